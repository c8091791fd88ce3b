//! Decisions of compiled policies over time, with a fake clock.

use std::collections::HashMap;
use std::time::Duration;

use policies::{
    ActionView, Branch, CompiledPolicy, Decision, Env, EvalError, PolicySet, SetValue, Skip, Value,
    Values, VarSlot,
};

/// Values by slot, settable by name.
struct Samples<'s> {
    set: &'s PolicySet,
    values: HashMap<VarSlot, Vec<f64>>,
    scalars: HashMap<VarSlot, f64>,
}

impl<'s> Samples<'s> {
    fn new(set: &'s PolicySet) -> Self {
        Samples {
            set,
            values: HashMap::new(),
            scalars: HashMap::new(),
        }
    }

    fn array(&mut self, name: &str, v: &[f64]) -> &mut Self {
        let slot = self.set.slot_of(name).expect(name);
        self.values.insert(slot, v.to_vec());
        self
    }

    fn scalar(&mut self, name: &str, x: f64) -> &mut Self {
        let slot = self.set.slot_of(name).expect(name);
        self.scalars.insert(slot, x);
        self
    }
}

impl Values for Samples<'_> {
    fn get(&self, slot: VarSlot) -> Option<Value<'_>> {
        if let Some(x) = self.scalars.get(&slot) {
            return Some(Value::Scalar(*x));
        }
        self.values.get(&slot).map(|v| Value::Array(v))
    }
}

fn at(secs: f64) -> Env {
    Env::new(0, 4, Duration::from_secs_f64(secs))
}

fn fired(branch: Branch) -> Decision {
    Decision::Fired {
        branch,
        write: true,
    }
}

const THEN: Branch = Branch::Then;
const OTHERWISE: Branch = Branch::Otherwise;

fn one(src: &str) -> (PolicySet, CompiledPolicy) {
    let set = PolicySet::parse(src, "test.toml").unwrap_or_else(|e| panic!("{e:#}"));
    let p = set.policies()[0].clone();
    (set, p)
}

/// The writes of a branch as text, e.g. `["A=1", "B=[1, 2]"]`.
fn writes(p: &CompiledPolicy, b: Branch) -> Vec<String> {
    p.actions(b)
        .map(|a| match a {
            ActionView::Set {
                cvar, value, index, ..
            } => {
                let v = match value {
                    SetValue::Number(x) => x.to_string(),
                    SetValue::Numbers(xs) => format!("{xs:?}"),
                    SetValue::Text(t) => format!("{t:?}"),
                };
                match index {
                    Some(i) => format!("{cvar}[{i}]={v}"),
                    None => format!("{cvar}={v}"),
                }
            }
            ActionView::SetEnv { name, value } => format!("env {name}={value}"),
            ActionView::Note(t) => format!("note {t}"),
            ActionView::Recommend(t) => format!("recommend {t}"),
        })
        .collect()
}

const THESIS: &str = include_str!("fixtures/thesis_vbuf.toml");

#[test]
fn thesis_scenario_four_pools() {
    let (set, mut p) = one(THESIS);
    let mut s = Samples::new(&set);
    // Four pools, one in use: the waste exceeds 10 in pools 1-3.
    s.array("mv2_vbuf_allocated_array", &[64.0, 32.0, 32.0, 16.0])
        .array("mv2_vbuf_max_use_array", &[60.0, 5.0, 2.0, 1.0]);
    assert_eq!(p.evaluate(&s, &at(1.0)), fired(THEN));
    assert_eq!(
        writes(&p, THEN),
        [
            "MPIR_CVAR_VBUF_POOL_CONTROL=1",
            "MPIR_CVAR_VBUF_POOL_REDUCED_VALUE=[60.0, 5.0, 2.0, 1.0]"
        ]
    );
    assert_eq!(p.condition_value(), Some(Value::Scalar(1.0)));
    let inputs: Vec<String> = p
        .condition_inputs()
        .map(|(n, v)| format!("{n}={}", v.unwrap()))
        .collect();
    assert_eq!(
        inputs,
        [
            "mv2_vbuf_allocated_array=[64, 32, 32, 16]",
            "mv2_vbuf_max_use_array=[60, 5, 2, 1]"
        ]
    );

    // Same samples a second later: already in effect.
    assert_eq!(p.evaluate(&s, &at(2.0)), Decision::Skipped(Skip::Steady));

    // Pools freed: waste [4, 3, 2, 1] is below the threshold everywhere.
    s.array("mv2_vbuf_allocated_array", &[64.0, 8.0, 4.0, 2.0]);
    assert_eq!(p.evaluate(&s, &at(3.0)), fired(OTHERWISE));
    assert_eq!(writes(&p, OTHERWISE), ["MPIR_CVAR_VBUF_POOL_CONTROL=0"]);
    assert_eq!(p.condition_value(), Some(Value::Scalar(0.0)));
    assert_eq!(p.evaluate(&s, &at(4.0)), Decision::Skipped(Skip::Steady));

    // Waste again, then the max-use watermark moves: the reduced values follow.
    s.array("mv2_vbuf_allocated_array", &[64.0, 32.0, 32.0, 16.0]);
    assert_eq!(p.evaluate(&s, &at(5.0)), fired(THEN));
    s.array("mv2_vbuf_max_use_array", &[61.0, 5.0, 2.0, 1.0]);
    assert_eq!(p.evaluate(&s, &at(6.0)), fired(THEN));
    assert_eq!(
        writes(&p, THEN)[1],
        "MPIR_CVAR_VBUF_POOL_REDUCED_VALUE=[61.0, 5.0, 2.0, 1.0]"
    );
    assert_eq!(p.state().firings, 4);
    assert_eq!(p.state().write_firings, 4);
}

