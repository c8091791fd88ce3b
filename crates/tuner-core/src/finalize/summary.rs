//! The cross-rank summary computed at finalize with the tool's collectives
//! on `MPI_COMM_WORLD`: four calls whatever the number of quantities,
//! classes and hosts.
//!
//! Rank 0 broadcasts the number of summarised quantities (its own) and the
//! hashes of the first [`NAMED`] names; every rank
//! contributes its value of each (or nothing, if it has none); reductions
//! give the sum, the sum of squares, the count, and the minimum and maximum
//! with the ranks that held them (one mixed reduction, not MINLOC/MAXLOC
//! with pair types, which some MVAPICH2 builds reject); one gather of a
//! fixed-size record a rank gives rank 0 the classes and hosts.
//!
//! Every call goes through a [`Collectives`] sequence: a failing call is
//! recorded and the rank goes on, so that the caller's agreement decides,
//! on every rank alike, whether the summary is used.

use crate::sample::Snapshot;
use mpit::collective::{Collectives, Extremes, FailedOn, Mixed, Verdict};
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

/// Computes the statistics, the classes and the hosts; every rank must
/// call this with a sequence over the same communicator of `size` ranks.
/// `signature` characterises this rank's behaviour; `host` is its node's
/// host name.
///
/// Four collectives whatever the number of quantities, classes and hosts,
/// and no agreement after them: one broadcast of root's list (the number
/// of its quantities and the hashes of the first [`NAMED`] names, 2 KiB),
/// one mixed reduction to every rank (the extremes with their ranks, and
/// whether every rank put the same quantity at each place beyond the named
/// ones), one sum onto `root` (sums,
/// counts, the histograms across ranks and the message-size histograms),
/// one gather of a fixed-size record a rank (its vote on the calls so
/// far, its signature's counts and its host name: O(ranks) bytes on `root`
/// only, a few hundred a rank), from which `root` finds the classes and
/// the hosts, and whether every rank's part arrived.
///
/// `root` gets the summary and how many quantities beyond the [`NAMED`]
/// ones were not the same on every rank (left out), or why not (its own failure, a rank's vote, a
/// damaged record); another rank gets `None`, or its own failure (rank 0
/// decides from what it received: a rank's failure before the gather is
/// in its vote).
pub fn reduce(
    seq: &mut Collectives,
    root: i32,
    size: usize,
    local: &[(String, &'static str, f64)],
    signature: &Signature,
    host: &str,
) -> (Option<(Summary, usize)>, Verdict) {
    let families = crate::sample::toolmetrics::snapshot();
    let sizes: Vec<f64> = families
        .iter()
        .flat_map(|f| f.hist.iter().map(|&n| n as f64))
        .collect();
    let Agreed {
        keys,
        values,
        extremes,
        differ,
    } = agree_on_quantities(seq, root, local);
    let n = values.len();
    // Sums, sums of squares and counts; the histogram across ranks of each
    // quantity; the message-size histograms: one reduction.
    let mut send = Vec::with_capacity(n * (3 + HISTOGRAM_BINS) + sizes.len());
    for v in &values {
        let present = v.is_finite();
        send.push(if present { *v } else { 0.0 });
        send.push(if present { v * v } else { 0.0 });
        send.push(if present { 1.0 } else { 0.0 });
    }
    for (i, v) in values.iter().enumerate() {
        let mut bins = [0.0; HISTOGRAM_BINS];
        if let (true, Some(Some(e))) = (v.is_finite(), extremes.get(i)) {
            bins[bin(*v, e.min, e.max)] = 1.0;
        }
        send.extend(bins);
    }
    send.extend(&sizes);
    let mut all = vec![0.0; send.len()];
    seq.reduce_sum(&send, &mut all, root);
    // Every rank's record onto the root, with its vote on the calls so far.
    let vote = mpit::collective::vote(seq.rank(), seq.failure());
    let record = Record::new(signature, host, vote).to_bytes();
    let records = seq.gather_bytes(&record, size, root);
    if seq.rank() != root {
        let verdict = match seq.take_failure() {
            Some(mine) => Verdict::Failed(FailedOn {
                ranks: (seq.rank(), seq.rank()),
                call: mine.call.clone(),
                class: None,
                mine: Some(mine),
            }),
            None => Verdict::AllOk,
        };
        return (None, verdict);
    }
    if let Some(mine) = seq.take_failure() {
        return (
            None,
            Verdict::Failed(FailedOn {
                ranks: (root, root),
                call: mine.call.clone(),
                class: None,
                mine: Some(mine),
            }),
        );
    }
    let records: Vec<Option<Record>> = records
        .chunks_exact(Record::BYTES)
        .map(Record::from_bytes)
        .collect();
    if let Some(bad) = records.iter().position(Option::is_none) {
        return (
            None,
            Verdict::Failed(FailedOn::local(
                bad as i32,
                &format!("the record rank {bad} gathered onto rank {root} is damaged"),
            )),
        );
    }
    let records: Vec<Record> = records.into_iter().flatten().collect();
    // The ranks' votes, reduced here as an agreement reduces them.
    let mut votes = [i64::MAX; 4];
    for r in &records {
        for (v, x) in votes.iter_mut().zip(r.vote) {
            *v = (*v).min(x);
        }
    }
    let verdict = mpit::collective::tally_votes(&votes);
    if let Verdict::Failed(_) = verdict {
        return (None, verdict);
    }
    let (sums, rest) = all.split_at(3 * n);
    let (hist, all_sizes) = rest.split_at(n * HISTOGRAM_BINS);
    let variables = keys
        .iter()
        .enumerate()
        .filter(|(i, _)| !differ.get(*i).copied().unwrap_or(false))
        .filter_map(|(i, key)| key.as_ref().map(|k| (i, k)))
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
    let size_histograms = families
        .iter()
        .enumerate()
        .filter_map(|(i, f)| {
            let b = crate::sample::toolmetrics::BUCKETS;
            let h: Vec<u64> = all_sizes
                .get(i * b..(i + 1) * b)?
                .iter()
                .map(|&n| n as u64)
                .collect();
            h.iter()
                .any(|&n| n > 0)
                .then(|| (f.family.name().to_string(), h))
        })
        .collect();
    let (classes, hosts) = classes_and_hosts(&records);
    (
        Some((
            Summary {
                variables,
                classes,
                hosts,
                size_histograms,
            },
            differ.iter().filter(|d| **d).count(),
        )),
        Verdict::AllOk,
    )
}

/// At most this many quantities are summarised (root's first ones; the
/// rest are left out, and rank 0's log says how many).
pub const MAX_QUANTITIES: usize = 8191;

/// The quantities whose names root broadcasts (their FNV-1a hashes, in one
/// broadcast of a fixed 2 KiB). Small on purpose: shared-memory transports
/// send it eagerly (MPICH's and Open MPI's `vader` up to 4 KiB), where the
/// 64 KiB list of before waited for every receiver: 0.4-0.6 s of a 32-rank
/// MPICH job's finalize on 2 cores, against under 0.1 ms. Quantities
/// beyond these (only a library with hundreds of PVARs has them,
/// MVAPICH2) are placed by every rank in a table by hash (linear probing,
/// twice as many places as root's other quantities: `places`), and the
/// reduction checks that every rank put the same one at each place.
pub const NAMED: usize = 255;

/// Hashes as the reductions carry them: below `i64::MAX` (which means
/// "none here"), so that a hash and its complement order alike.
const HASH_MASK: u64 = u64::MAX >> 2;

/// What [`agree_on_quantities`] gives a rank.
struct Agreed {
    /// Root's names and kinds, in place order (empty elsewhere; `None`
    /// for a place root has nothing at, which takes two of its names
    /// with one hash).
    keys: Vec<Option<(String, String)>>,
    /// This rank's value at each place (NaN: none, or a place where the
    /// ranks put different quantities).
    values: Vec<f64>,
    /// The extremes across ranks at each place (`None`: no rank has a
    /// value, or the place is not the same quantity on every rank).
    extremes: Vec<Option<Extremes>>,
    /// Per place, whether the ranks put different quantities there.
    differ: Vec<bool>,
}

/// The place of each quantity: the first `head.len()` places are root's
/// named quantities (by hash); after them a table of twice as many places
/// as root has other quantities (`n` in all), where each of this rank's
/// others goes to its hash's place, or the next free one (in the order
/// of the hashes, so that ranks with the same quantities place them
/// alike, and a quantity some ranks lack or have in addition moves only
/// those that would have probed past it). Each place gives an index into
/// `hashes` (this rank's), or `None`.
fn places(hashes: &[u64], head: &[u64], n: usize) -> Vec<Option<usize>> {
    let by_hash: std::collections::HashMap<u64, usize> =
        hashes.iter().enumerate().map(|(i, h)| (*h, i)).collect();
    let named: std::collections::HashSet<u64> = head.iter().copied().collect();
    let mut out: Vec<Option<usize>> = head.iter().map(|h| by_hash.get(h).copied()).collect();
    let table = 2 * n.saturating_sub(head.len());
    let mut rest: Vec<usize> = (0..hashes.len())
        .filter(|i| !named.contains(&hashes[*i]))
        .collect();
    rest.sort_by_key(|i| hashes[*i]);
    let mut slots: Vec<Option<usize>> = vec![None; table];
    for i in rest {
        let home = (hashes[i] % table.max(1) as u64) as usize;
        // (More quantities than places: the last ones are left out.)
        if let Some(free) = (0..table)
            .map(|k| (home + k) % table)
            .find(|s| slots[*s].is_none())
        {
            slots[free] = Some(i);
        }
    }
    out.extend(slots);
    out
}

/// The quantities every rank reduces, in place order: root broadcasts the
/// number of its quantities and the hashes of the first [`NAMED`] names
/// (one call of a fixed size, whatever the lists, so that the sequence of
/// calls never depends on a result a failed call may have left different
/// on some rank); every rank gives its value at each place (NaN: not
/// here), and one mixed reduction gives the extremes with their ranks and,
/// for the places beyond the named ones, whether every rank put the same
/// quantity there.
fn agree_on_quantities(
    seq: &mut Collectives,
    root: i32,
    local: &[(String, &'static str, f64)],
) -> Agreed {
    let hashes: Vec<u64> = local
        .iter()
        .map(|(name, _, _)| crate::run::fnv1a(name) & HASH_MASK)
        .collect();
    let mut message = vec![0u8; 8 * (NAMED + 1)];
    let mut keys = Vec::new();
    if seq.rank() == root {
        let n = local.len().min(MAX_QUANTITIES);
        let head = &hashes[..n.min(NAMED)];
        message[..8].copy_from_slice(&(n as u64).to_le_bytes());
        for (slot, h) in message[8..].chunks_exact_mut(8).zip(head) {
            slot.copy_from_slice(&h.to_le_bytes());
        }
        keys = places(&hashes, head, n)
            .into_iter()
            .map(|p| p.map(|i| (local[i].0.clone(), local[i].1.to_string())))
            .collect();
    }
    seq.bcast_bytes(&mut message, root);
    let words: Vec<u64> = message
        .chunks_exact(8)
        .map(|w| u64::from_le_bytes(w.try_into().unwrap_or_default()))
        .collect();
    let n = usize::try_from(words[0]).unwrap_or(0).min(MAX_QUANTITIES);
    let head = &words[1..=n.min(NAMED)];
    let placed = places(&hashes, head, n);
    let mut values: Vec<f64> = placed
        .iter()
        .map(|p| p.map_or(f64::NAN, |i| local[i].2))
        .collect();
    let checked: Vec<Option<u64>> = placed[head.len()..]
        .iter()
        .map(|p| p.map(|i| hashes[i]))
        .collect();
    let (extremes, differ) = extremes_with_ranks(seq, &values, head.len(), &checked);
    for (v, d) in values.iter_mut().zip(&differ) {
        if *d {
            *v = f64::NAN;
        }
    }
    Agreed {
        keys,
        values,
        extremes,
        differ,
    }
}

/// Per value, its minimum and maximum over every rank with the lowest
/// rank holding each (NaN: absent), and for the places from `from` on,
/// whether every rank that has a value there has the quantity whose hash
/// `checked` gives (its hash and its complement, by minimum), in one
/// mixed reduction.
fn extremes_with_ranks(
    seq: &mut Collectives,
    values: &[f64],
    from: usize,
    checked: &[Option<u64>],
) -> (Vec<Option<Extremes>>, Vec<bool>) {
    const NONE: i64 = i64::MAX;
    let me = i64::from(seq.rank());
    let mut send = Vec::with_capacity(2 * values.len() + 2 * checked.len());
    for v in values {
        let key = Some(*v)
            .filter(|x| !x.is_nan())
            .map(mpit::collective::order_key);
        send.push(match key {
            Some(k) => Mixed::min_pair(k, me),
            None => Mixed::min_pair(NONE, NONE),
        });
        send.push(match key {
            Some(k) => Mixed::min_pair(mpit::collective::neg_key(k), me),
            None => Mixed::min_pair(NONE, NONE),
        });
    }
    for h in checked {
        // (Hashes are below 2^62: neither they nor their complements are
        // `NONE`.)
        let h = h.map(|h| h as i64);
        send.push(Mixed::min(h.unwrap_or(NONE)));
        send.push(Mixed::min(h.map_or(NONE, |h| !h)));
    }
    if send.is_empty() {
        return (Vec::new(), Vec::new());
    }
    let got = seq.reduce_mixed(&send, None);
    let (pairs, checks) = got.split_at((2 * values.len()).min(got.len()));
    let mut differ = vec![false; values.len()];
    for (i, c) in checks.chunks_exact(2).enumerate() {
        let same = c[0].a == NONE || c[0].a == !c[1].a;
        if let Some(d) = differ.get_mut(from + i) {
            *d = !same;
        }
    }
    let extremes = pairs
        .chunks_exact(2)
        .zip(&differ)
        .map(|(p, d)| {
            (p[0].a != NONE && !d).then(|| Extremes {
                min: mpit::collective::from_order_key(p[0].a),
                min_rank: i32::try_from(p[0].b).unwrap_or(-1),
                max: mpit::collective::from_order_key(mpit::collective::neg_key(p[1].a)),
                max_rank: i32::try_from(p[1].b).unwrap_or(-1),
            })
        })
        .collect();
    (extremes, differ)
}

/// The bin of `v` among [`HISTOGRAM_BINS`] equal bins from `lo` to `hi`.
fn bin(v: f64, lo: f64, hi: f64) -> usize {
    if hi.partial_cmp(&lo) != Some(std::cmp::Ordering::Greater) {
        return 0;
    }
    (((v - lo) / (hi - lo) * HISTOGRAM_BINS as f64) as usize).min(HISTOGRAM_BINS - 1)
}

/// A rank's behaviour: calls and bytes per MPI call family, from its tool
/// metrics. Ranks with equal signatures form a class.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Signature {
    /// Per family of [`Family::ALL`](crate::sample::toolmetrics::Family::ALL):
    /// (calls, bytes).
    pub counts: [(u64, u64); FAMILIES],
}

const FAMILIES: usize = crate::sample::toolmetrics::Family::ALL.len();

impl Signature {
    /// The class key (FNV-1a of the families with calls).
    pub fn key(&self) -> u64 {
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for (f, (calls, bytes)) in crate::sample::toolmetrics::Family::ALL
            .iter()
            .zip(&self.counts)
        {
            if *calls == 0 {
                continue;
            }
            for b in f
                .name()
                .bytes()
                .chain(calls.to_le_bytes())
                .chain(bytes.to_le_bytes())
            {
                hash ^= u64::from(b);
                hash = hash.wrapping_mul(0x0100_0000_01b3);
            }
        }
        hash
    }

    /// The readable description: "allreduce 100 calls 800 B, ...".
    pub fn describe(&self) -> String {
        let parts: Vec<String> = crate::sample::toolmetrics::Family::ALL
            .iter()
            .zip(&self.counts)
            .filter(|(_, (calls, _))| *calls > 0)
            .map(|(f, (calls, bytes))| format!("{} {} calls {} B", f.name(), calls, bytes))
            .collect();
        if parts.is_empty() {
            "no counted MPI calls".into()
        } else {
            parts.join(", ")
        }
    }
}

/// A rank's signature from its tool metrics.
pub fn signature(snapshot: &Snapshot) -> Signature {
    let mut sig = Signature::default();
    for (f, slot) in crate::sample::toolmetrics::Family::ALL
        .iter()
        .zip(sig.counts.iter_mut())
    {
        let get = |m: &str| {
            snapshot
                .get(&format!("tool.{}.{m}", f.name()))
                .and_then(|v| v.metric.value.first().copied())
                .unwrap_or(0.0)
        };
        *slot = (get("calls") as u64, get("bytes") as u64);
    }
    sig
}

/// What a rank sends the root at finalize: its vote on the tool's calls
/// so far ([`mpit::collective::vote`]), its signature and host name, and a
/// checksum, in a fixed number of bytes.
#[derive(Debug, Clone, PartialEq)]
struct Record {
    vote: [i64; 4],
    signature: Signature,
    host: String,
}

/// Bytes of a host name in a [`Record`] (`HOST_NAME_MAX` is 64 on Linux).
const HOST_BYTES: usize = 64;

impl Record {
    const BYTES: usize = 32 + FAMILIES * 16 + HOST_BYTES + 8;

    fn new(signature: &Signature, host: &str, vote: [i64; 4]) -> Record {
        let mut end = host.len().min(HOST_BYTES);
        while !host.is_char_boundary(end) {
            end -= 1;
        }
        Record {
            vote,
            signature: signature.clone(),
            host: host[..end].to_string(),
        }
    }

    fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(Record::BYTES);
        for v in self.vote {
            out.extend(v.to_le_bytes());
        }
        for (calls, bytes) in &self.signature.counts {
            out.extend(calls.to_le_bytes());
            out.extend(bytes.to_le_bytes());
        }
        let mut host = self.host.as_bytes().to_vec();
        host.resize(HOST_BYTES, 0);
        out.extend(host);
        let sum = checksum(&out);
        out.extend(sum.to_le_bytes());
        out
    }

    /// From [`Record::BYTES`] bytes (what [`Record::to_bytes`] made);
    /// `None` when the checksum does not match (a damaged transfer).
    fn from_bytes(b: &[u8]) -> Option<Record> {
        let (body, sum) = b.split_at(Record::BYTES - 8);
        if u64::from_le_bytes(sum.try_into().ok()?) != checksum(body) {
            return None;
        }
        let word =
            |i: usize| u64::from_le_bytes(body[i * 8..i * 8 + 8].try_into().unwrap_or_default());
        let mut vote = [0i64; 4];
        for (i, v) in vote.iter_mut().enumerate() {
            *v = word(i) as i64;
        }
        let mut signature = Signature::default();
        for (i, slot) in signature.counts.iter_mut().enumerate() {
            *slot = (word(4 + 2 * i), word(4 + 2 * i + 1));
        }
        let host = &body[32 + FAMILIES * 16..];
        let end = host.iter().position(|&c| c == 0).unwrap_or(HOST_BYTES);
        Some(Record {
            vote,
            signature,
            host: String::from_utf8_lossy(&host[..end]).into_owned(),
        })
    }
}

/// FNV-1a of a record's bytes (not zero for a record of zeros, so that a
/// rank whose data never arrived is told apart).
fn checksum(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

/// The classes of equal signatures (lowest key first, at most
/// [`MAX_CLASSES`] and the rest as one) and the ranks of each host (by
/// lowest rank, at most [`MAX_HOSTS`] and the rest as one), from every
/// rank's record in rank order.
fn classes_and_hosts(records: &[Record]) -> (Vec<RankClass>, Vec<HostRanks>) {
    use std::collections::BTreeMap;
    let mut by_class: BTreeMap<u64, Vec<u32>> = BTreeMap::new();
    let mut by_host: BTreeMap<&str, Vec<u32>> = BTreeMap::new();
    for (rank, r) in records.iter().enumerate() {
        let rank = rank as u32;
        by_class
            .entry(r.signature.key() >> 2)
            .or_default()
            .push(rank);
        by_host.entry(r.host.as_str()).or_default().push(rank);
    }
    let mut classes: Vec<RankClass> = by_class
        .values()
        .take(MAX_CLASSES)
        .map(|members| {
            // Described by its lowest member.
            let signature = records[members[0] as usize].signature.describe();
            let (count, ranks, members) = describe_members(members);
            RankClass {
                count,
                ranks,
                members,
                signature,
            }
        })
        .collect();
    let rest: usize = by_class.values().skip(MAX_CLASSES).map(Vec::len).sum();
    if rest > 0 {
        classes.push(RankClass {
            count: rest as u32,
            ranks: format!("{rest} more ranks"),
            members: None,
            signature: format!("more than {MAX_CLASSES} classes: the rest"),
        });
    }
    let mut hosts: Vec<(&str, &Vec<u32>)> = by_host.iter().map(|(h, m)| (*h, m)).collect();
    hosts.sort_by_key(|(_, m)| m[0]);
    let rest: usize = hosts.iter().skip(MAX_HOSTS).map(|(_, m)| m.len()).sum();
    let mut out: Vec<HostRanks> = hosts
        .iter()
        .take(MAX_HOSTS)
        .map(|(host, members)| {
            let (count, ranks, members) = describe_members(members);
            HostRanks {
                host: host.to_string(),
                count,
                ranks,
                members,
            }
        })
        .collect();
    if rest > 0 {
        out.push(HostRanks {
            host: format!("more than {MAX_HOSTS} hosts: the rest"),
            count: rest as u32,
            ranks: format!("{rest} more ranks"),
            members: None,
        });
    }
    (classes, out)
}

/// A group's count, its ranks as text (`3`, `0-7`, `0-14:2`, or `5 ranks
/// in 0-12` when irregular) and its members when regular. `members` is
/// sorted and not empty.
fn describe_members(members: &[u32]) -> (u32, String, Option<Vec<u32>>) {
    let count = members.len() as u32;
    let (lo, hi) = (members[0], members[members.len() - 1]);
    let stride = members.get(1).map_or(1, |s| s - lo).max(1);
    let regular = members
        .iter()
        .enumerate()
        .all(|(i, &m)| u64::from(m) == u64::from(lo) + i as u64 * u64::from(stride));
    if !regular {
        return (count, format!("{count} ranks in {lo}-{hi}"), None);
    }
    let ranks = match (count, stride) {
        (1, _) => lo.to_string(),
        (_, 1) => format!("{lo}-{hi}"),
        _ => format!("{lo}-{hi}:{stride}"),
    };
    (count, ranks, Some(members.to_vec()))
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Root's named quantities take their places on every rank whatever
    /// its order; beyond them, ranks with the same other quantities place
    /// them alike, and a rank with one more or one less moves only those
    /// that probe past it.
    #[test]
    fn places_follow_root_then_hashes() {
        // Root: 50 and 10 named, then 3 others in a table of 6 places
        // (homes: 20 -> 2, 30 -> 0, 41 -> 5).
        let root = [50, 10, 20, 30, 41];
        let head = &root[..2];
        let at = |hashes: &[u64]| -> Vec<Option<u64>> {
            places(hashes, head, root.len())
                .into_iter()
                .map(|p| p.map(|i| hashes[i]))
                .collect()
        };
        let want = vec![
            Some(50),
            Some(10),
            Some(30),
            None,
            Some(20),
            None,
            None,
            Some(41),
        ];
        assert_eq!(at(&root), want);
        assert_eq!(at(&[41, 30, 20, 10, 50]), want);
        // Without 10 (named): its place is empty, the rest are unchanged.
        let mut without = want.clone();
        without[1] = None;
        assert_eq!(at(&[20, 30, 41, 50]), without);
        // Without 30 (not named): only its place changes.
        let mut without = want.clone();
        without[2] = None;
        assert_eq!(at(&[20, 41, 10, 50]), without);
        // One more, 26 (home 2, taken by 20, so the next free place): 20
        // and the others stay where root has them.
        let mut more = want.clone();
        more[5] = Some(26);
        assert_eq!(at(&[20, 26, 30, 41, 10, 50]), more);
        // Collisions probe on, wrapping around: 6 and 12 share home 0.
        let p = places(&[6, 12, 5], &[], 3);
        assert_eq!(p, vec![Some(0), Some(1), None, None, None, Some(2)]);
        // All named: nothing beyond.
        assert_eq!(
            places(&[3, 1, 2], &[3, 1, 2], 3),
            vec![Some(0), Some(1), Some(2)]
        );
    }

    fn record(calls: u64, host: &str) -> Record {
        let mut signature = Signature::default();
        signature.counts[6] = (calls, calls * 8);
        Record::new(&signature, host, [i64::MAX, i64::MAX, 3, i64::MAX])
    }

    #[test]
    fn records_keep_their_size_and_content() {
        let long = "h".repeat(100);
        for r in [
            record(3, "node1"),
            record(0, ""),
            record(u64::MAX / 8, &long),
        ] {
            let mut bytes = r.to_bytes();
            assert_eq!(bytes.len(), Record::BYTES);
            let back = Record::from_bytes(&bytes).expect("a whole record");
            assert_eq!(back.signature, r.signature);
            assert_eq!(back.vote, r.vote);
            bytes[40] ^= 1;
            assert_eq!(Record::from_bytes(&bytes), None, "a damaged record");
            assert_eq!(Record::from_bytes(&vec![0; Record::BYTES]), None);
            assert_eq!(
                back.host,
                r.host.chars().take(HOST_BYTES).collect::<String>()
            );
        }
    }

    #[test]
    fn classes_and_hosts_from_every_rank_record() {
        // Ranks 0, 2, 4, 6 call allreduce 5 times, the others 9 times;
        // ranks 0-3 on node1, 4-7 on node2, rank 5 alone on node3.
        let records: Vec<Record> = (0..8)
            .map(|r| {
                let host = match r {
                    5 => "node3",
                    0..=3 => "node1",
                    _ => "node2",
                };
                record(if r % 2 == 0 { 5 } else { 9 }, host)
            })
            .collect();
        let (classes, hosts) = classes_and_hosts(&records);
        assert_eq!(classes.len(), 2);
        let evens = classes.iter().find(|c| c.ranks == "0-6:2").expect("evens");
        assert_eq!(evens.count, 4);
        assert_eq!(evens.members.as_deref(), Some(&[0, 2, 4, 6][..]));
        assert_eq!(evens.signature, "allreduce 5 calls 40 B");
        let odds = classes.iter().find(|c| c.count == 4 && c.ranks != "0-6:2");
        assert_eq!(odds.map(|c| c.ranks.as_str()), Some("1-7:2"));
        let hosts: Vec<(&str, &str)> = hosts
            .iter()
            .map(|h| (h.host.as_str(), h.ranks.as_str()))
            .collect();
        assert_eq!(
            hosts,
            [
                ("node1", "0-3"),
                ("node2", "3 ranks in 4-7"),
                ("node3", "5")
            ]
        );
    }

    #[test]
    fn classes_and_hosts_beyond_the_caps_are_counted_as_one() {
        let records: Vec<Record> = (0..40)
            .map(|r| record(r + 1, &format!("n{r:02}")))
            .collect();
        let (classes, hosts) = classes_and_hosts(&records);
        assert_eq!(classes.len(), MAX_CLASSES + 1);
        assert_eq!(classes[MAX_CLASSES].count, 40 - MAX_CLASSES as u32);
        assert_eq!(hosts.len(), MAX_HOSTS + 1);
        assert_eq!(hosts[0].host, "n00");
        assert_eq!(hosts[MAX_HOSTS].count, 40 - MAX_HOSTS as u32);
        let counted: u32 = classes.iter().map(|c| c.count).sum();
        assert_eq!(counted, 40);
    }
}
