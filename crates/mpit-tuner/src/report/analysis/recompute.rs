//! What summary.json would have said, recomputed from the logs when it is
//! missing: cross-rank statistics from each log's last sample, classes of
//! ranks from the tool metrics, message-size histograms, and the tuner's
//! end-of-run recommendations applied to them.

use crate::report::reading::{Advice, Class, RankLog, Run, Stat};
use mpit::Library;
use std::collections::{BTreeMap, HashMap};
use tuner_core::decide::format_ranks;
use tuner_core::finalize::recommend;
use tuner_core::finalize::{Summary, VariableStats, HISTOGRAM_BINS};
use tuner_core::sample::toolmetrics::{Family, BUCKETS};

/// The per-rank quantities the summary would have (rank 0's rule:
/// unbound variables and those bound to `world`, not the `.hist` arrays;
/// levels also give their maximum).
pub(super) fn rank_quantities(r: &RankLog) -> Vec<(String, &'static str, f64)> {
    let mut out = Vec::new();
    for v in &r.vars {
        let bound_elsewhere = v.key.contains('@') && !v.key.ends_with("@world");
        if bound_elsewhere || v.key.ends_with(".hist") {
            continue;
        }
        let (value, kind) = v.headline();
        out.push((v.key.clone(), kind, value));
        if !v.accumulating() && !v.watermark() && !v.key.starts_with("tool.") {
            if let Some(max) = v.max {
                out.push((format!("{}:max", v.key), "max", max));
            }
        }
    }
    // A policy disabled here that did nothing has no quantity (as in
    // summary.json, where a policy disabled on every rank has none).
    for p in r
        .policies
        .iter()
        .filter(|p| p.disabled.is_none() || p.writes > 0 || p.refused > 0)
    {
        out.push((
            format!("policy.{}.writes", p.policy),
            "total",
            p.writes as f64,
        ));
        out.push((
            format!("policy.{}.refused", p.policy),
            "total",
            p.refused as f64,
        ));
    }
    out
}