#[test]
fn thesis_policy_with_mismatched_pools_is_an_error_not_a_panic() {
    let (set, mut p) = one(THESIS);
    let mut s = Samples::new(&set);
    s.array("mv2_vbuf_allocated_array", &[64.0, 32.0, 32.0])
        .array("mv2_vbuf_max_use_array", &[60.0, 5.0, 2.0, 1.0]);
    assert_eq!(
        p.evaluate(&s, &at(0.0)),
        Decision::Skipped(Skip::Error(EvalError::LengthMismatch {
            left: 3,
            right: 4,
            column: 30
        }))
    );
}

const TOGGLE: &str = r#"
[[policy]]
name = "toggle"
every = "1s"
when = "x > 5"
then = [ { set = "MPIR_CVAR_A", value = 1 } ]
otherwise = [ { set = "MPIR_CVAR_A", value = 0 } ]
"#;

fn toggle(extra: &str) -> (PolicySet, CompiledPolicy) {
    one(&format!("{TOGGLE}{extra}\n"))
}

#[test]
fn cooldown_delays_the_next_write() {
    let (set, mut p) = toggle("cooldown = \"10s\"");
    let mut s = Samples::new(&set);
    s.scalar("x", 10.0);
    assert_eq!(p.evaluate(&s, &at(0.0)), fired(THEN));
    s.scalar("x", 0.0);
    assert_eq!(
        p.evaluate(&s, &at(1.0)),
        Decision::Skipped(Skip::Cooldown {
            remaining: Duration::from_secs(9)
        })
    );
    assert_eq!(
        p.evaluate(&s, &at(9.0)),
        Decision::Skipped(Skip::Cooldown {
            remaining: Duration::from_secs(1)
        })
    );
    assert_eq!(p.evaluate(&s, &at(10.0)), fired(OTHERWISE));
    s.scalar("x", 10.0);
    assert!(matches!(
        p.evaluate(&s, &at(11.0)),
        Decision::Skipped(Skip::Cooldown { .. })
    ));
    assert_eq!(p.evaluate(&s, &at(20.0)), fired(THEN));
}

