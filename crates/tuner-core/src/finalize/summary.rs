//! The cross-rank summary computed at finalize with MPI reductions on the
//! tool's private communicator, in O(log P) steps and without gathering
//! every rank's data in one place.
//!
//! Rank 0 broadcasts the list of summarised quantities (its own); every rank
//! contributes its value of each (or nothing, if it has none); reductions
//! give the sum, the sum of squares, the count, and the minimum and maximum
//! with the ranks that held them (two reductions of basic types instead of
//! MINLOC/MAXLOC, which some MVAPICH2 builds reject).
//!
//! Every call goes through a [`Collectives`] sequence: a failing call is
//! recorded and the rank goes on, so that the caller's agreement decides,
//! on every rank alike, whether the summary is used.

use crate::sample::Snapshot;
use mpit::collective::{Collectives, ReduceOp};
use serde::{Deserialize, Serialize};

pub use vocab::summary::{HostRanks, RankClass, VariableStats};

/// Bins of the cross-rank histograms.
pub const HISTOGRAM_BINS: usize = 8;

/// At most this many classes are told apart; the rest are counted as one.
pub const MAX_CLASSES: usize = 16;

/// At most this many hosts are told apart; the rest are counted as one.
pub const MAX_HOSTS: usize = 32;

/// The cross-rank summary, as rank 0 gets it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Per quantity statistics.
    pub variables: Vec<VariableStats>,
    /// Functional classes of ranks.
    pub classes: Vec<RankClass>,
    /// The ranks of each host, by lowest rank.
    pub hosts: Vec<HostRanks>,
    /// Message-size histograms summed over all ranks, per MPI call family
    /// with calls (bucket `b`: `[2^(b-1), 2^b)` bytes; see `toolmetrics`).
    pub size_histograms: std::collections::BTreeMap<String, Vec<u64>>,
}

/// One rank's contribution: (name, kind, value), a value per quantity: the
/// class's headline number of each variable (arrays summed over their
/// elements), and for levels and sizes also their maximum over the run.
pub fn local_quantities(snapshot: &Snapshot) -> Vec<(String, &'static str, f64)> {
    let mut out = Vec::new();
    for v in snapshot
        .vars()
        .filter(|v| v.object.is_none_or(|o| o == "world"))
        .filter(|v| !v.name.ends_with(".hist"))
    {
        let name = match v.object {
            Some(o) => format!("{}@{o}", v.name),
            None => v.name.to_string(),
        };
        let value: f64 = v.metric.headline().iter().sum();
        out.push((name.clone(), v.metric.headline_kind(), value));
        if !v.class.is_accumulating() && !v.class.is_watermark() && !v.name.starts_with("tool.") {
            out.push((format!("{name}:max"), "max", v.metric.max.iter().sum()));
        }
    }
    out
}

