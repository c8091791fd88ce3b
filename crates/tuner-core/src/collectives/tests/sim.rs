//! N ranks in one process: each rank a thread with its own
//! `Tuner<SimMpi>`, the tool's collectives meeting in a shared [`World`].
//!
//! Every rank runs the same script of application calls (MPI orders a
//! communicator's collectives) and times each call as its own script says
//! (the time depends on the rank, the call and the algorithm the call
//! runs, so the ranks disagree locally). The simulated library is MPICH,
//! whose algorithm variables the tuner writes around calls, or Open MPI,
//! whose candidates run on communicators the tuner makes after writing
//! them. Failures are injected on chosen ranks: a reduction that reports an
//! error, a candidate the library refuses, a datatype whose size it will
//! not give, a private communicator it will not create. The tests check
//! that every rank logs the same search events at the same calls, that no
//! call ever runs different algorithms on different ranks, and that every
//! private communicator is released once.

use super::mix;
use super::world::{self, Faults, OpenMpi, Released, SimMpi, Switchable, World, INTER};
use crate::collectives::search::{Event, Params, Why};
use crate::collectives::{Bins, Collective, TuneEvent, Warm, What};
use mpit::{Comm, HandleBits};
use std::collections::HashMap;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

/// One step of the application, the same on every rank.
#[derive(Debug, Clone, Copy)]
enum Step {
    /// A blocking collective on the communicator of these bits, moving
    /// `bytes` per rank.
    Call {
        comm: u64,
        collective: Collective,
        bytes: u64,
    },
    /// `MPI_Comm_free` of the communicator of these bits.
    Free(u64),
}

/// What one rank does besides the common steps.
#[derive(Debug, Clone, Default)]
struct RankScript {
    faults: Faults,
    /// A value of a collective's variable this rank's library refuses.
    refused: Vec<(Collective, i64)>,
    /// Steps whose datatype size this rank's library will not give.
    sizeless: Vec<usize>,
    /// Before step `s`, the helper thread hands over a user's request:
    /// (s, collective, candidate, request id).
    pins: Vec<(usize, Collective, usize, &'static str)>,
}

/// A simulated job.
struct Plan {
    ranks: usize,
    steps: Vec<Step>,
    params: Params,
    switchable: Vec<Switchable>,
    /// The time (ns) of rank `r`'s call at step `s` of `collective`
    /// running the algorithm of value `v`.
    time: fn(usize, usize, Collective, i64) -> u64,
    scripts: HashMap<usize, RankScript>,
    /// The library is Open MPI of this version (calls switch
    /// communicators), its ranks on this many nodes (rank `r` on node
    /// `r % nodes`); `None`: MPICH (variables written around calls).
    open_mpi: Option<((u32, u32), usize)>,
    /// The tuning store's choices every rank starts from.
    warm: Vec<Warm>,
}

/// An event of a rank, at the step it was told at (the steps' count for
/// the events of the tuner's stop), without its time.
#[derive(Debug, Clone, PartialEq)]
struct Logged {
    step: usize,
    comm: u64,
    comm_size: i32,
    collective: Option<Collective>,
    bin: usize,
    what: What,
}

impl Logged {
    fn new(step: usize, e: TuneEvent) -> Logged {
        Logged {
            step,
            comm: e.comm,
            comm_size: e.comm_size,
            collective: e.collective,
            bin: e.bin,
            what: e.what,
        }
    }

