//! Reading a run directory: the per-rank logs (`rank-NNNNN.jsonl`), in
//! parallel and line by line, and `summary.json`.
//!
//! Nothing here fails on a damaged run: every problem (a file that is not
//! JSON, a cut last line, a log without its header or its close record, a
//! newer format, a missing rank) becomes a [`Problem`] and the rest is read.
//! A rank's samples are not kept: each variable is folded into a few
//! running numbers ([`VarAgg`]), and only the variables asked for get a
//! time series, downsampled to at most [`SERIES_POINTS`] points.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use rayon::prelude::*;
use serde_json::Value as Json;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::File;
use std::io::{BufRead, BufReader, IsTerminal};
use std::path::{Path, PathBuf};
use tuner_core::runtime::log::FORMAT_VERSION;
use vocab::record::{self, Record};

/// Points (t, value) of a time series.
pub type Points = Vec<(f64, f64)>;

/// At most this many points of a time series are kept per rank.
pub const SERIES_POINTS: usize = 400;

/// How many bad lines of one file are described (the others are counted).
const BAD_LINES_SHOWN: usize = 3;

/// What is wrong with a run directory or one of its files.
#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    /// What kind of problem: problems of one kind are told together.
    pub kind: ProblemKind,
    /// The rank whose log it is about, if one.
    pub rank: Option<u32>,
    /// The file (name within the run directory), if one.
    pub file: Option<String>,
    /// The details, for this file.
    pub detail: String,
}

/// The kinds of [`Problem`], in the order they are reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ProblemKind {
    /// Ranks of the job with no log at all.
    MissingRanks,
    /// A log that could not be opened or read.
    Unreadable,
    /// An empty log.
    Empty,
    /// A file that is not a tuner log at all.
    NotALog,
    /// A log in a newer format than this reader knows.
    NewerFormat,
    /// A log whose first record is not its header.
    NoHeader,
    /// A header whose rank is not the file's.
    RankMismatch,
    /// Lines that are not JSON or not a known record.
    BadLines,
    /// A last line cut in the middle.
    Truncated,
    /// A log that ends without its close record.
    NoClose,
    /// `summary.json` missing, unreadable or odd.
    Summary,
}

impl ProblemKind {
    /// What the kind means, for a group of files.
    pub fn headline(self) -> &'static str {
        match self {
            ProblemKind::MissingRanks => "ranks with no log",
            ProblemKind::Unreadable => "logs that cannot be read",
            ProblemKind::Empty => "empty logs (the rank never wrote its header)",
            ProblemKind::NotALog => "files that are not tuner logs (skipped)",
            ProblemKind::NewerFormat => {
                "logs in a newer format than this mpit-tuner reads (skipped; upgrade mpit-tuner)"
            }
            ProblemKind::NoHeader => "logs that do not start with their header",
            ProblemKind::RankMismatch => "logs whose header names another rank",
            ProblemKind::BadLines => "logs with lines that are not valid records (skipped)",
            ProblemKind::Truncated => {
                "logs whose last line is cut short (job killed while writing?)"
            }
            ProblemKind::NoClose => {
                "ranks that started and never finished: the log has its header but no close record (job killed or aborted before MPI_Finalize?)"
            }
            ProblemKind::Summary => "summary.json",
        }
    }
}

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

/// What one rank's samples say about one variable, folded as they are read.
#[derive(Debug, Clone, Default)]
pub struct VarAgg {
    /// `name` or `name@object`.
    pub key: String,
    /// The PVAR class (`COUNTER`, `LEVEL`, ...).
    pub class: String,
    /// Sum of the elements of the first value seen.
    pub first: f64,
    /// Sum of the elements of the last value.
    pub last: f64,
    /// The last sample's `mean` (levels), summed over elements.
    pub mean: Option<f64>,
    /// The last sample's `max` (levels), summed over elements.
    pub max: Option<f64>,
    /// Smallest and largest value (element sum) over the samples.
    pub lo: f64,
    /// See `lo`.
    pub hi: f64,
    /// Samples that had it.
    pub samples: u64,
    /// Samples in which it differed from the one before.
    pub changed: u64,
    /// Elements (the array size).
    pub elements: usize,
    /// Element-wise last value (for `.hist` variables).
    pub last_values: Vec<f64>,
}

impl VarAgg {
    /// Whether the class accumulates (counters, aggregates, timers).
    pub fn accumulating(&self) -> bool {
        matches!(self.class.as_str(), "COUNTER" | "AGGREGATE" | "TIMER")
    }

