//! "Top variables" (largest spread across ranks, most change during the
//! run) and "Cross-rank statistics".

use crate::report::analysis::{by_spread, spread, Analysis};
use crate::report::reading::Stat;
use crate::report::tables::{num, sparkline, Section};

/// Rows of the "top" tables.
const TOP: usize = 10;

/// The top variables section.
pub(super) fn top(a: &Analysis) -> Section {
    let mut s = Section::new("Top variables");
    let size = a.facts.size;
    let spread_rows: Vec<Vec<String>> = by_spread(&a.stats, size)
        .into_iter()
        .filter(|st| spread(st, size) > 0.01)
        .take(TOP)
        .map(|st| {
            vec![
                st.name.clone(),
                st.kind.clone(),
                format!(
                    "{}{}",
                    st.ranks,
                    size.map_or(String::new(), |n| format!("/{n}"))
                ),
                num(st.min),
                st.min_rank.to_string(),
                num(st.max),
                st.max_rank.to_string(),
                num(st.mean),
                format!("{:.0}%", spread(st, size) * 100.0),
            ]
        })
        .collect();
    s.text(
        "Largest spread across ranks ((max - min) / max; a rank without the variable counts as 0):",
    );
    if spread_rows.is_empty() {
        s.text("  none: every variable has the same value on every rank.");
    } else {
        s.table(
            &[
                "variable", "kind", "ranks", "min", "@rank", "max", "@rank", "mean", "spread",
            ],
            &[false, false, true, true, true, true, true, true, true],
            spread_rows,
            "",
        );
    }
    let active: Vec<Vec<String>> = a
        .activity
        .iter()
        .filter(|x| x.changed > 0.0)
        .take(TOP)
        .map(|x| {
            vec![
                x.key.clone(),
                x.class.clone(),
                x.ranks.to_string(),
                format!("{:.0}%", x.changed * 100.0),
                num(x.lo),
                num(x.hi),
            ]
        })
        .collect();
    s.text("Most change during the run (share of sampling intervals in which the value changed, mean over ranks; lowest and highest value on any rank):");
    if active.is_empty() {
        s.text("  none: no sampled variable changed between samples.");
    } else {
        s.table(
            &["variable", "class", "ranks", "changed", "lowest", "highest"],
            &[false, false, true, true, true, true],
            active,
            "",
        );
    }
    s
}

/// The cross-rank statistics section.
pub(super) fn statistics(a: &Analysis) -> Section {
    let mut s = Section::new("Cross-rank statistics");
    if a.stats_recomputed {
        s.text("Recomputed from the last sample of each log (summary.json is missing or empty).");
    } else if a.stats.is_empty() {
        s.text("No statistics: summary.json has none and no log has samples.");
        return s;
    } else {
        s.text("From summary.json (computed at MPI_Finalize with reductions over all ranks).");
    }
    let size = a.facts.size;
    let mut order: Vec<&Stat> = Vec::new();
    for st in by_spread(&a.stats, size) {
        order.push(st);
        let companion = format!("{}:max", st.name);
        if let Some(m) = a.stats.iter().find(|x| x.name == companion) {
            order.push(m);
        }
    }
    for st in &a.stats {
        if !order.iter().any(|o| std::ptr::eq(*o, st)) {
            order.push(st);
        }
    }
    let rows = order
        .iter()
        .map(|st| {
            vec![
                st.name.clone(),
                st.kind.clone(),
                st.ranks.to_string(),
                num(st.mean),
                num(st.min),
                st.min_rank.to_string(),
                num(st.max),
                st.max_rank.to_string(),
                num(st.stddev),
                sparkline(&st.histogram),
            ]
        })
        .collect();
    s.table(
        &[
            "variable",
            "kind",
            "ranks",
            "mean",
            "min",
            "@rank",
            "max",
            "@rank",
            "stddev",
            "ranks per bin",
        ],
        &[
            false, false, true, true, true, true, true, true, true, false,
        ],
        rows,
        "all in --markdown and summary.json",
    );
    s
}
