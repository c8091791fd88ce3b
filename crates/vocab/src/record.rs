//! Every record of a rank's log, as Rust types: the log format is defined
//! here and nowhere else.
//!
//! A log (`rank-NNNNN.jsonl` in the run directory) is JSON Lines: one
//! [`Record`] per line, told apart by its `"type"` field. The first record
//! is the [`Header`]; a rank that finished has a [`Close`] record last. The
//! writer in every rank, `replay`, `report` and its CSV export all go
//! through these types, and `mpit-tuner schema` prints the JSON Schema
//! generated from them.
//!
//! Strings are `Cow` so that the helper thread writes a sample straight from
//! its snapshot (no copy), while readers get owned records
//! (`Record<'static>`).
//!
//! # Unknown values
//!
//! Fields with a closed set of values are enums serialised to their names
//! in the log: the header's [`LibraryFamily`], a write's and a decision's
//! [`Phase`], a decision's [`Branch`], an object's [`ObjectChange`], a
//! collective tuning record's [`CollectiveEvent`], a steering answer's
//! [`SteeringKind`], the close record's [`CloseReason`], a write's
//! [`Outcome`], a steering answer's [`SteeringOutcome`]. Two kinds of
//! tolerance, each as the readers had it when these fields were strings:
//!
//! - [`LibraryFamily`], [`Phase`], [`Branch`], [`ObjectChange`],
//!   [`CollectiveEvent`], [`SteeringKind`] and [`CloseReason`] read any
//!   string: a value this version does not know becomes their `Other`
//!   variant, written back unchanged. Readers always passed these strings
//!   through (the report shows a library, a phase or an event as written,
//!   counts only `created` and `freed` objects, folds only the collective
//!   events it knows and needs only the close record's time; export and
//!   tune say they do not know a library), so a log of a newer writer with
//!   a new phase still reads whole.
//! - [`Outcome`] and [`SteeringOutcome`] have no such variant: a record
//!   with an outcome this version does not know is a damaged line, as it
//!   always was, because what a write did (applied or not) cannot be
//!   guessed from an unknown name.
//!
//! An abort is a [`Warning`] with `abort` set; logs written before that
//! field recorded it only in the message, which [`Warning::is_abort`]
//! still recognises.

use crate::meta::{Binding, Datatype, PvarClass};
use crate::nan;
use crate::value::Value;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::collections::BTreeMap;

/// For an enum of the names a field of the log takes, with an
/// `Other(String)` variant for the names this version does not know (see
/// [unknown values](crate::record#unknown-values)): `as_str`, the name in
/// the log (as serde writes it), and `Display`, which writes it.
macro_rules! names {
    ($t:ident { $($variant:ident => $name:literal),* $(,)? }) => {
        impl $t {
            /// The name in the log.
            pub fn as_str(&self) -> &str {
                match self {
                    $($t::$variant => $name,)*
                    $t::Other(s) => s,
                }
            }

            /// Every variant but `Other`, for the tests that check the
            /// names against serde's.
            #[cfg(test)]
            fn known() -> Vec<$t> {
                vec![$($t::$variant),*]
            }
        }

        impl std::fmt::Display for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

/// The version of the log format, in every header. Readers check it.
pub const FORMAT_VERSION: u32 = 1;

/// The file name of a rank's log within the run directory.
pub fn rank_file_name(rank: i32) -> String {
    format!("rank-{rank:05}.jsonl")
}

/// The file name of a node's log within the run directory, in the per-node
/// layout ([`LogLayout::Node`]): `node-<host>.jsonl`, the host name with
/// every byte but ASCII letters, digits, `.`, `_` and `-` replaced by `_`
/// (at most 200 bytes of it).
pub fn node_file_name(host: &str) -> String {
    let mut name: String = host
        .chars()
        .map(|c| match c {
            'a'..='z' | 'A'..='Z' | '0'..='9' | '.' | '_' | '-' => c,
            _ => '_',
        })
        .take(200)
        .collect();
    if name.is_empty() {
        name.push('_');
    }
    format!("node-{name}.jsonl")
}

/// Whether a file name is a node's log (`node-*.jsonl`).
pub fn is_node_file_name(name: &str) -> bool {
    name.strip_prefix("node-")
        .and_then(|n| n.strip_suffix(".jsonl"))
        .is_some_and(|n| !n.is_empty())
}

/// The start every line of a node's log has: `{"writer":N,` before the
/// record's own fields, N the rank that wrote it (not `rank`: a header
/// has a field of that name). Readers ignore the field otherwise.
pub fn rank_tag(rank: u32) -> String {
    format!("{{\"writer\":{rank},")
}

/// The rank a line of a node's log starts with ([`rank_tag`]), read
/// without parsing the line: `None` for a line without it.
pub fn rank_of_line(line: &[u8]) -> Option<u32> {
    let rest = line.strip_prefix(b"{\"writer\":")?;
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 || digits > 9 || rest.get(digits) != Some(&b',') {
        return None;
    }
    std::str::from_utf8(&rest[..digits]).ok()?.parse().ok()
}

/// The rank of a log file name (`rank-00003.jsonl` -> 3).
pub fn rank_of_file_name(name: &str) -> Option<u32> {
    name.strip_prefix("rank-")?
        .strip_suffix(".jsonl")
        .filter(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))?
        .parse()
        .ok()
}

/// One line of a rank's log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Record<'a> {
    /// Who started: the first record of every log.
    Header(Header),
    /// The variables at one tick of the helper thread.
    Sample(Sample<'a>),
    /// A communicator or window the sampler started or stopped tracking.
    Object(ObjectEvent),
    /// Something the tool could not do, or turned off, and why.
    Warning(Warning),
    /// A policy evaluated: fired (with the branch) or not (with the reason).
    Decision(Decision),
    /// A CVAR write attempt, with the value before, the request and the
    /// read-back.
    Write(Write),
    /// An environment variable set before `MPI_Init`.
    Setenv(Setenv),
    /// A policy's note.
    Note(PolicyText),
    /// A policy's recommendation (also in the summary).
    Recommendation(PolicyText),
    /// A policy that cannot run in this library, and why.
    PolicyDisabled(PolicyDisabled),
    /// What a policy did over the run (at finalize).
    PolicySummary(PolicySummary),
    /// Variables the library added while the job ran.
    Catalogue(CatalogueGrowth),
    /// Online collective tuning: a trial, a decision, a recheck or a stop
    /// for one (communicator, collective, size bin); identical on every
    /// rank of the communicator but for `t`.
    Collective(CollectiveTuning),
    /// A rank's answer to a steering request (`mpit-tuner set`, `pause`,
    /// `resume`, `reload`): the audit record. Its type in the log is
    /// `control`, the name of the directory requests arrive in.
    #[serde(rename = "control")]
    Steering(SteeringAnswer),
    /// The last record of a rank that finished (or whose tuner was off).
    Close(Close),
    /// `mpit-tuner replay` output: the first record of a replayed rank.
    Replay(ReplayStart),
    /// `mpit-tuner replay` output: the last record, with the CVAR values
    /// and environment the replay ended with.
    ReplayEnd(ReplayEnd),
}

/// Every record type, as `"type"` names it.
pub const KINDS: &[&str] = &[
    "header",
    "sample",
    "object",
    "warning",
    "decision",
    "write",
    "setenv",
    "note",
    "recommendation",
    "policy_disabled",
    "policy_summary",
    "catalogue",
    "collective",
    "control",
    "close",
    "replay",
    "replay_end",
];

impl Record<'_> {
    /// The record's `"type"`.
    pub fn kind(&self) -> &'static str {
        match self {
            Record::Header(_) => "header",
            Record::Sample(_) => "sample",
            Record::Object(_) => "object",
            Record::Warning(_) => "warning",
            Record::Decision(_) => "decision",
            Record::Write(_) => "write",
            Record::Setenv(_) => "setenv",
            Record::Note(_) => "note",
            Record::Recommendation(_) => "recommendation",
            Record::PolicyDisabled(_) => "policy_disabled",
            Record::PolicySummary(_) => "policy_summary",
            Record::Catalogue(_) => "catalogue",
            Record::Collective(_) => "collective",
            Record::Steering(_) => "control",
            Record::Close(_) => "close",
            Record::Replay(_) => "replay",
            Record::ReplayEnd(_) => "replay_end",
        }
    }

    /// Seconds since the tuner started on this rank (0 for the header).
    pub fn t(&self) -> f64 {
        match self {
            Record::Header(_) => 0.0,
            Record::Sample(r) => r.t,
            Record::Object(r) => r.t,
            Record::Warning(r) => r.t,
            Record::Decision(r) => r.t,
            Record::Write(r) => r.t,
            Record::Setenv(r) => r.t,
            Record::Note(r) | Record::Recommendation(r) => r.t,
            Record::PolicyDisabled(r) => r.t,
            Record::PolicySummary(r) => r.t,
            Record::Catalogue(r) => r.t,
            Record::Collective(r) => r.t,
            Record::Steering(r) => r.t,
            Record::Close(r) => r.t,
            Record::Replay(r) => r.t,
            Record::ReplayEnd(r) => r.t,
        }
    }
}