    /// Whether every rank of the communicator must log it alike: the
    /// search events and the communicator's setup.
    fn agreed(&self) -> bool {
        matches!(
            self.what,
            What::Search(_) | What::SetupFailed(_) | What::Excluded(_) | What::Stored { .. }
        )
    }
}

/// What one rank did.
#[derive(Debug, Clone, PartialEq)]
struct RankLog {
    events: Vec<Logged>,
    /// Per step, the value of the collective's variable the call ran
    /// (`None` for a free).
    ran: Vec<Option<i64>>,
    /// Whether this rank stopped tuning itself.
    stopped: bool,
    /// What the tuner's stop said.
    stop_messages: Vec<String>,
    /// The rank's clock at the end: its calls and the tool's collectives
    /// (ns).
    clock_ns: u64,
    /// Calls the quick path took (`Tuner::quick`).
    quick: u64,
}

struct Outcome {
    logs: Vec<RankLog>,
    world: Arc<World>,
}

/// The communicators of the standard script.
const A: u64 = 1;
const B: u64 = 2;
const C: u64 = 3;
const D: u64 = 4;
const X: u64 = 5;

/// The bits of the application's communicator number `i` (distinct, fit
/// an `int` handle, never 0).
fn bits(i: u64) -> u64 {
    Comm::from_bits(0x100 + i).to_bits()
}

/// The collectives the simulated library switches: four algorithms each
/// (0 is the default).
fn switchable() -> Vec<Switchable> {
    [Collective::Allreduce, Collective::Bcast]
        .into_iter()
        .map(|collective| Switchable {
            collective,
            candidates: vec![
                ("auto", 0),
                ("recursive_doubling", 1),
                ("ring", 2),
                ("rabenseifner", 3),
            ],
            refused: None,
        })
        .collect()
}

/// Search knobs that reach decisions within a few hundred calls (the
/// search unpriced: `network_*` tests price it).
fn params() -> Params {
    Params {
        settle_ns: 300e3,
        min_window_time_ns: 100e3,
        check_every: 4,
        search_budget: 0.0,
        ..Params::default()
    }
}

/// The standard application: allreduces on A, broadcasts of 100 kB on B,
/// from step 300 allreduces of two sizes on C, which is freed at step 700
/// (its searches under way), then allreduces on D; now and then an
/// allreduce on an intercommunicator X (never tuned). D and B are freed
/// before the end; A lives until the tuner stops.
fn standard_steps(n: usize) -> Vec<Step> {
    let call = |comm, collective, bytes| Step::Call {
        comm: bits(comm),
        collective,
        bytes,
    };
    (0..n)
        .map(|s| match s {
            700 => Step::Free(bits(C)),
            _ if s == n - 2 => Step::Free(bits(D)),
            _ if s == n - 1 => Step::Free(bits(B)),
            _ if s % 97 == 50 => Step::Call {
                comm: bits(X) | INTER,
                collective: Collective::Allreduce,
                bytes: 8,
            },
            _ => match s % 3 {
                0 => call(A, Collective::Allreduce, 8),
                1 => call(B, Collective::Bcast, 100_000),
                _ if (300..700).contains(&s) => {
                    call(C, Collective::Allreduce, if s % 2 == 0 { 8 } else { 2048 })
                }
                _ if s > 700 => call(D, Collective::Allreduce, 100),
                _ => call(A, Collective::Allreduce, 8),
            },
        })
        .collect()
}

/// Each rank's time of a call: recursive doubling (1) is the fastest and
/// rabenseifner (3) far too slow to keep; every rank sees its own noise of
/// up to 10% either way; from step 1000 recursive doubling is three times
/// slower (the search's choice drifts).
fn standard_time(rank: usize, step: usize, collective: Collective, value: i64) -> u64 {
    let mut base: u64 = match value {
        0 => 10_000,
        1 if step >= 1000 => 21_000,
        1 => 7_000,
        2 => 12_000,
        _ => 40_000,
    };
    if collective == Collective::Bcast {
        base *= 3;
    }
    let noise = mix(&[rank as u64, step as u64, value as u64]) % 2001;
    base * (9_000 + noise) / 10_000
}

/// The standard job of `ranks` ranks.
fn standard(ranks: usize) -> Plan {
    Plan {
        ranks,
        steps: standard_steps(1800),
        params: params(),
        switchable: switchable(),
        time: standard_time,
        scripts: HashMap::new(),
        open_mpi: None,
        warm: Vec::new(),
    }
}

/// Runs `plan`, every rank on a thread of its own.
fn run(plan: &Plan) -> Outcome {
    let world = World::new(plan.ranks, plan.ranks);
    let results: Vec<std::thread::Result<RankLog>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..plan.ranks)
            .map(|r| {
                let world = &world;
                std::thread::Builder::new()
                    .name(format!("rank {r}"))
                    .stack_size(256 << 10)
                    .spawn_scoped(s, move || rank_main(plan, world, r))
                    .expect("a thread per simulated rank")
            })
            .collect();
        handles.into_iter().map(|h| h.join()).collect()
    });
    let mut logs = Vec::new();
    let mut panics = Vec::new();
    for result in results {
        match result {
            Ok(log) => logs.push(log),
            Err(p) => panics.push(p),
        }
    }
    // The first panic that is not another rank's deadlock is the cause.
    if !panics.is_empty() {
        let text = |p: &Box<dyn std::any::Any + Send>| {
            p.downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default()
        };
        let i = panics
            .iter()
            .position(|p| !text(p).starts_with("deadlock"))
            .unwrap_or(0);
        std::panic::resume_unwind(panics.swap_remove(i));
    }
    Outcome { logs, world }
}

