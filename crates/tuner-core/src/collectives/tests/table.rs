//! Stress tests of the table of communicators: application threads make
//! calls on communicators and free them while a helper thread drains the
//! events and hands over users' requests, for many randomized operations
//! (deterministic seeds, no timing), on a world of one rank.
//!
//! Each application thread has communicators of its own (made and freed in
//! its own order, as an application's threads do), some of them
//! intercommunicators, more of them at once than the table holds. In the
//! serialized test the threads' MPI calls never overlap (a correct program
//! at `MPI_THREAD_SERIALIZED`): every call must be counted on its own
//! communicator's entry, or find the table full. In the unserialized test
//! they overlap (an erroneous program the tuner must survive): entries
//! must still never be lost, shared or freed twice. Both check that every
//! private communicator is freed exactly once and that every event queued
//! is either drained or counted lost.

use super::world::{self, Released, SimMpi, Switchable, World, INTER};
use super::Rng;
use crate::collectives::search::State;
use crate::collectives::tuner::{Begun, Slot};
use crate::collectives::{Collective, Event, Params, Tuner, What};
use mpit::{Comm, HandleBits};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::*};
use std::sync::Mutex;

const APP_THREADS: u64 = 4;
/// Communicators each application thread keeps alive at most at once
/// (together more than the table holds).
const LIVE_PER_THREAD: usize = 4;
const OPS_PER_THREAD: u64 = 20_000;
const CAPACITY: usize = 8;
/// A short event queue, so that some events are lost and counted.
const EVENTS: usize = 32;
/// The helper hands over a user's request every this many operations.
const PIN_EVERY: u64 = 2_000;

/// Thread `t`'s `k`-th communicator: every eleventh an intercommunicator.
fn comm(t: u64, k: u64) -> Comm {
    let bits = ((t + 1) << 20) | k;
    Comm::from_bits(if k % 11 == 0 { bits | INTER } else { bits })
}

fn switchable() -> Vec<Switchable> {
    [Collective::Allreduce, Collective::Bcast]
        .into_iter()
        .map(|collective| Switchable {
            collective,
            candidates: vec![("auto", 0), ("one", 1), ("two", 2)],
            refused: None,
        })
        .collect()
}

/// Short windows on a communicator of one rank: searches decide, drift,
/// pin and stop within the threads' few thousand calls.
fn params() -> Params {
    Params {
        warmup: 1,
        settle_ns: 0.0,
        window: 3,
        window_time_ns: 0.0,
        min_window_time_ns: 0.0,
        check_every: 2,
        min_comm_size: 1,
        search_budget: 0.0,
        ..Params::default()
    }
}

/// What the threads did, for the checks at the end.
#[derive(Default)]
struct Tally {
    /// Communicators that got an entry, and the entries claimed again by
    /// another communicator.
    tuned: HashSet<u64>,
    reused: u64,
    /// Private communicators the frees released.
    released: HashSet<u64>,
}

