//! One rank's log (`rank-NNNNN.jsonl`), read line by line into a
//! [`RankLog`]: its header, its samples folded per variable, and the
//! records the report tells (writes, environment settings, notes,
//! recommendations, policies, warnings, objects, the close record).
//!
//! A damaged log is read as far as it goes: a line that is not a record
//! this version knows, a cut last line, a missing header or close record
//! become [`Problem`]s. A file that is not a log at all, or a log in a newer
//! format, gives no [`RankLog`].

use super::fold::{Folder, Points, VarAgg};
use super::problem::{Problem, ProblemKind};
use serde_json::Value as Json;
use std::collections::{BTreeMap, HashSet};
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;
use tuner_core::runtime::log::FORMAT_VERSION;
use vocab::record::{self, ObjectChange, Record};

/// How many bad lines of one file are described (the others are counted).
const BAD_LINES_SHOWN: usize = 3;

/// The log header (first record).
#[derive(Debug, Clone, Default)]
pub struct Header {
    /// Job size.
    pub size: Option<i64>,
    /// Host name.
    pub host: Option<String>,
    /// Library family (`mpich`, `openmpi`, ...).
    pub library: Option<String>,
    /// `MPI_Get_library_version`.
    pub library_version: Option<String>,
    /// MPI_T thread level.
    pub thread_level: Option<String>,
    /// Unix time of the start.
    pub start_unix: Option<f64>,
    /// The tuner's configuration.
    pub config: Option<Json>,
    /// Catalogue counts.
    pub catalogue: Option<Json>,
    /// How many PVARs the sampler reads.
    pub sampled: usize,
}

/// A CVAR write record.
#[derive(Debug, Clone, Default)]
pub struct Write {
    /// The rank that wrote.
    pub rank: u32,
    /// Seconds since the start.
    pub t: f64,
    /// The policy.
    pub policy: String,
    /// Its phase.
    pub phase: String,
    /// The CVAR.
    pub cvar: String,
    /// Element, if one.
    pub index: Option<u32>,
    /// Value before.
    pub old: Option<Json>,
    /// Value asked.
    pub requested: Option<Json>,
    /// Value read back.
    pub readback: Option<Json>,
    /// `written`, `refused`, ...
    pub outcome: String,
    /// The error, if any.
    pub error: Option<String>,
    /// Whether it was a dry run.
    pub dry_run: bool,
}

/// The phase of the writes a user asked for (`mpit-tuner set`), in
/// [`Write::phase`].
pub const STEERING: &str = "steering";

/// A `setenv` record.
#[derive(Debug, Clone, Default)]
pub struct SetEnv {
    /// The rank.
    pub rank: u32,
    /// Seconds since the start.
    pub t: f64,
    /// The policy.
    pub policy: String,
    /// Variable name.
    pub name: String,
    /// Its value.
    pub value: String,
    /// Whether it was a dry run.
    pub dry_run: bool,
    /// The error, if any.
    pub error: Option<String>,
}

/// A policy's `policy_summary` record.
pub use vocab::record::PolicySummary;

/// One rank's log, read.
#[derive(Debug, Clone, Default)]
pub struct RankLog {
    /// The rank (from the file name).
    pub rank: u32,
    /// The file name.
    pub file: String,
    /// The header, if the log has one.
    pub header: Option<Header>,
    /// Samples read.
    pub samples: u64,
    /// The `t` of the last record.
    pub last_t: f64,
    /// The close record: (`t`, `reason`, `samples`).
    pub close: Option<(f64, String, u64)>,
    /// Per variable, in order of appearance.
    pub vars: Vec<VarAgg>,
    /// Time series of the variables asked for (key -> points).
    pub series: BTreeMap<String, Points>,
    /// CVAR writes.
    pub writes: Vec<Write>,
    /// Environment settings.
    pub setenvs: Vec<SetEnv>,
    /// Notes: (t, policy, text).
    pub notes: Vec<(f64, String, String)>,
    /// Policy recommendations: (t, policy, text).
    pub recommendations: Vec<(f64, String, String)>,
    /// Disabled policies: (policy, reason).
    pub disabled: Vec<(String, String)>,
    /// Policy summaries (at finalize).
    pub policies: Vec<PolicySummary>,
    /// Warnings: message -> count.
    pub warnings: BTreeMap<String, u32>,
    /// Objects created and freed.
    pub objects: (u64, u64),
    /// PVARs that appeared while the job ran.
    pub new_pvars: u64,
    /// Whether the application called MPI_Abort.
    pub aborted: bool,
    /// Lines read.
    pub lines: u64,
    /// Online collective tuning: every `collective` record, in order.
    pub collectives: Vec<vocab::record::CollectiveTuning>,
}