fn rank_main(plan: &Plan, world: &Arc<World>, r: usize) -> RankLog {
    let _presence = world.presence();
    let script = plan.scripts.get(&r).cloned().unwrap_or_default();
    let switchable: Vec<Switchable> = plan
        .switchable
        .iter()
        .map(|s| Switchable {
            refused: script
                .refused
                .iter()
                .find(|(c, _)| *c == s.collective)
                .map(|(_, v)| *v),
            ..s.clone()
        })
        .collect();
    let mpi = SimMpi::new(world, r, script.faults.clone());
    let open_mpi = plan.open_mpi.map(|(version, nodes)| OpenMpi {
        version,
        host: (r % nodes) as i64,
    });
    let (mut tuner, held) = world::tuner(mpi, &switchable, plan.params, 4, 4096, open_mpi);
    tuner.set_warm(plan.warm.clone());
    let mut log = RankLog {
        events: Vec::new(),
        ran: Vec::new(),
        stopped: false,
        stop_messages: Vec::new(),
        clock_ns: 0,
        quick: 0,
    };
    for (s, step) in plan.steps.iter().enumerate() {
        for &(_, collective, candidate, id) in script.pins.iter().filter(|p| p.0 == s) {
            assert!(tuner.request_pin(collective, candidate, id));
        }
        match *step {
            Step::Call {
                comm,
                collective,
                bytes,
            } => {
                let sized = (!script.sizeless.contains(&s)).then_some(bytes);
                let begun = tuner.begin(collective, Comm::from_bits(comm), sized);
                let quick = begun.quick();
                assert!(quick.is_none() || quick == sized, "{quick:?} {sized:?}");
                log.quick += u64::from(quick.is_some());
                // The algorithm the library runs for this call: the one of
                // the communicator the tuner made for it (every operation
                // here is commutative), or the variable's.
                let value = match begun.on() {
                    Some(on) => tuner
                        .mpi()
                        .runs_on(on, collective)
                        .expect("a communicator the tuner made"),
                    None => held
                        .iter()
                        .find(|(c, _)| *c == collective)
                        .map_or(0, |(_, v)| v.load(Relaxed)),
                };
                let ns = (plan.time)(r, s, collective, value);
                tuner.mpi().advance(ns);
                tuner.end(begun, ns);
                // Back to the default after every call.
                for (c, v) in &held {
                    assert_eq!(v.load(Relaxed), 0, "{c:?} left switched after step {s}");
                }
                log.ran.push(Some(value));
            }
            Step::Free(comm) => {
                tuner.comm_freeing(Comm::from_bits(comm));
                log.ran.push(None);
            }
        }
        log.events.extend(tuner.drain().map(|e| Logged::new(s, e)));
    }
    log.clock_ns = tuner.mpi().clock_ns();
    log.stopped = tuner.stopped();
    log.stop_messages = tuner.shutdown();
    let end = plan.steps.len();
    log.events
        .extend(tuner.drain().map(|e| Logged::new(end, e)));
    assert_eq!(tuner.lost_events(), 0, "rank {r} lost events");
    log
}

/// The events every rank must log alike.
fn agreed(log: &RankLog) -> Vec<&Logged> {
    log.events.iter().filter(|e| e.agreed()).collect()
}

/// Every rank logged the same search and setup events at the same steps
/// as rank 0.
fn assert_same_decisions(out: &Outcome) {
    let first = agreed(&out.logs[0]);
    for (r, log) in out.logs.iter().enumerate().skip(1) {
        let mine = agreed(log);
        if let Some(i) = (0..first.len().max(mine.len())).find(|&i| first.get(i) != mine.get(i)) {
            panic!(
                "rank {r} differs from rank 0 at its agreed event {i}:\n  rank 0: {:?}\n  rank {r}: {:?}",
                first.get(i),
                mine.get(i)
            );
        }
    }
}

/// No step ran different algorithms on different ranks (but on the
/// ranks in `except`, between the steps of `window`).
fn assert_same_algorithms(out: &Outcome, except: &[usize], window: std::ops::Range<usize>) {
    let reference = (0..out.logs.len())
        .find(|r| !except.contains(r))
        .expect("a rank that runs every call as agreed");
    let first = &out.logs[reference].ran;
    for (r, log) in out.logs.iter().enumerate() {
        for (s, (a, b)) in first.iter().zip(&log.ran).enumerate() {
            if except.contains(&r) && window.contains(&s) {
                continue;
            }
            assert_eq!(
                a, b,
                "step {s}: rank {reference} ran {a:?}, rank {r} ran {b:?}"
            );
        }
        assert_eq!(first.len(), log.ran.len());
    }
}

/// Every private communicator each rank made was freed once, and none was
/// dropped without a free.
fn assert_released(out: &Outcome) -> usize {
    let privates = out.world.privates();
    for ((comm, rank), released) in &privates {
        assert_eq!(
            *released,
            Released {
                frees: 1,
                dropped: false
            },
            "private communicator {comm:#x} of rank {rank}"
        );
    }
    privates.len()
}

/// The search events of rank 0.
fn searches(log: &RankLog) -> impl Iterator<Item = (&Logged, &Event)> {
    log.events.iter().filter_map(|e| match &e.what {
        What::Search(ev) => Some((e, ev)),
        _ => None,
    })
}

fn kinds(log: &RankLog) -> HashMap<&'static str, usize> {
    let mut m = HashMap::new();
    for (_, e) in searches(log) {
        let k = match e {
            Event::Trial { dropped: true, .. } => "dropped",
            Event::Trial { .. } => "trial",
            Event::Decision { candidate: 0, .. } => "decision_default",
            Event::Decision { .. } => "decision_switch",
            Event::Recheck {
                why: Why::Drift, ..
            } => "recheck_drift",
            Event::Recheck { .. } => "recheck",
            Event::Stopped => "stopped",
            Event::Pinned { .. } => "pinned",
            Event::Held { .. } => "held",
            Event::Measured { .. } => "measured",
            Event::Left { .. } => "left",
        };
        *m.entry(k).or_insert(0) += 1;
    }
    m
}

