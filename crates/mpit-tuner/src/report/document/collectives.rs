//! "Collective tuning": what online collective tuning chose, per
//! communicator, collective and message size, from the `collective`
//! records of the logs (identical on every rank of a communicator, so each
//! is counted once), what users pinned (`mpit-tuner set`, apart from what
//! the searches kept), and why it did not run where it did not.

use crate::report::reading::Run;
use crate::report::tables::{Block, Section};
use std::collections::BTreeMap;
use tuner_core::collectives::{self, OutcomeKey, Outcomes};
use vocab::record::{CollectiveEvent, CollectiveTuning};
use vocab::summary::CollectiveOutcome;

/// What the searches found, per (communicator, collective, bin), from the
/// logs: each rank's records folded as the tuner folds them for
/// summary.json, a communicator's outcome taken from the first rank that
/// has it (its ranks log the same). Empty when no log has a search.
pub(crate) fn outcomes(run: &Run) -> Vec<CollectiveOutcome> {
    let mut all: BTreeMap<OutcomeKey, CollectiveOutcome> = BTreeMap::new();
    for log in &run.ranks {
        let mut mine = Outcomes::default();
        for r in &log.collectives {
            mine.add(r);
        }
        for o in mine.to_vec() {
            all.entry((o.comm.clone(), o.collective.clone(), o.bin))
                .or_insert(o);
        }
    }
    all.into_values().collect()
}

/// A pin as the report shows it: its record, the time per call first
/// measured after it (`held`), and the rank whose records these are.
type Pin<'a> = (&'a CollectiveTuning, Option<f64>, u32);

