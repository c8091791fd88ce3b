//! The run by host: the ranks of each host (from the logs' headers), and
//! the quantities whose mean per rank differs most between hosts (from
//! each log's last sample, the quantities summary.json has), so that a
//! node that behaves unlike the others shows. "Most" is the range of the
//! hosts' means against the largest range within one host: a quantity
//! that is the same on the ranks of a host and differs from host to host
//! comes before one whose ranks scatter anyway (times, under load).

use super::recompute::rank_quantities;
use crate::report::reading::RankLog;
use std::collections::BTreeMap;

/// How many quantities the per-host view shows.
pub const COLUMNS: usize = 3;

/// The ranks of each host and their means of a few quantities.
#[derive(Debug, Clone, Default)]
pub struct Hosts {
    /// The quantities shown, most different between hosts first.
    pub columns: Vec<String>,
    /// One per host, by lowest rank.
    pub rows: Vec<HostRow>,
}

/// One host.
#[derive(Debug, Clone, Default)]
pub struct HostRow {
    /// Its name.
    pub host: String,
    /// Its ranks, in order.
    pub ranks: Vec<u32>,
    /// The mean per rank of each of [`Hosts::columns`].
    pub means: Vec<f64>,
}

/// The per-host view of the ranks' logs.
pub fn hosts(ranks: &[RankLog]) -> Hosts {
    let mut of_host: BTreeMap<&str, Vec<u32>> = BTreeMap::new();
    // quantity -> host -> its ranks' values; a rank without the quantity
    // counts as 0 (the interposer logs only the call families a rank used).
    let mut values: BTreeMap<String, BTreeMap<&str, Vec<f64>>> = BTreeMap::new();
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    for r in ranks {
        let Some(h) = &r.header else { continue };
        of_host.entry(h.host.as_str()).or_default().push(r.rank);
        let before = seen.entry(h.host.as_str()).or_default();
        for (name, _, v) in rank_quantities(r) {
            if v.is_finite() {
                let at = values.entry(name).or_default().entry(&h.host).or_default();
                at.resize(*before, 0.0);
                at.push(v);
            }
        }
        *before += 1;
    }
    for per in values.values_mut() {
        for (host, ranks) in &seen {
            per.entry(host).or_default().resize(*ranks, 0.0);
        }
    }
    let mut rows: Vec<HostRow> = of_host
        .into_iter()
        .map(|(host, mut ranks)| {
            ranks.sort_unstable();
            HostRow {
                host: host.to_string(),
                ranks,
                means: Vec::new(),
            }
        })
        .collect();
    rows.sort_by_key(|r| r.ranks.first().copied());
    // How far apart the hosts' means are against the widest host, then
    // relative to the largest mean; only quantities whose means differ by
    // more than 1%.
    let mut apart: Vec<(f64, f64, &String, Vec<f64>)> = values
        .iter()
        .filter_map(|(name, per)| {
            let of_rows: Vec<&Vec<f64>> = rows
                .iter()
                .map(|row| per.get(row.host.as_str()))
                .collect::<Option<_>>()?;
            let means: Vec<f64> = of_rows
                .iter()
                .map(|v| v.iter().sum::<f64>() / v.len() as f64)
                .collect();
            let (lo, hi) = range(&means);
            let scale = lo.abs().max(hi.abs());
            let relative = if scale > 0.0 { (hi - lo) / scale } else { 0.0 };
            let within = of_rows
                .iter()
                .map(|v| {
                    let (lo, hi) = range(v);
                    hi - lo
                })
                .fold(0.0, f64::max);
            let against = (hi - lo) / within.max(f64::MIN_POSITIVE);
            (relative > 0.01).then_some((against, relative, name, means))
        })
        .collect();
    apart.sort_by(|a, b| {
        b.0.total_cmp(&a.0)
            .then(b.1.total_cmp(&a.1))
            .then(a.2.cmp(b.2))
    });
    let chosen: Vec<(String, Vec<f64>)> = apart
        .into_iter()
        .take(COLUMNS)
        .map(|(_, _, name, means)| (name.clone(), means))
        .collect();
    for (i, row) in rows.iter_mut().enumerate() {
        row.means = chosen.iter().map(|(_, means)| means[i]).collect();
    }
    Hosts {
        columns: chosen.into_iter().map(|(name, _)| name).collect(),
        rows,
    }
}

/// The smallest and largest of some values.
fn range(values: &[f64]) -> (f64, f64) {
    values
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
            (lo.min(*v), hi.max(*v))
        })
}
