//! From what was read to what is reported: run facts, cross-rank statistics
//! (summary.json's, or recomputed from the logs' last samples when it is
//! missing), the variables worth a look, classes of ranks, CVAR changes,
//! policies, recommendations and warnings, aggregated over ranks.
//!
//! Modules: [`facts`] (the run), [`recompute`] (what summary.json would
//! say, from the logs), [`interest`] (which variables are worth a look),
//! [`grouping`] (records of several ranks told together), [`hosts`] (the
//! run by host). This file puts them together into an [`Analysis`].

mod facts;
mod grouping;
mod hosts;
mod interest;
mod recompute;

pub use facts::Facts;
pub use grouping::{Grouped, PolicyTotals};
pub use hosts::Hosts;
pub use interest::{by_spread, default_plots, spread, Activity, OverTime};

use super::reading::{Advice, Class, Points, Run, SetEnv, Stat, Write};
use std::collections::BTreeMap;

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
    /// The ranks of each host, with what differs between hosts.
    pub hosts: Hosts,
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
        facts: facts::facts(run),
        ..Analysis::default()
    };
    summarised(&mut a, run);
    a.hosts = hosts::hosts(&run.ranks);
    a.activity = interest::activity(&run.ranks);
    changes(&mut a, run);
    a.policies = grouping::policy_totals(&run.ranks);
    policy_texts(&mut a, run);
    a.warnings = grouping::warnings(&run.ranks);
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

/// What summary.json says (statistics, classes, message sizes,
/// recommendations, disabled policies), or what the logs say instead when
/// it is missing or has none.
fn summarised(a: &mut Analysis, run: &Run) {
    let summary = run.summary.as_ref();
    match summary {
        Some(s) if !s.variables.is_empty() || run.ranks.is_empty() => {
            a.stats = s.variables.clone();
        }
        _ => {
            a.stats = recompute::recompute_stats(&run.ranks);
            a.stats_recomputed = !a.stats.is_empty();
        }
    }
    match summary {
        Some(s) if !s.classes.is_empty() || run.ranks.is_empty() => a.classes = s.classes.clone(),
        _ => {
            a.classes = recompute::recompute_classes(&run.ranks);
            a.classes_recomputed = !a.classes.is_empty();
        }
    }
    a.size_histograms = match summary {
        Some(s) => s.size_histograms.clone(),
        None => recompute::recompute_size_histograms(&run.ranks),
    };
    match summary {
        Some(s) => a.advice = s.recommendations.clone(),
        None if !run.ranks.is_empty() => {
            a.advice = recompute::recompute_advice(run, &a.stats, &a.size_histograms);
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
}

/// Every CVAR write and environment setting of every rank, by time then
/// rank.
fn changes(a: &mut Analysis, run: &Run) {
    for r in &run.ranks {
        a.writes.extend(r.writes.iter().cloned());
        a.setenvs.extend(r.setenvs.iter().cloned());
    }
    a.writes
        .sort_by(|x, y| x.record.t.total_cmp(&y.record.t).then(x.rank.cmp(&y.rank)));
    a.setenvs
        .sort_by(|x, y| x.record.t.total_cmp(&y.record.t).then(x.rank.cmp(&y.rank)));
}

/// Disabled policies, recommendations and notes of policies, each grouped
/// over the ranks.
fn policy_texts(a: &mut Analysis, run: &Run) {
    a.disabled = grouping::group(run.ranks.iter().flat_map(|r| {
        r.disabled
            .iter()
            .map(move |(p, why)| (vec![p.clone(), why.clone()], r.rank, 0.0, 1))
    }));
    a.policy_advice = grouping::group(run.ranks.iter().flat_map(|r| {
        r.recommendations
            .iter()
            .map(move |(t, p, text)| (vec![p.clone(), text.clone()], r.rank, *t, 1))
    }));
    a.notes = grouping::group(run.ranks.iter().flat_map(|r| {
        r.notes
            .iter()
            .map(move |(t, p, text)| (vec![p.clone(), text.clone()], r.rank, *t, 1))
    }));
}