/// The standard job on `ranks` ranks: the same decisions everywhere, and
/// the script exercised what it is for.
fn standard_job(ranks: usize) {
    let plan = standard(ranks);
    let out = run(&plan);
    assert_same_decisions(&out);
    assert_same_algorithms(&out, &[], 0..0);
    // A, B, C and D each got a private communicator on every rank.
    assert_eq!(assert_released(&out), 4 * ranks);
    let log = &out.logs[0];
    let k = kinds(log);
    for kind in [
        "trial",
        "dropped",
        "decision_switch",
        "decision_default",
        "recheck_drift",
    ] {
        assert!(k.get(kind).is_some_and(|&n| n > 0), "no {kind}: {k:?}");
    }
    assert!(!k.contains_key("stopped"), "{k:?}");
    for log in &out.logs {
        assert!(!log.stopped);
        assert!(log.stop_messages.is_empty(), "{:?}", log.stop_messages);
        assert!(
            log.events.iter().all(|e| e.agreed()),
            "{:?}",
            log.events.iter().find(|e| !e.agreed())
        );
    }
    assert_eq!(out.world.said(), Vec::new());
    // The first decision, A's, switched to recursive doubling; every call
    // of A after it ran it until the drift.
    let (first, decision) = searches(log)
        .find(|(_, e)| matches!(e, Event::Decision { .. }))
        .expect("a decision");
    assert!(
        matches!(decision, Event::Decision { candidate: 1, .. })
            && first.collective == Some(Collective::Allreduce),
        "{first:?}"
    );
    let on_a = |s: &Step| matches!(s, Step::Call { comm, .. } if *comm == bits(A));
    for s in first.step + 1..1000 {
        if on_a(&plan.steps[s]) {
            assert_eq!(log.ran[s], Some(1), "step {s}");
        }
    }
}

#[test]
fn simulated_ranks_2_agree_on_every_decision() {
    standard_job(2);
}

#[test]
fn simulated_ranks_8_agree_on_every_decision() {
    standard_job(8);
}

#[test]
fn simulated_ranks_64_agree_on_every_decision() {
    standard_job(64);
}

#[test]
fn simulated_ranks_runs_do_not_depend_on_the_schedule() {
    let plan = standard(8);
    let one = run(&plan);
    let two = run(&plan);
    assert_eq!(one.logs, two.logs);
    // The steady state went the quick way, on every rank.
    assert!(
        one.logs.iter().all(|l| l.quick > 0),
        "{:?}",
        one.logs.iter().map(|l| l.quick).collect::<Vec<_>>()
    );
}

/// A rank slower than the others with recursive doubling: it is the
/// maximum over ranks that decides, so no rank switches to it.
#[test]
fn simulated_ranks_a_slow_rank_decides_for_all() {
    fn time(rank: usize, step: usize, collective: Collective, value: i64) -> u64 {
        let t = standard_time(rank, step, collective, value);
        if rank == 5 && value == 1 {
            3 * t
        } else {
            t
        }
    }
    let plan = Plan {
        time,
        ..standard(8)
    };
    let out = run(&plan);
    assert_same_decisions(&out);
    assert_same_algorithms(&out, &[], 0..0);
    for (_, e) in searches(&out.logs[0]) {
        assert!(
            !matches!(e, Event::Decision { candidate: 1, .. }),
            "switched to the algorithm rank 5 runs slowly: {e:?}"
        );
    }
    assert!(kinds(&out.logs[0]).contains_key("decision_default"));
}

/// The standard job of 4 ranks without settling, each rank's MPI costing
/// what `costs(rank)` says (its other faults none).
fn costed(costs: impl Fn(usize) -> Faults) -> Plan {
    Plan {
        params: Params {
            settle_ns: 0.0,
            search_budget: Params::default().search_budget,
            ..params()
        },
        scripts: (0..4)
            .map(|r| {
                let script = RankScript {
                    faults: costs(r),
                    ..RankScript::default()
                };
                (r, script)
            })
            .collect(),
        ..standard(4)
    }
}

/// Agreed points that cost 2 to 5 us (the ranks differ) pace the
/// searches alike on every rank, by the least of their costs: the same
/// events as when every point costs every rank 20 us, and later than when
/// points cost nothing.
#[test]
fn simulated_ranks_costly_agreed_points_pace_every_rank_alike() {
    let costly = |costs: [u64; 4]| {
        costed(|r| Faults {
            reduce_ns: costs[r],
            ..Faults::default()
        })
    };
    let mixed = run(&costly([5_000, 2_000, 4_000, 3_000]));
    assert_same_decisions(&mixed);
    assert_same_algorithms(&mixed, &[], 0..0);
    let least = run(&costly([2_000; 4]));
    let search_events = |out: &Outcome| -> Vec<Logged> {
        out.logs[0]
            .events
            .iter()
            .filter(|e| matches!(e.what, What::Search(_)))
            .cloned()
            .collect()
    };
    assert_eq!(search_events(&mixed), search_events(&least));
    let free = run(&costly([0; 4]));
    let first_decision = |out: &Outcome| {
        searches(&out.logs[0])
            .find(|(l, e)| {
                matches!(e, Event::Decision { .. }) && l.collective == Some(Collective::Allreduce)
            })
            .map(|(l, _)| l.step)
    };
    let (paced, unpaced) = (first_decision(&mixed), first_decision(&free));
    assert!(paced.is_some() && unpaced.is_some());
    assert!(paced > unpaced, "{paced:?} {unpaced:?}");
}

