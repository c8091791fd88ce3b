//! Interleaved A/B timing: the ratio of two pieces of code doing the same
//! work, each batch of A followed by a batch of B, so that both see the same
//! machine load (the benchmark machine is shared and noisy).

use std::time::{Duration, Instant};

/// The outcome of [`compare`]: per-batch times and their ratio.
#[derive(Debug, Clone, Copy)]
pub struct Paired {
    /// Median time of one call of A.
    pub a: Duration,
    /// Median time of one call of B.
    pub b: Duration,
    /// Median over batches of (time of A / time of B).
    pub ratio: f64,
    /// Smallest and largest batch ratio.
    pub ratio_min: f64,
    /// Largest batch ratio.
    pub ratio_max: f64,
}

impl std::fmt::Display for Paired {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:.1} ns / {:.1} ns = {:.3}x (batches {:.3}..{:.3})",
            self.a.as_secs_f64() * 1e9,
            self.b.as_secs_f64() * 1e9,
            self.ratio,
            self.ratio_min,
            self.ratio_max
        )
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// The shortest batch: long enough that a preemption or a timer tick is a
/// small part of it, short enough that many batches fit in a second.
const MIN_BATCH: Duration = Duration::from_millis(2);

/// Runs `batches` rounds of a batch of calls of `a` then one of `b`
/// (alternating which goes first) after one warm-up round, and returns the
/// median time per call of each and the median of the per-round ratios.
/// A batch has at least `calls` calls, more if that takes less than 2 ms.
pub fn compare(batches: usize, calls: usize, mut a: impl FnMut(), mut b: impl FnMut()) -> Paired {
    let batches = batches.max(1);
    let mut calls = calls.max(1);
    let time = |f: &mut dyn FnMut(), calls: usize| {
        let start = Instant::now();
        for _ in 0..calls {
            f();
        }
        start.elapsed().as_secs_f64() / calls as f64
    };
    let fastest = time(&mut a, calls).min(time(&mut b, calls)).max(1e-10);
    let needed = (MIN_BATCH.as_secs_f64() / fastest).ceil() as usize;
    calls = calls.max(needed);
    let time = |f: &mut dyn FnMut()| time(f, calls);
    let (mut ta, mut tb, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..batches {
        let (x, y) = if round % 2 == 0 {
            let x = time(&mut a);
            (x, time(&mut b))
        } else {
            let y = time(&mut b);
            (time(&mut a), y)
        };
        ta.push(x);
        tb.push(y);
        ratios.push(x / y);
    }
    let ratio = median(&mut ratios);
    Paired {
        a: Duration::from_secs_f64(median(&mut ta)),
        b: Duration::from_secs_f64(median(&mut tb)),
        ratio,
        ratio_min: ratios[0],
        ratio_max: ratios[ratios.len() - 1],
    }
}
