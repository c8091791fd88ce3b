//! The cross-rank summary computed at finalize with MPI reductions on the
//! tool's private communicator, in O(log P) steps and without gathering
//! every rank's data in one place.
//!
//! Rank 0 broadcasts the list of summarised quantities (its own); every rank
//! contributes its value of each (or nothing, if it has none); reductions
//! give the sum, the sum of squares, the count, and MINLOC/MAXLOC with the
//! ranks that held them (as LLNL's Gyan does).

use crate::error::Result;
use crate::ffi::{self, Comm, DoubleInt};
use crate::sampler::Snapshot;
use serde::{Deserialize, Serialize};

/// Statistics of one quantity across ranks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VariableStats {
    /// `name` or `name@object`, with the quantity (`total`, `final`, `mean`).
    pub name: String,
    /// What the per-rank number is: `total` (counters, timers), `final`
    /// (watermarks), `mean` (levels, sizes).
    pub kind: String,
    /// How many ranks had it.
    pub ranks: u32,
    /// Smallest per-rank value.
    pub min: f64,
    /// The rank that held it.
    pub min_rank: i32,
    /// Largest per-rank value.
    pub max: f64,
    /// The rank that held it.
    pub max_rank: i32,
    /// Mean over the ranks that had it.
    pub mean: f64,
    /// Population standard deviation over those ranks.
    pub stddev: f64,
}

/// One rank's contribution: (name, kind, value), a value per quantity.
pub fn local_quantities(snapshot: &Snapshot) -> Vec<(String, &'static str, f64)> {
    snapshot
        .vars
        .iter()
        .filter(|v| v.object.as_deref().is_none_or(|o| o == "world"))
        .map(|v| {
            let name = match &v.object {
                Some(o) => format!("{}@{o}", v.name),
                None => v.name.clone(),
            };
            // Arrays are summed element-wise into one number per rank.
            let value: f64 = v.metric.headline().iter().sum();
            (name, v.metric.headline_kind(), value)
        })
        .collect()
}

/// Computes the statistics; every rank must call this with the same
/// communicator. Only `root` gets the result (`None` elsewhere).
pub fn reduce(
    comm: Comm,
    root: i32,
    local: &[(String, &'static str, f64)],
) -> Result<Option<Vec<VariableStats>>> {
    let (rank, _) = ffi::rank_size(comm)?;
    // The list of quantities: root's, as "name\tkind\n" lines.
    let mut names: Vec<u8> = if rank == root {
        local
            .iter()
            .flat_map(|(n, k, _)| format!("{n}\t{k}\n").into_bytes())
            .collect()
    } else {
        Vec::new()
    };
    let mut len = (names.len() as u64).to_le_bytes();
    ffi::bcast_bytes(comm, &mut len, root)?;
    names.resize(u64::from_le_bytes(len) as usize, 0);
    ffi::bcast_bytes(comm, &mut names, root)?;
    let text = String::from_utf8_lossy(&names).into_owned();
    let keys: Vec<(&str, &str)> = text.lines().filter_map(|l| l.split_once('\t')).collect();
    let n = keys.len();
    if n == 0 {
        return Ok((rank == root).then(Vec::new));
    }
    // This rank's values in root's order (NaN = not present here).
    let mine: std::collections::HashMap<&str, f64> =
        local.iter().map(|(k, _, v)| (k.as_str(), *v)).collect();
    let values: Vec<f64> = keys
        .iter()
        .map(|(k, _)| mine.get(k).copied().unwrap_or(f64::NAN))
        .collect();
    let mut send = Vec::with_capacity(3 * n);
    for v in &values {
        let present = v.is_finite();
        send.push(if present { *v } else { 0.0 });
        send.push(if present { v * v } else { 0.0 });
        send.push(if present { 1.0 } else { 0.0 });
    }
    let mut sums = vec![0.0; 3 * n];
    ffi::reduce_sum(comm, &send, &mut sums, root)?;
    let pairs = |fill: f64| -> Vec<DoubleInt> {
        values
            .iter()
            .map(|v| DoubleInt {
                value: if v.is_finite() { *v } else { fill },
                rank,
            })
            .collect()
    };
    let mut mins = vec![DoubleInt::default(); n];
    let mut maxs = vec![DoubleInt::default(); n];
    ffi::reduce_loc(comm, &pairs(f64::INFINITY), &mut mins, false, root)?;
    ffi::reduce_loc(comm, &pairs(f64::NEG_INFINITY), &mut maxs, true, root)?;
    if rank != root {
        return Ok(None);
    }
    let stats = keys
        .iter()
        .enumerate()
        .map(|(i, (name, kind))| {
            let (sum, sumsq, count) = (sums[3 * i], sums[3 * i + 1], sums[3 * i + 2]);
            let mean = if count > 0.0 { sum / count } else { f64::NAN };
            let var = if count > 0.0 {
                (sumsq / count - mean * mean).max(0.0)
            } else {
                f64::NAN
            };
            VariableStats {
                name: name.to_string(),
                kind: kind.to_string(),
                ranks: count as u32,
                min: mins[i].value,
                min_rank: mins[i].rank,
                max: maxs[i].value,
                max_rank: maxs[i].rank,
                mean,
                stddev: var.sqrt(),
            }
        })
        .collect();
    Ok(Some(stats))
}

/// A short table of the statistics for the terminal: the `limit` quantities
/// that vary most across ranks first, then the rest by name.
pub fn table(stats: &[VariableStats], limit: usize) -> String {
    let mut rows: Vec<&VariableStats> = stats.iter().filter(|s| s.ranks > 0).collect();
    rows.sort_by(|a, b| {
        let spread = |s: &VariableStats| s.max - s.min;
        spread(b)
            .partial_cmp(&spread(a))
            .unwrap_or(std::cmp::Ordering::Equal)
            .then_with(|| a.name.cmp(&b.name))
    });
    let width = rows
        .iter()
        .take(limit)
        .map(|s| s.name.len())
        .max()
        .unwrap_or(8)
        .clamp(8, 48);
    let mut out = format!(
        "{:<width$}  {:>5}  {:>14}  {:>14} {:>6}  {:>14} {:>6}  {:>12}\n",
        "variable", "kind", "mean", "min", "@rank", "max", "@rank", "stddev"
    );
    for s in rows.iter().take(limit) {
        let mut name = s.name.clone();
        if name.len() > width {
            name.truncate(width - 1);
            name.push('~');
        }
        out.push_str(&format!(
            "{:<width$}  {:>5}  {:>14.6}  {:>14.6} {:>6}  {:>14.6} {:>6}  {:>12.6}\n",
            name, s.kind, s.mean, s.min, s.min_rank, s.max, s.max_rank, s.stddev
        ));
    }
    if rows.len() > limit {
        out.push_str(&format!(
            "... and {} more in summary.json\n",
            rows.len() - limit
        ));
    }
    out
}
