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

/// The variable with the largest spread across ranks: plotted over time
/// when nothing else moves (see [`default_plots`]).
pub fn default_plot_variable(stats: &[Stat], size: Option<u32>) -> Option<String> {
    by_spread(stats, size)
        .first()
        .map(|s| s.name.trim_end_matches(":max").to_string())
}

/// A plot over time: a variable's series (`name` or `name@world`), drawn as
/// its value or as its rate between samples.
#[derive(Debug, Clone, PartialEq)]
pub struct OverTime {
    /// The series key.
    pub key: String,
    /// Whether the rate per second between samples is drawn (for counters
    /// and timers, which only grow).
    pub rate: bool,
}

impl OverTime {
    /// The variable as the plot names it.
    pub fn label(&self) -> String {
        match (self.rate, self.key.as_str()) {
            (false, key) => key.to_string(),
            (true, "tool.mpi.time") => "time in MPI per s (tool.mpi.time, 1 = all)".into(),
            (true, key) => format!("{key} per s"),
        }
    }

    /// The file name stem (`over-time-<variable>[-rate]`).
    pub fn stem(&self) -> String {
        let slug = crate::report::plots::slug(&self.key);
        if self.rate {
            format!("over-time-{slug}-rate")
        } else {
            format!("over-time-{slug}")
        }
    }

    /// The points to draw from a series of (t, value).
    pub fn points(&self, series: &[(f64, f64)]) -> Vec<(f64, f64)> {
        if self.rate {
            rates(series)
        } else {
            series.to_vec()
        }
    }
}

/// The rate per second of a growing quantity, over intervals of at least
/// a sixtieth of the series' span (at most 60 points a line: the tool's
/// times are estimated from sampled calls, and one sample's estimate can
/// jump), at each interval's end (none across a drop).
pub fn rates(series: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let (Some(first), Some(last)) = (series.first(), series.last()) else {
        return Vec::new();
    };
    let min_dt = (last.0 - first.0) / 60.0;
    let mut out = Vec::new();
    let mut from = *first;
    for &(t, v) in &series[1..] {
        if v < from.1 {
            from = (t, v);
        } else if t > from.0 && t - from.0 >= min_dt {
            out.push((t, (v - from.1) / (t - from.0)));
            from = (t, v);
        }
    }
    out
}

/// The plots over time when none is asked for: what moves during a run.
/// The rate of the busiest MPI call family, the time each rank
/// spends in MPI, and the MPI queue length or level that changed most
/// often (a PVAR of class LEVEL or SIZE, from `activity`). When the logs
/// have none of these (no interposer metrics, no such PVAR), the variable
/// with the largest spread across ranks.
pub fn default_plots(stats: &[Stat], activity: &[Activity], size: Option<u32>) -> Vec<OverTime> {
    let mut out = Vec::new();
    let busiest = stats
        .iter()
        .filter(|s| {
            s.ranks > 0
                && s.mean > 0.0
                && s.name.starts_with("tool.")
                && s.name.ends_with(".calls")
                && s.name != "tool.mpi.calls"
        })
        .max_by(|a, b| a.mean.total_cmp(&b.mean).then(b.name.cmp(&a.name)));
    if let Some(s) = busiest {
        out.push(OverTime {
            key: s.name.clone(),
            rate: true,
        });
    }
    if stats
        .iter()
        .any(|s| s.name == "tool.mpi.time" && s.ranks > 0)
    {
        out.push(OverTime {
            key: "tool.mpi.time".into(),
            rate: true,
        });
    }
    let queue = activity.iter().find(|a| {
        matches!(a.class.as_str(), "LEVEL" | "SIZE")
            && !a.key.starts_with("tool.")
            && a.changed > 0.0
            && a.hi > a.lo
    });
    if let Some(q) = queue {
        out.push(OverTime {
            key: q.key.clone(),
            rate: false,
        });
    }
    if out.is_empty() {
        out.extend(default_plot_variable(stats, size).map(|key| OverTime { key, rate: false }));
    }
    out
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

    fn active(key: &str, class: &str, changed: f64) -> Activity {
        Activity {
            key: key.into(),
            class: class.into(),
            ranks: 4,
            changed,
            lo: 0.0,
            hi: if changed > 0.0 { 7.0 } else { 0.0 },
        }
    }

    #[test]
    fn default_plots_show_what_moves() {
        let stats = vec![
            stat("tool.gather.time", 4, 0.0, 3.0),
            stat("tool.allreduce.calls", 4, 900.0, 1000.0),
            stat("tool.send.calls", 4, 50.0, 60.0),
            stat("tool.mpi.calls", 4, 5000.0, 5000.0),
            stat("tool.mpi.time", 4, 0.5, 4.0),
        ];
        let activity = vec![
            active("tool.allreduce.calls", "COUNTER", 1.0),
            active("pml_ob1_posted_recvq_length@world", "LEVEL", 0.0),
            active("pml_ob1_unexpected_msgq_length@world", "LEVEL", 0.4),
        ];
        let plots = default_plots(&stats, &activity, Some(4));
        let keys: Vec<(&str, bool)> = plots.iter().map(|p| (p.key.as_str(), p.rate)).collect();
        assert_eq!(
            keys,
            vec![
                ("tool.allreduce.calls", true),
                ("tool.mpi.time", true),
                ("pml_ob1_unexpected_msgq_length@world", false),
            ]
        );
        assert_eq!(plots[0].stem(), "over-time-tool.allreduce.calls-rate");
        assert!(plots[1].label().starts_with("time in MPI per s"));
        assert_eq!(
            plots[2].stem(),
            "over-time-pml_ob1_unexpected_msgq_length_world"
        );
        // Without interposer metrics or moving queues: the largest spread.
        let only_pvars = vec![stat("some_pvar", 4, 1.0, 9.0)];
        assert_eq!(
            default_plots(&only_pvars, &[], Some(4)),
            vec![OverTime {
                key: "some_pvar".into(),
                rate: false
            }]
        );
    }

    #[test]
    fn rates_are_per_second_between_samples() {
        let series = [
            (0.0, 0.0),
            (0.5, 10.0),
            (1.5, 30.0),
            (1.5, 40.0),
            (2.0, 5.0),
            (3.0, 6.0),
        ];
        assert_eq!(rates(&series), vec![(0.5, 20.0), (1.5, 20.0), (3.0, 1.0)]);
        assert!(rates(&series[..1]).is_empty());
        // 600 samples: intervals of at least a sixtieth of the span.
        let dense: Vec<(f64, f64)> = (0..=600)
            .map(|i| (f64::from(i) * 0.1, f64::from(i)))
            .collect();
        let r = rates(&dense);
        assert!((59..=60).contains(&r.len()), "{}", r.len());
        assert!(
            r.iter().all(|&(_, rate)| (rate - 10.0).abs() < 1e-6),
            "{r:?}"
        );
    }
}