/// The first record of a log: who started, with what.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Header {
    /// [`FORMAT_VERSION`] of the writer.
    pub version: u32,
    /// Rank in `MPI_COMM_WORLD`.
    pub rank: i32,
    /// Size of `MPI_COMM_WORLD`.
    pub size: i32,
    /// Host name.
    pub host: String,
    /// Process id.
    pub pid: u32,
    /// Library family.
    pub library: LibraryFamily,
    /// `MPI_Get_library_version`, or empty when the library would not say.
    pub library_version: String,
    /// The MPI library's file as this rank's dynamic loader named it
    /// (`/usr/lib/x86_64-linux-gnu/libmpich.so.12`); empty when it could not
    /// say, and in logs written before it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub library_file: String,
    /// The thread level MPI_T gave the tool (`MPI_THREAD_*` without prefix).
    pub mpi_t_thread_level: String,
    /// Whether the application may call MPI from several threads at once
    /// (the tool's counters then use atomic read-modify-writes).
    pub concurrent_callers: bool,
    /// Start, in seconds since the Unix epoch.
    pub start_unix: f64,
    /// The configuration this rank runs with.
    pub config: RunConfig,
    /// What the library's MPI_T catalogue holds.
    pub catalogue: CatalogueCounts,
    /// The PVARs sampled.
    pub variables: Vec<SampledVariable>,
    /// The run directory's layout, agreed by every rank at start (logs
    /// written before it say nothing: per rank).
    #[serde(default)]
    pub layout: LogLayout,
}

/// How a run directory holds the ranks' logs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum LogLayout {
    /// `rank`: one file a rank, `rank-NNNNN.jsonl` ([`rank_file_name`]).
    #[default]
    Rank,
    /// `node`: one file a node, `node-<host>.jsonl` ([`node_file_name`]),
    /// that each rank of the node appends to with whole writes; every line
    /// starts with the rank that wrote it ([`rank_tag`]).
    Node,
}

impl LogLayout {
    /// The name in the header and in `MPIT_TUNER_LOG_LAYOUT`.
    pub fn as_str(self) -> &'static str {
        match self {
            LogLayout::Rank => "rank",
            LogLayout::Node => "node",
        }
    }
}

/// The MPI library family a run was made with, as a header, `summary.json`
/// and a replay name it (`mpit::Library`'s names).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum LibraryFamily {
    /// `mpich`: MPICH and derivatives not listed below.
    Mpich,
    /// `mvapich2`: MVAPICH2.
    Mvapich2,
    /// `intelmpi`: Intel MPI.
    IntelMpi,
    /// `openmpi`: Open MPI.
    OpenMpi,
    /// `unknown`: a library the tuner did not recognise.
    Unknown,
    /// A value this version does not know, kept as written (see
    /// [unknown values](crate::record#unknown-values)).
    #[serde(untagged)]
    Other(String),
}

