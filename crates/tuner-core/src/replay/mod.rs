//! Offline replay: runs a policy set against recorded per-rank logs, or a
//! small hand-written trace, and returns the records a live run would have
//! written: decisions, writes (with old, requested and read-back values),
//! refusals, notes, recommendations. This is what `mpit-tuner replay` prints:
//! an engineer tries a policy on last night's run before deploying it.
//!
//! In the flow `MPI_T -> sampler -> policies -> actuator -> log`, replay
//! swaps the first and the fourth steps: samples come from a file, and the
//! actuator is [`ReplayBackend`], which applies the same scope and type rules
//! as the live one ([`actuator::scope_refusal`], the same value conversion)
//! to a simulated set of CVAR values. The policy engine ([`Engine`]) is the
//! live one, so cooldown, hysteresis, `every` and `max_writes` behave exactly
//! as in a job.
//!
//! # Inputs
//!
//! **Per-rank logs** (`rank-NNNNN.jsonl`, format version
//! [`log::FORMAT_VERSION`]): the header gives rank and size; every `sample`
//! record gives PVAR values by name (unbound variables, and bound ones for
//! the object `world`); the header's `variables` give their classes. A log
//! holds no CVAR values of its own, so CVARs start unknown, except those
//! the recorded run wrote: their value before its first write (`old`) is
//! the starting value. A `cvars` object in the header, if a log has one,
//! gives starting values too.
//!
//! **Traces** (JSON Lines, written by hand or by a script; blank lines and
//! lines starting with `#` are ignored). A sample line:
//!
//! ```text
//! {"t": 0.0, "rank": 0, "pvars": {"mv2_vbuf_allocated_array": [64, 32, 32, 16]}, "cvars": {"MPIR_CVAR_VBUF_POOL_CONTROL": 0}}
//! ```
//!
//! `t` (seconds) is required; `rank` defaults to 0; `size` may be given on
//! any line (default: the highest rank plus one). A sample need only give
//! the values that changed: the others keep their last value. Its `cvars`
//! set the simulated CVAR values at that moment (starting values, or a
//! change made outside the policies). Values are numbers, arrays of numbers
//! or, for string CVARs, text. An optional catalogue line declares variables:
//!
//! ```text
//! {"catalogue": {"cvars": {"MPIR_CVAR_VBUF_POOL_REDUCED_VALUE": {"scope": "local", "count": 4, "type": "int"}},
//!                "pvars": {"mv2_vbuf_max_use_array": {"class": "highwatermark", "count": 4}}}}
//! ```
//!
//! (on one line). CVAR `scope` is an MPI_T scope (`local`, `all_eq`, ...;
//! default `local`), `type` one of `int`, `unsigned`, `double`, `string`,
//! `enum` (with `items`: a list of names, valued 0, 1, ..., or an object of
//! names and values) or an MPI datatype name; PVAR `class` an MPI_T class
//! (default `generic`). A catalogue line in a file without samples applies
//! to every rank of the replay, so one catalogue file can go with logs.
//!
//! Undeclared variables: a PVAR exists if some sample gives it; a CVAR
//! exists if its value is known or a policy writes it, with scope LOCAL.
//! A policy naming a variable that does not exist is disabled, as the live
//! runtime disables it.
//!
//! # Phases
//!
//! `pre-init` and `init` policies run once at the time of the first sample
//! and, as in a live run, see CVARs but no PVAR values (nothing has been
//! sampled yet at that point); `periodic` policies are evaluated at every
//! sample (their own `every` decides when they are due); `finalize`
//! policies run at the end (the log's `close` record, else the last
//! sample).
//!
//! ```
//! use tuner_core::replay::{parse_trace, replay};
//! let set = policies::PolicySet::parse(r#"
//! [[policy]]
//! name = "poll"
//! when = "queue > 10"
//! then = [ { set = "POLL_FREQ", value = 8 } ]
//! "#, "p.toml").unwrap();
//! let traces = parse_trace(r#"{"t": 0, "pvars": {"queue": 20}, "cvars": {"POLL_FREQ": 32}}"#, "t.jsonl").unwrap();
//! let out = replay(&set, &traces);
//! let write = out[0].records.iter().find_map(|r| match r {
//!     vocab::Record::Write(w) => Some(&w.attempt),
//!     _ => None,
//! }).unwrap();
//! assert_eq!((&write.old, &write.readback), (&Some(vocab::Value::Int(vec![32])), &Some(vocab::Value::Int(vec![8]))));
//! ```

