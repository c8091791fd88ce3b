//! Class-aware derived metrics of one sampled variable (thesis, chapter IV,
//! "PVAR Classes and Notion of Aggregability").
//!
//! - COUNTER, AGGREGATE, TIMER accumulate: what matters is the change
//!   (delta) over an interval and its rate, and the total over the run.
//! - HIGH/LOW WATERMARK: the value, how many times it changed, and by how
//!   much in total.
//! - LEVEL, SIZE, PERCENTAGE, STATE, GENERIC: the value, with its minimum,
//!   maximum and mean over the run.
//!
//! Arrays are handled element-wise. Updating allocates only when the
//! element count changes.

use mpit::meta::PvarClass;
use serde::Serialize;

/// Running metrics of one variable on one object.
#[derive(Debug, Serialize)]
pub struct Metric {
    /// The class that decides which metrics are meaningful.
    pub class: PvarClass,
    /// The latest value, element-wise.
    pub value: Vec<f64>,
    /// The change since the previous sample (accumulating classes and
    /// watermarks).
    pub delta: Vec<f64>,
    /// `delta` per second.
    pub rate: Vec<f64>,
    /// The first value seen (accumulating classes count from there).
    pub first: Vec<f64>,
    /// Number of changes seen (watermarks).
    pub changes: Vec<u64>,
    /// Total absolute change (watermarks).
    pub change_total: Vec<f64>,
    /// Minimum over the run (levels and the like).
    pub min: Vec<f64>,
    /// Maximum over the run.
    pub max: Vec<f64>,
    /// Sum of samples, for the mean.
    sum: Vec<f64>,
    /// Number of samples taken.
    pub samples: u64,
    last_time: f64,
}

impl Clone for Metric {
    fn clone(&self) -> Metric {
        let mut m = Metric::new(self.class);
        m.clone_from(self);
        m
    }

    /// Copies `source` into the buffers this metric already has (a
    /// snapshot's metrics are refilled so on every tick, without
    /// allocating while the element count stays the same).
    fn clone_from(&mut self, source: &Metric) {
        self.class = source.class;
        self.value.clone_from(&source.value);
        self.delta.clone_from(&source.delta);
        self.rate.clone_from(&source.rate);
        self.first.clone_from(&source.first);
        self.changes.clone_from(&source.changes);
        self.change_total.clone_from(&source.change_total);
        self.min.clone_from(&source.min);
        self.max.clone_from(&source.max);
        self.sum.clone_from(&source.sum);
        self.samples = source.samples;
        self.last_time = source.last_time;
    }
}

impl Metric {
    /// A metric with no samples yet.
    pub fn new(class: PvarClass) -> Metric {
        Metric {
            class,
            value: Vec::new(),
            delta: Vec::new(),
            rate: Vec::new(),
            first: Vec::new(),
            changes: Vec::new(),
            change_total: Vec::new(),
            min: Vec::new(),
            max: Vec::new(),
            sum: Vec::new(),
            samples: 0,
            last_time: 0.0,
        }
    }

    /// Adds a sample taken at `time` seconds since start.
    pub fn update(&mut self, values: &[f64], time: f64) {
        let n = values.len();
        if self.value.len() != n {
            // First sample, or the count changed: start over.
            *self = Metric::new(self.class);
            self.value = values.to_vec();
            self.first = values.to_vec();
            self.min = values.to_vec();
            self.max = values.to_vec();
            self.sum = values.to_vec();
            self.delta = vec![0.0; n];
            self.rate = vec![0.0; n];
            self.changes = vec![0; n];
            self.change_total = vec![0.0; n];
            self.samples = 1;
            self.last_time = time;
            return;
        }
        let dt = time - self.last_time;
        for (i, &new) in values.iter().enumerate() {
            let old = self.value[i];
            let d = new - old;
            self.delta[i] = d;
            self.rate[i] = if dt > 0.0 { d / dt } else { 0.0 };
            if d != 0.0 {
                self.changes[i] += 1;
                self.change_total[i] += d.abs();
            }
            self.min[i] = self.min[i].min(new);
            self.max[i] = self.max[i].max(new);
            self.sum[i] += new;
            self.value[i] = new;
        }
        self.samples += 1;
        self.last_time = time;
    }

    /// Mean over the run, element-wise.
    pub fn mean(&self) -> Vec<f64> {
        let n = self.samples.max(1) as f64;
        self.sum.iter().map(|s| s / n).collect()
    }

    /// Change since the first sample (accumulating classes).
    pub fn total(&self) -> Vec<f64> {
        self.value
            .iter()
            .zip(&self.first)
            .map(|(v, f)| v - f)
            .collect()
    }

    /// The one number per element that best sums the run up for its class:
    /// the total for accumulating classes, the final value for watermarks,
    /// the mean for levels.
    pub fn headline(&self) -> Vec<f64> {
        if self.class.is_accumulating() {
            self.total()
        } else if self.class.is_watermark() {
            self.value.clone()
        } else {
            self.mean()
        }
    }

    /// The name of what [`Metric::headline`] reports.
    pub fn headline_kind(&self) -> &'static str {
        if self.class.is_accumulating() {
            "total"
        } else if self.class.is_watermark() {
            "final"
        } else {
            "mean"
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_give_deltas_rates_and_totals() {
        let mut m = Metric::new(PvarClass::Counter);
        m.update(&[10.0, 0.0], 0.0);
        m.update(&[15.0, 2.0], 0.5);
        assert_eq!(m.delta, vec![5.0, 2.0]);
        assert_eq!(m.rate, vec![10.0, 4.0]);
        m.update(&[20.0, 2.0], 1.0);
        assert_eq!(m.total(), vec![10.0, 2.0]);
        assert_eq!(m.headline(), vec![10.0, 2.0]);
        assert_eq!(m.headline_kind(), "total");
    }

    #[test]
    fn watermarks_count_changes() {
        let mut m = Metric::new(PvarClass::Highwatermark);
        for (t, v) in [(0.0, 1.0), (1.0, 1.0), (2.0, 4.0), (3.0, 9.0)] {
            m.update(&[v], t);
        }
        assert_eq!(m.changes, vec![2]);
        assert_eq!(m.change_total, vec![8.0]);
        assert_eq!(m.headline(), vec![9.0]);
    }

    #[test]
    fn levels_give_min_max_mean() {
        let mut m = Metric::new(PvarClass::Level);
        for (t, v) in [(0.0, 2.0), (1.0, 6.0), (2.0, 4.0)] {
            m.update(&[v], t);
        }
        assert_eq!((m.min[0], m.max[0]), (2.0, 6.0));
        assert_eq!(m.mean(), vec![4.0]);
        assert_eq!(m.headline_kind(), "mean");
    }

    #[test]
    fn a_changed_count_restarts() {
        let mut m = Metric::new(PvarClass::Size);
        m.update(&[1.0, 2.0], 0.0);
        m.update(&[1.0, 2.0, 3.0, 4.0], 1.0);
        assert_eq!(m.value.len(), 4);
        assert_eq!(m.samples, 1);
    }
}