names!(LibraryFamily {
    Mpich => "mpich",
    Mvapich2 => "mvapich2",
    IntelMpi => "intelmpi",
    OpenMpi => "openmpi",
    Unknown => "unknown",
});

/// The runtime's configuration, as a header records it (durations in
/// seconds).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RunConfig {
    /// Whether the tuner runs at all.
    pub enabled: bool,
    /// The run directory, if the user chose one.
    pub dir: Option<String>,
    /// The sampling interval.
    pub interval: f64,
    /// The PVAR selection (empty: all).
    pub pvars: Vec<String>,
    /// The policy file (`None`: the embedded default; `"none"`: monitor
    /// only).
    pub policy: Option<String>,
    /// Whether rank 0 stays silent at finalize.
    pub quiet: bool,
    /// How often variables are re-enumerated (`None`: never).
    pub refresh: Option<f64>,
    /// How often the log is flushed.
    pub flush: f64,
    /// Online collective tuning, when asked for: the mode, which
    /// collectives and the window (`all: allreduce,bcast (window 8)`,
    /// `safe: all`; before modes: `allreduce,bcast (window 8)`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collectives: Option<String>,
}

/// How many variables the catalogue holds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CatalogueCounts {
    /// Control variables.
    pub cvars: usize,
    /// Performance variables.
    pub pvars: usize,
    /// Categories.
    pub categories: usize,
    /// Entries the library would not describe (see the warning records).
    pub skipped: usize,
    /// What `MPI_Init` added to the catalogue loaded before it.
    pub grew_during_init: Growth,
}

/// Entries added to a catalogue.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Growth {
    /// Control variables added.
    pub cvars: usize,
    /// Performance variables added.
    pub pvars: usize,
    /// Categories added.
    pub categories: usize,
}

impl Growth {
    /// Whether anything was added.
    pub fn is_empty(&self) -> bool {
        self.cvars == 0 && self.pvars == 0 && self.categories == 0
    }
}

/// A PVAR the sampler reads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SampledVariable {
    /// Its name.
    pub name: String,
    /// Its class.
    pub class: PvarClass,
    /// Its element type.
    pub datatype: Datatype,
    /// Elements (unbound variables; bound ones have one count per object).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<usize>,
    /// The kind of object it is bound to.
    pub binding: Binding,
    /// Whether it counts without being started.
    pub continuous: bool,
}

/// The variables at one tick.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Sample<'a> {
    /// Seconds since the tuner started.
    pub t: f64,
    /// Tick number, from 1.
    pub seq: u64,
    /// One entry per variable and object.
    pub vars: Cow<'a, [SampleVar<'a>]>,
}

/// One variable (on one object) in a sample. Which metrics it carries
/// depends on its class: `delta` and `rate` for counters, aggregates and
/// timers; `changes` and `change_total` for watermarks; `min`, `max` and
/// `mean` (over the run) for the others. Each is one number per element.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SampleVar<'a> {
    /// The PVAR, or a tool metric (`tool.allreduce.calls`).
    pub name: Cow<'a, str>,
    /// The object it is bound to (`world`, `comm3`, `win1`), if bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object: Option<Cow<'a, str>>,
    /// Its class.
    pub class: PvarClass,
    /// The latest value.
    #[serde(deserialize_with = "nan::cow")]
    #[schemars(with = "Vec<Option<f64>>")]
    pub value: Cow<'a, [f64]>,
    /// Change since the previous sample.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "nan::opt_cow"
    )]
    #[schemars(with = "Option<Vec<Option<f64>>>")]
    pub delta: Option<Cow<'a, [f64]>>,
    /// `delta` per second.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "nan::opt_cow"
    )]
    #[schemars(with = "Option<Vec<Option<f64>>>")]
    pub rate: Option<Cow<'a, [f64]>>,
    /// Changes seen (watermarks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changes: Option<Cow<'a, [u64]>>,
    /// Total absolute change (watermarks).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "nan::opt_cow"
    )]
    #[schemars(with = "Option<Vec<Option<f64>>>")]
    pub change_total: Option<Cow<'a, [f64]>>,
    /// Minimum over the run.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "nan::opt_cow"
    )]
    #[schemars(with = "Option<Vec<Option<f64>>>")]
    pub min: Option<Cow<'a, [f64]>>,
    /// Maximum over the run.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "nan::opt_cow"
    )]
    #[schemars(with = "Option<Vec<Option<f64>>>")]
    pub max: Option<Cow<'a, [f64]>>,
    /// Mean over the run.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "nan::opt_vec"
    )]
    #[schemars(with = "Option<Vec<Option<f64>>>")]
    pub mean: Option<Vec<f64>>,
}

/// A communicator or window tracked or released.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ObjectEvent {
    /// Seconds since start.
    pub t: f64,
    /// What happened to it.
    pub event: ObjectChange,
    /// `world`, `comm3`, `win1`.
    pub object: String,
    /// PVAR handles allocated for it (on `created`).
    pub handles: usize,
}

/// What happened to a communicator or window, in [`ObjectEvent::event`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ObjectChange {
    /// The sampler started tracking it (`created`).
    Created,
    /// The sampler stopped tracking it (`freed`).
    Freed,
    /// A value this version does not know, kept as written (see
    /// [unknown values](crate::record#unknown-values)).
    #[serde(untagged)]
    Other(String),
}

names!(ObjectChange {
    Created => "created",
    Freed => "freed",
});

