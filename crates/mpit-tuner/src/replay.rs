//! `mpit-tuner replay`: runs a policy file offline against recorded
//! per-rank logs (or a hand-written trace) and prints, per rank, the
//! decisions and writes it would have made.
//!
//! The work is `tuner_core::replay` (the same policy engine as in a job,
//! over a simulated backend); this module reads the inputs and prints.

use crate::table::{self, Table};
use anyhow::{Context, Result};
use clap::Args;
use mpit::Value;
use serde_json::Value as Json;
use std::collections::HashMap;
use std::io::{self, BufWriter, Write};
use std::path::PathBuf;
use tuner_core::replay::{self, RankReplay};
use vocab::record::{Branch, CvarWrite, Outcome, Phase, Record};

const AFTER_HELP: &str = "\
Inputs: logs of a run (rank-NNNNN.jsonl; node-<host>.jsonl, one trace per \
rank in it), run directories (every log inside), and traces: JSON Lines written by hand, one sample per \
line, such as

  {\"t\": 0, \"rank\": 0, \"pvars\": {\"mv2_vbuf_max_use_array\": [60, 5, 2, 1]}, \"cvars\": {\"MPIR_CVAR_VBUF_POOL_CONTROL\": 0}}

with an optional catalogue line declaring CVAR scopes, counts and types and \
PVAR classes:

  {\"catalogue\": {\"cvars\": {\"MPIR_CVAR_VBUF_POOL_REDUCED_VALUE\": {\"scope\": \"local\", \"count\": 4, \"type\": \"int\"}}, \"pvars\": {\"mv2_vbuf_max_use_array\": {\"class\": \"highwatermark\", \"count\": 4}}}}

(docs/cli.md#inputs-traces describes the format). A file with only a catalogue \
line applies to every rank, e.g. to give the scopes of CVARs with logs, \
which do not record them. Undeclared CVARs have scope LOCAL.

Each rank is replayed on its own, as the tuner would have run there: \
pre-init and init policies once at the first sample (they see CVARs, no \
PVARs), periodic policies at every sample when their `every` is due, \
finalize policies at the end. Writes are simulated (read back as written) \
with the live actuator's scope and type rules; nothing touches MPI.

Output: per rank, a table of decisions (TIME, POLICY, PHASE, EVENT): which \
branch fired, each write as `CVAR: old -> new` (`?` when the old value is \
unknown), refusals with their reason, why a policy did not fire when that \
reason changes, notes and recommendations; then per policy its firings, \
writes and refusals. --json prints the records instead, one per line, with \
a `rank` field, in the format of the per-rank logs (decision, write, ...) \
plus a `replay` record opening each rank and a `replay_end` record with \
the final values of the CVARs written and the environment variables set.";

/// Options of `mpit-tuner replay`.
#[derive(Debug, Args)]
#[command(after_long_help = AFTER_HELP)]
pub struct ReplayArgs {
    /// The policy file (TOML) to try.
    #[arg(long, value_name = "FILE")]
    policy: PathBuf,

    /// Logs (rank-*.jsonl, node-*.jsonl), run directories, or trace files.
    #[arg(value_name = "LOG", required = true)]
    inputs: Vec<PathBuf>,

    /// Print the records as JSON Lines instead of tables.
    #[arg(long)]
    json: bool,

    /// Never cut long values to the terminal's width.
    #[arg(long)]
    wide: bool,
}

/// Runs `mpit-tuner replay`.
pub fn run(args: &ReplayArgs) -> Result<()> {
    let source = std::fs::read_to_string(&args.policy)
        .with_context(|| format!("cannot read policy file {}", args.policy.display()))?;
    let set = policies::PolicySet::parse(&source, &args.policy.display().to_string())
        .map_err(|e| anyhow::anyhow!("the policy file has errors:\n{e:#}"))?;
    let traces = replay::read_paths(&args.inputs)?;
    let width = if args.wide || args.json {
        None
    } else {
        table::terminal_width()
    };
    let replays = replay::replay(&set, &traces);
    let stdout = io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    for (i, r) in replays.iter().enumerate() {
        if args.json {
            write_json(&mut out, r)?;
        } else {
            if i > 0 {
                writeln!(out)?;
            }
            write_table(&mut out, r, width)?;
        }
    }
    out.flush()?;
    Ok(())
}

fn write_json(out: &mut impl Write, r: &RankReplay) -> Result<()> {
    for record in &r.records {
        // Through a JSON object, which orders the keys, with the rank added.
        let mut record = serde_json::to_value(record).context("writing JSON")?;
        if let Json::Object(m) = &mut record {
            m.insert("rank".into(), r.rank.into());
        }
        serde_json::to_writer(&mut *out, &record).context("writing JSON")?;
        writeln!(out)?;
    }
    Ok(())
}

/// A logged value as the tables show values: `1`, `[60, 5, 2, 1]`,
/// `"text"`; `?` when unknown. A double that is not finite is `null` in
/// the JSON records, and shown as they have it (`[null]`).
fn value(v: Option<&Value>) -> String {
    match v {
        None => "?".into(),
        Some(v @ Value::Double(xs)) if xs.iter().any(|x| !x.is_finite()) => {
            serde_json::to_string(v).unwrap_or_default()
        }
        Some(v) => v.to_string(),
    }
}

/// The CVAR a write names, with its element.
fn target(w: &CvarWrite) -> String {
    match w.index {
        Some(i) => format!("{}[{i}]", w.cvar),
        None => w.cvar.clone(),
    }
}

/// The table row of a record: its policy, its phase if it has one, and the
/// EVENT cell; `None` for records not shown in the table.
fn row<'a>(r: &'a Record<'_>) -> Option<(&'a str, Option<&'a Phase>, String)> {
    Some(match r {
        Record::Decision(d) => {
            let event = if d.fired {
                let branch = d.branch.as_ref().map_or("", Branch::as_str);
                let why = match (&d.condition, d.branch.as_ref()) {
                    (None, _) => "",
                    (Some(_), Some(Branch::Then)) => " (condition holds)",
                    (Some(_), _) => " (condition does not hold)",
                };
                format!("fired {branch}{why}")
            } else {
                format!("not fired: {}", d.reason.as_deref().unwrap_or(""))
            };
            (&d.policy, Some(&d.phase), event)
        }
        Record::Write(w) => {
            let a = &w.attempt;
            let (old, new) = (value(a.old.as_ref()), value(a.requested.as_ref()));
            let event = match a.outcome {
                Outcome::Written | Outcome::WrittenDiffers | Outcome::WrittenUnverified => {
                    format!("  set {}: {old} -> {new}", target(a))
                }
                Outcome::DryRun => format!("  would set {}: {old} -> {new} (dry run)", target(a)),
                outcome => format!(
                    "  {} {} ({}): {}",
                    outcome.as_str().replace('_', " "),
                    target(a),
                    if new == "?" {
                        format!("value {}", w.source)
                    } else {
                        format!("{old} -> {new}")
                    },
                    a.error.as_deref().unwrap_or("")
                ),
            };
            (&w.policy, Some(&w.phase), event)
        }
        Record::Setenv(e) => {
            let dry = if e.dry_run { " (dry run)" } else { "" };
            let event = match &e.error {
                Some(why) => format!("  refused setenv {}={}: {why}", e.name, e.value),
                None => format!("  setenv {}={}{dry}", e.name, e.value),
            };
            (&e.policy, Some(&e.phase), event)
        }
        Record::Note(n) => (&n.policy, None, format!("  note: {}", n.text)),
        Record::Recommendation(n) => (&n.policy, None, format!("  recommend: {}", n.text)),
        Record::PolicyDisabled(d) => (&d.policy, None, format!("disabled: {}", d.reason)),
        _ => return None,
    })
}

fn write_table(out: &mut impl Write, r: &RankReplay, width: Option<usize>) -> io::Result<()> {
    let head = r.records.iter().find_map(|x| match x {
        Record::Replay(h) => Some(h),
        _ => None,
    });
    let samples = head.map_or(0, |h| h.samples);
    let span = match head.filter(|_| samples > 0) {
        Some(h) => format!(", {:.3} s to {:.3} s", h.t, h.end),
        None => String::new(),
    };
    let library = head
        .and_then(|h| h.library.as_ref())
        .map_or_else(String::new, |l| format!(", {l}"));
    writeln!(
        out,
        "== rank {} of {}: {} ({} sample{}{span}{library})",
        r.rank,
        r.size,
        r.source,
        samples,
        if samples == 1 { "" } else { "s" }
    )?;
    let mut table = Table::new(["TIME", "POLICY", "PHASE", "EVENT"]);
    // Per policy: its phase (actions records do not carry it) and the last
    // event shown, so that a reason is shown when it changes, not at every
    // evaluation (the engine logs it again after each "not due").
    let mut last: HashMap<&str, (&str, String)> = HashMap::new();
    for record in &r.records {
        let Some((policy, phase, event)) = row(record) else {
            continue;
        };
        let entry = last.entry(policy).or_insert(("", String::new()));
        if let Some(phase) = phase.map(Phase::as_str).filter(|p| !p.is_empty()) {
            entry.0 = phase;
        }
        if event.starts_with("not fired") && entry.1 == event {
            continue;
        }
        entry.1.clone_from(&event);
        table.push(vec![
            format!("{:.3}", record.t()),
            policy.to_string(),
            entry.0.to_string(),
            event,
        ]);
    }
    table.write(out, width)?;
    writeln!(out)?;
    for record in &r.records {
        let Record::PolicySummary(s) = record else {
            continue;
        };
        let line = match &s.disabled {
            Some(why) => format!("{}: disabled ({why})", s.policy),
            None => format!(
                "{}: fired {}, wrote {}, refused {}",
                s.policy,
                times(s.firings),
                times(s.writes),
                times(s.refused),
            ),
        };
        writeln!(out, "{}", table::one_line(&line))?;
    }
    let end = r.records.iter().find_map(|x| match x {
        Record::ReplayEnd(e) => Some(e),
        _ => None,
    });
    if let Some(cvars) = end.map(|e| &e.cvars).filter(|c| !c.is_empty()) {
        let values: Vec<String> = cvars
            .iter()
            .map(|(k, v)| format!("{k} = {}", value(Some(v))))
            .collect();
        writeln!(out, "final values: {}", values.join(", "))?;
    }
    Ok(())
}

fn times(n: u64) -> String {
    format!("{n} time{}", if n == 1 { "" } else { "s" })
}

#[cfg(test)]
mod tests {
    use super::*;
    use vocab::record::{Decision, Write as WriteRecord};

    fn write(
        index: Option<u32>,
        old: Option<Value>,
        requested: Option<Value>,
        outcome: Outcome,
        error: Option<&str>,
    ) -> Record<'static> {
        Record::Write(WriteRecord {
            t: 0.0,
            policy: "p".into(),
            phase: Phase::Periodic,
            attempt: CvarWrite {
                cvar: "C".into(),
                index,
                old,
                requested,
                readback: None,
                outcome,
                error: error.map(str::to_string),
            },
            source: "1".into(),
            dry_run: outcome == Outcome::DryRun,
        })
    }

    fn decision(fired: bool, branch: Option<Branch>, reason: Option<&str>) -> Record<'static> {
        Record::Decision(Decision {
            t: 0.0,
            policy: "p".into(),
            phase: Phase::Periodic,
            fired,
            reason: reason.map(str::to_string),
            branch,
            write: fired.then_some(true),
            condition: fired.then(|| vec![0.0]),
            inputs: None,
        })
    }

    fn event(r: &Record<'_>) -> Option<String> {
        row(r).map(|(_, _, e)| e)
    }

    #[test]
    fn events_read_like_sentences() {
        let int = |v: &[i64]| Some(Value::Int(v.to_vec()));
        let w = write(None, int(&[0]), int(&[1]), Outcome::Written, None);
        assert_eq!(event(&w).unwrap(), "  set C: 0 -> 1");
        let w = write(Some(2), None, int(&[1, 2]), Outcome::DryRun, None);
        assert_eq!(
            event(&w).unwrap(),
            "  would set C[2]: ? -> [1, 2] (dry run)"
        );
        let why = "`C` has scope ALL_EQ: ...";
        let w = write(None, int(&[0]), None, Outcome::Refused, Some(why));
        assert_eq!(
            event(&w).unwrap(),
            "  refused C (value 1): `C` has scope ALL_EQ: ..."
        );
        let d = decision(true, Some(Branch::Otherwise), None);
        assert_eq!(
            event(&d).unwrap(),
            "fired otherwise (condition does not hold)"
        );
        let d = decision(false, None, Some("cooldown: 7000 ms left"));
        assert_eq!(event(&d).unwrap(), "not fired: cooldown: 7000 ms left");
        let summary = Record::PolicySummary(vocab::record::PolicySummary {
            t: 0.0,
            policy: "p".into(),
            writes: 0,
            refused: 0,
            firings: 0,
            disabled: None,
        });
        assert!(event(&summary).is_none());
    }

    /// A double that is not finite is shown as the JSON records have it.
    #[test]
    fn values_not_finite_are_shown_as_in_json() {
        assert_eq!(value(Some(&Value::Double(vec![f64::NAN]))), "[null]");
        assert_eq!(value(Some(&Value::Double(vec![1.5, 2.0]))), "[1.5, 2]");
        assert_eq!(value(Some(&Value::Str("x".into()))), "\"x\"");
        assert_eq!(value(None), "?");
    }
}