/// Computes the statistics and the classes; every rank must call this with
/// a sequence over the same communicator. Only `root` gets the result
/// (`None` elsewhere), and only the caller's agreement after it says
/// whether every rank's calls succeeded. `signature` and `description`
/// characterise this rank's behaviour; `host` is its node's host name.
pub fn reduce(
    seq: &mut Collectives,
    root: i32,
    local: &[(String, &'static str, f64)],
    signature: u64,
    description: &str,
    host: &str,
) -> Option<Summary> {
    let variables = reduce_variables(seq, root, local);
    let classes = groups(seq, root, signature, description, MAX_CLASSES, "classes")
        .into_iter()
        .map(|g| RankClass {
            count: g.count,
            ranks: g.ranks,
            members: g.members,
            signature: g.description,
        })
        .collect();
    let mut hosts: Vec<(i64, HostRanks)> = groups(
        seq,
        root,
        crate::collectives::fnv1a(host),
        host,
        MAX_HOSTS,
        "hosts",
    )
    .into_iter()
    .map(|g| {
        (
            g.lowest,
            HostRanks {
                host: g.description,
                count: g.count,
                ranks: g.ranks,
                members: g.members,
            },
        )
    })
    .collect();
    // By lowest rank; the rest (lowest unknown) last.
    hosts.sort_by_key(|(lowest, _)| *lowest);
    let hosts = hosts.into_iter().map(|(_, h)| h).collect();
    // Size histograms: every family, every bucket, summed onto the root.
    let families = crate::sample::toolmetrics::snapshot();
    let mine: Vec<f64> = families
        .iter()
        .flat_map(|f| f.hist.iter().map(|&n| n as f64))
        .collect();
    let mut all = vec![0.0; mine.len()];
    seq.reduce_sum(&mine, &mut all, root);
    let size_histograms = families
        .iter()
        .enumerate()
        .filter_map(|(i, f)| {
            let h: Vec<u64> = all[i * crate::sample::toolmetrics::BUCKETS
                ..(i + 1) * crate::sample::toolmetrics::BUCKETS]
                .iter()
                .map(|&n| n as u64)
                .collect();
            h.iter()
                .any(|&n| n > 0)
                .then(|| (f.family.name().to_string(), h))
        })
        .collect();
    variables.map(|variables| Summary {
        variables,
        classes,
        hosts,
        size_histograms,
    })
}

/// Broadcasts a byte string of any length from `root` (its length first).
/// The length is capped, so that a failed broadcast can never make a rank
/// allocate without bound.
fn bcast_text(seq: &mut Collectives, mut text: Vec<u8>, root: i32) -> Vec<u8> {
    const MAX: u64 = 64 << 20;
    let mut len = (text.len() as u64).to_le_bytes();
    seq.bcast_bytes(&mut len, root);
    text.resize(u64::from_le_bytes(len).min(MAX) as usize, 0);
    seq.bcast_bytes(&mut text, root);
    text
}

fn reduce_variables(
    seq: &mut Collectives,
    root: i32,
    local: &[(String, &'static str, f64)],
) -> Option<Vec<VariableStats>> {
    let rank = seq.rank();
    // The list of quantities: root's, as "name\tkind\n" lines.
    let names: Vec<u8> = if rank == root {
        local
            .iter()
            .flat_map(|(n, k, _)| format!("{n}\t{k}\n").into_bytes())
            .collect()
    } else {
        Vec::new()
    };
    let names = bcast_text(seq, names, root);
    let text = String::from_utf8_lossy(&names).into_owned();
    let keys: Vec<(&str, &str)> = text.lines().filter_map(|l| l.split_once('\t')).collect();
    let n = keys.len();
    if n == 0 {
        return (rank == root).then(Vec::new);
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
    seq.reduce_sum(&send, &mut sums, root);
    // Minimum and maximum with their ranks, known to every rank, which
    // then bins its own value for the histogram across ranks.
    let present: Vec<Option<f64>> = values.iter().map(|v| v.is_finite().then_some(*v)).collect();
    let extremes = seq.min_max_with_ranks(&present);
    let mut bins = vec![0.0; n * HISTOGRAM_BINS];
    for (i, v) in values.iter().enumerate() {
        if let (true, Some(Some(e))) = (v.is_finite(), extremes.get(i)) {
            bins[i * HISTOGRAM_BINS + bin(*v, e.min, e.max)] = 1.0;
        }
    }
    let mut hist = vec![0.0; n * HISTOGRAM_BINS];
    seq.reduce_sum(&bins, &mut hist, root);
    if rank != root {
        return None;
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
            let e = extremes.get(i).copied().flatten();
            VariableStats {
                name: name.to_string(),
                kind: kind.to_string(),
                ranks: count as u32,
                min: e.map_or(f64::INFINITY, |e| e.min),
                min_rank: e.map_or(-1, |e| e.min_rank),
                max: e.map_or(f64::NEG_INFINITY, |e| e.max),
                max_rank: e.map_or(-1, |e| e.max_rank),
                mean,
                stddev: var.sqrt(),
                histogram: hist[i * HISTOGRAM_BINS..(i + 1) * HISTOGRAM_BINS]
                    .iter()
                    .map(|c| *c as u32)
                    .collect(),
            }
        })
        .collect();
    Some(stats)
}

/// The bin of `v` among [`HISTOGRAM_BINS`] equal bins from `lo` to `hi`.
fn bin(v: f64, lo: f64, hi: f64) -> usize {
    if hi.partial_cmp(&lo) != Some(std::cmp::Ordering::Greater) {
        return 0;
    }
    (((v - lo) / (hi - lo) * HISTOGRAM_BINS as f64) as usize).min(HISTOGRAM_BINS - 1)
}

/// A group of ranks with equal keys, as the root sees it.
struct Group {
    count: u32,
    ranks: String,
    members: Option<Vec<u32>>,
    /// From its lowest member.
    description: String,
    /// Its lowest member (`i64::MAX` for the rest, after `max` groups).
    lowest: i64,
}

/// Finds the groups of ranks with equal keys (the classes of equal
/// signatures, the ranks of each host), lowest key first, at most `max`
/// and the rest as one (`what`: what the groups are, for its
/// description): a few reductions of scalars per group, O(log P) each.
fn groups(
    seq: &mut Collectives,
    root: i32,
    key: u64,
    description: &str,
    max: usize,
    what: &str,
) -> Vec<Group> {
    const NONE: i64 = i64::MAX;
    let rank = seq.rank();
    let me = i64::from(rank);
    // Keys are kept below 2^62 so that NONE is never one.
    let signature = (key >> 2) as i64;
    let mut assigned = false;
    let mut out = Vec::new();
    for _ in 0..max {
        let mut next = [0i64];
        seq.allreduce_i64(
            &[if assigned { NONE } else { signature }],
            &mut next,
            ReduceOp::Min,
        );
        if next[0] == NONE {
            break;
        }
        let member = !assigned && signature == next[0];
        // Lowest rank, highest rank (as -rank, so one MIN does both).
        let mut stats = [0i64; 2];
        seq.allreduce_i64(
            &[
                if member { me } else { NONE },
                if member { -me } else { NONE },
            ],
            &mut stats,
            ReduceOp::Min,
        );
        let mut count = [0i64];
        seq.allreduce_i64(&[i64::from(member)], &mut count, ReduceOp::Sum);
        let (lo, hi, count) = (stats[0], -stats[1], count[0].max(1));
        // The second lowest member gives the stride of a regular pattern.
        let mut second = [0i64];
        seq.allreduce_i64(
            &[if member && me > lo { me } else { NONE }],
            &mut second,
            ReduceOp::Min,
        );
        // Every rank goes through the same collectives whatever the
        // values: the arithmetic between them must never panic.
        let stride = if count > 1 {
            second[0].saturating_sub(lo).max(1)
        } else {
            1
        };
        let mut off = [0i64];
        seq.allreduce_i64(
            &[i64::from(member && me.saturating_sub(lo) % stride != 0)],
            &mut off,
            ReduceOp::Max,
        );
        let regular = off[0] == 0 && hi >= lo && count == (hi - lo) / stride + 1;
        // The lowest member describes the class to the root.
        let text = if me == lo {
            description.as_bytes()[..description.len().min(1 << 16)].to_vec()
        } else {
            Vec::new()
        };
        let describer = i32::try_from(lo).unwrap_or(0);
        let text = bcast_text(seq, text, describer);
        if rank == root {
            let (ranks, members) = if regular {
                let members: Vec<u32> = (0..count)
                    .map(|k| lo.saturating_add(k.saturating_mul(stride)) as u32)
                    .collect();
                let ranks = match (count, stride) {
                    (1, _) => lo.to_string(),
                    (_, 1) => format!("{lo}-{hi}"),
                    _ => format!("{lo}-{hi}:{stride}"),
                };
                (ranks, Some(members))
            } else {
                (format!("{count} ranks in {lo}-{hi}"), None)
            };
            out.push(Group {
                count: count as u32,
                ranks,
                members,
                description: String::from_utf8_lossy(&text).into_owned(),
                lowest: lo,
            });
        }
        assigned |= member;
    }
    let mut left = [0i64];
    seq.allreduce_i64(&[i64::from(!assigned)], &mut left, ReduceOp::Sum);
    if rank == root && left[0] > 0 {
        out.push(Group {
            count: left[0] as u32,
            ranks: format!("{} more ranks", left[0]),
            members: None,
            description: format!("more than {max} {what}: the rest"),
            lowest: NONE,
        });
    }
    out
}

/// A rank's behaviour signature from its tool metrics: calls and bytes per
/// MPI call family (FNV-1a), and a readable description.
pub fn signature(snapshot: &Snapshot) -> (u64, String) {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut parts = Vec::new();
    for f in crate::sample::toolmetrics::Family::ALL {
        let get = |m: &str| {
            snapshot
                .get(&format!("tool.{}.{m}", f.name()))
                .and_then(|v| v.metric.value.first().copied())
                .unwrap_or(0.0)
        };
        let (calls, bytes) = (get("calls"), get("bytes"));
        if calls == 0.0 {
            continue;
        }
        for b in f
            .name()
            .bytes()
            .chain((calls as u64).to_le_bytes())
            .chain((bytes as u64).to_le_bytes())
        {
            hash ^= u64::from(b);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
        parts.push(format!("{} {} calls {} B", f.name(), calls, bytes));
    }
    if parts.is_empty() {
        parts.push("no counted MPI calls".into());
    }
    (hash, parts.join(", "))
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
