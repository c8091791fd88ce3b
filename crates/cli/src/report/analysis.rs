//! From what was read to what is reported: run facts, cross-rank statistics
//! (summary.json's, or recomputed from the logs' last samples when it is
//! missing), the variables worth a look, classes of ranks, CVAR changes,
//! policies, recommendations and warnings, aggregated over ranks.

use super::reading::{Advice, Class, Points, RankLog, Run, SetEnv, Stat, Write};
use mpit::Library;
use std::collections::{BTreeMap, HashMap};
use tuner_core::decide::format_ranks;
use tuner_core::finalize::recommend;
use tuner_core::finalize::{Summary, VariableStats, HISTOGRAM_BINS};
use tuner_core::sample::toolmetrics::{Family, BUCKETS};

/// Facts about the run.
#[derive(Debug, Clone, Default)]
pub struct Facts {
    /// Library family (`mpich`, `openmpi`).
    pub library: String,
    /// The first line of `MPI_Get_library_version`, tidied.
    pub library_version: String,
    /// Job size.
    pub size: Option<u32>,
    /// Hosts and how many ranks each ran.
    pub hosts: Vec<(String, u32)>,
    /// Unix time of the earliest start.
    pub start_unix: Option<f64>,
    /// Seconds from start to the last sample.
    pub duration: Option<f64>,
    /// Sampling interval in seconds.
    pub interval: Option<f64>,
    /// Rank 0's samples.
    pub samples_rank0: Option<u64>,
    /// Fewest and most samples of a rank.
    pub samples_range: Option<(u64, u64)>,
    /// The configuration, as `key=value` items.
    pub config: Vec<String>,
    /// MPI_T thread level.
    pub thread_level: Option<String>,
    /// Catalogue counts: CVARs, PVARs, categories.
    pub catalogue: Option<(u64, u64, u64)>,
    /// PVARs the sampler read (rank 0 or the first log).
    pub sampled: Option<usize>,
    /// Communicators and windows created and freed, over all ranks.
    pub objects: (u64, u64),
    /// PVARs that appeared while the job ran (rank 0).
    pub new_pvars: u64,
}

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

/// A group of identical records from several ranks.
#[derive(Debug, Clone)]
pub struct Grouped {
    /// What they say.
    pub key: Vec<String>,
    /// The ranks.
    pub ranks: Vec<u32>,
    /// How many records.
    pub count: u64,
    /// Earliest time.
    pub first_t: f64,
}

/// A policy's numbers over all ranks.
#[derive(Debug, Clone, Default)]
pub struct PolicyTotals {
    /// The policy.
    pub policy: String,
    /// Ranks that reported it.
    pub ranks: u32,
    /// Writes.
    pub writes: u64,
    /// Refused writes.
    pub refused: u64,
    /// Firings.
    pub firings: u64,
    /// Ranks on which it was disabled.
    pub disabled: u32,
}

/// Everything the report tells.
#[derive(Debug, Default)]
pub struct Analysis {
    /// Run facts.
    pub facts: Facts,
    /// Cross-rank statistics.
    pub stats: Vec<Stat>,
    /// Whether they were recomputed from the logs.
    pub stats_recomputed: bool,
    /// Classes of ranks.
    pub classes: Vec<Class>,
    /// Whether they were recomputed from the logs.
    pub classes_recomputed: bool,
    /// Message-size histograms per family.
    pub size_histograms: BTreeMap<String, Vec<u64>>,
    /// End-of-run recommendations.
    pub advice: Vec<Advice>,
    /// Whether they were recomputed from the logs.
    pub advice_recomputed: bool,
    /// Variables by activity during the run.
    pub activity: Vec<Activity>,
    /// Every CVAR write, by time then rank.
    pub writes: Vec<Write>,
    /// Every environment setting.
    pub setenvs: Vec<SetEnv>,
    /// Policies over all ranks.
    pub policies: Vec<PolicyTotals>,
    /// Disabled policies: [policy, reason].
    pub disabled: Vec<Grouped>,
    /// Disabled-policy lines of summary.json.
    pub disabled_messages: Vec<String>,
    /// Recommendations of policies: [policy, text].
    pub policy_advice: Vec<Grouped>,
    /// Notes of policies: [policy, text].
    pub notes: Vec<Grouped>,
    /// Warnings: [message].
    pub warnings: Vec<Grouped>,
    /// Total warnings.
    pub warning_total: u64,
    /// Per rank (rank, series) of each plotted variable.
    pub series: BTreeMap<String, Vec<(u32, Points)>>,
}

