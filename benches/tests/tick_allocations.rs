//! A tick of policy evaluations allocates nothing once warmed up: the thesis'
//! VBUF policy on 4-pool arrays and the default policy set
//! (`policies.toml`), evaluated on synthetic values that make conditions
//! flip and computed values change, under a counting global allocator.
//!
//! One test in this binary, so that nothing else allocates while it counts
//! (the counter only counts the test's own thread anyway).

use mpit_testkit::alloc_count::{count, Counting};
use mpit_tuner_benches::fixtures::{self, at, SyntheticValues};
use policies::{ActionView, CompiledPolicy, Decision, Env};
use std::hint::black_box;
use std::time::Duration;

#[global_allocator]
static GLOBAL: Counting = Counting;

/// One tick: every policy evaluated once, and for those that fire, what the
/// actuator and the log read (actions, condition value and inputs).
fn tick(policies: &mut [CompiledPolicy], values: &SyntheticValues, env: &Env) -> u64 {
    let mut fired = 0;
    for p in policies.iter_mut() {
        if let Decision::Fired { branch, .. } = p.evaluate(values, env) {
            fired += 1;
            for a in p.actions(branch) {
                if let ActionView::Set { value, .. } = a {
                    black_box(value);
                }
            }
            black_box(p.condition_value());
            for input in p.condition_inputs() {
                black_box(input);
            }
        }
    }
    fired
}

/// Runs `ticks` ticks after a warm-up and returns (allocations, bytes,
/// firings, evaluations that were not skipped as not due).
fn run(source: &str, name: &str, step: Duration, ticks: u64) -> (usize, usize, u64) {
    let set = fixtures::parse(source, name);
    let mut policies = set.policies().to_vec();
    let mut values = SyntheticValues::for_set(&set, 4);
    for t in 0..100 {
        values.advance(t);
        tick(&mut policies, &values, &Env::new(0, 4, at(t, step)));
    }
    let ((n, bytes), fired) = count(|| {
        let mut fired = 0;
        for t in 100..100 + ticks {
            values.advance(t);
            fired += tick(&mut policies, &values, &Env::new(0, 4, at(t, step)));
        }
        fired
    });
    (n, bytes, fired)
}

#[test]
fn a_tick_of_policy_evaluations_allocates_nothing() {
    // The thesis' VBUF policy, one evaluation per second of fake time.
    let (n, bytes, fired) = run(
        fixtures::THESIS_VBUF,
        "thesis-vbuf.toml",
        Duration::from_secs(1),
        10_000,
    );
    assert!(fired > 1_000, "the VBUF policy must fire often: {fired}");
    assert_eq!(
        (n, bytes),
        (0, 0),
        "VBUF evaluation allocated {n} times ({bytes} bytes)"
    );

    // The default set, every policy due on every tick.
    let (n, bytes, fired) = run(
        fixtures::DEFAULT_POLICIES,
        "policies.toml",
        Duration::from_secs(5),
        10_000,
    );
    assert!(fired > 1_000, "the default set must fire often: {fired}");
    assert_eq!(
        (n, bytes),
        (0, 0),
        "a tick of the default set allocated {n} times ({bytes} bytes)"
    );

    // The counter works at all.
    let ((n, _), v) = count(|| black_box(vec![1u8; 16]));
    drop(v);
    assert_eq!(n, 1, "the counting allocator missed an allocation");
}