use crate::decide::actuator::{self, CvarWrite, Outcome, Request, When};
use crate::decide::{self as engine, convert_class, convert_scope, Backend, Engine};
use crate::run::log;
use mpit::meta::{Binding, Datatype, PvarClass, Scope, Verbosity};
use mpit::value::Value;
use mpit::{CvarInfo as MpiCvarInfo, EnumItem, Enumeration};
use policies::{
    ActionView, Branch, CvarInfo, Phase, PolicySet, PvarInfo, SetValue, Severity, VariableLookup,
};
use serde::Deserialize;
use serde_json::Value as Json;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use vocab::read::DamageKind;
use vocab::record::{self, Record};

mod backend;
mod read;
mod trace;

use read::*;
use trace::*;

pub use backend::ReplayBackend;
pub use read::{parse_log, read_paths};
pub use trace::parse_trace;

/// Why inputs could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReplayError {
    /// A file or directory could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// A line is not what the format allows.
    #[error("{source_name}:{line}: {message}")]
    Format {
        /// The file, as given.
        source_name: String,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// A file or directory holds nothing to replay.
    #[error("{source_name}: {message}")]
    Empty {
        /// The file or directory, as given.
        source_name: String,
        /// What is missing.
        message: String,
    },
}

/// What the inputs declare (or show) about a control variable.
#[derive(Debug, Clone, PartialEq)]
pub struct CvarDecl {
    /// Its scope (`Local` unless declared).
    pub scope: Scope,
    /// Number of elements, if declared.
    pub count: Option<usize>,
    /// Element type.
    pub datatype: Datatype,
    /// Enumeration items, for enum CVARs.
    pub enumeration: Option<Enumeration>,
}

/// What the inputs declare (or show) about a performance variable.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PvarDecl {
    /// Its class.
    pub class: PvarClass,
    /// Number of elements, if known.
    pub count: Option<usize>,
}

/// Variables declared by a trace's catalogue line or seen in a log header.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Declarations {
    /// Control variables by name.
    pub cvars: BTreeMap<String, CvarDecl>,
    /// Performance variables by name.
    pub pvars: BTreeMap<String, PvarDecl>,
}

impl Declarations {
    /// Adds what `other` declares that `self` does not.
    fn fill_from(&mut self, other: &Declarations) {
        for (k, v) in &other.cvars {
            self.cvars.entry(k.clone()).or_insert_with(|| v.clone());
        }
        for (k, v) in &other.pvars {
            self.pvars.entry(k.clone()).or_insert(*v);
        }
    }

    fn is_empty(&self) -> bool {
        self.cvars.is_empty() && self.pvars.is_empty()
    }
}

/// One moment of a rank's recorded run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sample {
    /// Seconds since the tuner started.
    pub t: f64,
    /// PVAR values that this sample gives, element-wise.
    pub pvars: Vec<(String, Vec<f64>)>,
    /// CVAR values set at this moment (outside the policies).
    pub cvars: Vec<(String, Value)>,
}

/// Everything recorded about one rank.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RankTrace {
    /// The file it comes from.
    pub source: String,
    /// Rank in `MPI_COMM_WORLD`.
    pub rank: u32,
    /// Size of `MPI_COMM_WORLD`.
    pub size: u32,
    /// The MPI library family of a log (`mpich`, `openmpi`), if known.
    pub library: Option<record::LibraryFamily>,
    /// The samples, in time order.
    pub samples: Vec<Sample>,
    /// CVAR values before the first sample.
    pub initial_cvars: BTreeMap<String, Value>,
    /// Declared or observed variables.
    pub declared: Declarations,
    /// When the recorded run ended (a log's `close` record), if known.
    pub end: Option<f64>,
}

/// The replay of one rank: the records a live run would have logged.
#[derive(Debug, Clone, PartialEq)]
pub struct RankReplay {
    /// Rank in `MPI_COMM_WORLD`.
    pub rank: u32,
    /// Size of `MPI_COMM_WORLD`.
    pub size: u32,
    /// The input file.
    pub source: String,
    /// The records, in order: a `replay` record first, then
    /// `policy_disabled`, `decision`, `write`, `setenv`, `note`,
    /// `recommendation` records as in a live log, `policy_summary` per
    /// policy, and a closing `replay_end` record with the simulated values
    /// of the CVARs written and the environment set.
    pub records: Vec<Record<'static>>,
}

/// Every phase, for binding.
const ALL_PHASES: &[Phase] = &[
    Phase::PreInit,
    Phase::Init,
    Phase::Periodic,
    Phase::Finalize,
];

/// Replays `set` on each rank of `traces`, independently, from the
/// policies' initial state.
pub fn replay(set: &PolicySet, traces: &[RankTrace]) -> Vec<RankReplay> {
    traces.iter().map(|t| replay_rank(set, t)).collect()
}