    /// Whether the class is a watermark.
    pub fn watermark(&self) -> bool {
        matches!(self.class.as_str(), "HIGHWATERMARK" | "LOWWATERMARK")
    }

    /// The number the cross-rank summary uses for this rank: the total for
    /// accumulating classes (tool metrics count from zero), the final value
    /// for watermarks, the mean for the others.
    pub fn headline(&self) -> (f64, &'static str) {
        if self.accumulating() {
            let base = if self.key.starts_with("tool.") {
                0.0
            } else {
                self.first
            };
            (self.last - base, "total")
        } else if self.watermark() {
            (self.last, "final")
        } else {
            (self.mean.unwrap_or(self.last), "mean")
        }
    }

    /// The value plotted over time for a sample with element sum `v`.
    pub fn plotted(&self, v: f64) -> f64 {
        if self.accumulating() && !self.key.starts_with("tool.") {
            v - self.first
        } else {
            v
        }
    }
}

/// A downsampled time series: a point every `stride` samples, the stride
/// doubling whenever the buffer fills; the last point is always kept.
#[derive(Debug, Clone, Default)]
pub struct Series {
    /// The kept points (t, value).
    pub points: Vec<(f64, f64)>,
    stride: u64,
    seen: u64,
    last: Option<(f64, f64)>,
}

impl Series {
    fn push(&mut self, t: f64, v: f64) {
        if self.stride == 0 {
            self.stride = 1;
        }
        if self.seen % self.stride == 0 {
            if self.points.len() >= SERIES_POINTS {
                let kept: Vec<(f64, f64)> = self.points.iter().copied().step_by(2).collect();
                self.points = kept;
                self.stride *= 2;
            }
            if self.seen % self.stride == 0 {
                self.points.push((t, v));
                self.last = None;
            } else {
                self.last = Some((t, v));
            }
        } else {
            self.last = Some((t, v));
        }
        self.seen += 1;
    }

    /// The points, with the last sample included.
    pub fn finished(mut self) -> Vec<(f64, f64)> {
        if let Some(p) = self.last.take() {
            self.points.push(p);
        }
        self.points
    }
}

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
    pub series: BTreeMap<String, Vec<(f64, f64)>>,
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
}

/// `summary.json`, read leniently.
#[derive(Debug, Clone, Default)]
pub struct SummaryDoc {
    /// Job size.
    pub size: Option<u32>,
    /// Library family.
    pub library: Option<String>,
    /// `MPI_Get_library_version`.
    pub library_version: Option<String>,
    /// Samples taken by rank 0.
    pub samples_rank0: Option<u64>,
    /// Duration in seconds.
    pub duration_s: Option<f64>,
    /// Cross-rank statistics.
    pub variables: Vec<Stat>,
    /// Classes of ranks.
    pub classes: Vec<Class>,
    /// Message-size histograms per family.
    pub size_histograms: BTreeMap<String, Vec<u64>>,
    /// End-of-run recommendations.
    pub recommendations: Vec<Advice>,
    /// Messages: (kind, text).
    pub messages: Vec<(String, String)>,
}

/// Cross-rank statistics of one quantity.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Stat {
    /// `name`, `name@world` or `name:max`.
    pub name: String,
    /// `total`, `final`, `mean`, `max`.
    pub kind: String,
    /// Ranks that had it.
    pub ranks: u32,
    /// Smallest per-rank value.
    pub min: f64,
    /// Its rank.
    pub min_rank: i64,
    /// Largest per-rank value.
    pub max: f64,
    /// Its rank.
    pub max_rank: i64,
    /// Mean over ranks.
    pub mean: f64,
    /// Standard deviation over ranks.
    pub stddev: f64,
    /// Ranks per bin, 8 bins from min to max.
    pub histogram: Vec<u32>,
}

/// A class of ranks.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Class {
    /// How many ranks.
    pub count: u32,
    /// The members, compactly.
    pub ranks: String,
    /// What they do.
    pub signature: String,
}

/// A recommendation.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Advice {
    /// Stable identifier.
    pub id: String,
    /// What to do.
    pub advice: String,
    /// Why.
    pub evidence: String,
    /// What to set.
    pub setting: String,
}

/// A run directory, read.
#[derive(Debug, Default)]
pub struct Run {
    /// The directory.
    pub dir: PathBuf,
    /// The logs that could be read (at least their header), by rank.
    pub ranks: Vec<RankLog>,
    /// How many rank files there were.
    pub files: usize,
    /// `summary.json`, if it could be read.
    pub summary: Option<SummaryDoc>,
    /// Everything that is wrong.
    pub problems: Vec<Problem>,
    /// The job size, as the headers or summary.json say.
    pub size: Option<u32>,
}

