//! "Problems with this run directory": what is wrong, by kind; a kind
//! with many files is told once, with a few examples.

use super::ranks_text;
use crate::report::reading::{Problem, ProblemKind};
use crate::report::tables::{Block, Section};
use std::collections::BTreeMap;

/// The problems section.
pub(super) fn problems(list: &[Problem]) -> Section {
    let mut s = Section::new("Problems with this run directory");
    let mut groups: BTreeMap<ProblemKind, Vec<&Problem>> = BTreeMap::new();
    for p in list {
        groups.entry(p.kind).or_default().push(p);
    }
    let mut items = Vec::new();
    for (kind, ps) in groups {
        let files: Vec<&str> = ps.iter().filter_map(|p| p.file.as_deref()).collect();
        let mut distinct = files.clone();
        distinct.dedup();
        if distinct.len() <= 6 {
            for p in ps {
                let item = match &p.file {
                    Some(f) => format!("{f}: {}", p.detail),
                    None => p.detail.clone(),
                };
                items.push((item, Vec::new()));
            }
        } else {
            let ranks: Vec<u32> = ps.iter().filter_map(|p| p.rank).collect();
            let mut ranks = ranks;
            ranks.dedup();
            let details = ps
                .iter()
                .take(3)
                .map(|p| format!("{}: {}", p.file.as_deref().unwrap_or(""), p.detail))
                .chain(std::iter::once(format!(
                    "... and {} more",
                    ps.len().saturating_sub(3)
                )))
                .collect();
            items.push((
                format!(
                    "{} {} (ranks {}): {}",
                    distinct.len(),
                    if kind == ProblemKind::Summary {
                        "problems"
                    } else {
                        "logs"
                    },
                    ranks_text(&ranks),
                    kind.headline()
                ),
                details,
            ));
        }
    }
    s.blocks.push(Block::Bullets(items));
    s.text("What follows is what the readable part of the run says.");
    s
}
