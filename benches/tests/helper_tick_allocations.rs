//! A whole tick of the helper thread allocates nothing once warmed up,
//! through the real code and the real MPI library: objects tracked, PVAR
//! handles read and the interposer's counters sampled
//! (`Sampler::sample`, `sample_tool_metrics`), the snapshot refilled
//! (`Sampler::snapshot_into`), the policies' values gathered from it by
//! position, evaluated and acted on (`Engine::run` over an `MpiBackend`, as
//! `PolicyHooks::tick` runs them), with nothing to write: after their first
//! firings the policies' branches are already in effect, so no record is
//! made and no CVAR written.
//!
//! The test initialises MPI_T in this process (`MPI_T_init_thread`, which
//! needs neither `MPI_Init` nor a launcher: a plain `cargo test`), against
//! the build's MPI library, which `build.rs` links into this crate's tests
//! (tuner-core's tests link none). MPICH exports no PVAR, so there the
//! sampler reads the interposer's counters only (the test plays the
//! application's calls between ticks). Open MPI's library PVARs are left
//! out here (a filter that matches none): without `MPI_Init` its MTL
//! components are loaded but not started, and allocating a handle of one
//! crashes inside the component (PSM2's `psm2_mq_get_stats`, seen on
//! Open MPI 4.1.4); in a job the runtime samples them after `MPI_Init`,
//! where the quirks table leaves out those of components that did not
//! start. So on Open MPI the tick reads the interposer's counters only,
//! as on MPICH.
//!
//! Not in the count, because they allocate by design or are not the
//! tick's computing: the log (a sample record lists its variables and the
//! mean of each level, and is formatted as JSON), the publication of the
//! snapshot (an `ArcSwap::swap` of a snapshot the helper refills in place
//! through `Arc::make_mut` while no reader holds it), steering requests (a
//! directory listing) and collective tuning's events. Policies that read a
//! CVAR open and read it through MPI_T at each evaluation, which allocates
//! (a CVAR they only write is not read); the policies here read PVARs and
//! tool metrics only.
//!
//! One test in this binary, so that nothing else allocates while it counts
//! (the counter only counts the test's own thread anyway).

use mpit::{Catalogue, MpiT};
use mpit_testkit::alloc_count::{count, Counting};
use policies::{Phase, PolicySet};
use tuner_core::decide::{self, CatalogueView, Engine, MpiBackend, RUNTIME_PHASES};
use tuner_core::run::Config;
use tuner_core::sample::toolmetrics::{self, Family, Timing};
use tuner_core::sample::{ObjectTable, Sampler, Snapshot};
use vocab::Record;

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Every tick: values that move on every tick, conditions that hold
/// throughout, so that after the first firing each branch is already in
/// effect.
const POLICIES: &str = r#"
[[policy]]
name  = "allreduce-busy"
every = "1ms"
when  = "rate(tool.allreduce.calls) > 0 && tool.allreduce.bytes_p90 >= tool.allreduce.bytes_p50 && max(tool.allreduce.hist) >= 1"
then  = [ { note = "allreduce is busy" } ]
otherwise = [ { note = "allreduce is idle" } ]
"#;

/// MPICH's: a computed write, in a dry run (the library is left as it is);
/// on MVAPICH2 of another variable.
const MPICH_POLICY: &str = r#"
[[policy]]
name    = "poll-by-traffic"
every   = "1ms"
dry_run = true
when    = "delta(tool.allreduce.bytes) > 0"
then    = [ { set = "MPIR_CVAR_REQUEST_POLL_FREQ", value = "min(64, 8 * ceil(tool.allreduce.calls / 1e12))" } ]
otherwise = [ { set = "MPIR_CVAR_REQUEST_POLL_FREQ", value = 8 } ]
"#;

/// The application's calls between two ticks: allreduces of sizes that
/// change from tick to tick.
fn calls(tick: u64) {
    for k in 0..4 {
        let timing = toolmetrics::record(Family::Allreduce, 8 << ((tick + k) % 12));
        if timing != Timing::No {
            toolmetrics::record_time(Family::Allreduce, timing, 1_000 + tick % 7);
        }
    }
}

