//! A rank's samples folded as they are read: a few running numbers per
//! variable ([`VarAgg`]) and, for the variables asked for, a time series
//! downsampled to at most [`SERIES_POINTS`] points ([`Series`]).

use std::collections::{BTreeMap, HashMap, HashSet};
use vocab::record::{Sample, SampleVar};

/// Points (t, value) of a time series.
pub type Points = Vec<(f64, f64)>;

/// At most this many points of a time series are kept per rank.
pub const SERIES_POINTS: usize = 400;

/// What one rank's samples say about one variable, folded as they are read.
#[derive(Debug, Clone, Default)]
pub struct VarAgg {
    /// `name` or `name@object`.
    pub key: String,
    /// The PVAR class (`COUNTER`, `LEVEL`, ...).
    pub class: String,
    /// Sum of the elements of the first value seen.
    pub first: f64,
    /// Sum of the elements of the last value.
    pub last: f64,
    /// The last sample's `mean` (levels), summed over elements.
    pub mean: Option<f64>,
    /// The last sample's `max` (levels), summed over elements.
    pub max: Option<f64>,
    /// Smallest and largest value (element sum) over the samples.
    pub lo: f64,
    /// See `lo`.
    pub hi: f64,
    /// Samples that had it.
    pub samples: u64,
    /// Samples in which it differed from the one before.
    pub changed: u64,
    /// Elements (the array size).
    pub elements: usize,
    /// Element-wise last value (for `.hist` variables).
    pub last_values: Vec<f64>,
}

impl VarAgg {
    /// Whether the class accumulates (counters, aggregates, timers).
    pub fn accumulating(&self) -> bool {
        matches!(self.class.as_str(), "COUNTER" | "AGGREGATE" | "TIMER")
    }

    /// Whether the class is a watermark.
    pub fn watermark(&self) -> bool {
        matches!(self.class.as_str(), "HIGHWATERMARK" | "LOWWATERMARK")
    }

    /// The number the cross-rank summary uses for this rank: the total for
    /// accumulating classes (tool metrics count from zero), the final value
    /// for watermarks, the mean for the others.
    pub fn headline(&self) -> (f64, &'static str) {
        if self.accumulating() {
            let base = if self.key.starts_with("tool.") {
                0.0
            } else {
                self.first
            };
            (self.last - base, "total")
        } else if self.watermark() {
            (self.last, "final")
        } else {
            (self.mean.unwrap_or(self.last), "mean")
        }
    }

    /// The value plotted over time for a sample with element sum `v`.
    pub fn plotted(&self, v: f64) -> f64 {
        if self.accumulating() && !self.key.starts_with("tool.") {
            v - self.first
        } else {
            v
        }
    }

    /// Folds in one sample's value of the variable; returns its element sum.
    fn fold(&mut self, v: &SampleVar<'_>) -> f64 {
        let total = sum(&v.value);
        if self.samples == 0 {
            self.first = total;
            self.lo = total;
            self.hi = total;
        } else if total != self.last {
            self.changed += 1;
        }
        self.samples += 1;
        self.last = total;
        self.lo = self.lo.min(total);
        self.hi = self.hi.max(total);
        self.elements = v.value.len();
        if let Some(m) = &v.mean {
            self.mean = Some(sum(m));
        }
        if let Some(m) = &v.max {
            self.max = Some(sum(m));
        }
        if self.key.ends_with(".hist") {
            self.last_values = v
                .value
                .iter()
                .map(|x| if x.is_nan() { 0.0 } else { *x })
                .collect();
        }
        total
    }
}

/// A downsampled time series: a point every `stride` samples, the stride
/// doubling whenever the buffer fills; the last point is always kept.
#[derive(Debug, Clone, Default)]
pub struct Series {
    /// The kept points (t, value).
    pub points: Vec<(f64, f64)>,
    stride: u64,
    seen: u64,
    last: Option<(f64, f64)>,
}

impl Series {
    fn push(&mut self, t: f64, v: f64) {
        if self.stride == 0 {
            self.stride = 1;
        }
        if self.seen % self.stride == 0 {
            if self.points.len() >= SERIES_POINTS {
                let kept: Vec<(f64, f64)> = self.points.iter().copied().step_by(2).collect();
                self.points = kept;
                self.stride *= 2;
            }
            if self.seen % self.stride == 0 {
                self.points.push((t, v));
                self.last = None;
            } else {
                self.last = Some((t, v));
            }
        } else {
            self.last = Some((t, v));
        }
        self.seen += 1;
    }