/// Open MPI: the candidate communicators cost 100 us each to make (and
/// the reductions nothing). The searches pay for them as for agreed
/// points, alike on every rank: later decisions than when they are free.
#[test]
fn simulated_ranks_costly_candidate_communicators_pace_the_search() {
    let plan = |create_ns: u64| Plan {
        open_mpi: Some(((4, 1), 1)),
        warm: Vec::new(),
        ..costed(|_| Faults {
            create_ns,
            ..Faults::default()
        })
    };
    let first_trial_of = |out: &Outcome, candidate: usize| {
        searches(&out.logs[0])
            .find(|(l, e)| {
                matches!(e, Event::Trial { candidate: c, .. } if *c == candidate)
                    && l.collective == Some(Collective::Allreduce)
            })
            .map(|(l, _)| l.step)
    };
    let costly = run(&plan(100_000));
    assert_same_decisions(&costly);
    assert_same_algorithms(&costly, &[], 0..0);
    let free = run(&plan(0));
    // The second candidate's window waits for the first one's
    // communicator to be paid for.
    let (paced, unpaced) = (first_trial_of(&costly, 2), first_trial_of(&free, 2));
    assert!(unpaced.is_some(), "{:?}", kinds(&free.logs[0]));
    assert!(
        paced.is_none_or(|p| Some(p) > unpaced),
        "{paced:?} {unpaced:?}"
    );
}

/// After a rank's stop, every search stops at its next agreed point, on
/// every rank alike, and no other search event follows.
fn assert_stopped_together(out: &Outcome) -> usize {
    let log = &out.logs[0];
    let first = searches(log)
        .find(|(_, e)| matches!(e, Event::Stopped))
        .map(|(l, _)| l.step)
        .expect("a stop");
    for (l, e) in searches(log) {
        if l.step > first {
            assert!(
                matches!(e, Event::Stopped),
                "{e:?} at step {} after the stop",
                l.step
            );
        }
    }
    first
}

fn with_script(mut plan: Plan, rank: usize, script: RankScript) -> Plan {
    plan.scripts.insert(rank, script);
    plan
}

#[test]
fn simulated_ranks_a_failed_reduction_on_one_rank_stops_every_rank_together() {
    // While settling, during the trials, while decided.
    for (ranks, which) in [(8, 0), (8, 9), (8, 40), (2, 15), (64, 25)] {
        let failing = ranks / 2;
        let plan = with_script(
            standard(ranks),
            failing,
            RankScript {
                faults: Faults {
                    failed_allreduces: vec![which],
                    ..Faults::default()
                },
                ..RankScript::default()
            },
        );
        let out = run(&plan);
        assert_same_decisions(&out);
        assert_same_algorithms(&out, &[], 0..0);
        assert_released(&out);
        assert_stopped_together(&out);
        for (r, log) in out.logs.iter().enumerate() {
            let failed: Vec<_> = log
                .events
                .iter()
                .filter_map(|e| match &e.what {
                    What::ReductionFailed(m) => Some(m.as_str()),
                    _ => None,
                })
                .collect();
            assert_eq!(log.stopped, r == failing, "rank {r} of {ranks}");
            if r == failing {
                assert_eq!(failed.len(), 1, "{failed:?}");
                assert!(
                    failed[0].starts_with(
                        "MPI_Allreduce failed with MPI_ERR_OTHER: going on with what it returned"
                    ),
                    "{}",
                    failed[0]
                );
            } else {
                assert!(failed.is_empty(), "rank {r}: {failed:?}");
            }
        }
    }
}

#[test]
fn simulated_ranks_a_refused_candidate_stops_every_rank_together() {
    for (refusing, value) in [(3, 2), (0, 1), (7, 3)] {
        let plan = with_script(
            standard(8),
            refusing,
            RankScript {
                refused: vec![(Collective::Allreduce, value)],
                ..RankScript::default()
            },
        );
        let out = run(&plan);
        assert_same_decisions(&out);
        let stop = assert_stopped_together(&out);
        let log = &out.logs[refusing];
        let (at, message) = log
            .events
            .iter()
            .find_map(|e| match &e.what {
                What::WriteFailed(m) => Some((e.step, m)),
                _ => None,
            })
            .expect("the refusal is logged");
        assert!(
            message.contains("MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM"),
            "{message}"
        );
        // Until every search stopped, the refusing rank ran its default
        // where its peers ran the refused value; every other call ran the
        // same algorithm everywhere.
        assert!(at <= stop);
        let peer = (refusing + 1) % 8;
        let end = searches(&out.logs[peer])
            .filter(|(_, e)| matches!(e, Event::Stopped))
            .map(|(l, _)| l.step)
            .max()
            .unwrap_or(stop);
        assert_same_algorithms(&out, &[refusing], at..end + 1);
        for s in at..=end {
            let (mine, theirs) = (log.ran[s], out.logs[peer].ran[s]);
            if mine != theirs {
                assert_eq!((mine, theirs), (Some(0), Some(value)), "step {s}");
            }
        }
        assert!(log.stopped);
        assert_released(&out);
    }
}

#[test]
fn simulated_ranks_a_missing_datatype_size_stops_every_rank_together() {
    // An allreduce on A (same size as its last) while settling, during the
    // trials and while decided.
    for step in [30, 150, 603] {
        let plan = with_script(
            standard(8),
            6,
            RankScript {
                sizeless: vec![step],
                ..RankScript::default()
            },
        );
        assert!(matches!(
            plan.steps[step],
            Step::Call {
                collective: Collective::Allreduce,
                ..
            }
        ));
        let out = run(&plan);
        assert_same_decisions(&out);
        assert_same_algorithms(&out, &[], 0..0);
        let stop = assert_stopped_together(&out);
        assert!(stop >= step);
        let log = &out.logs[6];
        assert!(log.stopped);
        assert!(
            log.events.iter().any(|e| e.step == step
                && matches!(&e.what, What::CallFailed(m) if m.starts_with("MPI_Type_size failed"))),
            "{:?}",
            log.events
        );
        assert_released(&out);
    }
}