fn replay_rank(set: &PolicySet, trace: &RankTrace) -> RankReplay {
    let mut records = Vec::new();
    let t0 = trace.samples.first().map_or(0.0, |s| s.t);
    let last = trace.samples.last().map_or(t0, |s| s.t);
    let end = trace.end.map_or(last, |e| e.max(last));
    let (rank, size) = (trace.rank, trace.size.max(trace.rank + 1));
    let mut push = |r: Record<'static>| records.push(r);
    push(Record::Replay(record::ReplayStart {
        t: t0,
        rank,
        size,
        source: trace.source.clone(),
        library: trace.library.clone(),
        policies: Some(set.file_name().to_string()),
        samples: trace.samples.len(),
        end,
    }));

    let mut engine = Engine::new(set.clone());
    let mut backend = ReplayBackend::new(trace, set);
    let diagnostics = set.check(&backend.catalogue);
    let mut disabled: Vec<Option<String>> = vec![None; set.policies().len()];
    for (i, reason, missing) in engine.bind(&backend.catalogue, ALL_PHASES) {
        let reason = if missing {
            missing_reason(set, &diagnostics, i).unwrap_or(reason)
        } else {
            reason
        };
        push(Record::PolicyDisabled(record::PolicyDisabled {
            t: t0,
            policy: set.policies()[i].name().to_string(),
            reason: reason.clone(),
        }));
        disabled[i] = Some(reason);
    }

    let mut out = |r| push(r);
    let env = engine::env(rank, size, t0);
    engine.run(Phase::PreInit, &mut backend, &env, &mut out);
    engine.run(Phase::Init, &mut backend, &env, &mut out);
    for sample in &trace.samples {
        backend.advance(sample);
        let env = engine::env(rank, size, sample.t);
        engine.run(Phase::Periodic, &mut backend, &env, &mut out);
    }
    backend.set_time(end);
    engine.run(
        Phase::Finalize,
        &mut backend,
        &engine::env(rank, size, end),
        &mut out,
    );

    for (i, engine::WriteCounts { writes, refused }) in engine.counts.iter().enumerate() {
        let p = &engine.policies()[i];
        push(Record::PolicySummary(record::PolicySummary {
            t: end,
            policy: p.name().to_string(),
            writes: *writes,
            refused: *refused,
            firings: p.state().firings,
            disabled: disabled[i].clone(),
        }));
    }
    let written: BTreeMap<String, Value> = backend
        .catalogue
        .written
        .keys()
        .filter_map(|name| Some((name.clone(), backend.cvars.get(name)?.clone())))
        .collect();
    push(Record::ReplayEnd(record::ReplayEnd {
        t: end,
        cvars: written,
        environment: backend.environment.clone(),
    }));
    RankReplay {
        rank,
        size,
        source: trace.source.clone(),
        records,
    }
}