#[test]
fn cooldown_ignores_branches_without_writes() {
    let (set, mut p) = one(r#"
[[policy]]
name = "n"
when = "x > 5"
then = [ { set = "MPIR_CVAR_A", value = 1 } ]
otherwise = [ { note = "calm" } ]
cooldown = "1h"
"#);
    let mut s = Samples::new(&set);
    s.scalar("x", 0.0);
    assert_eq!(
        p.evaluate(&s, &at(0.0)),
        Decision::Fired {
            branch: OTHERWISE,
            write: false
        }
    );
    s.scalar("x", 9.0);
    assert_eq!(p.evaluate(&s, &at(1.0)), fired(THEN));
    s.scalar("x", 0.0);
    // a note is not a write: no cooldown
    assert_eq!(
        p.evaluate(&s, &at(2.0)),
        Decision::Fired {
            branch: OTHERWISE,
            write: false
        }
    );
    s.scalar("x", 9.0);
    assert!(matches!(
        p.evaluate(&s, &at(3.0)),
        Decision::Skipped(Skip::Cooldown { .. })
    ));
}

#[test]
fn hysteresis_needs_consecutive_evaluations_to_switch() {
    let (set, mut p) = toggle("hysteresis = 3");
    let mut s = Samples::new(&set);
    let h = |streak| Decision::Skipped(Skip::Hysteresis { streak, needed: 3 });
    s.scalar("x", 10.0);
    assert_eq!(p.evaluate(&s, &at(0.0)), h(1));
    assert_eq!(p.evaluate(&s, &at(1.0)), h(2));
    assert_eq!(p.evaluate(&s, &at(2.0)), fired(THEN));
    s.scalar("x", 0.0);
    assert_eq!(p.evaluate(&s, &at(3.0)), h(1));
    // a blip back to the branch in effect: nothing to do, the streak restarts
    s.scalar("x", 10.0);
    assert_eq!(p.evaluate(&s, &at(4.0)), Decision::Skipped(Skip::Steady));
    s.scalar("x", 0.0);
    assert_eq!(p.evaluate(&s, &at(5.0)), h(1));
    assert_eq!(p.evaluate(&s, &at(6.0)), h(2));
    assert_eq!(p.evaluate(&s, &at(7.0)), fired(OTHERWISE));
    // missing values neither count nor break the streak
    s.scalar("x", 10.0);
    assert_eq!(p.evaluate(&s, &at(8.0)), h(1));
    let empty = Samples::new(&set);
    let x = set.slot_of("x").unwrap();
    assert_eq!(
        p.evaluate(&empty, &at(9.0)),
        Decision::Skipped(Skip::Missing(x))
    );
    assert_eq!(p.evaluate(&s, &at(10.0)), h(2));
    assert_eq!(p.evaluate(&s, &at(11.0)), fired(THEN));
}

#[test]
fn max_writes_counts_firings_that_write() {
    let (set, mut p) = toggle("max_writes = 2");
    let mut s = Samples::new(&set);
    s.scalar("x", 10.0);
    assert_eq!(p.evaluate(&s, &at(0.0)), fired(THEN));
    s.scalar("x", 0.0);
    assert_eq!(p.evaluate(&s, &at(1.0)), fired(OTHERWISE));
    s.scalar("x", 10.0);
    assert_eq!(
        p.evaluate(&s, &at(2.0)),
        Decision::Skipped(Skip::MaxWrites { limit: 2 })
    );
    assert_eq!(p.state().write_firings, 2);
    // the branch in effect stays steady
    s.scalar("x", 0.0);
    assert_eq!(p.evaluate(&s, &at(3.0)), Decision::Skipped(Skip::Steady));
}

#[test]
fn dry_run_decides_but_does_not_write() {
    let (set, mut p) = toggle("dry_run = true\nmax_writes = 1");
    let mut s = Samples::new(&set);
    s.scalar("x", 10.0);
    assert_eq!(
        p.evaluate(&s, &at(0.0)),
        Decision::Fired {
            branch: THEN,
            write: false
        }
    );
    assert_eq!(writes(&p, THEN), ["MPIR_CVAR_A=1"]);
    // dry-run firings count like real ones, to show what would happen
    s.scalar("x", 0.0);
    assert_eq!(
        p.evaluate(&s, &at(1.0)),
        Decision::Skipped(Skip::MaxWrites { limit: 1 })
    );
}

#[test]
fn schedule_and_rank_selection() {
    let (set, mut p) = toggle("ranks = \"rank % 2 == 1\"");
    let mut s = Samples::new(&set);
    s.scalar("x", 10.0);
    assert!(!p.applies_to(0, 4) && p.applies_to(1, 4));
    assert_eq!(
        p.evaluate(&s, &at(0.0)),
        Decision::Skipped(Skip::NotSelected)
    );
    let rank1 = |t: f64| Env::new(1, 4, Duration::from_secs_f64(t));
    assert_eq!(p.evaluate(&s, &rank1(0.0)), fired(THEN));
    assert_eq!(p.evaluate(&s, &rank1(0.5)), Decision::Skipped(Skip::NotDue));
    // 10% tolerance for timer jitter
    assert_eq!(
        p.evaluate(&s, &rank1(0.95)),
        Decision::Skipped(Skip::Steady)
    );
    assert_eq!(p.evaluate(&s, &rank1(1.5)), Decision::Skipped(Skip::NotDue));
    assert_eq!(p.state().evaluations, 2);
    // absurd clocks do not overflow
    let end = Env::new(1, 4, Duration::MAX);
    assert_eq!(p.evaluate(&s, &end), Decision::Skipped(Skip::Steady));
    assert!(matches!(p.evaluate(&s, &end), Decision::Skipped(_)));
}

#[test]
fn rearm_fires_again_after_a_failed_write() {
    let (set, mut p) = toggle("");
    let mut s = Samples::new(&set);
    s.scalar("x", 10.0);
    assert_eq!(p.evaluate(&s, &at(0.0)), fired(THEN));
    p.rearm();
    assert_eq!(p.evaluate(&s, &at(1.0)), fired(THEN));
}

#[test]
fn warmup_missing_and_errors() {
    let (set, mut p) = one(r#"
[[policy]]
name = "r"
when = "rate(mv2_vbuf_allocated) > 100"
then = [ { set = "MPIR_CVAR_A", value = "1 / (mv2_vbuf_allocated - 200)" } ]
"#);
    let mut s = Samples::new(&set);
    let slot = set.slot_of("mv2_vbuf_allocated").unwrap();
    assert_eq!(
        p.evaluate(&s, &at(0.0)),
        Decision::Skipped(Skip::Missing(slot))
    );
    s.scalar("mv2_vbuf_allocated", 0.0);
    assert_eq!(p.evaluate(&s, &at(1.0)), Decision::Skipped(Skip::Warmup));
    s.scalar("mv2_vbuf_allocated", 200.0);
    assert_eq!(
        p.evaluate(&s, &at(2.0)),
        Decision::Skipped(Skip::Error(EvalError::NotFinite))
    );
    s.scalar("mv2_vbuf_allocated", 450.0);
    assert_eq!(p.evaluate(&s, &at(3.0)), fired(THEN));
    assert_eq!(writes(&p, THEN), ["MPIR_CVAR_A=0.004"]);
    assert_eq!(p.condition_value(), Some(Value::Scalar(1.0)));
}

#[test]
fn element_writes_and_array_conditions() {
    let (set, mut p) = one(r#"
[[policy]]
name = "e"
when = "pools > 10"
then = [ { set = "MPIR_CVAR_R", index = 2, value = "pools[2] / 2" },
         { set = "MPIR_CVAR_R", index = 0, value = "pools" } ]
"#);
    let mut s = Samples::new(&set);
    s.array("pools", &[20.0, 30.0]);
    assert_eq!(
        p.evaluate(&s, &at(0.0)),
        Decision::Skipped(Skip::Error(EvalError::ArrayCondition { len: 2 }))
    );
    s.array("pools", &[20.0]);
    assert_eq!(
        p.evaluate(&s, &at(1.0)),
        Decision::Skipped(Skip::Error(EvalError::IndexOutOfRange {
            index: 2,
            len: 1,
            column: 6
        }))
    );
    let (set, mut p) = one(r#"
[[policy]]
name = "e"
when = "any(pools > 10)"
then = [ { set = "MPIR_CVAR_R", index = 1, value = "pools" } ]
"#);
    let mut s = Samples::new(&set);
    s.array("pools", &[20.0, 30.0]);
    assert_eq!(
        p.evaluate(&s, &at(0.0)),
        Decision::Skipped(Skip::Error(EvalError::ArrayForElement { len: 2 }))
    );
    s.array("pools", &[20.0]);
    assert_eq!(p.evaluate(&s, &at(1.0)), fired(THEN));
    assert_eq!(writes(&p, THEN), ["MPIR_CVAR_R[1]=20"]);
}

#[test]
fn one_shot_phases_and_texts() {
    let set = PolicySet::parse(
        include_str!("fixtures/all_features.toml"),
        "all_features.toml",
    )
    .unwrap();
    let mut pre = set.policies()[0].clone();
    let s = Samples::new(&set);
    let env = |rank| Env::new(rank, 4, Duration::ZERO);
    assert_eq!(
        pre.evaluate(&s, &env(3)),
        Decision::Skipped(Skip::NotSelected)
    );
    assert_eq!(pre.evaluate(&s, &env(1)), fired(THEN));
    assert_eq!(
        writes(&pre, THEN),
        [
            "MPIR_CVAR_IBA_EAGER_THRESHOLD=65536",
            "note eager threshold 64K"
        ]
    );
    assert!(!pre.sets_environment());
    let mut env_policy = set.policies()[4].clone();
    assert!(env_policy.sets_environment());
    assert!(env_policy.slots().is_empty());
    assert_eq!(
        env_policy.evaluate(&s, &env(3)),
        Decision::Skipped(Skip::NotSelected)
    );
    assert_eq!(env_policy.evaluate(&s, &env(1)), fired(THEN));
    assert_eq!(writes(&env_policy, THEN), ["env MV2_ENABLE_AFFINITY=1"]);
    let mut init = set.policies()[1].clone();
    assert_eq!(init.evaluate(&s, &env(0)), fired(THEN));
    assert_eq!(
        writes(&init, THEN),
        [
            "MPIR_CVAR_ENABLE_SMP_COLLECTIVES=1",
            "note SMP collectives enabled"
        ]
    );
    let fin = &set.policies()[3];
    assert_eq!(
        writes(fin, THEN),
        [
            "recommend set MPIR_CVAR_ENABLE_SHARP=1 for the next run",
            "MPIR_CVAR_ALLREDUCE_COLLECTIVE_ALGORITHM=\"auto\""
        ]
    );
}