/// The section, or `None` when no log has a `collective` record.
pub(super) fn collectives(run: &Run) -> Option<Section> {
    if run.ranks.iter().all(|r| r.collectives.is_empty()) {
        return None;
    }
    let mut s = Section::new("Collective tuning");
    // Per (communicator, collective, bin), its last decision and the search
    // cost of all its decisions.
    let mut decided: BTreeMap<(String, String, u64), (&CollectiveTuning, f64, u32)> =
        BTreeMap::new();
    let mut messages: BTreeMap<String, Vec<u32>> = BTreeMap::new();
    // Per (communicator, collective, bin), the last pin (from one rank:
    // every rank of the communicator pins at the same point) and what ran
    // after it.
    let mut pinned: BTreeMap<(String, String, u64), Pin> = BTreeMap::new();
    for log in &run.ranks {
        for r in &log.collectives {
            let key = || {
                (
                    r.comm.clone(),
                    r.collective.clone().unwrap_or_default(),
                    r.bin.map_or(0, |b| b.0),
                )
            };
            match r.event {
                CollectiveEvent::Pinned => {
                    let entry = pinned.entry(key()).or_insert((r, None, log.rank));
                    if entry.2 == log.rank {
                        *entry = (r, None, log.rank);
                    }
                }
                CollectiveEvent::Held => {
                    if let Some(entry) = pinned.get_mut(&key()) {
                        if entry.2 == log.rank && entry.0.request == r.request {
                            entry.1 = r.time_us;
                        }
                    }
                }
                CollectiveEvent::Decision => {
                    let key = (
                        r.comm.clone(),
                        r.collective.clone().unwrap_or_default(),
                        r.bin.map_or(0, |b| b.0),
                    );
                    let entry = decided.entry(key).or_insert((r, 0.0, log.rank));
                    // Every rank of the communicator logs the same: count
                    // one rank's decisions only.
                    if entry.2 == log.rank {
                        entry.0 = r;
                        entry.1 += r.cost_us.unwrap_or(0.0);
                    }
                }
                CollectiveEvent::Start
                | CollectiveEvent::Off
                | CollectiveEvent::Skipped
                | CollectiveEvent::Stopped
                | CollectiveEvent::SetupFailed
                | CollectiveEvent::ReductionFailed
                | CollectiveEvent::WriteFailed
                | CollectiveEvent::ApplicationWrote
                | CollectiveEvent::Left
                | CollectiveEvent::Stored
                | CollectiveEvent::Concurrent => {
                    let text = match (&r.message, r.collective.as_deref()) {
                        (Some(m), Some(c)) => format!("{} {c}: {m}", r.event),
                        (Some(m), None) => format!("{}: {m}", r.event),
                        (None, _) => r.event.to_string(),
                    };
                    messages.entry(text).or_default().push(log.rank);
                }
                _ => {}
            }
        }
    }
    if decided.is_empty() && pinned.is_empty() {
        s.text("No search ended: too few calls per communicator, collective and size, or tuning did not run.");
    } else if decided.is_empty() {
        s.text("No search ended before the users' pins below.");
    } else {
        let rows = decided
            .iter()
            .map(|((comm, coll, _), (r, cost, _))| {
                let default = r.default_us.unwrap_or(f64::NAN);
                let chosen = r.time_us.unwrap_or(f64::NAN);
                vec![
                    format!("{comm} ({})", r.comm_size.unwrap_or(0)),
                    coll.clone(),
                    bin_text(r.bin),
                    format!("{default:.1}"),
                    match (r.algorithm.clone().unwrap_or_default(), r.stored) {
                        // The tuning store's choice, confirmed in this run.
                        (a, true) => format!("{a} (store)"),
                        (a, false) => a,
                    },
                    format!("{chosen:.1}"),
                    format!("{:.2}x", default / chosen),
                    format!("{:.1}", cost / 1e3),
                ]
            })
            .collect();
        s.text("Per communicator (label, size), collective and message size: the library's default and the algorithm kept (\"(store)\": the tuning store's choice, confirmed against the default in this run), with their time per call agreed across ranks (the maximum over ranks of each rank's mean), and what the search cost over the run:");
        s.table(
            &[
                "communicator",
                "collective",
                "bytes",
                "default us",
                "kept",
                "kept us",
                "gain",
                "search cost ms",
            ],
            &[false, false, false, true, false, true, true, true],
            rows,
            "",
        );
    }
    if !pinned.is_empty() {
        let rows = pinned
            .iter()
            .map(|((comm, coll, _), (r, held_us, _))| {
                vec![
                    format!("{comm} ({})", r.comm_size.unwrap_or(0)),
                    coll.clone(),
                    bin_text(r.bin),
                    format!(
                        "{} ({})",
                        r.algorithm.clone().unwrap_or_default(),
                        r.value.map_or_else(String::new, |v| v.to_string())
                    ),
                    r.request.clone().unwrap_or_default(),
                    r.calls.map_or_else(String::new, |c| c.to_string()),
                    held_us.map_or_else(|| "-".to_string(), |t| format!("{t:.1}")),
                ]
            })
            .collect();
        s.text("Pinned by a user's request (`mpit-tuner set`), not chosen by a search: from the agreed point after the call shown (the same call on every rank of the communicator), the user's algorithm ran every call and searching stopped; its time per call as first measured after the pin:");
        s.table(
            &[
                "communicator",
                "collective",
                "bytes",
                "pinned",
                "request",
                "after call",
                "pinned us",
            ],
            &[false, false, false, false, false, true, true],
            rows,
            "",
        );
    }
    if !messages.is_empty() {
        let items = messages
            .into_iter()
            .map(|(text, ranks)| {
                (
                    format!("{text} (ranks {})", super::ranks_text(&ranks)),
                    Vec::new(),
                )
            })
            .collect();
        s.blocks.push(Block::Bullets(items));
    }
    Some(s)
}

/// The bin's sizes as every other output names them
/// (`collectives::bin_text`: `[64 KiB, 1 MiB)`, `>= 1 MiB`).
fn bin_text(bin: Option<(u64, Option<u64>)>) -> String {
    bin.map_or_else(String::new, |(lo, hi)| collectives::bin_text(lo, hi))
}
