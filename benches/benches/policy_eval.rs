//! Policy evaluation: the time of one `CompiledPolicy::evaluate` of the
//! thesis' VBUF policy on 4-pool arrays, of a tick of the default policy set
//! (`policies.toml`) on synthetic values, and of the same tick through the
//! runtime's `Engine` (values gathered by name, decisions logged).
//!
//! Target: under 1 us per VBUF evaluation (the latest figure:
//! BENCHMARKS.md#one-vbuf-policy-evaluation-under-1-us). That a tick
//! allocates nothing is checked by `benches/tests/tick_allocations.rs`.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use mpit_tuner_benches::fixtures::{self, at, FakeBackend, SyntheticValues};
use policies::{CompiledPolicy, CvarInfo, CvarType, Env, MemoryCatalogue, Phase, PvarInfo};
use std::hint::black_box;
use std::time::Duration;
use tuner_core::decide::Engine;

/// The data cycle of [`SyntheticValues::advance`] (8 ticks of waste
/// pattern times 3 of high-water marks).
const CYCLE: u64 = 24;

fn states(set: &policies::PolicySet) -> Vec<SyntheticValues> {
    (0..CYCLE)
        .map(|t| {
            let mut v = SyntheticValues::for_set(set, 4);
            v.advance(t);
            v
        })
        .collect()
}

/// Evaluates `policies` once per iteration, `step` apart in time, cycling
/// through precomputed `values` (or always the first one if `steady`).
fn evaluate_loop(
    c: &mut Criterion,
    name: &str,
    mut policies: Vec<CompiledPolicy>,
    values: &[SyntheticValues],
    step: Duration,
    steady: bool,
) {
    let mut group = c.benchmark_group("policy_eval");
    group.throughput(Throughput::Elements(policies.len() as u64));
    let mut tick = 0u64;
    group.bench_function(name, |b| {
        b.iter(|| {
            tick += 1;
            let v = if steady {
                &values[0]
            } else {
                &values[(tick % CYCLE) as usize]
            };
            let env = Env::new(0, 4, at(tick, step));
            for p in policies.iter_mut() {
                black_box(p.evaluate(v, &env));
            }
        })
    });
    group.finish();
}

fn vbuf(c: &mut Criterion) {
    let set = fixtures::parse(fixtures::THESIS_VBUF, "thesis-vbuf.toml");
    let values = states(&set);
    let policies = set.policies().to_vec();
    // Same pools every second: the condition holds, nothing changes, the
    // decision is "steady" (the common case in a long run).
    evaluate_loop(
        c,
        "vbuf_4pools/steady",
        policies.clone(),
        &values,
        Duration::from_secs(1),
        true,
    );
    // Pools change every second: the branch flips every 4 evaluations and
    // the reduced values are recomputed, so most evaluations fire.
    evaluate_loop(
        c,
        "vbuf_4pools/changing",
        policies,
        &values,
        Duration::from_secs(1),
        false,
    );
}

fn default_set(c: &mut Criterion) {
    let set = fixtures::parse(fixtures::DEFAULT_POLICIES, "policies.toml");
    let values = states(&set);
    let policies = set.policies().to_vec();
    // Ticks 5 s apart: every policy is due on every tick (worst case).
    evaluate_loop(
        c,
        "default_set/tick_all_due",
        policies.clone(),
        &values,
        Duration::from_secs(5),
        false,
    );
    // Ticks 100 ms apart: what the helper does at MPIT_TUNER_INTERVAL=100ms,
    // where most ticks find the 1 s and 5 s policies not due.
    evaluate_loop(
        c,
        "default_set/tick_100ms",
        policies,
        &values,
        Duration::from_millis(100),
        false,
    );
}

/// The catalogue of an MPI library that exports every variable the default
/// set names (an MVAPICH2 research build with Open MPI's queues, which does
/// not exist: the worst case, every policy enabled).
fn everything_catalogue(set: &policies::PolicySet) -> MemoryCatalogue {
    let mut cat = MemoryCatalogue::default();
    for v in set.variables() {
        if v.name.starts_with("MPIR_CVAR_") {
            let count = if v.name.ends_with("REDUCED_VALUE") {
                4
            } else {
                1
            };
            cat.add_cvar(
                &v.name,
                CvarInfo {
                    scope: policies::Scope::Local,
                    count,
                    ty: CvarType::Int,
                },
            );
        } else {
            cat.add_pvar(
                &v.name,
                PvarInfo {
                    class: policies::PvarClass::Level,
                    count: 4,
                },
            );
        }
    }
    cat
}

fn engine(c: &mut Criterion) {
    let set = fixtures::parse(fixtures::DEFAULT_POLICIES, "policies.toml");
    let catalogue = everything_catalogue(&set);
    let values = SyntheticValues::for_set(&set, 4);
    let mut engine = Engine::new(set);
    let disabled = engine.bind(&catalogue, tuner_core::decide::RUNTIME_PHASES);
    assert!(disabled.is_empty(), "policies disabled: {disabled:?}");
    let mut backend = FakeBackend { values, now: 0.0 };
    let mut group = c.benchmark_group("policy_eval");
    group.throughput(Throughput::Elements(engine.policies().len() as u64));
    let mut tick = 0u64;
    let mut records = 0usize;
    group.bench_function("engine/default_set_tick_all_due", |b| {
        // Moving the synthetic values (a few dozen stores) is part of the
        // measured time: the runtime's backend does comparable work.
        b.iter(|| {
            tick += 1;
            backend.values.advance(tick);
            backend.now = (tick * 5) as f64;
            let env = tuner_core::decide::env(0, 4, backend.now);
            engine.run(Phase::Periodic, &mut backend, &env, &mut |r| {
                records += 1;
                black_box(r);
            });
        })
    });
    group.finish();
    black_box(records);
}

criterion_group!(benches, vbuf, default_set, engine);
criterion_main!(benches);