/// Why policy `i` is disabled when it names a variable the replayed data
/// lacks, with the closest names the data has.
fn missing_reason(
    set: &PolicySet,
    diagnostics: &[policies::Diagnostic],
    i: usize,
) -> Option<String> {
    let d = diagnostics
        .iter()
        .find(|d| d.policy == i && d.severity == Severity::Missing)?;
    let name = &set.variable(d.slot?)?.name;
    let closest = d
        .message
        .find("; closest known names")
        .map_or("", |at| &d.message[at..]);
    Some(format!(
        "`{name}` is not in the replayed data (not sampled in that run, or not exported by its MPI library){closest}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A header as the runtime writes it.
    fn header(rank: i32, size: i32, variables: Vec<record::SampledVariable>) -> Json {
        serde_json::to_value(Record::Header(record::Header {
            version: log::FORMAT_VERSION,
            rank,
            size,
            host: "node".into(),
            pid: 1,
            library: record::LibraryFamily::OpenMpi,
            library_version: String::new(),
            library_file: String::new(),
            mpi_t_thread_level: "MULTIPLE".into(),
            concurrent_callers: false,
            start_unix: 0.0,
            config: record::RunConfig {
                enabled: true,
                dir: None,
                interval: 1.0,
                pvars: Vec::new(),
                policy: None,
                quiet: true,
                refresh: None,
                flush: 1.0,
                collectives: None,
            },
            catalogue: record::CatalogueCounts::default(),
            variables,
            layout: record::LogLayout::Rank,
        }))
        .unwrap()
    }

    /// The thesis' policy (docs/policies.md#overview), with extra keys.
    fn vbuf_policy(extra: &str) -> PolicySet {
        let text = format!(
            r#"
[[policy]]
name  = "free-unused-vbufs"
every = "1s"
when  = "any(mv2_vbuf_allocated_array - mv2_vbuf_max_use_array > 10)"
then  = [ {{ set = "MPIR_CVAR_VBUF_POOL_CONTROL", value = 1 }},
          {{ set = "MPIR_CVAR_VBUF_POOL_REDUCED_VALUE", value = "mv2_vbuf_max_use_array" }} ]
otherwise = [ {{ set = "MPIR_CVAR_VBUF_POOL_CONTROL", value = 0 }} ]
{extra}
"#
        );
        PolicySet::parse(&text, "vbuf.toml").unwrap_or_else(|e| panic!("{e:#}"))
    }

    const CATALOGUE: &str = r#"{"catalogue": {"cvars": {"MPIR_CVAR_VBUF_POOL_CONTROL": {"scope": "local", "count": 1, "type": "int"}, "MPIR_CVAR_VBUF_POOL_REDUCED_VALUE": {"scope": "local", "count": 4, "type": "int"}}, "pvars": {"mv2_vbuf_allocated_array": {"class": "level", "count": 4}, "mv2_vbuf_max_use_array": {"class": "highwatermark", "count": 4}}}}"#;

    /// Four VBUF pools, one in use: one sample per second; `max_use[t]`
    /// gives the max-use array at each second (allocated stays
    /// [64, 32, 32, 16]).
    fn trace(max_use: &[[u32; 4]]) -> Vec<RankTrace> {
        let mut text = format!("{CATALOGUE}\n");
        for (t, m) in max_use.iter().enumerate() {
            let cvars = if t == 0 {
                r#", "cvars": {"MPIR_CVAR_VBUF_POOL_CONTROL": 0, "MPIR_CVAR_VBUF_POOL_REDUCED_VALUE": [64, 32, 32, 16]}"#
            } else {
                ""
            };
            text.push_str(&format!(
                "{{\"t\": {t}, \"pvars\": {{\"mv2_vbuf_allocated_array\": [64, 32, 32, 16], \"mv2_vbuf_max_use_array\": {m:?}}}{cvars}}}\n"
            ));
        }
        parse_trace(&text, "thesis.jsonl").unwrap()
    }

    const WASTEFUL: [u32; 4] = [60, 5, 2, 1];
    const BUSY: [u32; 4] = [60, 30, 28, 14];

    /// The records of a replay that are of one variant of [`Record`]:
    /// `of!(r, Write)`.
    macro_rules! of {
        ($r:expr, $variant:ident) => {
            $r.records.iter().filter_map(|x| match x {
                Record::$variant(v) => Some(v),
                _ => None,
            })
        };
    }

    fn ints(v: &[i64]) -> Value {
        Value::Int(v.to_vec())
    }

    /// (time, CVAR, written value) of every successful write.
    fn writes(r: &RankReplay) -> Vec<(f64, String, Value)> {
        of!(r, Write)
            .map(|w| {
                assert_eq!(w.attempt.outcome, Outcome::Written, "{w:?}");
                let readback = w.attempt.readback.clone().unwrap();
                (w.t, w.attempt.cvar.clone(), readback)
            })
            .collect()
    }

    fn reasons(r: &RankReplay) -> Vec<(f64, String)> {
        of!(r, Decision)
            .filter(|d| !d.fired)
            .map(|d| (d.t, d.reason.clone().unwrap()))
            .collect()
    }

    const CONTROL: &str = "MPIR_CVAR_VBUF_POOL_CONTROL";
    const REDUCED: &str = "MPIR_CVAR_VBUF_POOL_REDUCED_VALUE";

    #[test]
    fn the_thesis_policy_frees_unused_pools_and_stops_when_they_are_used() {
        let mut max_use = vec![WASTEFUL; 3];
        max_use.extend([BUSY; 3]);
        let out = replay(&vbuf_policy(""), &trace(&max_use));
        assert_eq!(out.len(), 1);
        let r = &out[0];
        assert_eq!(
            writes(r),
            vec![
                (0.0, CONTROL.into(), ints(&[1])),
                (0.0, REDUCED.into(), ints(&[60, 5, 2, 1])),
                (3.0, CONTROL.into(), ints(&[0])),
            ]
        );
        // The audit records carry the old values and the decision's inputs.
        let first = &of!(r, Write).next().unwrap().attempt;
        assert_eq!(first.old, Some(ints(&[0])));
        assert_eq!(first.requested, Some(ints(&[1])));
        let reduced = &of!(r, Write).nth(1).unwrap().attempt;
        assert_eq!(reduced.old, Some(ints(&[64, 32, 32, 16])));
        let decision = of!(r, Decision).find(|d| d.fired).unwrap();
        assert_eq!(decision.branch, Some(record::Branch::Then));
        assert_eq!(
            decision.inputs.as_ref().unwrap()["mv2_vbuf_max_use_array"],
            Some(vec![60.0, 5.0, 2.0, 1.0])
        );
        // In between, nothing new to write.
        let steady = "already in effect".to_string();
        assert_eq!(reasons(r), vec![(1.0, steady.clone()), (4.0, steady)]);
        let close = of!(r, ReplayEnd).next().unwrap();
        assert_eq!(close.cvars[CONTROL], ints(&[0]));
        assert_eq!(close.cvars[REDUCED], ints(&[60, 5, 2, 1]));
        let summary = of!(r, PolicySummary).next().unwrap();
        assert_eq!((summary.writes, summary.firings), (3, 2));
    }

    #[test]
    fn reduced_values_follow_max_use_while_pools_stay_wasteful() {
        let out = replay(
            &vbuf_policy(""),
            &trace(&[WASTEFUL, WASTEFUL, [60, 9, 2, 1]]),
        );
        assert_eq!(
            writes(&out[0])[2..],
            [
                (2.0, CONTROL.to_string(), ints(&[1])),
                (2.0, REDUCED.to_string(), ints(&[60, 9, 2, 1]))
            ]
        );
    }

    #[test]
    fn no_waste_means_pool_control_off_from_the_start() {
        let out = replay(&vbuf_policy(""), &trace(&[BUSY, BUSY]));
        assert_eq!(writes(&out[0]), vec![(0.0, CONTROL.into(), ints(&[0]))]);
    }

    #[test]
    fn hysteresis_needs_consecutive_evaluations() {
        // Waste from 0 to 4 s, no waste from 5 to 9 s, then a condition that
        // flips every second from 10 to 19 s.
        let mut max_use = vec![WASTEFUL; 5];
        max_use.extend([BUSY; 5]);
        for i in 0..10 {
            max_use.push(if i % 2 == 0 { WASTEFUL } else { BUSY });
        }
        let out = replay(&vbuf_policy("hysteresis = 3"), &trace(&max_use));
        let r = &out[0];
        assert_eq!(
            writes(r),
            vec![
                (2.0, CONTROL.into(), ints(&[1])),
                (2.0, REDUCED.into(), ints(&[60, 5, 2, 1])),
                (7.0, CONTROL.into(), ints(&[0])),
            ],
            "{:#?}",
            r.records
        );
        let pending: Vec<_> = reasons(r)
            .into_iter()
            .filter(|(_, why)| why.starts_with("hysteresis"))
            .collect();
        assert_eq!(
            pending[..2],
            [
                (
                    0.0,
                    "hysteresis: 1 of 3 consecutive evaluations".to_string()
                ),
                (
                    5.0,
                    "hysteresis: 1 of 3 consecutive evaluations".to_string()
                ),
            ]
        );
        // Flapping never completes a streak: no write after 7 s.
        assert!(writes(r).iter().all(|w| w.0 < 10.0));
    }

    #[test]
    fn cooldown_delays_the_next_write() {
        // Waste until 2 s, none from 3 s: the switch back waits for the
        // 10 s cooldown after the write at 0 s.
        let mut max_use = vec![WASTEFUL; 3];
        max_use.extend([BUSY; 12]);
        let out = replay(&vbuf_policy("cooldown = \"10s\""), &trace(&max_use));
        let r = &out[0];
        assert_eq!(
            writes(r),
            vec![
                (0.0, CONTROL.into(), ints(&[1])),
                (0.0, REDUCED.into(), ints(&[60, 5, 2, 1])),
                (10.0, CONTROL.into(), ints(&[0])),
            ]
        );
        // The refusal is logged once when it starts, with the time left.
        let cooling: Vec<_> = reasons(r)
            .into_iter()
            .filter(|(_, why)| why.starts_with("cooldown"))
            .collect();
        assert_eq!(cooling, vec![(3.0, "cooldown: 7000 ms left".to_string())]);
    }

    #[test]
    fn every_decides_which_samples_are_evaluated() {
        // Samples every 0.5 s, policy every 1 s: evaluated at 0, 1, 2 s.
        let mut text = format!("{CATALOGUE}\n");
        for i in 0..6 {
            let m = if i < 3 { WASTEFUL } else { BUSY };
            text.push_str(&format!(
                "{{\"t\": {}, \"pvars\": {{\"mv2_vbuf_allocated_array\": [64, 32, 32, 16], \"mv2_vbuf_max_use_array\": {m:?}}}}}\n",
                f64::from(i) * 0.5
            ));
        }
        let traces = parse_trace(&text, "half.jsonl").unwrap();
        let out = replay(&vbuf_policy(""), &traces);
        let times: Vec<f64> = writes(&out[0]).iter().map(|w| w.0).collect();
        // Waste stops at 1.5 s; the next due evaluation is at 2 s.
        assert_eq!(times, vec![0.0, 0.0, 2.0]);
        // CVAR values were unknown: the first write has no old value.
        let first = of!(&out[0], Write).next().unwrap();
        assert!(first.attempt.old.is_none());
    }

    #[test]
    fn a_skip_reason_is_logged_once_even_between_evaluations_not_due() {
        // Samples every 0.5 s, policy every 1 s: the samples in between
        // ("not due") must not make the same reason repeat.
        let mut text = format!("{CATALOGUE}\n");
        for i in 0..12 {
            text.push_str(&format!(
                "{{\"t\": {}, \"pvars\": {{\"mv2_vbuf_allocated_array\": [64, 32, 32, 16], \"mv2_vbuf_max_use_array\": {WASTEFUL:?}}}}}\n",
                f64::from(i) * 0.5
            ));
        }
        let traces = parse_trace(&text, "half.jsonl").unwrap();
        let out = replay(&vbuf_policy(""), &traces);
        // Written at 0 s; from 1 s to 5.5 s the pools stay the same, so the
        // decision is "already in effect", logged once, not every second.
        assert_eq!(
            reasons(&out[0]),
            vec![(1.0, "already in effect".to_string())]
        );
    }

    #[test]
    fn scope_rules_apply_to_declared_cvars() {
        let set = PolicySet::parse(
            r#"
[[policy]]
name = "startup"
phase = "init"
then = [ { set = "ALGO", value = 2 } ]

[[policy]]
name = "switch"
when = "x > 1"
then = [ { set = "LOCAL_ONE", value = 3 } ]
"#,
            "p.toml",
        )
        .unwrap();
        let text = r#"
# ALGO must be equal on all ranks; LOCAL_ONE is per rank.
{"catalogue": {"cvars": {"ALGO": {"scope": "all_eq"}, "LOCAL_ONE": {"scope": "local"}}}, "size": 2}
{"t": 0, "rank": 0, "pvars": {"x": 5}, "cvars": {"ALGO": 0}}
{"t": 0, "rank": 1, "pvars": {"x": 0}}
"#;
        let out = replay(&set, &parse_trace(text, "scopes.jsonl").unwrap());
        assert_eq!(out.len(), 2);
        assert_eq!((out[1].rank, out[1].size), (1, 2));
        // init writes ALL_EQ at the same point on every rank: allowed.
        let w = writes(&out[0]);
        assert_eq!(w[0], (0.0, "ALGO".into(), ints(&[2])));
        assert_eq!(w[1], (0.0, "LOCAL_ONE".into(), ints(&[3])));
        assert_eq!(writes(&out[1]).len(), 1);

        // A periodic write of an ALL_EQ CVAR is disabled at bind time, as in
        // a live run.
        let set = PolicySet::parse(
            "[[policy]]\nname = \"bad\"\nthen = [ { set = \"ALGO\", value = 1 } ]\n",
            "bad.toml",
        )
        .unwrap();
        let out = replay(&set, &parse_trace(text, "scopes.jsonl").unwrap());
        let disabled = of!(&out[0], PolicyDisabled).next().unwrap();
        assert!(disabled.reason.contains("ALL_EQ"), "{disabled:?}");
        assert_eq!(of!(&out[0], Write).count(), 0);
    }

    #[test]
    fn the_backend_refuses_what_the_live_actuator_refuses() {
        let text = r#"{"catalogue": {"cvars": {"RO": {"scope": "readonly"}, "EQ": {"scope": "all_eq"}, "ARR": {"count": 2}, "MODE": {"type": "enum", "items": ["auto", "ring"]}}}}
{"t": 0, "cvars": {"ARR": [1, 2]}}"#;
        let traces = parse_trace(text, "t.jsonl").unwrap();
        let set = PolicySet::parse("", "empty.toml").unwrap();
        let mut b = ReplayBackend::new(&traces[0], &set);
        b.advance(&traces[0].samples[0]);
        let w = b.write("RO", None, &Request::Number(1.0), When::Collective, false);
        assert_eq!(w.outcome, Outcome::Refused);
        let w = b.write("EQ", None, &Request::Number(1.0), When::RankLocal, false);
        assert_eq!(w.outcome, Outcome::Refused);
        assert!(w.error.unwrap().contains("ALL_EQ"));
        assert_eq!(
            b.write("EQ", None, &Request::Number(1.0), When::Collective, false)
                .outcome,
            Outcome::Written
        );
        let w = b.write(
            "ARR",
            Some(1),
            &Request::Number(9.0),
            When::RankLocal,
            false,
        );
        assert_eq!(w.readback, Some(Value::Int(vec![1, 9])));
        let w = b.write(
            "ARR",
            None,
            &Request::Numbers(vec![1.0]),
            When::RankLocal,
            false,
        );
        assert_eq!(w.outcome, Outcome::Invalid);
        let w = b.write(
            "MODE",
            None,
            &Request::Text("ring".into()),
            When::RankLocal,
            false,
        );
        assert_eq!(w.readback, Some(Value::Int(vec![1])));
        let w = b.write("NOPE", None, &Request::Number(1.0), When::RankLocal, false);
        assert_eq!(w.outcome, Outcome::Missing);
        let w = b.write("ARR", None, &Request::Number(5.0), When::RankLocal, true);
        assert_eq!(
            (w.outcome, w.readback),
            (Outcome::DryRun, Some(Value::Int(vec![1, 9])))
        );
        assert_eq!(b.cvar("ARR"), Some(vec![1.0, 9.0]));
        assert!(b.setenv("A=B", "x", false).is_err());
        b.setenv("UCX_TLS", "shm", false).unwrap();
        assert_eq!(b.environment()["UCX_TLS"], "shm");
    }

    #[test]
    fn policies_over_missing_variables_are_disabled_with_the_closest_names() {
        let set = PolicySet::parse(
            "[[policy]]\nname = \"typo\"\nwhen = \"mv2_vbuf_alocated_array > 0\"\nthen = [ { note = \"x\" } ]\n",
            "typo.toml",
        )
        .unwrap();
        let out = replay(&set, &trace(&[WASTEFUL]));
        let reason = &of!(&out[0], PolicyDisabled).next().unwrap().reason;
        assert!(
            reason.contains("`mv2_vbuf_alocated_array` is not in the replayed data")
                && reason.contains("closest known names: mv2_vbuf_allocated_array"),
            "{reason}"
        );
    }

    #[test]
    fn phases_run_in_order_and_init_sees_no_pvars() {
        let set = PolicySet::parse(
            r#"
[[policy]]
name = "pre"
phase = "pre-init"
then = [ { setenv = "UCX_RNDV_THRESH", value = "64K" } ]
[[policy]]
name = "init-reads-pvar"
phase = "init"
when = "q > 0"
then = [ { note = "never: no samples at init" } ]
[[policy]]
name = "end"
phase = "finalize"
when = "q > 0"
then = [ { recommend = "queue was busy" } ]
"#,
            "phases.toml",
        )
        .unwrap();
        let text = "{\"t\": 1, \"pvars\": {\"q\": 3}}\n{\"t\": 2, \"pvars\": {\"q\": 4}}\n";
        let out = replay(&set, &parse_trace(text, "t.jsonl").unwrap());
        let r = &out[0];
        let kinds: Vec<&str> = r.records.iter().map(Record::kind).collect();
        assert_eq!(kinds[0], "replay");
        let setenv = of!(r, Setenv).next().unwrap();
        assert_eq!((setenv.t, setenv.error.clone()), (1.0, None));
        assert!(reasons(r)
            .iter()
            .any(|(t, why)| *t == 1.0 && why.starts_with("no value")));
        let rec = of!(r, Recommendation).next().unwrap();
        assert_eq!(rec.t, 2.0);
        let close = of!(r, ReplayEnd).next().unwrap();
        assert_eq!(close.environment["UCX_RNDV_THRESH"], "64K");
    }

    #[test]
    fn logs_are_read_as_the_runtime_wrote_them() {
        let log = [
            header(
                1,
                2,
                vec![record::SampledVariable {
                    name: "pml_ob1_unexpected_msgq_length".into(),
                    class: PvarClass::Size,
                    datatype: Datatype::UnsignedLong,
                    count: None,
                    binding: Binding::Comm,
                    continuous: true,
                }],
            ),
            json!({"type": "write", "t": 0.0, "policy": "p", "phase": "init", "source": "16",
                   "dry_run": false, "cvar": "MPIR_CVAR_REQUEST_POLL_FREQ", "old": [8],
                   "requested": [16], "readback": [16], "outcome": "written"}),
            json!({"type": "sample", "t": 0.1, "seq": 1, "vars": [
                {"name": "pml_ob1_unexpected_msgq_length", "object": "world", "class": "SIZE", "value": [3.0, 70.0]},
                {"name": "pml_ob1_unexpected_msgq_length", "object": "comm2", "class": "SIZE", "value": [500.0]},
                {"name": "mpool_hugepage_bytes_allocated", "class": "SIZE", "value": [null]}]}),
            json!({"type": "close", "t": 0.2, "reason": "finalize", "samples": 1,
                   "objects_untracked": 0, "objects_short_lived": 0}),
        ];
        let text: String = log.iter().map(|r| format!("{r}\n")).collect();
        let t = parse_log(&text, "rank-00001.jsonl").unwrap();
        assert_eq!((t.rank, t.size, t.end), (1, 2, Some(0.2)));
        assert_eq!(
            t.samples[0].pvars[0],
            ("pml_ob1_unexpected_msgq_length".into(), vec![3.0, 70.0])
        );
        assert_eq!(t.samples[0].pvars.len(), 2);
        assert!(t.samples[0].pvars[1].1[0].is_nan());
        assert_eq!(
            t.initial_cvars["MPIR_CVAR_REQUEST_POLL_FREQ"],
            Value::Int(vec![8])
        );
        assert_eq!(
            t.declared.pvars["pml_ob1_unexpected_msgq_length"].class,
            PvarClass::Size
        );

        let newer = text.replace("\"version\":1", "\"version\":2");
        let err = parse_log(&newer, "rank-00001.jsonl")
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("rank-00001.jsonl:1: log format version 2"),
            "{err}"
        );
    }

    #[test]
    fn trace_errors_name_the_line() {
        let err = |text: &str| parse_trace(text, "t.jsonl").unwrap_err().to_string();
        assert!(err("{\"t\": 0}\n{\"tt\": 1}")
            .starts_with("t.jsonl:2: not a trace line: unknown field `tt`"));
        assert!(err("{\"rank\": 0}").contains("needs a time `t`"));
        assert!(
            err("{\"catalogue\": {\"cvars\": {\"X\": {\"scope\": \"sometimes\"}}}}").contains(
                "CVAR `X`: unknown scope \"sometimes\"; expected one of constant, readonly, local"
            )
        );
        assert!(
            err("{\"t\": 0, \"pvars\": {\"q\": \"high\"}}").contains("PVAR `q`: expected numbers")
        );
        assert!(err("# only a comment\n").contains("no samples"));
    }

    #[test]
    fn catalogue_files_apply_to_every_rank_of_the_replay() {
        let dir = std::env::temp_dir().join(format!("mpit-replay-unit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let cat = dir.join("catalogue.jsonl");
        std::fs::write(
            &cat,
            r#"{"catalogue": {"cvars": {"EQ": {"scope": "all_eq"}}}}"#,
        )
        .unwrap();
        let run = dir.join("run");
        std::fs::create_dir_all(&run).unwrap();
        for rank in [1, 0] {
            let header = header(rank, 2, Vec::new());
            let sample = json!({"type": "sample", "t": 0.5, "seq": 1, "vars": []});
            std::fs::write(
                run.join(log::rank_file_name(rank)),
                format!("{header}\n{sample}\n"),
            )
            .unwrap();
        }
        std::fs::write(run.join("summary.json"), "{}").unwrap();
        let traces = read_paths(&[cat.clone(), run.clone()]).unwrap();
        assert_eq!(
            traces.iter().map(|t| t.rank).collect::<Vec<_>>(),
            vec![0, 1]
        );
        assert!(traces
            .iter()
            .all(|t| t.declared.cvars["EQ"].scope == Scope::AllEq));
        let err = read_paths(&[dir.join("nothing-here")])
            .unwrap_err()
            .to_string();
        assert!(err.contains("cannot read"), "{err}");
        let err = read_paths(&[cat]).unwrap_err().to_string();
        assert!(err.contains("no samples to replay"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A node's log replays as one trace a rank, each with its own
    /// samples, from a run directory or named alone.
    #[test]
    fn node_logs_replay_rank_by_rank() {
        let dir = std::env::temp_dir().join(format!("mpit-replay-node-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let tagged = |rank: u32, record: &Json| {
            let text = record.to_string();
            format!("{}{}", vocab::record::rank_tag(rank), &text[1..])
        };
        let mut text = String::new();
        for (rank, t) in [(1, 0.0), (0, 0.0), (1, 0.5), (0, 0.5), (1, 1.0)] {
            let record = if t == 0.0 {
                header(rank as i32, 2, Vec::new())
            } else {
                json!({"type": "sample", "t": t, "seq": 1, "vars": []})
            };
            text.push('\n');
            text.push_str(&tagged(rank, &record));
            text.push('\n');
        }
        let node = dir.join(log::node_file_name("n1"));
        std::fs::write(&node, text).unwrap();
        for paths in [vec![dir.clone()], vec![node.clone()]] {
            let traces = read_paths(&paths).unwrap();
            let got: Vec<(u32, usize)> = traces.iter().map(|t| (t.rank, t.samples.len())).collect();
            assert_eq!(got, [(0, 1), (1, 2)], "{paths:?}");
            assert!(traces[1].source.ends_with("node-n1.jsonl (rank 1)"));
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