/// Builds the analysis of a run.
pub fn analyse(run: &Run) -> Analysis {
    let mut a = Analysis {
        facts: facts(run),
        ..Analysis::default()
    };
    let summary = run.summary.as_ref();
    match summary {
        Some(s) if !s.variables.is_empty() || run.ranks.is_empty() => {
            a.stats = s.variables.clone();
        }
        _ => {
            a.stats = recompute_stats(&run.ranks);
            a.stats_recomputed = !a.stats.is_empty();
        }
    }
    match summary {
        Some(s) if !s.classes.is_empty() || run.ranks.is_empty() => a.classes = s.classes.clone(),
        _ => {
            a.classes = recompute_classes(&run.ranks);
            a.classes_recomputed = !a.classes.is_empty();
        }
    }
    a.size_histograms = match summary {
        Some(s) => s.size_histograms.clone(),
        None => recompute_size_histograms(&run.ranks),
    };
    match summary {
        Some(s) => a.advice = s.recommendations.clone(),
        None if !run.ranks.is_empty() => {
            a.advice = recompute_advice(run, &a.stats, &a.size_histograms);
            a.advice_recomputed = true;
        }
        None => {}
    }
    if let Some(s) = summary {
        a.disabled_messages = s
            .messages
            .iter()
            .filter(|(k, _)| k == "disabled")
            .map(|(_, t)| t.clone())
            .collect();
    }
    a.activity = activity(&run.ranks);
    for r in &run.ranks {
        a.writes.extend(r.writes.iter().cloned());
        a.setenvs.extend(r.setenvs.iter().cloned());
    }
    a.writes
        .sort_by(|x, y| x.t.total_cmp(&y.t).then(x.rank.cmp(&y.rank)));
    a.setenvs
        .sort_by(|x, y| x.t.total_cmp(&y.t).then(x.rank.cmp(&y.rank)));
    a.policies = policy_totals(&run.ranks);
    a.disabled = group(run.ranks.iter().flat_map(|r| {
        r.disabled
            .iter()
            .map(move |(p, why)| (vec![p.clone(), why.clone()], r.rank, 0.0, 1))
    }));
    a.policy_advice = group(run.ranks.iter().flat_map(|r| {
        r.recommendations
            .iter()
            .map(move |(t, p, text)| (vec![p.clone(), text.clone()], r.rank, *t, 1))
    }));
    a.notes = group(run.ranks.iter().flat_map(|r| {
        r.notes
            .iter()
            .map(move |(t, p, text)| (vec![p.clone(), text.clone()], r.rank, *t, 1))
    }));
    // Warnings that differ only in the names they quote are one kind:
    // key = [pattern, a few of the names].
    let mut kinds: BTreeMap<String, Vec<String>> = BTreeMap::new();
    a.warnings = group(run.ranks.iter().flat_map(|r| {
        r.warnings.iter().map(move |(m, n)| {
            let (pattern, names) = warning_pattern(m);
            (vec![pattern, names.join(" ")], r.rank, 0.0, u64::from(*n))
        })
    }));
    for g in &a.warnings {
        let names = kinds.entry(g.key[0].clone()).or_default();
        for n in g.key[1].split(' ').filter(|n| !n.is_empty()) {
            if !names.iter().any(|x| x == n) {
                names.push(n.to_string());
            }
        }
    }
    let mut merged: Vec<Grouped> = Vec::new();
    for g in std::mem::take(&mut a.warnings) {
        match merged.iter_mut().find(|m| m.key[0] == g.key[0]) {
            Some(m) => {
                m.count += g.count;
                m.ranks.extend(g.ranks);
                m.ranks.sort_unstable();
                m.ranks.dedup();
            }
            None => merged.push(g),
        }
    }
    for m in &mut merged {
        let names = &kinds[&m.key[0]];
        m.key[1] = match names.len() {
            0 | 1 => names.join(", "),
            n => format!(
                "{} distinct: {}{}",
                n,
                names.iter().take(3).cloned().collect::<Vec<_>>().join(", "),
                if n > 3 { ", ..." } else { "" }
            ),
        };
    }
    a.warnings = merged;
    a.warnings
        .sort_by(|x, y| y.count.cmp(&x.count).then(x.key.cmp(&y.key)));
    a.warning_total = a.warnings.iter().map(|w| w.count).sum();
    for r in &run.ranks {
        for (key, points) in &r.series {
            a.series
                .entry(key.clone())
                .or_default()
                .push((r.rank, points.clone()));
        }
    }
    a
}