/// Runs the stress: `serialized` threads make their MPI calls one at a
/// time.
fn stress(serialized: bool) {
    let world = World::new(1, APP_THREADS as usize);
    let (tuner, _) = world::tuner(
        SimMpi::new(&world, 0, world::Faults::default()),
        &switchable(),
        params(),
        CAPACITY,
        EVENTS,
        None,
    );
    // The MPI library's lock at MPI_THREAD_SERIALIZED (the application's
    // to take).
    let mpi_lock = Mutex::new(());
    let done = AtomicBool::new(false);
    // Operations made so far: the helper hands over a request every
    // `PIN_EVERY` of them.
    let ops = AtomicU64::new(0);
    let received = AtomicU64::new(0);
    let concurrent = AtomicU64::new(0);
    let pinned = AtomicU64::new(0);
    let tally = Mutex::new(Tally::default());
    let claimed_by: Mutex<HashMap<usize, u64>> = Mutex::new(HashMap::new());

    std::thread::scope(|s| {
        let mut apps = Vec::new();
        for t in 0..APP_THREADS {
            let (tuner, world, mpi_lock, tally, claimed_by, ops) =
                (&tuner, &world, &mpi_lock, &tally, &claimed_by, &ops);
            apps.push(s.spawn(move || {
                let _presence = world.presence();
                let mut rng = Rng::new(0x9e37_79b9_7f4a_7c15 ^ (t + 1));
                let mut live: Vec<Comm> = Vec::new();
                // Each live communicator's entry, once it has one.
                let mut entries: HashMap<u64, usize> = HashMap::new();
                let mut next = 1u64;
                let op = |f: &mut dyn FnMut()| {
                    let _g = serialized.then(|| mpi_lock.lock().unwrap_or_else(|e| e.into_inner()));
                    f();
                };
                for _ in 0..OPS_PER_THREAD {
                    ops.fetch_add(1, Relaxed);
                    let r = rng.below(16);
                    if live.is_empty() || (live.len() < LIVE_PER_THREAD && r == 0) {
                        // MPI_Comm_dup: the table sees it at its first call.
                        live.push(comm(t, next));
                        next += 1;
                    } else if r == 1 {
                        let c = live.swap_remove(rng.below(live.len() as u64) as usize);
                        op(&mut || free(tuner, world, tally, serialized, &mut entries, c));
                    } else {
                        let c = live[rng.below(live.len() as u64) as usize];
                        let collective = match rng.below(8) {
                            0 => Collective::Reduce,
                            1..=3 => Collective::Bcast,
                            _ => Collective::Allreduce,
                        };
                        let bytes = [8, 2048, 100_000][rng.below(3) as usize];
                        let ns = 1_000 + rng.below(500);
                        op(&mut || {
                            let had = tuner.calls_on(c);
                            let full = !tuner.slots().contains(&Slot::Free);
                            let begun = tuner.begin(collective, c, Some(bytes));
                            if serialized {
                                let quick = begun.quick();
                                assert!(quick.is_none_or(|b| b == bytes), "{quick:?}");
                            }
                            tuner.mpi().advance(ns);
                            tuner.end(begun, ns);
                            let now = tuner.calls_on(c);
                            let entry = tuner.entry_of(c);
                            if let Some(i) = entry {
                                match entries.insert(c.to_bits(), i) {
                                    Some(j) => assert_eq!(i, j, "entry moved"),
                                    None => {
                                        let mut claimed = claimed_by.lock().unwrap();
                                        let mut tally = tally.lock().unwrap();
                                        tally.tuned.insert(c.to_bits());
                                        if claimed.insert(i, c.to_bits()).is_some() {
                                            tally.reused += 1;
                                        }
                                    }
                                }
                            }
                            if !serialized {
                                return;
                            }
                            let inter = c.to_bits() & INTER != 0;
                            match (had, now) {
                                _ if inter => assert_eq!((had, now), (None, None)),
                                // Not a tuned collective: not counted.
                                _ if collective == Collective::Reduce => assert_eq!(had, now),
                                (Some(n), now) => assert_eq!(now, Some(n + 1), "a call lost"),
                                (None, Some(1)) => {
                                    // A fresh search, whatever the entry's
                                    // last communicator left.
                                    let states = tuner.states_on(c).unwrap();
                                    assert!(
                                        matches!(states[..], [State::Warmup | State::Trial { .. }])
                                            || states == [State::Off],
                                        "{states:?}"
                                    );
                                }
                                (None, None) => assert!(full, "untracked with a free entry"),
                                other => panic!("{other:?}"),
                            }
                        });
                    }
                    // The table's shape: one entry per communicator at most.
                    let slots = tuner.slots();
                    assert_eq!(slots.len(), CAPACITY);
                    assert!(tuner.high_water() <= CAPACITY);
                    let held: Vec<u64> = slots
                        .iter()
                        .filter_map(|s| match s {
                            Slot::Comm(b) => Some(*b),
                            _ => None,
                        })
                        .collect();
                    let unique: HashSet<_> = held.iter().collect();
                    assert_eq!(unique.len(), held.len(), "two entries for one communicator");
                    assert!(
                        held.iter().all(|b| b & INTER == 0),
                        "an intercommunicator tuned"
                    );
                }
                // The application frees what it has left.
                for c in live {
                    op(&mut || free(tuner, world, tally, serialized, &mut entries, c));
                }
            }));
        }

        // The helper thread: drains events, hands over users' requests.
        s.spawn(|| {
            let mut rng = Rng::new(0xdead_beef);
            let mut requests = 0;
            loop {
                let finished = done.load(SeqCst);
                for e in tuner.drain() {
                    received.fetch_add(1, SeqCst);
                    match e.what {
                        What::Concurrent => {
                            concurrent.fetch_add(1, SeqCst);
                        }
                        What::Search(Event::Pinned { .. }) => {
                            pinned.fetch_add(1, SeqCst);
                        }
                        _ => {}
                    }
                }
                while requests < ops.load(Relaxed) / PIN_EVERY {
                    requests += 1;
                    let candidate = rng.below(3) as usize;
                    let id = ["a", "b", "c"][rng.below(3) as usize];
                    assert!(tuner.request_pin(Collective::Allreduce, candidate, id));
                }
                if serialized {
                    assert!(!tuner.stopped(), "a correct program stopped tuning");
                }
                if finished {
                    break;
                }
                std::thread::yield_now();
            }
        });

        for app in apps {
            if let Err(panic) = app.join() {
                done.store(true, SeqCst);
                std::panic::resume_unwind(panic);
            }
        }
        done.store(true, SeqCst);
    });

    // Every communicator is freed: the table is empty.
    assert!(tuner.slots().iter().all(|s| *s == Slot::Free));
    assert_eq!(tuner.shutdown(), Vec::<String>::new());
    received.fetch_add(tuner.drain().count() as u64, SeqCst);
    assert_eq!(
        received.load(SeqCst) + tuner.lost_events(),
        tuner.sent_events(),
        "an event lost uncounted"
    );
    let tally = tally.into_inner().unwrap();
    let privates = world.privates();
    for (key, released) in &privates {
        assert_eq!(
            *released,
            Released {
                frees: 1,
                dropped: false
            },
            "{key:?}"
        );
    }
    let made: HashSet<u64> = privates.keys().map(|k| k.0).collect();
    assert_eq!(
        made.symmetric_difference(&tally.released).next(),
        None,
        "a private communicator not freed with its communicator"
    );
    // What the run exercised.
    assert!(tally.tuned.len() > CAPACITY, "{}", tally.tuned.len());
    assert!(tally.reused > 0);
    assert!(tuner.sent_events() > 0);
    if serialized {
        assert_eq!(concurrent.load(SeqCst), 0);
        assert!(!tuner.stopped());
        assert!(pinned.load(SeqCst) > 0);
    }
    drop(tuner);
    assert!(world.privates().values().all(|r| !r.dropped));
    assert_eq!(world.said(), Vec::new());
}

