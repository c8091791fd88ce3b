//! "Notes from policies" and "Warnings", each grouped over the ranks.

use super::ranks_text;
use crate::report::analysis::{Analysis, Grouped};
use crate::report::tables::{cut, one_line, Section};

/// Rows of grouped records: policy or pattern, text, ranks, count, first t.
fn grouped_rows(groups: &[Grouped]) -> Vec<Vec<String>> {
    groups
        .iter()
        .map(|g| {
            vec![
                g.key[0].clone(),
                one_line(&g.key[1]),
                ranks_text(&g.ranks),
                g.count.to_string(),
                format!("{:.3}", g.first_t),
            ]
        })
        .collect()
}

/// The notes section.
pub(super) fn notes(a: &Analysis) -> Section {
    let mut s = Section::new("Notes from policies");
    s.table(
        &["policy", "note", "ranks", "times", "first t (s)"],
        &[false, false, false, true, true],
        grouped_rows(&a.notes),
        "all in --markdown",
    );
    s
}

/// The warnings section.
pub(super) fn warnings(a: &Analysis) -> Section {
    let mut s = Section::new("Warnings");
    if a.warning_total == 0 {
        s.text("No warnings in the logs.");
        return s;
    }
    s.text(format!(
        "{} warning{} in the logs ({} kinds), most frequent first:",
        a.warning_total,
        if a.warning_total == 1 { "" } else { "s" },
        a.warnings.len()
    ));
    let rows = a
        .warnings
        .iter()
        .map(|g| {
            vec![
                g.count.to_string(),
                g.ranks.len().to_string(),
                cut(&one_line(&g.key[0]), 120),
                cut(&g.key[1], 100),
            ]
        })
        .collect();
    s.table(
        &["count", "ranks", "message (`*`: a name)", "names"],
        &[true, true, false, false],
        rows,
        "all in --markdown",
    );
    s
}