fn facts(run: &Run) -> Facts {
    let summary = run.summary.as_ref();
    let headers: Vec<(u32, &super::reading::Header)> = run
        .ranks
        .iter()
        .filter_map(|r| Some((r.rank, r.header.as_ref()?)))
        .collect();
    let first = headers.first().map(|(_, h)| *h);
    let library = summary
        .and_then(|s| s.library.clone())
        .or_else(|| first.and_then(|h| h.library.clone()))
        .unwrap_or_else(|| "unknown".into());
    let library_version = summary
        .and_then(|s| s.library_version.clone())
        .or_else(|| first.and_then(|h| h.library_version.clone()))
        .map(|v| tidy_version(&v))
        .unwrap_or_default();
    let mut hosts: BTreeMap<String, u32> = BTreeMap::new();
    for (_, h) in &headers {
        *hosts
            .entry(h.host.clone().unwrap_or_else(|| "?".into()))
            .or_insert(0) += 1;
    }
    let mut hosts: Vec<(String, u32)> = hosts.into_iter().collect();
    hosts.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let rank0 = run.ranks.iter().find(|r| r.rank == 0);
    let duration = summary.and_then(|s| s.duration_s).or_else(|| {
        run.ranks
            .iter()
            .map(|r| r.close.as_ref().map_or(r.last_t, |c| c.0))
            .reduce(f64::max)
    });
    let config = first.and_then(|h| h.config.clone());
    let interval = config
        .as_ref()
        .and_then(|c| c.get("interval"))
        .and_then(|v| v.as_f64());
    let config_items = config
        .as_ref()
        .and_then(|c| c.as_object())
        .map(|m| {
            m.iter()
                .filter(|(k, _)| k.as_str() != "interval")
                .map(|(k, v)| format!("{k}={}", config_value(k, v)))
                .collect()
        })
        .unwrap_or_default();
    let catalogue = first.and_then(|h| h.catalogue.as_ref()).map(|c| {
        let n = |k: &str| c.get(k).and_then(|v| v.as_u64()).unwrap_or(0);
        (n("cvars"), n("pvars"), n("categories"))
    });
    let samples_range = run
        .ranks
        .iter()
        .map(|r| r.samples)
        .fold(None, |acc: Option<(u64, u64)>, s| {
            Some(acc.map_or((s, s), |(lo, hi)| (lo.min(s), hi.max(s))))
        });
    Facts {
        library,
        library_version,
        size: run.size,
        hosts,
        start_unix: headers
            .iter()
            .filter_map(|(_, h)| h.start_unix)
            .reduce(f64::min),
        duration,
        interval,
        samples_rank0: summary
            .and_then(|s| s.samples_rank0)
            .or(rank0.map(|r| r.samples)),
        samples_range,
        config: config_items,
        thread_level: first.and_then(|h| h.thread_level.clone()),
        catalogue,
        sampled: rank0
            .and_then(|r| r.header.as_ref())
            .or(first)
            .map(|h| h.sampled),
        objects: run
            .ranks
            .iter()
            .fold((0, 0), |acc, r| (acc.0 + r.objects.0, acc.1 + r.objects.1)),
        new_pvars: rank0.map_or(0, |r| r.new_pvars),
    }
}

fn config_value(key: &str, v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::Null if key == "policy" => "default (embedded policies.toml)".into(),
        serde_json::Value::String(s) if key == "policy" && s == "none" => {
            "none (monitor only)".into()
        }
        serde_json::Value::Null => "none".into(),
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Array(a) if a.is_empty() && key == "pvars" => "all".into(),
        serde_json::Value::Array(a) => a
            .iter()
            .map(|x| x.as_str().map_or_else(|| x.to_string(), str::to_string))
            .collect::<Vec<_>>()
            .join(","),
        serde_json::Value::Number(n)
            if matches!(key, "flush" | "refresh" | "interval") && n.as_f64().is_some() =>
        {
            super::tables::seconds(n.as_f64().unwrap_or(0.0))
        }
        other => other.to_string(),
    }
}

/// `MPICH Version: 4.0.2 (ch4:ucx)`, `Open MPI v4.1.4`: the first line, or
/// the first part of a one-line version.
pub fn tidy_version(v: &str) -> String {
    let mut lines = v.lines();
    let first = lines.next().unwrap_or_default();
    let first = first.split(", ").next().unwrap_or(first);
    let mut out = super::tables::one_line(first).replace("MPICH Version:", "MPICH");
    if let Some(device) = v
        .lines()
        .find_map(|l| l.strip_prefix("MPICH Device:"))
        .map(str::trim)
    {
        out.push_str(&format!(" ({device})"));
    }
    out
}

