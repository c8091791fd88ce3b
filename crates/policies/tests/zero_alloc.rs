//! Evaluation allocates nothing once warmed up: a counting global allocator
//! watches the evaluating thread while policies are evaluated many times.
//!
//! This file holds a single test so that nothing else runs in the binary
//! while it counts (the counter only counts the test's own thread anyway).

use mpit_testkit::alloc_count::{count, Counting};
use std::time::Duration;

use policies::{ActionView, Decision, Env, PolicySet, Value, Values, VarSlot};

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Fixed buffers; values change every tick without reallocating.
struct Samples {
    slots: Vec<VarSlot>,
    arrays: Vec<[f64; 4]>,
}

impl Values for Samples {
    fn get(&self, slot: VarSlot) -> Option<Value<'_>> {
        let i = self.slots.iter().position(|s| *s == slot)?;
        Some(Value::Array(&self.arrays[i]))
    }
}

const POLICIES: &str = r#"
[[policy]]
name  = "free-unused-vbufs"
every = "1ms"
when  = "any(mv2_vbuf_allocated_array - mv2_vbuf_max_use_array > 10)"
then  = [ { set = "MPIR_CVAR_VBUF_POOL_CONTROL", value = 1 },
          { set = "MPIR_CVAR_VBUF_POOL_REDUCED_VALUE", value = "mv2_vbuf_max_use_array" } ]
otherwise = [ { set = "MPIR_CVAR_VBUF_POOL_CONTROL", value = 0 } ]

[[policy]]
name  = "everything"
every = "1ms"
ranks = "rank % 2 == 0"
when  = "(sum(rate(mv2_vbuf_allocated_array)) > -1 and count(changes(mv2_vbuf_max_use_array) >= 0) == len(mv2_vbuf_max_use_array)) || mean(abs(delta(mv2_vbuf_allocated_array))) / 0 > min(max(mv2_vbuf_max_use_array[1], 2), time) + rank * size % 7"
then  = [ { set = "MPIR_CVAR_R", value = "round(max(mv2_vbuf_max_use_array, 1) * 1.5 + floor(ceil(2.5)))" },
          { set = "MPIR_CVAR_R", index = 2, value = "mv2_vbuf_allocated_array[2] / 2" },
          { recommend = "look at the VBUF pools" } ]
otherwise = [ { note = "nothing to do" } ]
hysteresis = 2
cooldown = "3ms"
"#;

#[test]
fn evaluation_allocates_nothing_after_warm_up() {
    let set = PolicySet::parse(POLICIES, "zero_alloc.toml").unwrap();
    let mut policies = set.policies().to_vec();
    let slots = vec![
        set.slot_of("mv2_vbuf_allocated_array").unwrap(),
        set.slot_of("mv2_vbuf_max_use_array").unwrap(),
    ];
    let mut samples = Samples {
        slots,
        arrays: vec![[64.0, 32.0, 32.0, 16.0], [60.0, 5.0, 2.0, 1.0]],
    };

    let mut tick = |samples: &mut Samples, i: u64, fired: &mut u64| {
        // Alternate between waste and no waste, and move the watermarks.
        let waste = (i / 7) % 2 == 0;
        samples.arrays[0] = if waste {
            [64.0, 32.0, 32.0, 16.0]
        } else {
            [64.0, 8.0, 4.0, 2.0]
        };
        samples.arrays[1][0] = 60.0 + (i % 3) as f64;
        let env = Env::new(0, 4, Duration::from_millis(i));
        for p in policies.iter_mut() {
            if let Decision::Fired { branch, .. } = p.evaluate(&*samples, &env) {
                *fired += 1;
                // What the actuator and the log read.
                for a in p.actions(branch) {
                    if let ActionView::Set { value, .. } = a {
                        std::hint::black_box(value);
                    }
                }
                std::hint::black_box(p.condition_value());
                for (name, v) in p.condition_inputs() {
                    std::hint::black_box((name, v));
                }
            }
        }
    };

    let mut fired = 0;
    for i in 0..100 {
        tick(&mut samples, i, &mut fired);
    }
    let warm = fired;

    let ((n, bytes), ()) = count(|| {
        for i in 100..10_100 {
            tick(&mut samples, i, &mut fired);
        }
    });
    assert!(
        fired - warm > 1000,
        "the policies must fire often: {}",
        fired - warm
    );
    assert_eq!(
        (n, bytes),
        (0, 0),
        "evaluation allocated {n} times ({bytes} bytes)"
    );
    // Sanity check that the counter works at all.
    let ((n, _), v) = count(|| std::hint::black_box(vec![1u8; 16]));
    drop(v);
    assert_eq!(n, 1);
}