/// A warning.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Warning {
    /// Seconds since start.
    pub t: f64,
    /// What happened, what was turned off, and why.
    pub message: String,
    /// Set on the warning the runtime writes when the application calls
    /// `MPI_Abort` (written only when true). Readers ask
    /// [`Warning::is_abort`], which also knows logs written before this
    /// field existed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub abort: bool,
}

impl Warning {
    /// A warning about something else than an abort.
    pub fn new(t: f64, message: impl Into<String>) -> Warning {
        Warning {
            t,
            message: message.into(),
            abort: false,
        }
    }

    /// The warning that records a call of `MPI_Abort`.
    pub fn abort(t: f64) -> Warning {
        Warning {
            t,
            message: "MPI_Abort called; flushing".into(),
            abort: true,
        }
    }

    /// Whether this warning records a call of `MPI_Abort`: its `abort`
    /// field, or, in logs written before that field existed (which recorded
    /// the abort only in words), a message that names `MPI_Abort`. No other
    /// warning the runtime writes names `MPI_Abort`.
    pub fn is_abort(&self) -> bool {
        self.abort || self.message.contains("MPI_Abort")
    }
}

/// A policy evaluated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Decision {
    /// Seconds since start.
    pub t: f64,
    /// The policy.
    pub policy: String,
    /// The policy's phase.
    pub phase: Phase,
    /// Whether it fired.
    pub fired: bool,
    /// Why it did not fire.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The branch that ran, when it fired.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<Branch>,
    /// Whether its writes were real (false: dry run), when it fired.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write: Option<bool>,
    /// The condition's value, when it fired and has one.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "nan::opt_vec"
    )]
    #[schemars(with = "Option<Vec<Option<f64>>>")]
    pub condition: Option<Vec<f64>>,
    /// The variables the condition read, with their values (null when the
    /// variable had no value yet).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "nan::inputs"
    )]
    #[schemars(with = "Option<BTreeMap<String, Option<Vec<Option<f64>>>>>")]
    pub inputs: Option<BTreeMap<String, Option<Vec<f64>>>>,
}

/// The branch of a policy that ran, in [`Decision::branch`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Branch {
    /// `then`: the condition held, or the policy has none.
    Then,
    /// `otherwise`: the condition did not hold.
    Otherwise,
    /// A value this version does not know, kept as written (see
    /// [unknown values](crate::record#unknown-values)).
    #[serde(untagged)]
    Other(String),
}

names!(Branch {
    Then => "then",
    Otherwise => "otherwise",
});

/// The phase of a policy's decision, write or environment setting, as
/// policy files name it; readers that show a user's `mpit-tuner set`
/// (a `control` record) among the policies' writes give it the phase
/// [`Phase::Steering`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    /// `pre-init`: in `MPI_Init`, before the library initialises.
    PreInit,
    /// `init`: right after `MPI_Init`.
    Init,
    /// `periodic`: while the application runs.
    Periodic,
    /// `finalize`: in `MPI_Finalize`.
    Finalize,
    /// `steering`: a user's request while the job runs. The runtime logs
    /// these as `control` records, never with this phase; it names them
    /// where they are read together with the policies' writes.
    Steering,
    /// A value this version does not know, kept as written (see
    /// [unknown values](crate::record#unknown-values)).
    #[serde(untagged)]
    Other(String),
}

names!(Phase {
    PreInit => "pre-init",
    Init => "init",
    Periodic => "periodic",
    Finalize => "finalize",
    Steering => "steering",
});

/// How a write attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Written, and the read-back matches.
    Written,
    /// Written, but the library reads back another value.
    WrittenDiffers,
    /// Written (the library accepted it), but reading it back failed: the
    /// error says how.
    WrittenUnverified,
    /// The policy is a dry run: nothing was written.
    DryRun,
    /// The library refused for now (`MPI_T_ERR_CVAR_SET_NOT_NOW`).
    RefusedNow,
    /// The library or the scope refuses it for good.
    Refused,
    /// The request does not fit the variable (type, count, index).
    Invalid,
    /// The variable does not exist in this library.
    Missing,
}

impl Outcome {
    /// The name in the log (`written_differs`).
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Written => "written",
            Outcome::WrittenDiffers => "written_differs",
            Outcome::WrittenUnverified => "written_unverified",
            Outcome::DryRun => "dry_run",
            Outcome::RefusedNow => "refused_now",
            Outcome::Refused => "refused",
            Outcome::Invalid => "invalid",
            Outcome::Missing => "missing",
        }
    }

    /// Whether the library took the value (or would have, in a dry run).
    pub fn applied(self) -> bool {
        matches!(
            self,
            Outcome::Written
                | Outcome::WrittenDiffers
                | Outcome::WrittenUnverified
                | Outcome::DryRun
        )
    }
}

/// A CVAR write attempt: the audit record. Its middle part, what the
/// attempt found ([`CvarWrite`]), is what the actuator returns, written
/// here as it came.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Write {
    /// Seconds since start.
    pub t: f64,
    /// The policy that asked.
    pub policy: String,
    /// Its phase.
    pub phase: Phase,
    /// The CVAR, the values and how it ended (fields `cvar`, `index`,
    /// `old`, `requested`, `readback`, `outcome`, `error` of the record).
    #[serde(flatten)]
    pub attempt: CvarWrite,
    /// The value as the policy wrote it (an expression's text; free text,
    /// not a closed set).
    pub source: String,
    /// Whether this was a dry run.
    pub dry_run: bool,
}