/// Reads one rank's log. Returns `None` when nothing of it is usable.
pub fn read_rank(
    rank: u32,
    path: &Path,
    series_wanted: &HashSet<String>,
) -> (Option<RankLog>, Vec<Problem>) {
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut reader = RankReader::new(rank, file_name, series_wanted);
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) => {
            reader.problem(ProblemKind::Unreadable, format!("cannot open: {e}"));
            return (None, reader.problems);
        }
    };
    let mut lines = BufReader::with_capacity(256 * 1024, file);
    let mut buf = Vec::with_capacity(64 * 1024);
    loop {
        buf.clear();
        match lines.read_until(b'\n', &mut buf) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => {
                let detail = format!("read error after line {}: {e}", reader.n);
                reader.problem(ProblemKind::Unreadable, detail);
                break;
            }
        }
        if let Next::Unusable = reader.line(&buf) {
            return (None, reader.problems);
        }
    }
    reader.finish()
}

/// What the reading of a log does after a line.
enum Next {
    /// Go on with the next line.
    Line,
    /// Stop: nothing of this log is usable (not a log, a newer format).
    Unusable,
}

/// The state of the reading of one log.
struct RankReader<'w> {
    rank: u32,
    /// The file name, for problems.
    file: String,
    log: RankLog,
    folder: Folder<'w>,
    problems: Vec<Problem>,
    /// Lines that are not valid records.
    bad: usize,
    /// Lines read (blank ones included).
    n: u64,
}

impl<'w> RankReader<'w> {
    fn new(rank: u32, file: String, series_wanted: &'w HashSet<String>) -> Self {
        RankReader {
            rank,
            log: RankLog {
                rank,
                file: file.clone(),
                ..RankLog::default()
            },
            file,
            folder: Folder::new(series_wanted),
            problems: Vec::new(),
            bad: 0,
            n: 0,
        }
    }

    fn problem(&mut self, kind: ProblemKind, detail: String) {
        self.problems.push(Problem {
            kind,
            rank: Some(self.rank),
            file: Some(self.file.clone()),
            detail,
        })
    }