#[test]
fn a_whole_tick_allocates_nothing_after_warm_up() {
    let mpit = MpiT::init().expect("MPI_T_init_thread, without MPI_Init");
    let catalogue = Catalogue::load(&mpit).expect("the MPI_T catalogue");
    let mut config = Config::default();
    if cfg!(mpi_flavor = "openmpi") {
        // No library PVAR (see the module doc): a name is never empty.
        config.pvar_patterns = vec![regex::Regex::new("^$").expect("a valid regex")];
    }
    let mut sampler = Sampler::new(&mpit, catalogue, &config).expect("a PVAR session");
    let table = ObjectTable::new(64);
    let mut source = POLICIES.to_string();
    if cfg!(mpi_library = "mvapich2") {
        // MVAPICH2 has no MPIR_CVAR_REQUEST_POLL_FREQ; a LOCAL integer it
        // has instead (the dry run writes nothing anyway).
        source.push_str(
            &MPICH_POLICY.replace("MPIR_CVAR_REQUEST_POLL_FREQ", "MPIR_CVAR_CHOP_ERROR_STACK"),
        );
    } else if cfg!(mpi_flavor = "mpich") {
        source.push_str(MPICH_POLICY);
    }
    let set = PolicySet::parse(&source, "tick.toml").unwrap_or_else(|e| panic!("{e:#}"));
    let mut engine = Engine::new(set);
    let disabled = engine.bind(
        &CatalogueView::new(&mpit, sampler.catalogue()),
        RUNTIME_PHASES,
    );
    assert!(disabled.is_empty(), "policies disabled: {disabled:?}");

    let mut snapshot = Snapshot::default();
    let mut records: Vec<Record<'static>> = Vec::with_capacity(1024);
    let mut tick = |seq: u64, snapshot: &mut Snapshot, records: &mut Vec<Record<'static>>| {
        calls(seq);
        let t = seq as f64 * 0.01;
        let events = sampler.track_objects(&table);
        sampler.sample(&table, t);
        sampler.sample_tool_metrics(t);
        sampler.snapshot_into(snapshot, t, seq);
        let mut backend = MpiBackend {
            mpit: &mpit,
            catalogue: sampler.catalogue(),
            snapshot,
            now: t,
        };
        let env = decide::env(0, 1, t);
        engine.run(Phase::Periodic, &mut backend, &env, &mut |r| {
            records.push(r)
        });
        events.len()
    };

    // Warm-up: the tool metrics appear (a new layout, positions bound
    // again), the policies fire once, then find their branches in effect.
    for seq in 1..=50 {
        tick(seq, &mut snapshot, &mut records);
    }
    let fired: Vec<&str> = records
        .iter()
        .filter_map(|r| match r {
            Record::Decision(d) if d.fired => Some(d.policy.as_str()),
            _ => None,
        })
        .collect();
    let expected: &[&str] = if cfg!(mpi_flavor = "mpich") {
        &["allreduce-busy", "poll-by-traffic"]
    } else {
        &["allreduce-busy"]
    };
    assert_eq!(fired, expected, "{records:#?}");
    let warm = records.len();
    let layout = snapshot.layout().id();

    let ((n, bytes), events) = count(|| {
        let mut events = 0;
        for seq in 51..=10_050 {
            events += tick(seq, &mut snapshot, &mut records);
        }
        events
    });
    assert_eq!(
        records[warm..],
        [],
        "the policies were to have nothing to do after the warm-up"
    );
    assert_eq!(events, 0);
    assert_eq!(snapshot.layout().id(), layout, "the variables changed");
    assert!(snapshot.vars().any(|v| v.name == "tool.allreduce.calls"));
    assert_eq!(
        (n, bytes),
        (0, 0),
        "a tick allocated {n} times ({bytes} bytes) over 10000 ticks"
    );

    // The counter works at all.
    let ((n, _), v) = count(|| std::hint::black_box(vec![1u8; 16]));
    drop(v);
    assert_eq!(n, 1, "the counting allocator missed an allocation");
    let problems = sampler.close();
    assert!(problems.is_empty(), "{problems:?}");
}
