//! "Policies" (totals over the ranks, disabled ones) and
//! "Recommendations" (end-of-run advice and the policies' own).

use super::ranks_text;
use crate::report::analysis::Analysis;
use crate::report::reading::Run;
use crate::report::tables::{Block, Section};

/// The policies section.
pub(super) fn policies(a: &Analysis) -> Section {
    let mut s = Section::new("Policies");
    if a.policies.is_empty() && a.disabled.is_empty() && a.disabled_messages.is_empty() {
        s.text("No policy reported (monitor-only run, or the logs end before finalize).");
        return s;
    }
    // The policies for variables this library does not export, on every
    // rank that has them, are named in one line below, not in the table.
    let not_for_library = |p: &&crate::report::analysis::PolicyTotals| {
        p.disabled == p.ranks
            && p.firings == 0
            && p.writes == 0
            && p.refused == 0
            && a.disabled.iter().any(|g| {
                g.key[0] == p.policy
                    && g.key[1].starts_with(vocab::record::NOT_EXPORTED)
                    && g.ranks.len() == p.ranks as usize
            })
    };
    let shown: Vec<_> = a.policies.iter().filter(|p| !not_for_library(p)).collect();
    if !a.policies.is_empty() && shown.is_empty() {
        s.text("No policy applies to this MPI library.");
    }
    if !shown.is_empty() {
        let rows = shown
            .iter()
            .map(|p| {
                vec![
                    p.policy.clone(),
                    p.ranks.to_string(),
                    p.firings.to_string(),
                    p.writes.to_string(),
                    p.refused.to_string(),
                    p.disabled.to_string(),
                ]
            })
            .collect();
        s.text("Totals over the ranks (from each log's policy summary at finalize):");
        s.table(
            &[
                "policy",
                "ranks",
                "firings",
                "writes",
                "refused",
                "disabled on",
            ],
            &[false, true, true, true, true, true],
            rows,
            "",
        );
    }
    let mut items: Vec<(String, Vec<String>)> = a
        .disabled_messages
        .iter()
        .map(|m| (m.clone(), Vec::new()))
        .collect();
    // From the logs: the policies for variables this library does not
    // export, in one line; the others one by one.
    let mut not_here: Vec<(String, String, Vec<u32>)> = Vec::new();
    if !a.disabled.is_empty() {
        items.clear();
        for g in &a.disabled {
            match g.key[1].strip_prefix(vocab::record::NOT_EXPORTED) {
                Some(var) => not_here.push((g.key[0].clone(), var.to_string(), g.ranks.clone())),
                None => items.push((
                    format!(
                        "policy {} disabled on ranks {}: {}",
                        g.key[0],
                        ranks_text(&g.ranks),
                        g.key[1]
                    ),
                    Vec::new(),
                )),
            }
        }
    }
    if items.is_empty() && not_here.is_empty() {
        s.text("No policy was disabled.");
    }
    if !not_here.is_empty() {
        let mut ranks: Vec<u32> = not_here.iter().flat_map(|(_, _, r)| r.clone()).collect();
        ranks.sort_unstable();
        ranks.dedup();
        let names: Vec<String> = not_here
            .iter()
            .map(|(policy, var, _)| format!("{policy} ({var})"))
            .collect();
        s.text(format!(
            "Not for this MPI library ({}; ranks {}), which does not export the variable each reads: {}.",
            not_here.len(),
            ranks_text(&ranks),
            names.join(", ")
        ));
    }
    if !items.is_empty() {
        s.text(format!("Disabled policies ({}):", items.len()));
        s.blocks.push(Block::Bullets(items));
    }
    s
}

/// The recommendations section.
pub(super) fn recommendations(run: &Run, a: &Analysis) -> Section {
    let mut s = Section::new("Recommendations");
    if a.advice_recomputed {
        s.text("summary.json is missing: these come from the tuner's end-of-run rules applied to the statistics recomputed from the logs (the eager limit taken as the library's default).");
    }
    let mut items: Vec<(String, Vec<String>)> = a
        .advice
        .iter()
        .map(|r| {
            (
                format!("[{}] {}", r.id, r.advice),
                vec![
                    format!("evidence: {}", r.evidence),
                    format!("set: {}", r.setting),
                ],
            )
        })
        .collect();
    for g in &a.policy_advice {
        items.push((
            format!("policy {}: {}", g.key[0], g.key[1]),
            vec![format!(
                "on ranks {} (first at t = {:.3} s)",
                ranks_text(&g.ranks),
                g.first_t
            )],
        ));
    }
    if items.is_empty() {
        s.text(if run.summary.is_some() || a.advice_recomputed {
            "None: nothing in this run calls for a change."
        } else {
            "None available."
        });
    } else {
        s.blocks.push(Block::Bullets(items));
    }
    s
}