/// What one write attempt of a CVAR found: the variable, its values
/// before, asked for and after, and how it ended. The actuator (and the
/// replay's simulated library) return it; the `write` record carries it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CvarWrite {
    /// The CVAR.
    pub cvar: String,
    /// The element written, if one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<u32>,
    /// Its value before.
    pub old: Option<Value>,
    /// The value asked for, converted to the variable's type.
    pub requested: Option<Value>,
    /// Its value after, as read back.
    pub readback: Option<Value>,
    /// How it ended.
    pub outcome: Outcome,
    /// The error, with the MPI_T error name, when there was one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl CvarWrite {
    /// An attempt on `cvar` that has not found the variable (yet):
    /// [`Outcome::Missing`], no values, no error. Writers fill it in as
    /// they go.
    pub fn missing(cvar: &str, index: Option<u32>) -> CvarWrite {
        CvarWrite {
            cvar: cvar.to_string(),
            index,
            old: None,
            requested: None,
            readback: None,
            outcome: Outcome::Missing,
            error: None,
        }
    }

    /// An attempt that ended before reading anything: `outcome`, and why.
    pub fn failed(cvar: &str, index: Option<u32>, outcome: Outcome, error: String) -> CvarWrite {
        CvarWrite {
            outcome,
            error: Some(error),
            ..CvarWrite::missing(cvar, index)
        }
    }
}

/// An environment variable set before `MPI_Init`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Setenv {
    /// Seconds since start.
    pub t: f64,
    /// The policy.
    pub policy: String,
    /// Its phase (`pre-init`).
    pub phase: Phase,
    /// The variable.
    pub name: String,
    /// The value.
    pub value: String,
    /// Whether this was a dry run.
    pub dry_run: bool,
    /// Why it was not set; `null` when it was (always written: scripts
    /// test `"error":null`).
    #[serde(default)]
    pub error: Option<String>,
}

/// A policy's note or recommendation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PolicyText {
    /// Seconds since start.
    pub t: f64,
    /// The policy.
    pub policy: String,
    /// The text.
    pub text: String,
}

/// A policy that cannot run here.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PolicyDisabled {
    /// Seconds since start.
    pub t: f64,
    /// The policy.
    pub policy: String,
    /// Why (a variable the library lacks, a scope it forbids).
    pub reason: String,
}

/// What a policy did over the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PolicySummary {
    /// Seconds since start.
    pub t: f64,
    /// The policy.
    pub policy: String,
    /// Writes the library took.
    pub writes: u64,
    /// Writes refused.
    pub refused: u64,
    /// Times it fired.
    pub firings: u64,
    /// Why it was disabled, if it was.
    pub disabled: Option<String>,
}

/// Variables the library added while the job ran.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CatalogueGrowth {
    /// Seconds since start.
    pub t: f64,
    /// PVARs added to the sampling.
    pub new_pvars: usize,
    /// Every PVAR sampled from now on.
    pub variables: Vec<SampledVariable>,
}

/// One event of online collective tuning.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CollectiveTuning {
    /// Seconds since start.
    pub t: f64,
    /// What happened (see each [`CollectiveEvent`] for the fields it
    /// fills).
    pub event: CollectiveEvent,
    /// The communicator: a label the same on all its ranks (`c<world rank
    /// of its rank 0>.<n>`), empty for events of the process.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub comm: String,
    /// Its size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comm_size: Option<i32>,
    /// The collective (`allreduce`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collective: Option<String>,
    /// The message sizes of the bin, in bytes: `[lo, hi]`, `hi` null for
    /// the last bin.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bin: Option<(u64, Option<u64>)>,
    /// The algorithm tried or chosen (the library's name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub algorithm: Option<String>,
    /// Its value of the library's variable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<i64>,
    /// Time per call agreed across ranks (maximum over ranks of each
    /// rank's mean), microseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_us: Option<f64>,
    /// The default's time per call, microseconds (decisions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_us: Option<f64>,
    /// Calls the trial ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calls: Option<u64>,
    /// A trial dropped after its first window: far slower than the
    /// default.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dropped: bool,
    /// Decisions and `left`: what the search cost beyond running the kept
    /// algorithm on every call of the search (the calls of the other
    /// candidates at their times, the agreed points, the tool's other
    /// collectives on the communicator), microseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_us: Option<f64>,
    /// Why, for events that are not measurements.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// `algorithms` events: every algorithm of the collective's variable.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub algorithms: Vec<Algorithm>,
    /// `pinned` and `held`: the id of the user's request (`mpit-tuner
    /// set`; its `control` record has the same id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<String>,
    /// `decision`: the algorithm kept came from the tuning store and this
    /// run confirmed it against the default (docs/tuning-store.md).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stored: bool,
}

impl CollectiveTuning {
    /// A record of `event` at `t` with no other field set: writers fill in
    /// those that apply.
    pub fn new(t: f64, event: CollectiveEvent) -> CollectiveTuning {
        CollectiveTuning {
            t,
            event,
            comm: String::new(),
            comm_size: None,
            collective: None,
            bin: None,
            algorithm: None,
            value: None,
            time_us: None,
            default_us: None,
            calls: None,
            dropped: false,
            cost_us: None,
            message: None,
            algorithms: Vec::new(),
            request: None,
            stored: false,
        }
    }
}

/// How a `policy_disabled` record's reason begins when the library does
/// not export a variable the policy reads or writes (the policy does not
/// apply to this library): `MPI library does not export NAME`. The report
/// groups those policies in one line.
pub const NOT_EXPORTED: &str = "MPI library does not export ";

/// Which calls online collective tuning may switch to another algorithm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum CollectiveMode {
    /// Only calls whose result cannot depend on the algorithm: moving data
    /// (bcast, allgather, alltoall, barrier) and reductions of integer,
    /// logical and byte datatypes with a predefined operation. Reductions
    /// of floating-point datatypes (or derived ones holding any) and with
    /// user-defined operations run the library's default choice.
    #[default]
    Safe,
    /// Every call, floating-point reductions too, whose last bits may then
    /// differ from the default's (`MPIT_TUNER_COLLECTIVES=tune`).
    All,
}

impl CollectiveMode {
    /// Its name in the environment, the policy file and the logs.
    pub fn name(self) -> &'static str {
        match self {
            CollectiveMode::Safe => "safe",
            CollectiveMode::All => "all",
        }
    }

    /// The mode named `name` (`safe`, `all`).
    pub fn parse(name: &str) -> Option<CollectiveMode> {
        match name {
            "safe" => Some(CollectiveMode::Safe),
            "all" => Some(CollectiveMode::All),
            _ => None,
        }
    }
}