/// `MPI_Comm_free` of `c`: its entry (the one it had all along, in
/// `entries`) is free again and its private communicator freed.
fn free(
    tuner: &Tuner<SimMpi>,
    world: &World,
    tally: &Mutex<Tally>,
    serialized: bool,
    entries: &mut HashMap<u64, usize>,
    c: Comm,
) {
    let private = tuner.private_of(c);
    let entry = tuner.entry_of(c);
    assert_eq!(
        entry,
        entries.remove(&c.to_bits()),
        "communicator {:#x} moved or lost its entry",
        c.to_bits()
    );
    tuner.comm_freeing(c);
    assert_eq!(tuner.entry_of(c), None);
    if let Some(i) = entry {
        // Nothing else held its state: free again. With overlapping calls
        // another thread may already have claimed the entry for its own
        // communicator, and even be freeing that one (a tombstone for the
        // moment of its free, seen in CI under load): a tombstone left for
        // good would fail the empty table at the end.
        let slot = tuner.slots()[i];
        assert_ne!(slot, Slot::Comm(c.to_bits()));
        if serialized {
            assert_eq!(slot, Slot::Free);
        }
    }
    if let Some(p) = private {
        let released = world.privates()[&(p.to_bits(), 0)];
        assert_eq!(released.frees, 1, "private of {:#x}", c.to_bits());
        let mut tally = tally.lock().unwrap_or_else(|e| e.into_inner());
        tally.released.insert(p.to_bits());
    }
}

#[test]
fn comm_table_stress_serialized_calls_are_each_counted_on_their_own_entry() {
    stress(true);
}

#[test]
fn comm_table_stress_overlapping_calls_never_lose_share_or_double_free_an_entry() {
    stress(false);
}

/// A tuner of rank 0 of `world` with a table of two entries, over
/// [`switchable`] with [`params`].
fn two_entry_tuner(world: &std::sync::Arc<World>) -> Tuner<SimMpi> {
    world::tuner(
        SimMpi::new(world, 0, world::Faults::default()),
        &switchable(),
        params(),
        2,
        64,
        None,
    )
    .0
}