#[test]
fn simulated_ranks_a_private_communicator_refused_on_one_rank_is_untuned_everywhere() {
    let plan = with_script(
        standard(8),
        2,
        RankScript {
            faults: Faults {
                failed_creates: vec![0],
                ..Faults::default()
            },
            ..RankScript::default()
        },
    );
    let out = run(&plan);
    assert_same_decisions(&out);
    assert_same_algorithms(&out, &[], 0..0);
    let log = &out.logs[0];
    let failed: Vec<_> = log
        .events
        .iter()
        .filter(|e| matches!(e.what, What::SetupFailed(_)))
        .collect();
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert_eq!(
        failed[0].what,
        What::SetupFailed("MPI_Comm_create_group failed on rank 2: error class 15".into())
    );
    // The first communicator set up is A: none of its calls switched;
    // the others were tuned.
    let untuned = failed[0].comm;
    assert!(searches(log).all(|(l, _)| l.comm != untuned));
    assert!(log
        .ran
        .iter()
        .zip(&plan.steps)
        .all(|(v, s)| !matches!(s, Step::Call { comm, .. } if *comm == bits(A)) || *v == Some(0)));
    assert!(kinds(log).contains_key("decision_switch"));
    // Rank 2 says its own failure; the others made the communicator and
    // freed it at once.
    let said = out.world.said();
    assert_eq!(said.len(), 1, "{said:?}");
    assert_eq!(said[0].0, 2);
    assert!(
        said[0].1.starts_with(
            "mpit-tuner[rank 2]: collective tuning: MPI_Comm_create_group failed with MPI_ERR_OTHER"
        ),
        "{}",
        said[0].1
    );
    assert_eq!(assert_released(&out), 4 * 8 - 1);
}

#[test]
fn simulated_ranks_pin_requests_arriving_at_different_calls_pin_together() {
    let mut plan = standard(8);
    for r in 0..plan.ranks {
        // A request that rank 7 never gets: never pinned.
        let mut pins = Vec::new();
        if r != 7 {
            pins.push((100 + 5 * r, Collective::Allreduce, 3, "early"));
        }
        // One every rank gets, each at its own moment.
        pins.push((400 + 7 * r, Collective::Allreduce, 2, "late"));
        plan.scripts.insert(
            r,
            RankScript {
                pins,
                ..RankScript::default()
            },
        );
    }
    let out = run(&plan);
    assert_same_decisions(&out);
    assert_same_algorithms(&out, &[], 0..0);
    assert_released(&out);
    let log = &out.logs[0];
    let pinned: Vec<_> = searches(log)
        .filter_map(|(l, e)| match e {
            Event::Pinned { candidate, .. } => Some((l.step, l.comm, *candidate)),
            _ => None,
        })
        .collect();
    assert!(!pinned.is_empty());
    let last_request = 400 + 7 * 7;
    for (step, _, candidate) in &pinned {
        assert_eq!(*candidate, 2, "only the request every rank holds pins");
        assert!(*step >= last_request, "pinned at {step}");
    }
    // A, and D made after the request, are pinned; from its pin on, every
    // allreduce on a pinned communicator runs ring.
    let mut first_pin = HashMap::new();
    for (step, comm, _) in &pinned {
        first_pin.entry(*comm).or_insert(*step);
    }
    assert!(first_pin.len() >= 2, "{pinned:?}");
    let label_of = |comm: u64| {
        searches(log)
            .find(|(l, _)| {
                plan.steps
                    .get(l.step)
                    .is_some_and(|s| matches!(s, Step::Call { comm: c, .. } if *c == comm))
            })
            .map(|(l, _)| l.comm)
    };
    for c in [A, D] {
        let label = label_of(bits(c)).expect("searched");
        let from = *first_pin.get(&label).expect("pinned");
        for (s, step) in plan.steps.iter().enumerate().skip(from + 1) {
            if let Step::Call {
                comm,
                collective: Collective::Allreduce,
                ..
            } = step
            {
                if *comm == bits(c) {
                    assert_eq!(log.ran[s], Some(2), "step {s}");
                }
            }
        }
    }
    assert!(kinds(log).contains_key("held"));
}