/// Cross-rank statistics from the last samples of the logs.
pub fn recompute_stats(ranks: &[RankLog]) -> Vec<Stat> {
    type KindValues = (&'static str, Vec<(u32, f64)>);
    let mut per: BTreeMap<String, KindValues> = BTreeMap::new();
    for r in ranks {
        for (name, kind, v) in rank_quantities(r) {
            if v.is_finite() {
                per.entry(name)
                    .or_insert((kind, Vec::new()))
                    .1
                    .push((r.rank, v));
            }
        }
    }
    per.into_iter()
        .map(|(name, (kind, values))| stat_of(name, kind, &values))
        .collect()
}

/// The statistics of (rank, value) pairs, as summary.json has them.
pub fn stat_of(name: String, kind: &str, values: &[(u32, f64)]) -> Stat {
    let n = values.len() as f64;
    let (mut min, mut min_rank, mut max, mut max_rank) = (f64::INFINITY, -1, f64::NEG_INFINITY, -1);
    let (mut s, mut s2) = (0.0, 0.0);
    for &(r, v) in values {
        if v < min {
            min = v;
            min_rank = i64::from(r);
        }
        if v > max {
            max = v;
            max_rank = i64::from(r);
        }
        s += v;
        s2 += v * v;
    }
    let mean = s / n.max(1.0);
    let mut histogram = vec![0u32; HISTOGRAM_BINS];
    for &(_, v) in values {
        let b = if max > min {
            (((v - min) / (max - min) * HISTOGRAM_BINS as f64) as usize).min(HISTOGRAM_BINS - 1)
        } else {
            0
        };
        histogram[b] += 1;
    }
    Stat {
        name,
        kind: kind.to_string(),
        ranks: values.len() as u32,
        min,
        min_rank,
        max,
        max_rank,
        mean,
        stddev: (s2 / n.max(1.0) - mean * mean).max(0.0).sqrt(),
        histogram,
    }
}

/// Members, compactly: `0-6:2` for a regular pattern, else `0-3,8`.
pub fn compact_ranks(members: &[u32]) -> String {
    if members.len() >= 3 {
        let stride = members[1] - members[0];
        if stride > 1 && members.windows(2).all(|w| w[1] - w[0] == stride) {
            return format!("{}-{}:{stride}", members[0], members[members.len() - 1]);
        }
    }
    format_ranks(members)
}

/// Classes of ranks from the tool metrics in the logs: ranks with the same
/// calls and bytes per MPI call family.
pub fn recompute_classes(ranks: &[RankLog]) -> Vec<Class> {
    let mut classes: Vec<(String, Vec<u32>)> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    for r in ranks {
        if r.samples == 0 {
            continue;
        }
        let get = |key: String| {
            r.vars
                .iter()
                .find(|v| v.key == key)
                .map_or(0.0, |v| v.headline().0)
        };
        let mut parts = Vec::new();
        for f in Family::ALL {
            let calls = get(format!("tool.{}.calls", f.name()));
            if calls == 0.0 {
                continue;
            }
            let bytes = get(format!("tool.{}.bytes", f.name()));
            parts.push(format!("{} {calls} calls {bytes} B", f.name()));
        }
        if parts.is_empty() {
            parts.push("no counted MPI calls".into());
        }
        let sig = parts.join(", ");
        let i = *index.entry(sig.clone()).or_insert_with(|| {
            classes.push((sig, Vec::new()));
            classes.len() - 1
        });
        classes[i].1.push(r.rank);
    }
    classes
        .into_iter()
        .map(|(signature, members)| Class {
            count: members.len() as u32,
            ranks: compact_ranks(&members),
            signature,
        })
        .collect()
}

/// Message-size histograms summed over the ranks' last samples.
pub fn recompute_size_histograms(ranks: &[RankLog]) -> BTreeMap<String, Vec<u64>> {
    let mut out: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for r in ranks {
        for v in &r.vars {
            let Some(family) = v
                .key
                .strip_prefix("tool.")
                .and_then(|k| k.strip_suffix(".hist"))
            else {
                continue;
            };
            let h = out
                .entry(family.to_string())
                .or_insert_with(|| vec![0; BUCKETS]);
            for (a, b) in h.iter_mut().zip(&v.last_values) {
                *a += b.max(0.0) as u64;
            }
        }
    }
    out.retain(|_, h| h.iter().any(|&n| n > 0));
    out
}

/// The end-of-run rules of the tuner, applied to recomputed statistics.
pub fn recompute_advice(
    run: &Run,
    stats: &[Stat],
    sizes: &BTreeMap<String, Vec<u64>>,
) -> Vec<Advice> {
    let header = run.ranks.iter().find_map(|r| r.header.as_ref());
    let library = header.map(|h| match Library::from_version(&h.library_version) {
        Library::Unknown => Library::from(&h.library),
        l => l,
    });
    let summary = Summary {
        variables: stats
            .iter()
            .map(|s| VariableStats {
                name: s.name.clone(),
                kind: s.kind.clone(),
                ranks: s.ranks,
                min: s.min,
                min_rank: s.min_rank as i32,
                max: s.max,
                max_rank: s.max_rank as i32,
                mean: s.mean,
                stddev: s.stddev,
                histogram: s.histogram.clone(),
            })
            .collect(),
        classes: Vec::new(),
        hosts: Vec::new(),
        size_histograms: sizes.clone(),
    };
    let ctx = recommend::Context {
        library,
        eager_limit: None,
        has_hcoll: false,
    };
    recommend::recommend(&summary, &ctx)
        .into_iter()
        .map(|r| Advice {
            id: r.id,
            advice: r.advice,
            evidence: r.evidence,
            setting: r.setting,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_like_the_summary() {
        let s = stat_of(
            "x".into(),
            "total",
            &[(0, 1.0), (1, 3.0), (2, 3.0), (3, 5.0)],
        );
        assert_eq!((s.min, s.min_rank, s.max, s.max_rank), (1.0, 0, 5.0, 3));
        assert_eq!(s.mean, 3.0);
        assert!((s.stddev - 2f64.sqrt()).abs() < 1e-12);
        assert_eq!(s.histogram, vec![1, 0, 0, 0, 2, 0, 0, 1]);
    }

    #[test]
    fn ranks_compactly() {
        assert_eq!(compact_ranks(&[0, 2, 4, 6]), "0-6:2");
        assert_eq!(compact_ranks(&[1, 3]), "1,3");
        assert_eq!(compact_ranks(&[0, 1, 2, 3]), "0-3");
        assert_eq!(compact_ranks(&[5]), "5");
    }
}
