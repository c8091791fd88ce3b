//! Which variables are worth a look: those that differ most across ranks
//! ([`by_spread`]) and those that change most during the run
//! ([`activity`]), MPI PVARs before the tool's own metrics ([`tier`]).

use crate::report::reading::{RankLog, Stat};
use std::collections::BTreeMap;

/// Activity of a variable over the run, across ranks.
#[derive(Debug, Clone)]
pub struct Activity {
    /// `name` or `name@world`.
    pub key: String,
    /// Its class.
    pub class: String,
    /// Ranks that had it.
    pub ranks: u32,
    /// Mean over ranks of the share of sample intervals in which it changed.
    pub changed: f64,
    /// Smallest value seen on any rank.
    pub lo: f64,
    /// Largest value seen on any rank.
    pub hi: f64,
}

/// The variables by how often they changed between samples, across ranks.
pub fn activity(ranks: &[RankLog]) -> Vec<Activity> {
    let mut per: BTreeMap<&str, Activity> = BTreeMap::new();
    for r in ranks {
        for v in &r.vars {
            if v.key.ends_with(".hist") || (v.key.contains('@') && !v.key.ends_with("@world")) {
                continue;
            }
            let share = if v.samples > 1 {
                v.changed as f64 / (v.samples - 1) as f64
            } else {
                0.0
            };
            let a = per.entry(v.key.as_str()).or_insert_with(|| Activity {
                key: v.key.clone(),
                class: v.class.clone(),
                ranks: 0,
                changed: 0.0,
                lo: f64::INFINITY,
                hi: f64::NEG_INFINITY,
            });
            a.ranks += 1;
            a.changed += share;
            a.lo = a.lo.min(v.plotted(v.lo));
            a.hi = a.hi.max(v.plotted(v.hi));
        }
    }
    let mut out: Vec<Activity> = per
        .into_values()
        .map(|mut a| {
            a.changed /= f64::from(a.ranks.max(1));
            a
        })
        .collect();
    out.sort_by(|a, b| {
        b.changed
            .total_cmp(&a.changed)
            .then(tier(&a.key).cmp(&tier(&b.key)))
            .then(a.key.cmp(&b.key))
    });
    out
}

/// Which variables come first when looking for the interesting ones: MPI
/// PVARs, then the tool's call counts, bytes, other tool metrics, times,
/// and policy counts last.
pub fn tier(name: &str) -> u8 {
    let base = name.split(['@', ':']).next().unwrap_or(name);
    if base.starts_with("policy.") {
        5
    } else if let Some(rest) = base.strip_prefix("tool.") {
        if rest.ends_with(".calls") {
            1
        } else if rest.ends_with(".bytes") {
            2
        } else if rest.ends_with(".time") {
            4
        } else {
            3
        }
    } else {
        0
    }
}

/// How much a quantity differs across ranks, from 0 (alike) to 1; ranks
/// without it count as zero.
pub fn spread(s: &Stat, size: Option<u32>) -> f64 {
    if s.ranks == 0 || !s.min.is_finite() || !s.max.is_finite() {
        return 0.0;
    }
    let partial = size.is_some_and(|n| s.ranks < n);
    let (lo, hi) = if partial {
        (s.min.min(0.0), s.max.max(0.0))
    } else {
        (s.min, s.max)
    };
    let scale = lo.abs().max(hi.abs());
    if scale > 0.0 {
        (hi - lo) / scale
    } else {
        0.0
    }
}

/// The statistics by interest: those that differ across ranks first, then
/// by [`tier`], relative spread, absolute spread and name. `:max`
/// companions are left out.
pub fn by_spread(stats: &[Stat], size: Option<u32>) -> Vec<&Stat> {
    let mut rows: Vec<&Stat> = stats
        .iter()
        .filter(|s| s.ranks > 0 && !s.name.ends_with(":max"))
        .collect();
    rows.sort_by(|a, b| {
        let (sa, sb) = (spread(a, size), spread(b, size));
        (sb > 0.01)
            .cmp(&(sa > 0.01))
            .then(tier(&a.name).cmp(&tier(&b.name)))
            .then(sb.total_cmp(&sa))
            .then((b.max - b.min).total_cmp(&(a.max - a.min)))
            .then(a.name.cmp(&b.name))
    });
    rows
}

/// The variable plotted over time when none is asked for: the one with the
/// largest spread across ranks.
pub fn default_plot_variable(stats: &[Stat], size: Option<u32>) -> Option<String> {
    by_spread(stats, size)
        .first()
        .map(|s| s.name.trim_end_matches(":max").to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat(name: &str, ranks: u32, min: f64, max: f64) -> Stat {
        Stat {
            name: name.into(),
            ranks,
            min,
            max,
            mean: (min + max) / 2.0,
            ..Stat::default()
        }
    }

    #[test]
    fn pvars_with_spread_come_first_then_call_counts() {
        let stats = vec![
            stat("tool.mpi.time", 4, 0.5, 4.0),
            stat("tool.allreduce.calls", 2, 200.0, 200.0),
            stat("tool.allreduce.bytes", 2, 1600.0, 1600.0),
            stat("tool.send.calls", 4, 50.0, 50.0),
        ];
        assert_eq!(
            default_plot_variable(&stats, Some(4)).as_deref(),
            Some("tool.allreduce.calls")
        );
        let mut with_pvar = stats.clone();
        with_pvar.push(stat("pml_ob1_posted_recvq_length@world", 4, 0.0, 0.9));
        with_pvar.push(stat("pml_ob1_unexpected_msgq_length@world", 4, 0.0, 15.0));
        with_pvar.push(stat(
            "pml_ob1_unexpected_msgq_length@world:max",
            4,
            0.0,
            16.0,
        ));
        assert_eq!(
            default_plot_variable(&with_pvar, Some(4)).as_deref(),
            Some("pml_ob1_unexpected_msgq_length@world")
        );
    }
}