/// What a `collective` record tells, in [`CollectiveTuning::event`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CollectiveEvent {
    /// `start`: what is tuned (once per rank, with a message).
    Start,
    /// `off`: why nothing is tuned.
    Off,
    /// `skipped`: a collective or an algorithm left out at start, and why.
    Skipped,
    /// `algorithms`, in measure mode (`MPIT_TUNER_COLLECTIVES=measure`),
    /// once per collective: the algorithm set at start (`algorithm`,
    /// `value`) and every one the variable has (`algorithms`; the variable
    /// in `message`).
    Algorithms,
    /// `trial`: a candidate's window: each candidate's first, then a second
    /// for those within the margin of the fastest, and the default's
    /// confirming window in a search that would leave it. `calls` is that
    /// window's, `time_us` the candidate's time over all its windows so
    /// far (for the default after its confirming window, the smaller of
    /// its two measurements).
    Trial,
    /// `decision`: a search ended: the algorithm kept, its time and the
    /// default's, what the search cost.
    Decision,
    /// `left`: a collective not searched, because one agreed point
    /// between the ranks costs more than a call of the default
    /// (`time_us`: the default's time per call, `cost_us`: what the search
    /// spent before it left, `message`: what a point costs); a check point
    /// now and then searches it once a point costs less.
    Left,
    /// `recheck`: a decision searched again, and why.
    Recheck,
    /// `measured`, in measure mode, per communicator, collective and bin,
    /// at the end: the agreed time per call.
    Measured,
    /// `pinned`: a user's request (`request`) pinned the algorithm at this
    /// agreed point (`calls` before it); searching stops.
    Pinned,
    /// `held`: the first agreed point after a pin: the pinned algorithm ran
    /// `calls` calls since, at `time_us` per call.
    Held,
    /// `stopped`: a rank stopped tuning: the library's default from now
    /// on.
    Stopped,
    /// `setup_failed`: a communicator could not be set up for tuning.
    SetupFailed,
    /// `reduction_failed`: this rank's reduction at an agreed point failed.
    ReductionFailed,
    /// `write_failed`: the library refused a write of the algorithm
    /// variable.
    WriteFailed,
    /// `application_wrote`: the application wrote a variable the tuner
    /// writes: left to it.
    ApplicationWrote,
    /// `excluded`: a candidate not tried on a communicator, and why.
    Excluded,
    /// `call_failed`: a call on a candidate communicator failed: tuning
    /// stops on this rank.
    CallFailed,
    /// `concurrent`: collectives were called from two threads at once.
    Concurrent,
    /// `stored`: a search starts from the tuning store's choice
    /// (`algorithm`; `message`: which store, when and where it was
    /// learned), which it confirms against the default before keeping it.
    Stored,
    /// A value this version does not know, kept as written (see
    /// [unknown values](crate::record#unknown-values)).
    #[serde(untagged)]
    Other(String),
}

names!(CollectiveEvent {
    Start => "start",
    Off => "off",
    Skipped => "skipped",
    Algorithms => "algorithms",
    Trial => "trial",
    Decision => "decision",
    Left => "left",
    Recheck => "recheck",
    Measured => "measured",
    Pinned => "pinned",
    Held => "held",
    Stopped => "stopped",
    SetupFailed => "setup_failed",
    ReductionFailed => "reduction_failed",
    WriteFailed => "write_failed",
    ApplicationWrote => "application_wrote",
    Excluded => "excluded",
    CallFailed => "call_failed",
    Concurrent => "concurrent",
    Stored => "stored",
});

/// One algorithm of a library's algorithm variable.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Algorithm {
    /// The library's name for it.
    pub name: String,
    /// The variable's value that selects it.
    pub value: i64,
}

/// How a rank answered a steering request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SteeringOutcome {
    /// Done (a CVAR written and read back, policies paused, resumed or
    /// replaced).
    Applied,
    /// Not done, and `reason` says why (scope, type, range, a policy file
    /// that does not compile, a library refusal); nothing changed.
    Refused,
    /// The request's `ranks` or `hosts` leave this rank out.
    NotForThisRank,
    /// The request file could not be read or is not a request.
    Error,
}

impl SteeringOutcome {
    /// The name in the log (`not_for_this_rank`).
    pub fn as_str(self) -> &'static str {
        match self {
            SteeringOutcome::Applied => "applied",
            SteeringOutcome::Refused => "refused",
            SteeringOutcome::NotForThisRank => "not_for_this_rank",
            SteeringOutcome::Error => "error",
        }
    }
}

impl From<CvarWrite> for SteeringWrite {
    /// The parts of a write attempt a steering answer records (its `error`
    /// goes to the answer's `message`).
    fn from(w: CvarWrite) -> SteeringWrite {
        SteeringWrite {
            cvar: w.cvar,
            old: w.old,
            requested: w.requested,
            readback: w.readback,
            outcome: w.outcome,
        }
    }
}

/// A rank's answer to a steering request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SteeringAnswer {
    /// Seconds since start.
    pub t: f64,
    /// The request's id (its file name without `.json` when the file is
    /// not a request).
    pub id: String,
    /// What the request asked.
    pub kind: SteeringKind,
    /// The request in words (`set X=4 on ranks 0-1`).
    pub request: String,
    /// How it ended.
    pub outcome: SteeringOutcome,
    /// Why it was refused or failed; what was done otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// `set`: the CVAR written, with its write outcome and values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write: Option<SteeringWrite>,
}