    /// Reads the next line (with its `\n`, unless it is the cut last one).
    fn line(&mut self, buf: &[u8]) -> Next {
        self.n += 1;
        let complete = buf.last() == Some(&b'\n');
        let trimmed = buf.trim_ascii();
        if trimmed.is_empty() {
            return Next::Line;
        }
        match serde_json::from_slice::<Record<'static>>(trimmed) {
            Ok(record) => self.record(record),
            Err(e) => self.undecodable(trimmed, complete, &e),
        }
    }

    /// A line that is not a record this version knows: a record type of a
    /// newer tuner (skipped silently), a file that is not a log, a header of
    /// a newer format, a cut last line, or a bad line.
    fn undecodable(&mut self, line: &[u8], complete: bool, e: &serde_json::Error) -> Next {
        let n = self.n;
        let value = serde_json::from_slice::<Json>(line).ok();
        let is_json = value.is_some();
        // A record type of a newer tuner: not this reader's business.
        let kind = value
            .as_ref()
            .and_then(|v| v.get("type")?.as_str().map(str::to_string));
        if n > 1 && kind.as_deref().is_some_and(|k| !record::KINDS.contains(&k)) {
            return Next::Line;
        }
        if n == 1 && !is_json {
            self.problem(
                ProblemKind::NotALog,
                format!("line 1 is not JSON ({e}); not a tuner log"),
            );
            return Next::Unusable;
        }
        if n == 1 && kind.as_deref() == Some("header") {
            if let Some(v) = value
                .as_ref()
                .and_then(|v| v.get("version")?.as_u64())
                .filter(|&v| v > u64::from(FORMAT_VERSION))
            {
                self.problem(
                    ProblemKind::NewerFormat,
                    format!("format version {v}; this mpit-tuner reads version {FORMAT_VERSION}"),
                );
                return Next::Unusable;
            }
        }
        if !complete && !is_json {
            self.problem(
                ProblemKind::Truncated,
                format!("line {n} is cut short after {} bytes (skipped)", line.len()),
            );
        } else {
            self.bad += 1;
            if self.bad <= BAD_LINES_SHOWN {
                let what = if is_json {
                    "is not a record this version knows"
                } else {
                    "is not JSON"
                };
                self.problem(ProblemKind::BadLines, format!("line {n} {what} ({e})"));
            }
        }
        Next::Line
    }

    /// A record: the header checked and kept, samples folded, the others
    /// kept as the report tells them.
    fn record(&mut self, record: Record<'static>) -> Next {
        let n = self.n;
        self.log.lines = n;
        if n == 1 && !matches!(record, Record::Header(_)) {
            self.problem(
                ProblemKind::NoHeader,
                format!(
                    "line 1 is a `{}` record, not the header; rank, size and library unknown",
                    record.kind()
                ),
            );
        }
        let t = match record {
            Record::Header(_) => self.log.last_t,
            _ => record.t(),
        };
        self.log.last_t = self.log.last_t.max(t);
        match record {
            Record::Header(h) => return self.header(h),
            Record::Sample(sample) => {
                self.log.samples += 1;
                self.folder.sample(&mut self.log.vars, &sample, t);
            }
            other => self.event(other, t),
        }
        Next::Line
    }

    /// The header: refused when newer than this reader, checked against the
    /// file's rank, kept.
    fn header(&mut self, h: record::Header) -> Next {
        if h.version > FORMAT_VERSION {
            self.problem(
                ProblemKind::NewerFormat,
                format!(
                    "format version {}; this mpit-tuner reads version {FORMAT_VERSION}",
                    h.version
                ),
            );
            return Next::Unusable;
        }
        let rank = self.rank;
        if i64::from(h.rank) != i64::from(rank) {
            self.problem(
                ProblemKind::RankMismatch,
                format!(
                    "its header says rank {}; reported as rank {rank} (its file name)",
                    h.rank
                ),
            );
        }
        self.log.header = Some(Header {
            size: Some(i64::from(h.size)),
            host: Some(h.host),
            library: Some(h.library),
            library_version: Some(h.library_version),
            thread_level: Some(h.mpi_t_thread_level),
            start_unix: Some(h.start_unix),
            config: serde_json::to_value(&h.config).ok(),
            catalogue: serde_json::to_value(&h.catalogue).ok(),
            sampled: h.variables.len(),
        });
        Next::Line
    }

    /// Any record but the header and samples, at `t`.
    fn event(&mut self, record: Record<'static>, t: f64) {
        let (rank, log) = (self.rank, &mut self.log);
        match record {
            Record::Write(w) => log.writes.push(Write {
                rank,
                t,
                policy: w.policy,
                phase: w.phase.to_string(),
                cvar: w.attempt.cvar,
                index: w.attempt.index,
                old: json(w.attempt.old),
                requested: json(w.attempt.requested),
                readback: json(w.attempt.readback),
                outcome: w.attempt.outcome.as_str().to_string(),
                error: w.attempt.error,
                dry_run: w.dry_run,
            }),
            Record::Setenv(e) => log.setenvs.push(SetEnv {
                rank,
                t,
                policy: e.policy,
                name: e.name,
                value: e.value,
                dry_run: e.dry_run,
                error: e.error,
            }),
            Record::Note(note) => log.notes.push((t, note.policy, note.text)),
            Record::Recommendation(r) => log.recommendations.push((t, r.policy, r.text)),
            Record::PolicyDisabled(d) => log.disabled.push((d.policy, d.reason)),
            Record::PolicySummary(p) => log.policies.push(p),
            Record::Warning(w) => {
                if w.is_abort() {
                    log.aborted = true;
                }
                *log.warnings.entry(w.message).or_insert(0) += 1;
            }
            Record::Object(o) => match o.event {
                ObjectChange::Created => log.objects.0 += 1,
                ObjectChange::Freed => log.objects.1 += 1,
                ObjectChange::Other(_) => {}
            },
            Record::Catalogue(c) => log.new_pvars += c.new_pvars as u64,
            Record::Close(c) => log.close = Some((t, c.reason, c.samples)),
            Record::Collective(c) => log.collectives.push(c),
            // Decisions are many and the report tells their effects (writes,
            // notes); replay records are not in run directories. Headers and
            // samples are read before.
            // A user's `mpit-tuner set`: a write of its own kind (phase
            // `steering`), apart from the policies' in the timeline.
            Record::Control(c) => {
                if let Some(w) = c.write {
                    log.writes.push(Write {
                        rank,
                        t,
                        policy: format!("user request {}", c.id),
                        phase: STEERING.to_string(),
                        cvar: w.cvar,
                        index: None,
                        old: json(w.old),
                        requested: json(w.requested),
                        readback: json(w.readback),
                        outcome: w.outcome.as_str().to_string(),
                        error: c.message.filter(|_| !w.outcome.applied()),
                        dry_run: false,
                    });
                }
            }
            Record::Decision(_)
            | Record::Replay(_)
            | Record::ReplayEnd(_)
            | Record::Header(_)
            | Record::Sample(_) => {}
        }
    }

    /// After the last line: the problems of the whole log (bad lines beyond
    /// those described, empty, no close record) and the log if usable.
    fn finish(mut self) -> (Option<RankLog>, Vec<Problem>) {
        let n = self.n;
        if self.bad > BAD_LINES_SHOWN {
            let detail = format!("and {} more bad lines", self.bad - BAD_LINES_SHOWN);
            self.problem(ProblemKind::BadLines, detail);
        }
        if n == 0 {
            self.problem(
                ProblemKind::Empty,
                "empty: the rank never wrote its header".into(),
            );
            return (None, self.problems);
        }
        if self.log.close.is_none() && self.log.lines > 0 {
            let why = if self.log.aborted {
                "MPI_Abort was called"
            } else {
                "job killed?"
            };
            let detail = format!(
                "ends at line {n} (t = {:.2} s, {} samples) without a close record ({why}): started and never finished",
                self.log.last_t, self.log.samples
            );
            self.problem(ProblemKind::NoClose, detail);
        }
        let mut log = self.log;
        self.folder.into_series(&log.vars, &mut log.series);
        let usable = log.header.is_some() || log.samples > 0 || !log.writes.is_empty();
        (usable.then_some(log), self.problems)
    }
}

fn json(value: Option<vocab::Value>) -> Option<Json> {
    value.and_then(|v| serde_json::to_value(v).ok())
}