    /// The points, with the last sample included.
    pub fn finished(mut self) -> Vec<(f64, f64)> {
        if let Some(p) = self.last.take() {
            self.points.push(p);
        }
        self.points
    }
}

/// Folds the samples of one log into its [`VarAgg`]s (one per variable, in
/// order of appearance) and the series of the wanted variables.
///
/// A sample lists its variables in the same order as the one before, mostly:
/// the variable at a position is looked up by key only when the one seen
/// there last time is another.
pub(super) struct Folder<'w> {
    /// The variables (`name` or `name@object`) to keep a series of.
    wanted: &'w HashSet<String>,
    /// Key -> index into the log's variables.
    slots: HashMap<String, usize>,
    /// Position in a sample -> index into the log's variables.
    by_position: Vec<usize>,
    /// Index into the log's variables -> its series.
    series: HashMap<usize, Series>,
}

impl<'w> Folder<'w> {
    /// A folder keeping the series of the variables in `wanted`.
    pub(super) fn new(wanted: &'w HashSet<String>) -> Self {
        Folder {
            wanted,
            slots: HashMap::new(),
            by_position: Vec::new(),
            series: HashMap::new(),
        }
    }

    /// Folds in one sample, taken at `t`, into `vars`.
    pub(super) fn sample(&mut self, vars: &mut Vec<VarAgg>, sample: &Sample<'_>, t: f64) {
        for (pos, v) in sample.vars.iter().enumerate() {
            let slot = self.slot(vars, pos, v);
            let agg = &mut vars[slot];
            let total = agg.fold(v);
            if self.wanted.contains(&agg.key) {
                let y = agg.plotted(total);
                self.series.entry(slot).or_default().push(t, y);
            }
        }
    }

    /// The index in `vars` of the variable at position `pos` of a sample,
    /// added if it is new.
    fn slot(&mut self, vars: &mut Vec<VarAgg>, pos: usize, v: &SampleVar<'_>) -> usize {
        let known = self.by_position.get(pos).copied().filter(|&s| {
            let a: &VarAgg = &vars[s];
            same_key(&a.key, &v.name, v.object.as_deref())
        });
        if let Some(s) = known {
            return s;
        }
        let key = match &v.object {
            Some(o) => format!("{}@{o}", v.name),
            None => v.name.to_string(),
        };
        let s = *self.slots.entry(key.clone()).or_insert_with(|| {
            vars.push(VarAgg {
                key,
                class: v.class.as_str().to_string(),
                ..VarAgg::default()
            });
            vars.len() - 1
        });
        if self.by_position.len() <= pos {
            self.by_position.resize(pos + 1, usize::MAX);
        }
        self.by_position[pos] = s;
        s
    }

    /// The series kept, by key.
    pub(super) fn into_series(self, vars: &[VarAgg], into: &mut BTreeMap<String, Points>) {
        for (slot, s) in self.series {
            into.insert(vars[slot].key.clone(), s.finished());
        }
    }
}

/// The sum of a value's elements, NaN (unknown) counted as 0.
fn sum(values: &[f64]) -> f64 {
    values.iter().filter(|x| !x.is_nan()).sum()
}

/// Whether `key` is `name` (no object) or `name@object`, compared without
/// allocating.
fn same_key(key: &str, name: &str, object: Option<&str>) -> bool {
    match object {
        None => key == name,
        Some(o) => {
            key.len() == name.len() + 1 + o.len()
                && key.starts_with(name)
                && key.as_bytes()[name.len()] == b'@'
                && key.ends_with(o)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn series_keeps_a_bounded_spread_of_points_and_the_last() {
        let mut s = Series::default();
        for i in 0..10_000 {
            s.push(i as f64, i as f64);
        }
        let p = s.finished();
        assert!(p.len() <= SERIES_POINTS + 1, "{}", p.len());
        assert!(p.len() > SERIES_POINTS / 4);
        assert_eq!(p.first(), Some(&(0.0, 0.0)));
        assert_eq!(p.last(), Some(&(9999.0, 9999.0)));
        assert!(p.windows(2).all(|w| w[0].0 < w[1].0));
    }

    #[test]
    fn keys_compare_without_allocating() {
        assert!(same_key("a@world", "a", Some("world")));
        assert!(!same_key("a@world", "a", None));
        assert!(!same_key("ab@world", "a", Some("world")));
        assert!(same_key("a", "a", None));
    }
}