/// What a steering request asked, in [`SteeringAnswer::kind`]: the `kind`
/// of the request ([`crate::steering::Action`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SteeringKind {
    /// `set`: write a CVAR.
    Set,
    /// `pause`: stop evaluating a policy, or all.
    Pause,
    /// `resume`: evaluate a paused policy again, or all.
    Resume,
    /// `reload`: replace the running policies.
    Reload,
    /// `""` (empty): the file is not a request, so it asks nothing.
    #[serde(rename = "")]
    NotARequest,
    /// A value this version does not know, kept as written (see
    /// [unknown values](crate::record#unknown-values)).
    #[serde(untagged)]
    Other(String),
}

names!(SteeringKind {
    Set => "set",
    Pause => "pause",
    Resume => "resume",
    Reload => "reload",
    NotARequest => "",
});

/// The CVAR write of a `set` request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SteeringWrite {
    /// The CVAR.
    pub cvar: String,
    /// Its value before.
    pub old: Option<Value>,
    /// The value asked for, converted to the variable's type.
    pub requested: Option<Value>,
    /// Its value after, as read back.
    pub readback: Option<Value>,
    /// How the write ended, as for a policy's write.
    pub outcome: Outcome,
}

/// The last record of a rank.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Close {
    /// Seconds since start.
    pub t: f64,
    /// Why the log ends.
    pub reason: CloseReason,
    /// Samples taken.
    pub samples: u64,
    /// Communicators and windows not tracked (the table was full).
    pub objects_untracked: u64,
    /// Communicators and windows freed before the sampler saw them.
    pub objects_short_lived: u64,
    /// How many times this rank listed the run directory's `control/`
    /// directory for steering requests: one rank a node lists it (the
    /// others read its listing from node-local memory), so this is 0 on
    /// most ranks. Absent in logs of versions that did not count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_listings: Option<u64>,
}

/// Why a rank's log ends, in [`Close::reason`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CloseReason {
    /// `finalize`: the application called `MPI_Finalize`.
    Finalize,
    /// `disabled`: the tuner could not start on this rank.
    Disabled,
    /// A value this version does not know, kept as written (see
    /// [unknown values](crate::record#unknown-values)).
    #[serde(untagged)]
    Other(String),
}

names!(CloseReason {
    Finalize => "finalize",
    Disabled => "disabled",
});

/// The start of a replayed rank.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ReplayStart {
    /// Time of the first sample replayed.
    pub t: f64,
    /// The rank replayed.
    pub rank: u32,
    /// The job size.
    pub size: u32,
    /// Where the data came from (a log or a trace file).
    pub source: String,
    /// The library family of the log, if known.
    pub library: Option<LibraryFamily>,
    /// The policy file.
    pub policies: Option<String>,
    /// Samples replayed.
    pub samples: usize,
    /// Time the replay ends.
    pub end: f64,
}