/// The per-rank quantities the summary would have (rank 0's rule:
/// unbound variables and those bound to `world`, not the `.hist` arrays;
/// levels also give their maximum).
fn rank_quantities(r: &RankLog) -> Vec<(String, &'static str, f64)> {
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
    for p in &r.policies {
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
fn recompute_advice(run: &Run, stats: &[Stat], sizes: &BTreeMap<String, Vec<u64>>) -> Vec<Advice> {
    let header = run.ranks.iter().find_map(|r| r.header.as_ref());
    let library = header.map(|h| {
        let v = h.library_version.clone().unwrap_or_default();
        match Library::from_version(&v) {
            Library::Unknown => match h.library.as_deref() {
                Some("mpich") => Library::Mpich,
                Some("openmpi") => Library::OpenMpi,
                Some("mvapich2") => Library::Mvapich2,
                Some("intelmpi") => Library::IntelMpi,
                _ => Library::Unknown,
            },
            l => l,
        }
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

fn activity(ranks: &[RankLog]) -> Vec<Activity> {
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

fn policy_totals(ranks: &[RankLog]) -> Vec<PolicyTotals> {
    let mut per: BTreeMap<&str, PolicyTotals> = BTreeMap::new();
    for r in ranks {
        for p in &r.policies {
            let t = per
                .entry(p.policy.as_str())
                .or_insert_with(|| PolicyTotals {
                    policy: p.policy.clone(),
                    ..PolicyTotals::default()
                });
            t.ranks += 1;
            t.writes += p.writes;
            t.refused += p.refused;
            t.firings += p.firings;
            t.disabled += u32::from(p.disabled.is_some());
        }
    }
    per.into_values().collect()
}

/// Groups records (key, rank, t, count) by key, in order of first time.
fn group(items: impl Iterator<Item = (Vec<String>, u32, f64, u64)>) -> Vec<Grouped> {
    let mut out: Vec<Grouped> = Vec::new();
    let mut index: HashMap<Vec<String>, usize> = HashMap::new();
    for (key, rank, t, n) in items {
        let i = *index.entry(key.clone()).or_insert_with(|| {
            out.push(Grouped {
                key,
                ranks: Vec::new(),
                count: 0,
                first_t: t,
            });
            out.len() - 1
        });
        let g = &mut out[i];
        if g.ranks.last() != Some(&rank) {
            g.ranks.push(rank);
        }
        g.count += n;
        g.first_t = g.first_t.min(t);
    }
    for g in &mut out {
        g.ranks.sort_unstable();
        g.ranks.dedup();
    }
    out.sort_by(|a, b| a.first_t.total_cmp(&b.first_t).then(a.key.cmp(&b.key)));
    out
}

/// A warning with the names it quotes (between backquotes) replaced by
/// `*`, and those names.
pub fn warning_pattern(message: &str) -> (String, Vec<String>) {
    let mut pattern = String::new();
    let mut names: Vec<String> = Vec::new();
    let mut parts = message.split('`');
    if let Some(first) = parts.next() {
        pattern.push_str(first);
    }
    let rest: Vec<&str> = parts.collect();
    for (i, part) in rest.iter().enumerate() {
        // Odd parts are quoted (when the quote is closed).
        if i % 2 == 0 && i + 1 < rest.len() {
            pattern.push_str("`*`");
            if !names.iter().any(|n| n == part) {
                names.push(part.to_string());
            }
        } else if i % 2 == 0 {
            pattern.push('`');
            pattern.push_str(part);
        } else {
            pattern.push_str(part);
        }
    }
    (pattern, names)
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
    fn warnings_differing_in_names_are_one_kind() {
        let (p, n) = warning_pattern("cannot sample `a` on world: failed for `a`");
        assert_eq!(p, "cannot sample `*` on world: failed for `*`");
        assert_eq!(n, vec!["a"]);
        assert_eq!(warning_pattern("plain").0, "plain");
        assert_eq!(warning_pattern("odd `quote").0, "odd `quote");
    }

    #[test]
    fn ranks_compactly() {
        assert_eq!(compact_ranks(&[0, 2, 4, 6]), "0-6:2");
        assert_eq!(compact_ranks(&[1, 3]), "1,3");
        assert_eq!(compact_ranks(&[0, 1, 2, 3]), "0-3");
        assert_eq!(compact_ranks(&[5]), "5");
    }

    #[test]
    fn versions_are_tidied() {
        assert_eq!(
            tidy_version("MPICH Version:\t4.0.2\nMPICH Release date:\tx\nMPICH Device:\tch4:ucx\n"),
            "MPICH 4.0.2 (ch4:ucx)"
        );
        assert_eq!(
            tidy_version(
                "Open MPI v4.1.4, package: Debian OpenMPI, ident: 4.1.4, repo rev: v4.1.4"
            ),
            "Open MPI v4.1.4"
        );
    }
}
