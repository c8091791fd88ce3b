//! "CVAR changes": the writes by policy, CVAR and outcome, every write in
//! time order, and the environment variables policies set.

use super::{cvar_value_text, ranks_text};
use crate::report::analysis::Analysis;
use crate::report::reading::{Ranked, SetEnv, Write};
use crate::report::tables::{one_line, Section};
use std::collections::BTreeMap;
use vocab::record::Outcome;

/// Writes of one policy, CVAR and outcome.
struct WriteGroup {
    writes: u64,
    ranks: Vec<u32>,
    first: f64,
    last: f64,
    values: Vec<String>,
}

/// The CVAR changes section.
pub(super) fn changes(a: &Analysis) -> Section {
    let mut s = Section::new("CVAR changes");
    if a.writes.is_empty() && a.setenvs.is_empty() {
        s.text("No CVAR was written and no environment variable set by a policy.");
        return s;
    }
    if !a.writes.is_empty() {
        by_policy(&mut s, &a.writes);
        every_write(&mut s, &a.writes);
    }
    if !a.setenvs.is_empty() {
        environment(&mut s, &a.setenvs);
    }
    s
}

/// How many writes on how many ranks, and a table of them by policy, CVAR
/// and outcome.
fn by_policy(s: &mut Section, writes: &[Write]) {
    let ranks: std::collections::BTreeSet<u32> = writes.iter().map(|w| w.rank).collect();
    let refused = writes
        .iter()
        .filter(|w| !w.record.attempt.outcome.applied())
        .count();
    s.text(format!(
        "{} write{} on {} rank{} ({refused} refused or invalid). By policy and CVAR:",
        writes.len(),
        if writes.len() == 1 { "" } else { "s" },
        ranks.len(),
        if ranks.len() == 1 { "" } else { "s" }
    ));
    // (policy, cvar, outcome) -> writes, ranks, first, last, values.
    let mut groups: BTreeMap<(&str, &str, &str), WriteGroup> = BTreeMap::new();
    for Ranked { rank, record: w } in writes {
        let a = &w.attempt;
        let g = groups
            .entry((&w.policy, &a.cvar, a.outcome.as_str()))
            .or_insert(WriteGroup {
                writes: 0,
                ranks: Vec::new(),
                first: f64::INFINITY,
                last: 0.0,
                values: Vec::new(),
            });
        g.writes += 1;
        g.ranks.push(*rank);
        g.first = g.first.min(w.t);
        g.last = g.last.max(w.t);
        let v = cvar_value_text(a.readback.as_ref().or(a.requested.as_ref()));
        if !g.values.contains(&v) {
            g.values.push(v);
        }
    }
    let rows = groups
        .into_iter()
        .map(|((policy, cvar, outcome), mut g)| {
            g.ranks.sort_unstable();
            g.ranks.dedup();
            let shown: Vec<String> = g.values.iter().take(6).cloned().collect();
            let more = if g.values.len() > 6 {
                format!(" (+{} more)", g.values.len() - 6)
            } else {
                String::new()
            };
            vec![
                policy.to_string(),
                cvar.to_string(),
                outcome.to_string(),
                g.writes.to_string(),
                ranks_text(&g.ranks),
                format!("{:.3}-{:.3}", g.first, g.last),
                format!("{}{more}", shown.join(" ")),
            ]
        })
        .collect();
    s.table(
        &[
            "policy", "cvar", "outcome", "writes", "ranks", "t (s)", "values",
        ],
        &[false, false, false, true, false, false, false],
        rows,
        "",
    );
}

/// Every write, in time order.
fn every_write(s: &mut Section, writes: &[Write]) {
    s.text("Every write, in time order (old -> read back; the requested value when it differs):");
    let rows = writes
        .iter()
        .map(|Ranked { rank, record: w }| {
            let a = &w.attempt;
            let old = cvar_value_text(a.old.as_ref());
            let back = cvar_value_text(a.readback.as_ref());
            let req = cvar_value_text(a.requested.as_ref());
            let mut change = format!("{old} -> {back}");
            if req != back && req != "-" {
                change.push_str(&format!(" (asked {req})"));
            }
            let cvar = match a.index {
                Some(i) => format!("{}[{i}]", a.cvar),
                None => a.cvar.clone(),
            };
            let mut outcome = a.outcome.as_str().to_string();
            if w.dry_run && a.outcome != Outcome::DryRun {
                outcome.push_str(" (dry run)");
            }
            vec![
                format!("{:.3}", w.t),
                rank.to_string(),
                w.policy.clone(),
                w.phase.to_string(),
                cvar,
                change,
                outcome,
                a.error.as_deref().map(one_line).unwrap_or_default(),
            ]
        })
        .collect();
    s.table(
        &[
            "t (s)", "rank", "policy", "phase", "cvar", "change", "outcome", "error",
        ],
        &[true, true, false, false, false, false, false, false],
        rows,
        "all in --markdown and --csv writes.csv",
    );
}

/// The environment variables set by policies.
fn environment(s: &mut Section, setenvs: &[SetEnv]) {
    s.text("Environment variables set by policies:");
    let rows = setenvs
        .iter()
        .map(|Ranked { rank, record: e }| {
            vec![
                format!("{:.3}", e.t),
                rank.to_string(),
                e.policy.clone(),
                format!("{}={}", e.name, e.value),
                if e.dry_run {
                    "dry run".into()
                } else {
                    String::new()
                },
                e.error.clone().unwrap_or_default(),
            ]
        })
        .collect();
    s.table(
        &["t (s)", "rank", "policy", "setting", "", "error"],
        &[true, true, false, false, false, false],
        rows,
        "all in --markdown",
    );
}