/// The end of a replayed rank.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ReplayEnd {
    /// Time the replay ended.
    pub t: f64,
    /// The CVARs the policies wrote, with their final values.
    pub cvars: BTreeMap<String, Value>,
    /// The environment variables the policies set.
    pub environment: BTreeMap<String, String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_round_trip_with_nan_as_null() {
        let values = [1.0, f64::NAN];
        let record = Record::Sample(Sample {
            t: 0.5,
            seq: 1,
            vars: Cow::Owned(vec![SampleVar {
                name: Cow::Borrowed("x"),
                object: None,
                class: PvarClass::Level,
                value: Cow::Borrowed(&values),
                delta: None,
                rate: None,
                changes: None,
                change_total: None,
                min: Some(Cow::Borrowed(&values)),
                max: Some(Cow::Borrowed(&values)),
                mean: Some(values.to_vec()),
            }]),
        });
        let line = serde_json::to_string(&record).unwrap();
        assert!(line.contains(r#""value":[1.0,null]"#), "{line}");
        let back: Record<'static> = serde_json::from_str(&line).unwrap();
        let Record::Sample(s) = back else {
            panic!("not a sample: {line}")
        };
        assert_eq!(s.vars[0].value[0], 1.0);
        assert!(s.vars[0].value[1].is_nan());
        assert!(s.vars[0].mean.as_ref().unwrap()[1].is_nan());
    }

    /// A write record as the runtime has always written it: read and
    /// written back byte for byte.
    #[test]
    fn write_lines_keep_their_bytes() {
        let lines = [
            r#"{"type":"write","t":1.5,"policy":"p","phase":"periodic","cvar":"C","index":2,"old":[0],"requested":[4],"readback":[4],"outcome":"written","source":"4","dry_run":false}"#,
            r#"{"type":"write","t":0.0,"policy":"p","phase":"pre-init","cvar":"C","old":null,"requested":null,"readback":null,"outcome":"missing","error":"no such CVAR","source":"x * 2","dry_run":true}"#,
            r#"{"type":"setenv","t":0.0,"policy":"p","phase":"pre-init","name":"N","value":"v","dry_run":false,"error":null}"#,
            r#"{"type":"decision","t":2.0,"policy":"p","phase":"init","fired":false,"reason":"r"}"#,
            r#"{"type":"object","t":0.1,"event":"created","object":"comm3","handles":4}"#,
            r#"{"type":"object","t":0.1,"event":"freed","object":"comm3","handles":0}"#,
            r#"{"type":"warning","t":0.2,"message":"m"}"#,
            r#"{"type":"collective","t":0.3,"event":"decision","comm":"c0.1","comm_size":2,"collective":"allreduce","bin":[0,256],"algorithm":"smp","value":3,"time_us":4.5,"default_us":6.0,"cost_us":1.5}"#,
            r#"{"type":"collective","t":0.0,"event":"setup_failed","message":"m"}"#,
            r#"{"type":"decision","t":2.0,"policy":"p","phase":"periodic","fired":true,"branch":"otherwise","write":false,"condition":[0.0],"inputs":{"x":[1.0]}}"#,
            r#"{"type":"control","t":3.0,"id":"a1","kind":"set","request":"set X=4","outcome":"applied","write":{"cvar":"X","old":[1],"requested":[4],"readback":[4],"outcome":"written"}}"#,
            r#"{"type":"control","t":3.0,"id":"junk","kind":"","request":"","outcome":"error","message":"m"}"#,
            r#"{"type":"close","t":4.0,"reason":"finalize","samples":3,"objects_untracked":0,"objects_short_lived":1}"#,
            r#"{"type":"close","t":0.5,"reason":"disabled","samples":0,"objects_untracked":0,"objects_short_lived":0}"#,
        ];
        for line in lines {
            let record: Record<'static> = serde_json::from_str(line).unwrap();
            assert_eq!(serde_json::to_string(&record).unwrap(), line);
        }
        let Ok(Record::Write(w)) = serde_json::from_str(lines[0]) else {
            panic!("not a write")
        };
        assert_eq!(
            (w.phase, w.attempt.outcome),
            (Phase::Periodic, Outcome::Written)
        );
    }

    /// Phases and object events of a newer writer read as `Other` and are
    /// written back unchanged.
    #[test]
    fn unknown_phases_and_object_events_are_kept() {
        for line in [
            r#"{"type":"decision","t":2.0,"policy":"p","phase":"someday","fired":false}"#,
            r#"{"type":"object","t":0.1,"event":"moved","object":"win1","handles":0}"#,
            r#"{"type":"collective","t":0.1,"event":"teleported"}"#,
            r#"{"type":"decision","t":2.0,"policy":"p","phase":"init","fired":true,"branch":"maybe"}"#,
            r#"{"type":"control","t":3.0,"id":"a1","kind":"rewind","request":"r","outcome":"refused"}"#,
            r#"{"type":"close","t":4.0,"reason":"killed","samples":3,"objects_untracked":0,"objects_short_lived":0}"#,
        ] {
            let record: Record<'static> = serde_json::from_str(line).unwrap();
            match &record {
                Record::Decision(d) if d.branch.is_some() => {
                    assert_eq!(d.branch, Some(Branch::Other("maybe".into())))
                }
                Record::Decision(d) => assert_eq!(d.phase, Phase::Other("someday".into())),
                Record::Object(o) => assert_eq!(o.event, ObjectChange::Other("moved".into())),
                Record::Collective(c) => {
                    assert_eq!(c.event, CollectiveEvent::Other("teleported".into()))
                }
                Record::Steering(c) => assert_eq!(c.kind, SteeringKind::Other("rewind".into())),
                Record::Close(c) => assert_eq!(c.reason, CloseReason::Other("killed".into())),
                other => panic!("{other:?}"),
            }
            assert_eq!(serde_json::to_string(&record).unwrap(), line);
        }
        assert_eq!(
            serde_json::to_string(&Phase::Steering).unwrap(),
            r#""steering""#
        );
        // An outcome this version does not know is a damaged line.
        let line = r#"{"type":"write","t":1,"policy":"p","phase":"init","cvar":"C","old":null,"requested":null,"readback":null,"outcome":"teleported","source":"1","dry_run":false}"#;
        assert!(serde_json::from_str::<Record<'static>>(line).is_err());
    }

    /// Each name as `as_str` gives it is the one serde writes and reads.
    #[test]
    fn names_are_serde_names() {
        fn check<T>(known: Vec<T>)
        where
            T: Serialize
                + for<'de> Deserialize<'de>
                + PartialEq
                + std::fmt::Debug
                + std::fmt::Display,
        {
            assert!(!known.is_empty());
            for v in known {
                let json = serde_json::to_string(&v).unwrap();
                assert_eq!(json, format!("\"{v}\""));
                assert_eq!(serde_json::from_str::<T>(&json).unwrap(), v);
            }
        }
        check(Phase::known());
        check(Branch::known());
        check(ObjectChange::known());
        check(CollectiveEvent::known());
        check(SteeringKind::known());
        check(CloseReason::known());
        check(LibraryFamily::known());
    }

    /// The abort is a field; a log of an older writer has only the message.
    #[test]
    fn aborts_by_field_and_in_old_logs_by_message() {
        let line = serde_json::to_string(&Record::Warning(Warning::abort(1.0))).unwrap();
        assert_eq!(
            line,
            r#"{"type":"warning","t":1.0,"message":"MPI_Abort called; flushing","abort":true}"#
        );
        let old: Warning =
            serde_json::from_str(r#"{"t":1.0,"message":"MPI_Abort called; flushing"}"#).unwrap();
        assert!(!old.abort && old.is_abort());
        assert!(!Warning::new(1.0, "something else").is_abort());
    }

    #[test]
    fn file_names_and_ranks() {
        assert_eq!(rank_file_name(3), "rank-00003.jsonl");
        assert_eq!(rank_of_file_name("rank-00003.jsonl"), Some(3));
        assert_eq!(rank_of_file_name("rank-x.jsonl"), None);
        assert_eq!(rank_of_file_name("rank-+3.jsonl"), None);
        assert_eq!(rank_of_file_name("rank-.jsonl"), None);
        assert_eq!(rank_of_file_name("summary.json"), None);
        assert_eq!(node_file_name("node1"), "node-node1.jsonl");
        assert_eq!(node_file_name("a b/c\u{e9}"), "node-a_b_c_.jsonl");
        assert_eq!(node_file_name(""), "node-_.jsonl");
        assert!(is_node_file_name("node-n1.jsonl"));
        assert!(!is_node_file_name("node-.jsonl"));
        assert!(!is_node_file_name("rank-00001.jsonl"));
        let line = format!("{}\"type\":\"warning\"}}", rank_tag(17));
        assert_eq!(rank_of_line(line.as_bytes()), Some(17));
        assert_eq!(rank_of_line(b"{\"writer\":x,"), None);
        assert_eq!(rank_of_line(b"{\"writer\":3"), None);
        assert_eq!(rank_of_line(b"{\"type\":\"warning\"}"), None);
    }
}