/// Open MPI: each candidate runs on a communicator the tuner makes over
/// the same ranks right after writing its algorithm, at the call that
/// first runs it, which is the same call on every rank; Open MPI 5.0 does
/// the same when the communicator is on one node.
#[test]
fn simulated_ranks_open_mpi_candidates_run_on_communicators_made_at_the_same_call() {
    for version in [(4, 1), (5, 0)] {
        let plan = Plan {
            open_mpi: Some((version, 1)),
            warm: Vec::new(),
            ..standard(8)
        };
        let out = run(&plan);
        assert_same_decisions(&out);
        assert_same_algorithms(&out, &[], 0..0);
        // A, B, C and D, and a communicator per candidate each ran.
        let made = assert_released(&out);
        assert!(made > 4 * 8, "{made}");
        assert_eq!(made % 8, 0);
        let log = &out.logs[0];
        let k = kinds(log);
        for kind in ["dropped", "decision_switch", "recheck_drift"] {
            assert!(k.get(kind).is_some_and(|&n| n > 0), "no {kind}: {k:?}");
        }
        // Every candidate ran on a communicator of its own.
        for v in 1..4 {
            assert!(log.ran.contains(&Some(v)), "{v} never ran");
        }
        let (first, decision) = searches(log)
            .find(|(_, e)| matches!(e, Event::Decision { .. }))
            .expect("a decision");
        assert!(matches!(decision, Event::Decision { candidate: 1, .. }));
        for s in first.step + 1..1000 {
            if matches!(plan.steps[s], Step::Call { comm, .. } if comm == bits(A)) {
                assert_eq!(log.ran[s], Some(1), "step {s}");
            }
        }
        assert_eq!(out.world.said(), Vec::new());
    }
}

/// Open MPI 5.0 runs the collectives of a communicator over several nodes
/// in coll/han, which copies the forced algorithms when it first runs: such
/// a communicator is left untuned, on every rank alike.
#[test]
fn simulated_ranks_open_mpi_5_leaves_communicators_over_several_nodes_untuned() {
    let plan = Plan {
        open_mpi: Some(((5, 0), 2)),
        warm: Vec::new(),
        ..standard(8)
    };
    let out = run(&plan);
    assert_same_decisions(&out);
    assert_same_algorithms(&out, &[], 0..0);
    assert_eq!(assert_released(&out), 4 * 8);
    let log = &out.logs[0];
    assert_eq!(searches(log).count(), 0);
    let excluded = log
        .events
        .iter()
        .filter(|e| matches!(&e.what, What::Excluded(m) if m.starts_with("this communicator spans several nodes")))
        .count();
    assert_eq!(excluded, 4);
    assert!(log.ran.iter().all(|v| matches!(v, None | Some(0))));
}

/// A cost model of 2 nodes x 2 ranks joined by 1 Gbit/s links: a message
/// between nodes costs 30 us of latency and 8 ns a byte. An allreduce of
/// 8 B takes 2 latencies (60 us; ring 6, rabenseifner 4), a bcast of
/// 1 MiB 2 transfers at the default (16.8 ms), 10 ms with recursive
/// doubling (1, the best), 25 ms with ring (2) and 300 ms with
/// rabenseifner (3, catastrophic); every rank's call within 5% of that.
fn network_time(rank: usize, step: usize, collective: Collective, value: i64) -> u64 {
    const LATENCY: u64 = 30_000;
    let base = match collective {
        Collective::Bcast => [16_800_000, 10_000_000, 25_000_000, 300_000_000][value as usize],
        _ => LATENCY * [2, 2, 6, 4][value as usize],
    };
    let noise = mix(&[rank as u64, step as u64, value as u64]) % 1001;
    base * (9_500 + noise) / 10_000
}

/// The network job: `steps` steps alternating an 8-byte allreduce on A and
/// a 1 MiB bcast on B, the search priced as by default, an agreed point
/// (one small reduction across the nodes) 70 us on every rank.
fn network(steps: usize) -> Plan {
    let call = |comm, collective, bytes| Step::Call {
        comm: bits(comm),
        collective,
        bytes,
    };
    Plan {
        ranks: 4,
        steps: (0..steps)
            .map(|s| match s % 2 {
                0 => call(A, Collective::Allreduce, 8),
                _ => call(B, Collective::Bcast, 1 << 20),
            })
            .collect(),
        params: Params::default(),
        switchable: switchable(),
        time: network_time,
        scripts: (0..4)
            .map(|r| {
                let faults = Faults {
                    reduce_ns: 70_000,
                    ..Faults::default()
                };
                (
                    r,
                    RankScript {
                        faults,
                        ..RankScript::default()
                    },
                )
            })
            .collect(),
        open_mpi: None,
        warm: Vec::new(),
    }
}

/// Each rank's time over its time with the library's default on every
/// call (the same script without the tool).
fn ratios_to_default(plan: &Plan, out: &Outcome) -> Vec<f64> {
    (0..plan.ranks)
        .map(|r| {
            let default: u64 = plan
                .steps
                .iter()
                .enumerate()
                .map(|(s, step)| match *step {
                    Step::Call { collective, .. } => (plan.time)(r, s, collective, 0),
                    Step::Free(_) => 0,
                })
                .sum();
            out.logs[r].clock_ns as f64 / default as f64
        })
        .collect()
}

