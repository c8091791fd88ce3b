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
use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use tuner_core::run::log::FORMAT_VERSION;
use vocab::read::{DamageKind, Damaged};
use vocab::record::{self, CvarWrite, ObjectChange, Phase, Record};

/// How many bad lines of one file are described (the others are counted).
const BAD_LINES_SHOWN: usize = 3;

/// The log header (first record).
pub use vocab::record::Header;

/// A record of one rank, with the rank it came from (the report puts the
/// records of every rank side by side).
#[derive(Debug, Clone)]
pub struct Ranked<T> {
    /// The rank.
    pub rank: u32,
    /// Its record.
    pub record: T,
}

/// A CVAR write: a policy's `write` record, or the write of a user's
/// request (`mpit-tuner set`) with the phase [`Phase::Steering`].
pub type Write = Ranked<record::Write>;

/// A `setenv` record.
pub type SetEnv = Ranked<record::Setenv>;

/// A policy's `policy_summary` record.
pub use vocab::record::PolicySummary;

/// One rank's log, read.
#[derive(Debug, Clone, Default)]
pub struct RankLog {
    /// The rank (from the file name, or the lines of a node's log).
    pub rank: u32,
    /// The file name.
    pub file: String,
    /// Whether the file is a node's log (other ranks' lines in it too).
    pub shared: bool,
    /// The header, if the log has one.
    pub header: Option<Header>,
    /// Samples read.
    pub samples: u64,
    /// The `t` of the last record.
    pub last_t: f64,
    /// The close record: (`t`, `reason`, `samples`).
    pub close: Option<(f64, record::CloseReason, u64)>,
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

impl RankLog {
    /// The log this was read from, in the run directory `dir`.
    pub fn source(&self, dir: &Path) -> vocab::RankFile {
        vocab::RankFile {
            rank: self.rank,
            path: dir.join(&self.file),
            shared: self.shared,
        }
    }
}

/// What the reading of one rank's log gives: the log, unless nothing of it
/// is usable, and its problems.
pub type Read = (Option<RankLog>, Vec<Problem>);

/// Reads every rank's log among `files`, each file once: a node's log is
/// read in one pass for all its ranks (reading it rank by rank would read
/// a node of K ranks K times). One result per rank, in `files`' order.
pub fn read_logs(
    files: &[vocab::RankFile],
    series_wanted: &HashSet<String>,
    bar: &indicatif::ProgressBar,
) -> Vec<Read> {
    use rayon::prelude::*;
    let groups = vocab::read::by_file(files);
    let mut read: Vec<(u32, Read)> = groups
        .par_iter()
        .flat_map_iter(|group| {
            let out = match group.as_slice() {
                [one] if !one.shared => vec![(one.rank, read_rank(one, series_wanted))],
                shared => read_node(shared, series_wanted),
            };
            bar.inc(out.len() as u64);
            out
        })
        .collect();
    let order: std::collections::HashMap<u32, usize> =
        files.iter().enumerate().map(|(i, f)| (f.rank, i)).collect();
    read.sort_by_key(|(rank, _)| order.get(rank).copied().unwrap_or(usize::MAX));
    read.into_iter().map(|(_, r)| r).collect()
}

/// Reads the ranks `files` of one node's log in one pass, each line given
/// to the reader of the rank it starts with (as [`read_rank`] reads one).
fn read_node(files: &[&vocab::RankFile], series_wanted: &HashSet<String>) -> Vec<(u32, Read)> {
    let Some(first) = files.first() else {
        return Vec::new();
    };
    let file_name = first
        .path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // Per rank: its reader, and whether its log turned out unusable.
    let mut readers: BTreeMap<u32, (RankReader<'_>, bool)> = files
        .iter()
        .map(|f| {
            let mut reader = RankReader::new(f.rank, file_name.clone(), series_wanted);
            reader.log.shared = true;
            (f.rank, (reader, false))
        })
        .collect();
    let mut records = match vocab::records(&first.path) {
        Ok(r) => r,
        Err(e) => {
            return readers
                .into_values()
                .map(|(mut reader, _)| {
                    reader.problem(ProblemKind::Unreadable, format!("cannot open: {e}"));
                    (reader.rank, (None, reader.problems))
                })
                .collect();
        }
    };
    while let Some(item) = records.next() {
        // A line without its rank belongs to none (schema --check names it).
        let Some((reader, unusable)) = records.line_rank().and_then(|r| readers.get_mut(&r)) else {
            continue;
        };
        if *unusable {
            continue;
        }
        *unusable = matches!(reader.item(item), Next::Unusable);
    }
    let lines = records.lines() as u64;
    readers
        .into_values()
        .map(|(mut reader, unusable)| {
            if unusable {
                return (reader.rank, (None, reader.problems));
            }
            reader.n = lines;
            (reader.rank, reader.finish())
        })
        .collect()
}

/// Reads one rank's log (through [`vocab::records`]). Returns `None` when
/// nothing of it is usable.
pub fn read_rank(file: &vocab::RankFile, series_wanted: &HashSet<String>) -> Read {
    let file_name = file
        .path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut reader = RankReader::new(file.rank, file_name, series_wanted);
    reader.log.shared = file.shared;
    let mut records = match file.records() {
        Ok(r) => r,
        Err(e) => {
            reader.problem(ProblemKind::Unreadable, format!("cannot open: {e}"));
            return (None, reader.problems);
        }
    };
    for item in records.by_ref() {
        if let Next::Unusable = reader.item(item) {
            return (None, reader.problems);
        }
    }
    reader.n = records.lines() as u64;
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
    /// The line being read, then (at the end) the lines of the file,
    /// blank ones included.
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

    /// Reads one item of the log: a record, or a damaged line.
    fn item(&mut self, item: Result<(usize, Record<'static>), vocab::Damaged>) -> Next {
        match item {
            Ok((n, record)) => {
                self.n = n as u64;
                self.record(record)
            }
            Err(damaged) => {
                self.n = damaged.line as u64;
                self.damaged(damaged)
            }
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

    /// A line that is not a record this version knows: a record type of a
    /// newer tuner (skipped silently), a file that is not a log, a header of
    /// a newer format, a cut last line, a bad line, or a read error (the
    /// reading ends).
    fn damaged(&mut self, d: Damaged) -> Next {
        let n = self.n;
        let e = &d.error;
        match &d.kind {
            DamageKind::Io => {
                let detail = format!("read error after line {}: {e}", n - 1);
                self.problem(ProblemKind::Unreadable, detail);
                return Next::Line;
            }
            // A record type of a newer tuner: not this reader's business.
            DamageKind::UnknownType(_) if n > 1 => return Next::Line,
            DamageKind::NotJson if n == 1 => {
                self.problem(
                    ProblemKind::NotALog,
                    format!("line 1 is not JSON ({e}); not a tuner log"),
                );
                return Next::Unusable;
            }
            DamageKind::NewerFormat(v) if n == 1 => {
                self.problem(
                    ProblemKind::NewerFormat,
                    format!("format version {v}; this mpit-tuner reads version {FORMAT_VERSION}"),
                );
                return Next::Unusable;
            }
            _ => {}
        }
        let is_json = d.kind != DamageKind::NotJson;
        if d.truncated && !is_json {
            self.problem(
                ProblemKind::Truncated,
                format!("line {n} is cut short after {} bytes (skipped)", d.bytes),
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
        self.log.header = Some(h);
        Next::Line
    }

    /// Any record but the header and samples, at `t`.
    fn event(&mut self, record: Record<'static>, t: f64) {
        let (rank, log) = (self.rank, &mut self.log);
        match record {
            Record::Write(record) => log.writes.push(Ranked { rank, record }),
            Record::Setenv(record) => log.setenvs.push(Ranked { rank, record }),
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
            Record::Steering(c) => {
                if let Some(w) = c.write {
                    let record = record::Write {
                        t,
                        policy: format!("user request {}", c.id),
                        phase: Phase::Steering,
                        attempt: CvarWrite {
                            cvar: w.cvar,
                            index: None,
                            old: w.old,
                            requested: w.requested,
                            readback: w.readback,
                            outcome: w.outcome,
                            error: c.message.filter(|_| !w.outcome.applied()),
                        },
                        source: c.request,
                        dry_run: false,
                    };
                    log.writes.push(Ranked { rank, record });
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