/// A communicator freed while a call on it holds its state (another
/// thread's, in an erroneous program) stays a tombstone: no new
/// communicator takes the entry before the tuner stops, tuning stops, and
/// its private communicator is freed once, at the stop.
#[test]
fn a_communicator_freed_during_its_call_stays_a_tombstone_until_stop() {
    let world = World::new(1, 1);
    let _presence = world.presence();
    let tuner = two_entry_tuner(&world);
    let call = |tuner: &Tuner<_>, c: Comm| {
        let begun = tuner.begin(Collective::Allreduce, c, Some(8));
        tuner.end(begun, 1_000);
    };
    let (a, b, c) = (comm(0, 1), comm(0, 2), comm(0, 3));
    for _ in 0..5 {
        call(&tuner, a);
    }
    let private = tuner
        .private_of(a)
        .expect("set up at its first agreed point");
    let i = tuner.entry_of(a).expect("an entry");
    // A call on `a` under way (searching: it holds the state).
    let Begun::Ticket(ticket) = tuner.begin(Collective::Allreduce, a, Some(8)) else {
        panic!("searching: the long way");
    };
    assert!(ticket.timed());
    tuner.comm_freeing(a);
    assert_eq!(tuner.slots()[i], Slot::Tombstone);
    assert!(tuner.stopped());
    assert_eq!(world.privates()[&(private.to_bits(), 0)].frees, 0);
    tuner.after(ticket, Some(1_000));
    // The other entry goes to `b` (whose first agreed point tells the stop);
    // `c` finds the table full.
    for _ in 0..4 {
        call(&tuner, b);
    }
    call(&tuner, c);
    assert_eq!(tuner.entry_of(c), None);
    assert_eq!(tuner.slots()[i], Slot::Tombstone);
    assert_eq!(tuner.shutdown(), Vec::<String>::new());
    assert_eq!(
        world.privates()[&(private.to_bits(), 0)],
        Released {
            frees: 1,
            dropped: false
        }
    );
    let events: Vec<_> = tuner.drain().collect();
    assert!(
        events
            .iter()
            .any(|e| e.what == What::Search(Event::Stopped)),
        "{events:?}"
    );
    drop(tuner);
    assert!(world
        .privates()
        .values()
        .all(|r| r.frees == 1 && !r.dropped));
    assert_eq!(world.said(), Vec::new());
}

/// Steady state goes the quick way (the key of the collective's last
/// call), every call still counted once; a call of another size, another
/// collective between, or a communicator freed and made again with the
/// same handle sends the next call the long way, where it finds its own
/// search (a fresh one for the new communicator).
#[test]
fn the_quick_path_takes_the_steady_state_and_forgets_what_changed() {
    let world = World::new(1, 1);
    let _presence = world.presence();
    let tuner = two_entry_tuner(&world);
    let call = |collective: Collective, c: Comm, bytes: u64| {
        let before = tuner.calls_on(c).unwrap_or(0);
        let begun = tuner.begin(collective, c, Some(bytes));
        let quick = begun.quick();
        assert!(quick.is_none_or(|b| b == bytes), "{quick:?}");
        let quick = quick.is_some();
        assert!(!(quick && begun.timed()), "a quick call is never timed");
        tuner.end(begun, 1_000);
        assert_eq!(tuner.calls_on(c), Some(before + 1), "a call lost");
        quick
    };
    let a = comm(0, 1);
    // Until the search has decided: the long way throughout.
    let mut n = 0;
    while !matches!(tuner.states_on(a).as_deref(), Some([State::Decided { .. }])) {
        call(Collective::Allreduce, a, 8);
        n += 1;
        assert!(n < 10_000, "{:?}", tuner.states_on(a));
    }
    let quick = (0..1_000)
        .filter(|_| call(Collective::Allreduce, a, 8))
        .count();
    // All but the check points' windows (3 calls in every 2 x 3) and the
    // calls that end them.
    assert!(quick >= 400, "{quick} of 1000 calls quick");
    // Another size: its own search, the long way; back to 8 bytes, the
    // long way once (the key changed), then quick again.
    assert!(!call(Collective::Allreduce, a, 100_000));
    assert!(!call(Collective::Allreduce, a, 8));
    assert!((0..10).any(|_| call(Collective::Allreduce, a, 8)));
    // Another collective between calls keeps each collective's key.
    assert!((0..50).any(|_| {
        call(Collective::Bcast, a, 8);
        call(Collective::Allreduce, a, 8)
    }));
    // Freed and made again with the same handle: a fresh search.
    tuner.comm_freeing(a);
    assert_eq!(tuner.entry_of(a), None);
    let begun = tuner.begin(Collective::Allreduce, a, Some(8));
    assert!(matches!(begun, Begun::Ticket(_)), "the long way");
    tuner.end(begun, 1_000);
    let states = tuner.states_on(a).unwrap();
    assert!(
        matches!(states[..], [State::Warmup | State::Trial { .. }]),
        "{states:?}"
    );
    assert_eq!(tuner.shutdown(), Vec::<String>::new());
}
