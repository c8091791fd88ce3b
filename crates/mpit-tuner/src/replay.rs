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

const AFTER_HELP: &str = "\
Inputs: per-rank logs of a run (rank-NNNNN.jsonl), run directories (every \
rank-*.jsonl inside), and traces: JSON Lines written by hand, one sample per \
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
plus a `replay` record opening each rank and a `close` record with the \
final values of the CVARs written.";

/// Options of `mpit-tuner replay`.
#[derive(Debug, Args)]
#[command(after_long_help = AFTER_HELP)]
pub struct ReplayArgs {
    /// The policy file (TOML) to try.
    #[arg(long, value_name = "FILE")]
    policy: PathBuf,

    /// Per-rank logs (rank-*.jsonl), run directories, or trace files.
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
        let mut record = record.clone();
        if let Json::Object(m) = &mut record {
            m.insert("rank".into(), r.rank.into());
        }
        serde_json::to_writer(&mut *out, &record).context("writing JSON")?;
        writeln!(out)?;
    }
    Ok(())
}

fn text<'a>(record: &'a Json, key: &str) -> &'a str {
    record.get(key).and_then(Json::as_str).unwrap_or("")
}

/// A logged value (`[1]`, `[60, 5, 2, 1]`, `"text"`) as the tables show
/// values: `1`, `[60, 5, 2, 1]`, `"text"`; `?` when unknown.
fn value(v: Option<&Json>) -> String {
    match v.filter(|v| !v.is_null()) {
        None => "?".into(),
        Some(v) => serde_json::from_value::<Value>(v.clone())
            .map_or_else(|_| v.to_string(), |v| v.to_string()),
    }
}

/// The CVAR a write record names, with its element.
fn target(w: &Json) -> String {
    match w.get("index").and_then(Json::as_u64) {
        Some(i) => format!("{}[{i}]", text(w, "cvar")),
        None => text(w, "cvar").to_string(),
    }
}

/// The EVENT cell of a record, or `None` for records not shown in the
/// table.
fn event(r: &Json) -> Option<String> {
    Some(match text(r, "type") {
        "decision" if r["fired"] == true => {
            let branch = text(r, "branch");
            let why = match (r.get("condition").filter(|c| !c.is_null()), branch) {
                (None, _) => String::new(),
                (Some(_), "then") => " (condition holds)".into(),
                (Some(_), _) => " (condition does not hold)".into(),
            };
            format!("fired {branch}{why}")
        }
        "decision" => format!("not fired: {}", text(r, "reason")),
        "write" => {
            let (old, new) = (value(r.get("old")), value(r.get("requested")));
            match text(r, "outcome") {
                "written" | "written_differs" | "written_unverified" => {
                    format!("  set {}: {old} -> {new}", target(r))
                }
                "dry_run" => format!("  would set {}: {old} -> {new} (dry run)", target(r)),
                outcome => format!(
                    "  {} {} ({}): {}",
                    outcome.replace('_', " "),
                    target(r),
                    if new == "?" {
                        format!("value {}", text(r, "source"))
                    } else {
                        format!("{old} -> {new}")
                    },
                    text(r, "error")
                ),
            }
        }
        "setenv" => {
            let dry = if r["dry_run"] == true {
                " (dry run)"
            } else {
                ""
            };
            match r.get("error").and_then(Json::as_str) {
                Some(e) => format!(
                    "  refused setenv {}={}: {e}",
                    text(r, "name"),
                    text(r, "value")
                ),
                None => format!("  setenv {}={}{dry}", text(r, "name"), text(r, "value")),
            }
        }
        "note" => format!("  note: {}", text(r, "text")),
        "recommendation" => format!("  recommend: {}", text(r, "text")),
        "policy_disabled" => format!("disabled: {}", text(r, "reason")),
        _ => return None,
    })
}

fn write_table(out: &mut impl Write, r: &RankReplay, width: Option<usize>) -> io::Result<()> {
    let head = &r.records[0];
    let samples = head["samples"].as_u64().unwrap_or(0);
    let span = if samples > 0 {
        format!(
            ", {:.3} s to {:.3} s",
            head["t"].as_f64().unwrap_or(0.0),
            head["end"].as_f64().unwrap_or(0.0)
        )
    } else {
        String::new()
    };
    let library = head
        .get("library")
        .and_then(Json::as_str)
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
        let Some(event) = event(record) else {
            continue;
        };
        let policy = text(record, "policy");
        let entry = last.entry(policy).or_insert(("", String::new()));
        if !text(record, "phase").is_empty() {
            entry.0 = text(record, "phase");
        }
        if event.starts_with("not fired") && entry.1 == event {
            continue;
        }
        entry.1.clone_from(&event);
        table.push(vec![
            format!("{:.3}", record["t"].as_f64().unwrap_or(0.0)),
            policy.to_string(),
            entry.0.to_string(),
            event,
        ]);
    }
    table.write(out, width)?;
    writeln!(out)?;
    for s in r.records.iter().filter(|x| x["type"] == "policy_summary") {
        let line = match s.get("disabled").and_then(Json::as_str) {
            Some(why) => format!("{}: disabled ({why})", text(s, "policy")),
            None => format!(
                "{}: fired {}, wrote {}, refused {}",
                text(s, "policy"),
                times(s["firings"].as_u64().unwrap_or(0)),
                times(s["writes"].as_u64().unwrap_or(0)),
                times(s["refused"].as_u64().unwrap_or(0)),
            ),
        };
        writeln!(out, "{}", table::one_line(&line))?;
    }
    if let Some(close) = r.records.iter().find(|x| x["type"] == "replay_end") {
        if let Some(cvars) = close["cvars"].as_object().filter(|c| !c.is_empty()) {
            let values: Vec<String> = cvars
                .iter()
                .map(|(k, v)| format!("{k} = {}", value(Some(v))))
                .collect();
            writeln!(out, "final values: {}", values.join(", "))?;
        }
    }
    Ok(())
}

fn times(n: u64) -> String {
    format!("{n} time{}", if n == 1 { "" } else { "s" })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn events_read_like_sentences() {
        let w = json!({"type": "write", "cvar": "C", "old": [0], "requested": [1], "outcome": "written"});
        assert_eq!(event(&w).unwrap(), "  set C: 0 -> 1");
        let w = json!({"type": "write", "cvar": "C", "index": 2, "old": null, "requested": [1, 2], "outcome": "dry_run"});
        assert_eq!(
            event(&w).unwrap(),
            "  would set C[2]: ? -> [1, 2] (dry run)"
        );
        let w = json!({"type": "write", "cvar": "C", "old": [0], "requested": null, "outcome": "refused",
                       "source": "1", "error": "`C` has scope ALL_EQ: ..."});
        assert_eq!(
            event(&w).unwrap(),
            "  refused C (value 1): `C` has scope ALL_EQ: ..."
        );
        let d =
            json!({"type": "decision", "fired": true, "branch": "otherwise", "condition": [0.0]});
        assert_eq!(
            event(&d).unwrap(),
            "fired otherwise (condition does not hold)"
        );
        let d = json!({"type": "decision", "fired": false, "reason": "cooldown: 7000 ms left"});
        assert_eq!(event(&d).unwrap(), "not fired: cooldown: 7000 ms left");
        assert!(event(&json!({"type": "policy_summary"})).is_none());
    }
}
