//! "Message sizes" per MPI call family and "Classes of ranks" (ranks that
//! made the same calls with the same bytes).

use crate::report::analysis::Analysis;
use crate::report::tables::{bytes, Section};
use tuner_core::sample::toolmetrics::bucket_floor;

/// `[8 B, 16 B)` for bucket 4; `0 B` for bucket 0.
pub fn bucket_label(b: usize) -> String {
    if b == 0 {
        "0 B".into()
    } else {
        format!(
            "[{}, {})",
            bytes(bucket_floor(b)),
            bytes(bucket_floor(b) * 2)
        )
    }
}

/// The message sizes section.
pub(super) fn sizes(a: &Analysis) -> Section {
    let mut s = Section::new("Message sizes");
    s.text("Messages per MPI call family over all ranks, by size (power-of-two buckets):");
    let rows = a
        .size_histograms
        .iter()
        .map(|(family, h)| {
            let total: u64 = h.iter().sum();
            let parts: Vec<String> = h
                .iter()
                .enumerate()
                .filter(|(_, n)| **n > 0)
                .map(|(b, n)| format!("{}: {n}", bucket_label(b)))
                .collect();
            vec![family.clone(), total.to_string(), parts.join("; ")]
        })
        .collect();
    s.table(
        &["family", "messages", "sizes"],
        &[false, true, false],
        rows,
        "",
    );
    s
}

/// The classes of ranks section.
pub(super) fn classes(a: &Analysis) -> Section {
    let mut s = Section::new("Classes of ranks");
    if a.classes.is_empty() {
        s.text("No classes: no rank recorded MPI calls.");
        return s;
    }
    if a.classes_recomputed {
        s.text("Recomputed from the logs' tool metrics (summary.json is missing or has none).");
    }
    s.text(if a.classes.len() == 1 {
        "Every rank behaved alike (same calls and bytes per MPI call family):".to_string()
    } else {
        format!(
            "{} classes: ranks in a class made the same calls with the same bytes per MPI call family.",
            a.classes.len()
        )
    });
    let rows = a
        .classes
        .iter()
        .map(|c| vec![c.ranks.clone(), c.count.to_string(), c.signature.clone()])
        .collect();
    s.table(
        &["ranks", "count", "behaviour"],
        &[false, true, false],
        rows,
        "",
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_as_text() {
        assert_eq!(bucket_label(4), "[8 B, 16 B)");
        assert_eq!(bucket_label(17), "[64 KiB, 128 KiB)");
        assert_eq!(bucket_label(0), "0 B");
    }
}