impl Run {
    /// Whether there is anything to report.
    pub fn is_empty(&self) -> bool {
        self.ranks.is_empty() && self.summary.is_none()
    }
}

/// The rank files of a directory, by rank.
pub fn rank_files(dir: &Path) -> std::io::Result<Vec<(u32, PathBuf)>> {
    Ok(vocab::rank_files(dir)?
        .into_iter()
        .map(|f| (f.rank, f.path))
        .collect())
}

/// Reads a run directory: every rank log in parallel (`series` names the
/// variables whose time series to keep), then summary.json. `progress`
/// shows a bar on standard error when it is a terminal.
pub fn read_run(dir: &Path, series: &HashSet<String>, progress: bool) -> std::io::Result<Run> {
    let files = rank_files(dir)?;
    let mut run = Run {
        dir: dir.to_path_buf(),
        files: files.len(),
        ..Run::default()
    };
    let bar = progress_bar(files.len() as u64, progress);
    let results: Vec<(Option<RankLog>, Vec<Problem>)> = files
        .par_iter()
        .map(|(rank, path)| {
            let r = read_rank(*rank, path, series);
            bar.inc(1);
            r
        })
        .collect();
    bar.finish_and_clear();
    for (log, problems) in results {
        run.problems.extend(problems);
        if let Some(log) = log {
            run.ranks.push(log);
        }
    }
    run.summary = read_summary(dir, &mut run.problems);
    // The job size: the headers', else summary.json's.
    let header_size = run
        .ranks
        .iter()
        .filter_map(|r| r.header.as_ref()?.size)
        .filter(|&s| s > 0)
        .max()
        .map(|s| s as u32);
    run.size = header_size.or(run.summary.as_ref().and_then(|s| s.size));
    if let Some(size) = run.size {
        let present: HashSet<u32> = files.iter().map(|(r, _)| *r).collect();
        let missing: Vec<u32> = (0..size).filter(|r| !present.contains(r)).collect();
        if !missing.is_empty() {
            run.problems.push(Problem {
                kind: ProblemKind::MissingRanks,
                rank: None,
                file: None,
                detail: format!(
                    "{} {} {} no log (its rank-NNNNN.jsonl was deleted, or the rank never started the tuner)",
                    if missing.len() == 1 { "rank" } else { "ranks" },
                    tuner_core::decide::format_ranks(&missing),
                    if missing.len() == 1 { "has" } else { "have" }
                ),
            });
        }
    }
    run.problems.sort_by(|a, b| {
        (a.kind, a.rank, &a.file)
            .partial_cmp(&(b.kind, b.rank, &b.file))
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    Ok(run)
}

/// The time series of one variable (`key`) on every rank, read again from
/// the logs (when it was not known before the first reading).
pub fn read_series(run: &Run, key: &str) -> Vec<(u32, Points)> {
    let wanted: HashSet<String> = std::iter::once(key.to_string()).collect();
    let bar = progress_bar(run.ranks.len() as u64, true);
    let mut out: Vec<(u32, Points)> = run
        .ranks
        .par_iter()
        .filter_map(|r| {
            let (log, _) = read_rank(r.rank, &run.dir.join(&r.file), &wanted);
            bar.inc(1);
            let points = log?.series.remove(key)?;
            Some((r.rank, points))
        })
        .collect();
    bar.finish_and_clear();
    out.sort_by_key(|(r, _)| *r);
    out
}

/// A progress bar on standard error when it is a terminal, hidden
/// otherwise.
pub fn progress_bar(len: u64, wanted: bool) -> ProgressBar {
    if !wanted || !std::io::stderr().is_terminal() || len < 2 {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
    if let Ok(style) =
        ProgressStyle::with_template("reading logs {bar:40} {pos}/{len} ({per_sec}, {eta} left)")
    {
        bar.set_style(style);
    }
    bar
}

/// The sum of a value's elements, NaN (unknown) counted as 0.
fn sum(values: &[f64]) -> f64 {
    values.iter().filter(|x| !x.is_nan()).sum()
}

fn json(value: Option<vocab::Value>) -> Option<Json> {
    value.and_then(|v| serde_json::to_value(v).ok())
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
    let mut problems = Vec::new();
    let mut problem = |kind: ProblemKind, detail: String| {
        problems.push(Problem {
            kind,
            rank: Some(rank),
            file: Some(file_name.clone()),
            detail,
        })
    };
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) => {
            problem(ProblemKind::Unreadable, format!("cannot open: {e}"));
            return (None, problems);
        }
    };
    let mut reader = BufReader::with_capacity(256 * 1024, file);
    let mut log = RankLog {
        rank,
        file: file_name.clone(),
        ..RankLog::default()
    };
    let mut slots: HashMap<String, usize> = HashMap::new();
    let mut by_position: Vec<usize> = Vec::new();
    let mut series: HashMap<usize, Series> = HashMap::new();
    let mut buf = Vec::with_capacity(64 * 1024);
    let mut bad = 0usize;
    let mut n = 0u64;
    loop {
        buf.clear();
        match reader.read_until(b'\n', &mut buf) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => {
                problem(
                    ProblemKind::Unreadable,
                    format!("read error after line {n}: {e}"),
                );
                break;
            }
        }
        n += 1;
        let complete = buf.last() == Some(&b'\n');
        let trimmed = buf.trim_ascii();
        if trimmed.is_empty() {
            continue;
        }
        let record: Record<'static> = match serde_json::from_slice(trimmed) {
            Ok(r) => r,
            Err(e) => {
                let value = serde_json::from_slice::<Json>(trimmed).ok();
                let is_json = value.is_some();
                // A record type of a newer tuner: not this reader's business.
                let kind = value
                    .as_ref()
                    .and_then(|v| v.get("type")?.as_str().map(str::to_string));
                if n > 1 && kind.as_deref().is_some_and(|k| !record::KINDS.contains(&k)) {
                    continue;
                }
                if n == 1 && !is_json {
                    problem(
                        ProblemKind::NotALog,
                        format!("line 1 is not JSON ({e}); not a tuner log"),
                    );
                    return (None, problems);
                }
                if n == 1 && kind.as_deref() == Some("header") {
                    if let Some(v) = value
                        .as_ref()
                        .and_then(|v| v.get("version")?.as_u64())
                        .filter(|&v| v > u64::from(FORMAT_VERSION))
                    {
                        problem(
                            ProblemKind::NewerFormat,
                            format!(
                                "format version {v}; this mpit-tuner reads version {FORMAT_VERSION}"
                            ),
                        );
                        return (None, problems);
                    }
                }
                if !complete && !is_json {
                    problem(
                        ProblemKind::Truncated,
                        format!(
                            "line {n} is cut short after {} bytes (skipped)",
                            trimmed.len()
                        ),
                    );
                } else {
                    bad += 1;
                    if bad <= BAD_LINES_SHOWN {
                        let what = if is_json {
                            "is not a record this version knows"
                        } else {
                            "is not JSON"
                        };
                        problem(ProblemKind::BadLines, format!("line {n} {what} ({e})"));
                    }
                }
                continue;
            }
        };
        log.lines = n;
        if n == 1 && !matches!(record, Record::Header(_)) {
            problem(
                ProblemKind::NoHeader,
                format!(
                    "line 1 is a `{}` record, not the header; rank, size and library unknown",
                    record.kind()
                ),
            );
        }
        let t = match record {
            Record::Header(_) => log.last_t,
            _ => record.t(),
        };
        log.last_t = log.last_t.max(t);
        match record {
            Record::Header(h) => {
                if h.version > FORMAT_VERSION {
                    problem(
                        ProblemKind::NewerFormat,
                        format!(
                            "format version {}; this mpit-tuner reads version {FORMAT_VERSION}",
                            h.version
                        ),
                    );
                    return (None, problems);
                }
                if i64::from(h.rank) != i64::from(rank) {
                    problem(
                        ProblemKind::RankMismatch,
                        format!(
                            "its header says rank {}; reported as rank {rank} (its file name)",
                            h.rank
                        ),
                    );
                }
                log.header = Some(Header {
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
            }
            Record::Sample(sample) => {
                log.samples += 1;
                for (pos, v) in sample.vars.iter().enumerate() {
                    let slot = match by_position.get(pos).copied().filter(|&s| {
                        let a: &VarAgg = &log.vars[s];
                        same_key(&a.key, &v.name, v.object.as_deref())
                    }) {
                        Some(s) => s,
                        None => {
                            let key = match &v.object {
                                Some(o) => format!("{}@{o}", v.name),
                                None => v.name.to_string(),
                            };
                            let s = *slots.entry(key.clone()).or_insert_with(|| {
                                log.vars.push(VarAgg {
                                    key,
                                    class: v.class.as_str().to_string(),
                                    ..VarAgg::default()
                                });
                                log.vars.len() - 1
                            });
                            if by_position.len() <= pos {
                                by_position.resize(pos + 1, usize::MAX);
                            }
                            by_position[pos] = s;
                            s
                        }
                    };
                    let agg = &mut log.vars[slot];
                    let total = sum(&v.value);
                    if agg.samples == 0 {
                        agg.first = total;
                        agg.lo = total;
                        agg.hi = total;
                    } else if total != agg.last {
                        agg.changed += 1;
                    }
                    agg.samples += 1;
                    agg.last = total;
                    agg.lo = agg.lo.min(total);
                    agg.hi = agg.hi.max(total);
                    agg.elements = v.value.len();
                    if let Some(m) = &v.mean {
                        agg.mean = Some(sum(m));
                    }
                    if let Some(m) = &v.max {
                        agg.max = Some(sum(m));
                    }
                    if agg.key.ends_with(".hist") {
                        agg.last_values = v
                            .value
                            .iter()
                            .map(|x| if x.is_nan() { 0.0 } else { *x })
                            .collect();
                    }
                    if series_wanted.contains(&agg.key) {
                        let y = agg.plotted(total);
                        series.entry(slot).or_default().push(t, y);
                    }
                }
            }
            Record::Write(w) => log.writes.push(Write {
                rank,
                t,
                policy: w.policy,
                phase: w.phase,
                cvar: w.cvar,
                index: w.index,
                old: json(w.old),
                requested: json(w.requested),
                readback: json(w.readback),
                outcome: w.outcome.as_str().to_string(),
                error: w.error,
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
                if w.message.contains("MPI_Abort") {
                    log.aborted = true;
                }
                *log.warnings.entry(w.message).or_insert(0) += 1;
            }
            Record::Object(o) => match o.event.as_str() {
                "created" => log.objects.0 += 1,
                "freed" => log.objects.1 += 1,
                _ => {}
            },
            Record::Catalogue(c) => log.new_pvars += c.new_pvars as u64,
            Record::Close(c) => log.close = Some((t, c.reason, c.samples)),
            // Decisions are many and the report tells their effects (writes,
            // notes); replay records are not in run directories.
            Record::Decision(_)
            | Record::Collective(_)
            | Record::Replay(_)
            | Record::ReplayEnd(_) => {}
        }
    }
    if bad > BAD_LINES_SHOWN {
        problem(
            ProblemKind::BadLines,
            format!("and {} more bad lines", bad - BAD_LINES_SHOWN),
        );
    }
    if n == 0 {
        problem(
            ProblemKind::Empty,
            "empty: the rank never wrote its header".into(),
        );
        return (None, problems);
    }
    if log.close.is_none() && log.lines > 0 {
        let why = if log.aborted {
            "MPI_Abort was called"
        } else {
            "job killed?"
        };
        problem(
            ProblemKind::NoClose,
            format!(
                "ends at line {n} (t = {:.2} s, {} samples) without a close record ({why}): started and never finished",
                log.last_t, log.samples
            ),
        );
    }
    for (slot, s) in series {
        log.series.insert(log.vars[slot].key.clone(), s.finished());
    }
    let usable = log.header.is_some() || log.samples > 0 || !log.writes.is_empty();
    (usable.then_some(log), problems)
}

fn same_key(key: &str, name: &str, object: Option<&str>) -> bool {
    match object {
        None => key == name,
        Some(o) => {
            key.len() == name.len() + 1 + o.len()
                && key.starts_with(name)
                && key.as_bytes()[name.len()] == b'@'
                && key.ends_with(o)
        }
    }
}

/// Reads summary.json leniently; records what is wrong with it.
pub fn read_summary(dir: &Path, problems: &mut Vec<Problem>) -> Option<SummaryDoc> {
    let path = dir.join("summary.json");
    let mut problem = |detail: String| {
        problems.push(Problem {
            kind: ProblemKind::Summary,
            rank: None,
            file: Some("summary.json".into()),
            detail,
        })
    };
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            problem(
                "missing (rank 0 did not get through MPI_Finalize?): cross-rank statistics, \
                 classes and recommendations below are recomputed from the logs"
                    .into(),
            );
            return None;
        }
        Err(e) => {
            problem(format!(
                "cannot be read ({e}): statistics recomputed from the logs"
            ));
            return None;
        }
    };
    let doc: Json = match serde_json::from_slice(&bytes) {
        Ok(d) => d,
        Err(e) => {
            problem(format!(
                "is not valid JSON ({e}): statistics recomputed from the logs"
            ));
            return None;
        }
    };
    if !doc.is_object() {
        problem("is not a JSON object: statistics recomputed from the logs".into());
        return None;
    }
    let version = doc["version"].as_u64();
    if let Some(v) = version.filter(|&v| v > u64::from(FORMAT_VERSION)) {
        problem(format!(
            "format version {v}, newer than this mpit-tuner's ({FORMAT_VERSION}); read what is recognisable"
        ));
    }
    let s = |v: &Json| v.as_str().unwrap_or_default().to_string();
    let f = |v: &Json| v.as_f64().unwrap_or(f64::NAN);
    let variables = doc["variables"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter(|v| v["name"].is_string())
                .map(|v| Stat {
                    name: s(&v["name"]),
                    kind: s(&v["kind"]),
                    ranks: v["ranks"].as_u64().unwrap_or(0) as u32,
                    min: f(&v["min"]),
                    min_rank: v["min_rank"].as_i64().unwrap_or(-1),
                    max: f(&v["max"]),
                    max_rank: v["max_rank"].as_i64().unwrap_or(-1),
                    mean: f(&v["mean"]),
                    stddev: f(&v["stddev"]),
                    histogram: v["histogram"]
                        .as_array()
                        .map(|h| h.iter().map(|c| c.as_u64().unwrap_or(0) as u32).collect())
                        .unwrap_or_default(),
                })
                .collect()
        })
        .unwrap_or_default();
    let classes = doc["classes"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|c| Class {
                    count: c["count"].as_u64().unwrap_or(0) as u32,
                    ranks: s(&c["ranks"]),
                    signature: s(&c["signature"]),
                })
                .collect()
        })
        .unwrap_or_default();
    let size_histograms = doc["size_histograms"]
        .as_object()
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| {
                    Some((
                        k.clone(),
                        v.as_array()?
                            .iter()
                            .map(|c| c.as_u64().unwrap_or(0))
                            .collect(),
                    ))
                })
                .collect()
        })
        .unwrap_or_default();
    let recommendations = doc["recommendations"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|r| Advice {
                    id: s(&r["id"]),
                    advice: s(&r["advice"]),
                    evidence: s(&r["evidence"]),
                    setting: s(&r["setting"]),
                })
                .collect()
        })
        .unwrap_or_default();
    let messages = doc["messages"]
        .as_array()
        .map(|a| a.iter().map(|m| (s(&m["kind"]), s(&m["text"]))).collect())
        .unwrap_or_default();
    Some(SummaryDoc {
        size: doc["size"].as_u64().map(|n| n as u32),
        library: doc["library"].as_str().map(str::to_string),
        library_version: doc["library_version"].as_str().map(str::to_string),
        samples_rank0: doc["samples_rank0"].as_u64(),
        duration_s: doc["duration_s"].as_f64(),
        variables,
        classes,
        size_histograms,
        recommendations,
        messages,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rank_file_names() {
        assert_eq!(
            vocab::record::rank_of_file_name("rank-00003.jsonl"),
            Some(3)
        );
        assert_eq!(
            vocab::record::rank_of_file_name("rank-123456.jsonl"),
            Some(123_456)
        );
        assert_eq!(vocab::record::rank_of_file_name("rank-.jsonl"), None);
        assert_eq!(vocab::record::rank_of_file_name("rank-0003.json"), None);
        assert_eq!(vocab::record::rank_of_file_name("summary.json"), None);
    }

    #[test]
    fn series_keeps_a_bounded_spread_of_points_and_the_last() {
        let mut s = Series::default();
        for i in 0..10_000 {
            s.push(i as f64, i as f64);
        }
        let p = s.finished();
        assert!(p.len() <= SERIES_POINTS + 1, "{}", p.len());
        assert!(p.len() > SERIES_POINTS / 4);
        assert_eq!(p.first(), Some(&(0.0, 0.0)));
        assert_eq!(p.last(), Some(&(9999.0, 9999.0)));
        assert!(p.windows(2).all(|w| w[0].0 < w[1].0));
    }

    #[test]
    fn keys_compare_without_allocating() {
        assert!(same_key("a@world", "a", Some("world")));
        assert!(!same_key("a@world", "a", None));
        assert!(!same_key("ab@world", "a", Some("world")));
        assert!(same_key("a", "a", None));
    }
}