/// Across the modelled nodes: the 8-byte allreduce, whose call costs a
/// little less than an agreed point (60 us against 70 us), is searched in
/// windows long enough for their points on every rank alike, ring (3 times
/// the default) dropped after one call, and the default kept (no
/// candidate is faster); the 1 MiB bcast is searched, its catastrophic
/// candidate dropped after one call, and recursive doubling kept. A short job (100 bcasts) costs every rank at
/// most 3% over the default; a long one gains what recursive doubling
/// gives.
#[test]
fn network_searches_pay_for_themselves_on_every_rank() {
    let short = network(200);
    let out = run(&short);
    assert_same_decisions(&out);
    assert_same_algorithms(&out, &[], 0..0);
    for (r, ratio) in ratios_to_default(&short, &out).iter().enumerate() {
        assert!(*ratio <= 1.03, "rank {r}: {ratio:.4} of the default");
    }

    let long = network(20_000);
    let out = run(&long);
    assert_same_decisions(&out);
    assert_same_algorithms(&out, &[], 0..0);
    let log = &out.logs[0];
    let of = |c: Collective| {
        searches(log)
            .filter(move |(l, _)| l.collective == Some(c))
            .map(|(_, e)| *e)
            .collect::<Vec<_>>()
    };
    let allreduce = of(Collective::Allreduce);
    assert!(
        !allreduce.iter().any(|e| matches!(e, Event::Left { .. })),
        "{allreduce:?}"
    );
    assert!(
        matches!(allreduce.last(), Some(Event::Decision { candidate: 0, .. })),
        "{allreduce:?}"
    );
    // Ring ran one call a search, a probe, and was dropped there.
    assert!(
        allreduce.iter().all(|e| match e {
            Event::Trial {
                candidate: 2,
                calls,
                dropped,
                ..
            } => *calls == 1 && *dropped,
            _ => true,
        }),
        "{allreduce:?}"
    );
    // The windows after the default's first (which measures what a point
    // costs) are long enough for their points: 70 us at most 2% of a
    // window of 60 us calls (59 calls).
    assert!(
        allreduce.iter().skip(1).all(|e| match e {
            Event::Trial { calls, .. } => *calls == 1 || *calls >= 57,
            _ => true,
        }),
        "{allreduce:?}"
    );
    let bcast = of(Collective::Bcast);
    assert!(
        bcast.contains(&Event::Trial {
            candidate: 3,
            ns: bcast
                .iter()
                .find_map(|e| match e {
                    Event::Trial {
                        candidate: 3, ns, ..
                    } => Some(*ns),
                    _ => None,
                })
                .unwrap_or(0.0),
            calls: 1,
            dropped: true,
        }),
        "{bcast:?}"
    );
    assert!(
        bcast
            .iter()
            .any(|e| matches!(e, Event::Decision { candidate: 1, .. })),
        "{bcast:?}"
    );
    for (r, ratio) in ratios_to_default(&long, &out).iter().enumerate() {
        // Recursive doubling is 0.6 of the default's bcast, and the bcasts
        // are nearly all of the time.
        assert!(*ratio <= 0.70, "rank {r}: {ratio:.4} of the default");
    }
}

/// The network job's short run (100 bcasts of 1 MiB) started from a store
/// that holds recursive doubling for the bcast and the default for the
/// allreduce: every rank confirms the same choices at the same calls, the
/// bcast's decision says it came from the store and no other candidate
/// runs, and the short run already gains most of what recursive doubling
/// gives (without the store it only breaks even: the test above).
#[test]
fn network_a_warm_start_confirms_the_stored_choices_on_every_rank() {
    let mut plan = network(200);
    let bins = Bins::default();
    plan.warm = vec![
        Warm {
            collective: Collective::Bcast,
            bin: bins.of(1 << 20),
            comm_size: 4,
            candidate: 1,
            note: "test".into(),
        },
        Warm {
            collective: Collective::Allreduce,
            bin: bins.of(8),
            comm_size: 4,
            candidate: 0,
            note: "test".into(),
        },
        // Another size: not used on these communicators of 4.
        Warm {
            collective: Collective::Bcast,
            bin: bins.of(1 << 20),
            comm_size: 8,
            candidate: 3,
            note: "test".into(),
        },
    ];
    let out = run(&plan);
    assert_same_decisions(&out);
    assert_same_algorithms(&out, &[], 0..0);
    let log = &out.logs[0];
    let stored: Vec<_> = log
        .events
        .iter()
        .filter(|e| matches!(e.what, What::Stored { .. }))
        .map(|e| e.collective)
        .collect();
    // Both communicators (A and B) are of 4 ranks: each search of each
    // starts from the store; the entry for 8 ranks is not used.
    assert_eq!(stored.len(), 4, "{stored:?}");
    let of = |c: Collective| {
        searches(log)
            .filter(move |(l, _)| l.collective == Some(c))
            .map(|(_, e)| *e)
            .collect::<Vec<_>>()
    };
    let bcast = of(Collective::Bcast);
    assert!(
        bcast.iter().all(|e| match e {
            Event::Trial { candidate, .. } => *candidate <= 1,
            _ => true,
        }),
        "{bcast:?}"
    );
    assert!(
        bcast.iter().any(|e| matches!(
            e,
            Event::Decision {
                candidate: 1,
                stored: true,
                ..
            }
        )),
        "{bcast:?}"
    );
    let allreduce = of(Collective::Allreduce);
    assert!(
        allreduce.iter().all(|e| match e {
            Event::Trial { candidate, .. } => *candidate == 0,
            _ => true,
        }),
        "{allreduce:?}"
    );
    for (r, ratio) in ratios_to_default(&plan, &out).iter().enumerate() {
        assert!(*ratio <= 0.85, "rank {r}: {ratio:.4} of the default");
    }
}
