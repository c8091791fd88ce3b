//! What the benchmarks evaluate and publish: the policy files, synthetic
//! values for their variables, and a realistic snapshot.

use mpit::PvarClass;
use policies::{PolicySet, Value, Values, VarSlot};
use std::time::Duration;
use tuner_core::decide::actuator::{CvarWrite, Outcome, Request, When};
use tuner_core::decide::Backend;
use tuner_core::sample::Metric;
use tuner_core::sample::{Layout, Snapshot, VarName};

/// The thesis' VBUF policy (`examples/policies/thesis-vbuf.toml`).
pub const THESIS_VBUF: &str = include_str!("../../examples/policies/thesis-vbuf.toml");

/// The default policy set embedded in the library (`policies.toml`).
pub const DEFAULT_POLICIES: &str = include_str!("../../policies.toml");

/// Parses one of the files above (they are part of the repository and
/// checked by its tests, so a failure here is a bug).
pub fn parse(source: &str, name: &str) -> PolicySet {
    PolicySet::parse(source, name).unwrap_or_else(|e| panic!("{name} does not parse: {e:#}"))
}

/// Whether a variable is an array in the synthetic data: the thesis'
/// per-pool arrays and Open MPI's per-peer queue lengths.
fn is_array(name: &str) -> bool {
    name.ends_with("_array") || name.starts_with("pml_ob1_")
}

/// Synthetic values for every variable a policy set names, in fixed
/// buffers: arrays have `elements` elements (4 VBUF pools, 4 peers),
/// everything else is a scalar. [`SyntheticValues::advance`] changes them
/// in place, without allocating.
#[derive(Debug, Clone)]
pub struct SyntheticValues {
    values: Vec<Vec<f64>>,
    names: Vec<String>,
    /// The id of their positions (they never move).
    layout: u64,
}

impl SyntheticValues {
    /// Values for every variable of `set`.
    pub fn for_set(set: &PolicySet, elements: usize) -> SyntheticValues {
        let names: Vec<String> = set.variables().iter().map(|v| v.name.clone()).collect();
        let values = names
            .iter()
            .map(|n| vec![0.0; if is_array(n) { elements } else { 1 }])
            .collect();
        let mut v = SyntheticValues {
            values,
            names,
            layout: Layout::new_id(),
        };
        v.advance(0);
        v
    }

    /// Moves every value to tick `tick`. The VBUF arrays alternate every 4
    /// ticks between pools that waste more than the threshold and pools that
    /// do not, and the high-water marks creep, so that conditions flip and
    /// computed values change; the other variables wander within ranges
    /// where the default policies mostly stay quiet.
    pub fn advance(&mut self, tick: u64) {
        let waste = (tick / 4) % 2 == 0;
        for (name, value) in self.names.iter().zip(self.values.iter_mut()) {
            for (i, x) in value.iter_mut().enumerate() {
                let i = i as u64;
                *x = match name.as_str() {
                    "mv2_vbuf_allocated_array" if waste => {
                        [64.0, 32.0, 32.0, 16.0][(i % 4) as usize]
                    }
                    "mv2_vbuf_allocated_array" => [64.0, 8.0, 4.0, 2.0][(i % 4) as usize],
                    "mv2_vbuf_max_use_array" => {
                        [60.0, 5.0, 2.0, 1.0][(i % 4) as usize] + (tick % 3) as f64
                    }
                    _ => (100 + (tick * 7 + i * 13) % 50) as f64,
                };
            }
        }
    }

    /// The position of the variable `name`, if the set names it.
    pub fn position(&self, name: &str) -> Option<usize> {
        self.names.iter().position(|n| n == name)
    }
}

impl Values for SyntheticValues {
    fn get(&self, slot: VarSlot) -> Option<Value<'_>> {
        let v = self.values.get(slot.index())?;
        Some(if v.len() == 1 {
            Value::Scalar(v[0])
        } else {
            Value::Array(v)
        })
    }
}

/// The `elapsed` of tick `tick` when ticks are `step` apart.
pub fn at(tick: u64, step: Duration) -> Duration {
    step * u32::try_from(tick).unwrap_or(u32::MAX)
}

/// A snapshot like the runtime publishes on Open MPI with a few
/// communicators: `n` variables (`n / 2` unbound scalars of mixed classes,
/// the rest bound to `world` and `commN`, with 4 elements each), every
/// metric updated twice so that all its vectors are filled.
pub fn snapshot(n: usize) -> Snapshot {
    let classes = [
        PvarClass::Counter,
        PvarClass::Level,
        PvarClass::Size,
        PvarClass::Highwatermark,
        PvarClass::Timer,
    ];
    let vars = (0..n)
        .map(|i| {
            let class = classes[i % classes.len()];
            let bound = i >= n / 2;
            let elements = if bound { 4 } else { 1 };
            let mut metric = Metric::new(class);
            let v1: Vec<f64> = (0..elements).map(|e| (i * 10 + e) as f64).collect();
            let v2: Vec<f64> = v1.iter().map(|x| x * 2.0 + 1.0).collect();
            metric.update(&v1, 1.0);
            metric.update(&v2, 2.0);
            let name = VarName {
                name: if bound {
                    format!("pml_ob1_var_{i}")
                } else {
                    format!("mpool_var_{i}")
                },
                object: bound.then(|| {
                    if i % 3 == 0 {
                        "world".to_string()
                    } else {
                        format!("comm{}", i % 3)
                    }
                }),
                class,
            };
            (name, metric)
        })
        .collect();
    Snapshot::new(2.0, 2, vars)
}

/// An engine backend that serves PVARs from fixed synthetic values, the
/// way the runtime's backend serves them from its snapshot (by position,
/// bound once by name), and records writes without performing them.
#[derive(Debug)]
pub struct FakeBackend {
    /// Where the values come from.
    pub values: SyntheticValues,
    /// Seconds since start.
    pub now: f64,
}

impl Backend for FakeBackend {
    fn layout(&self) -> u64 {
        self.values.layout
    }

    fn pvar_position(&self, name: &str) -> Option<usize> {
        self.values.position(name)
    }

    fn pvar_at(&self, position: usize) -> Option<&[f64]> {
        self.values.values.get(position).map(Vec::as_slice)
    }

    fn cvar(&mut self, _name: &str) -> Option<Vec<f64>> {
        None
    }

    fn write(
        &mut self,
        name: &str,
        index: Option<u32>,
        _request: &Request,
        _when: When,
        _dry_run: bool,
    ) -> CvarWrite {
        CvarWrite {
            outcome: Outcome::DryRun,
            ..CvarWrite::missing(name, index)
        }
    }

    fn setenv(
        &mut self,
        _name: &str,
        _value: &str,
        _dry_run: bool,
    ) -> Result<(), tuner_core::decide::SetenvError> {
        Ok(())
    }

    fn time(&self) -> f64 {
        self.now
    }
}
