//! "What the tool changed", the report's first section: the collectives
//! online tuning switched (per communicator, collective and size bin: the
//! algorithm kept, its measured gain over the library's default and what
//! the searches cost), the CVARs written, or that nothing changed and why.

use crate::report::analysis::Analysis;
use crate::report::reading::Run;
use crate::report::tables::Section;
use vocab::record::CollectiveEvent;

/// The section; the details are in "Collective tuning" and "CVAR changes".
pub(super) fn changed(run: &Run, a: &Analysis) -> Section {
    let mut s = Section::new("What the tool changed");
    let outcomes = super::collective_outcomes(run);
    let switched: Vec<_> = outcomes
        .iter()
        .filter_map(|o| Some((o, o.switched_to()?)))
        .collect();
    // Searches that ended on the default, nothing pinned over them.
    let kept = outcomes
        .iter()
        .filter(|o| o.chosen.is_some() && o.switched_to().is_none())
        .count();
    // What tuning said at start, from the lowest rank that logged it.
    let said = |event: CollectiveEvent| {
        run.ranks.iter().find_map(|log| {
            log.collectives
                .iter()
                .find(|r| r.event == event)
                .and_then(|r| r.message.clone())
        })
    };
    let tuning = match (said(CollectiveEvent::Start), said(CollectiveEvent::Off)) {
        // The start record lists every candidate ("Collective tuning"
        // has it): its mode and window here.
        (Some(start), _) => match start.split_once(" in mode ") {
            Some((_, rest)) => format!("Collective tuning ran in mode {rest}."),
            None => format!("Collective tuning ran: {start}."),
        },
        (None, Some(off)) => format!("Collective tuning was off: {off}."),
        (None, None) => "Collective tuning did not run (a run from before it existed, or \
                         MPIT_TUNER_COLLECTIVES=off)."
            .to_string(),
    };
    let applied = a
        .writes
        .iter()
        .filter(|w| w.record.attempt.outcome.applied())
        .count();
    if switched.is_empty() && applied == 0 {
        s.text(format!(
            "Nothing: every collective ran the library's own algorithm and no CVAR was written. \
             {tuning}{}",
            if kept > 0 {
                format!(" {kept} searches kept the library's default.")
            } else {
                String::new()
            }
        ));
        return s;
    }
    s.text(tuning);
    if !switched.is_empty() {
        let rows = switched
            .iter()
            .map(|(o, ran)| {
                let gain = match (o.pinned.as_ref(), o.gain) {
                    (Some(_), _) => "pinned".to_string(),
                    (None, Some(g)) if g.is_finite() => format!("{g:.2}x"),
                    _ => "-".to_string(),
                };
                vec![
                    format!("{} ({})", o.comm, o.comm_size.unwrap_or(0)),
                    o.collective.clone(),
                    o.bin.map_or_else(String::new, |(lo, hi)| {
                        tuner_core::collectives::bin_text(lo, hi)
                    }),
                    o.default.clone().unwrap_or_default(),
                    ran.to_string(),
                    gain,
                    format!("{:.1}", o.cost_us / 1e3),
                ]
            })
            .collect();
        s.text(format!(
            "Switched by online collective tuning, per communicator (label, size), collective \
             and message size: the library's default, the algorithm that ran instead, its \
             measured gain (the default's agreed time per call over the kept one's) and what \
             the searches cost (time in candidates slower than the default){}. Details: \
             \"Collective tuning\".",
            if kept > 0 {
                format!("; {kept} other searches kept the library's default")
            } else {
                String::new()
            }
        ));
        s.table(
            &[
                "communicator",
                "collective",
                "bytes",
                "default",
                "ran instead",
                "gain",
                "search cost ms",
            ],
            &[false, false, false, false, false, true, true],
            rows,
            "",
        );
    }
    if applied > 0 {
        let cvars: std::collections::BTreeSet<&str> = a
            .writes
            .iter()
            .filter(|w| w.record.attempt.outcome.applied())
            .map(|w| w.record.attempt.cvar.as_str())
            .collect();
        s.text(format!(
            "{applied} CVAR write{} applied, of {}. Details: \"CVAR changes\".",
            if applied == 1 { "" } else { "s" },
            cvars.into_iter().collect::<Vec<_>>().join(", ")
        ));
    }
    s
}
