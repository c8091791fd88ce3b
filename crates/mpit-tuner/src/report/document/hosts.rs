//! "Hosts": the ranks of each node, and the quantities whose mean per
//! rank differs most between nodes.

use super::ranks_text;
use crate::report::analysis::Analysis;
use crate::report::tables::{num, Section};

/// The hosts section (for a run on several hosts).
pub(super) fn hosts(a: &Analysis) -> Section {
    let h = &a.hosts;
    let mut s = Section::new("Hosts");
    s.text(if h.columns.is_empty() {
        format!(
            "{} hosts; every quantity has the same mean per rank on each.",
            h.rows.len()
        )
    } else {
        format!(
            "{} hosts, with the mean per rank of the quantities that differ most between \
             them (each log's last sample):",
            h.rows.len()
        )
    });
    let mut header = vec!["host", "ranks", "count"];
    header.extend(h.columns.iter().map(String::as_str));
    let mut numeric = vec![false, false, true];
    numeric.extend(h.columns.iter().map(|_| true));
    let rows = h
        .rows
        .iter()
        .map(|r| {
            let mut row = vec![
                r.host.clone(),
                ranks_text(&r.ranks),
                r.ranks.len().to_string(),
            ];
            row.extend(r.means.iter().map(|m| num(*m)));
            row
        })
        .collect();
    s.table(&header, &numeric, rows, "");
    s
}
