//! Reading a run directory: the per-rank logs (`rank-NNNNN.jsonl`), in
//! parallel and line by line, and `summary.json`.
//!
//! Nothing here fails on a damaged run: every problem (a file that is not
//! JSON, a cut last line, a log without its header or its close record, a
//! newer format, a missing rank) becomes a [`Problem`] and the rest is read.
//! A rank's samples are not kept: each variable is folded into a few
//! running numbers ([`fold::VarAgg`]), and only the variables asked for get
//! a time series, downsampled to at most [`fold::SERIES_POINTS`] points.
//!
//! Modules: [`problem`] (what can be wrong), [`rank`] (one log, line by
//! line, into a [`RankLog`]), [`fold`] (samples into running numbers and
//! series), [`summary`] (`summary.json`). This file reads the whole
//! directory into a [`Run`].

mod fold;
mod problem;
mod rank;
mod summary;

pub use fold::Points;
pub use problem::{Problem, ProblemKind};
pub use rank::{read_logs, Header, RankLog, Ranked, SetEnv, Write};
pub use summary::{read_summary, Advice, Class, Stat, SummaryDoc};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::collections::HashSet;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

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

/// Reads a run directory: every rank log in parallel (`series` names the
/// variables whose time series to keep), then summary.json. `progress`
/// shows a bar on standard error when it is a terminal.
pub fn read_run(dir: &Path, series: &HashSet<String>, progress: bool) -> std::io::Result<Run> {
    let files = vocab::rank_files(dir)?;
    let mut run = Run {
        dir: dir.to_path_buf(),
        files: files.len(),
        ..Run::default()
    };
    let bar = progress_bar(files.len() as u64, progress);
    let results = read_logs(&files, series, &bar);
    bar.finish_and_clear();
    for (log, problems) in results {
        run.problems.extend(problems);
        if let Some(log) = log {
            run.ranks.push(log);
        }
    }
    run.summary = read_summary(dir, &mut run.problems);
    run.size = job_size(&run);
    if let Some(size) = run.size {
        let present: HashSet<u32> = files.iter().map(|f| f.rank).collect();
        let missing: Vec<u32> = (0..size).filter(|r| !present.contains(r)).collect();
        if !missing.is_empty() {
            run.problems.push(missing_ranks(&missing));
        }
    }
    run.problems.sort_by(|a, b| {
        (a.kind, a.rank, &a.file)
            .partial_cmp(&(b.kind, b.rank, &b.file))
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    Ok(run)
}

/// The job size: the headers', else summary.json's.
fn job_size(run: &Run) -> Option<u32> {
    let header_size = run
        .ranks
        .iter()
        .filter_map(|r| Some(r.header.as_ref()?.size))
        .filter(|&s| s > 0)
        .max()
        .map(|s| s as u32);
    header_size.or(run.summary.as_ref().and_then(|s| s.size))
}

/// The problem of ranks (of the job size) without a rank file.
fn missing_ranks(missing: &[u32]) -> Problem {
    Problem {
        kind: ProblemKind::MissingRanks,
        rank: None,
        file: None,
        detail: format!(
            "{} {} {} no log (its rank-NNNNN.jsonl was deleted, or it wrote no line in its node's log, or the rank never started the tuner)",
            if missing.len() == 1 { "rank" } else { "ranks" },
            tuner_core::decide::format_ranks(missing),
            if missing.len() == 1 { "has" } else { "have" }
        ),
    }
}

/// The time series of one variable (`key`) on every rank, read again from
/// the logs (when it was not known before the first reading).
pub fn read_series(run: &Run, key: &str) -> Vec<(u32, Points)> {
    let wanted: HashSet<String> = std::iter::once(key.to_string()).collect();
    let bar = progress_bar(run.ranks.len() as u64, true);
    let files: Vec<vocab::RankFile> = run.ranks.iter().map(|r| r.source(&run.dir)).collect();
    let mut out: Vec<(u32, Points)> = read_logs(&files, &wanted, &bar)
        .into_iter()
        .zip(&files)
        .filter_map(|((log, _), f)| Some((f.rank, log?.series.remove(key)?)))
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

#[cfg(test)]
mod tests {
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
}
