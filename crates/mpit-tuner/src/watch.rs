//! `mpit-tuner watch RUN_DIR`: a live view of a running job, from its run
//! directory only.
//!
//! [`Watch`] follows every rank's log incrementally ([`vocab::Follow`]:
//! whole lines only, from where it left off; ranks that have not written yet
//! read as empty) and keeps what a frame shows: ranks alive and finished,
//! samples, elapsed time, the variables whose latest values differ most
//! across ranks (with their rates), the latest decisions, writes, steering
//! answers and warnings, and a short history of each variable. Two views
//! draw that one state: [`Watch::frame`] renders it as plain text (the
//! plain mode prints one frame per refresh, for pipes, dumb terminals,
//! `--once` and `--plain`), and [`tui`] draws it full-screen on a terminal
//! with ratatui. It never writes into the run directory and never slows
//! the job.

use anyhow::{bail, Context, Result};
use clap::Args;
use std::collections::{BTreeMap, VecDeque};
use std::fmt::Write as _;
use std::io::{IsTerminal, Write as _};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;
use vocab::record::{Branch, Header, SteeringOutcome};
use vocab::{Follow, Record};

mod tui;

/// Options of `mpit-tuner watch`.
#[derive(Debug, Args)]
pub struct WatchArgs {
    /// The run directory of a running (or finished) job.
    run_dir: PathBuf,
    /// Print frames as plain text, one after the other, instead of the
    /// full-screen view (plain is the default when standard output is not a
    /// terminal or TERM is dumb or unset).
    #[arg(long)]
    plain: bool,
    /// Print one frame and exit.
    #[arg(long)]
    once: bool,
    /// How often to refresh (durations: docs/guide.md#durations).
    #[arg(long, value_name = "DURATION", default_value = "1s")]
    every: String,
    /// How many variables and events a frame shows.
    #[arg(long, value_name = "N", default_value_t = 8)]
    top: usize,
}

/// Runs `mpit-tuner watch`.
pub fn run(args: &WatchArgs) -> Result<ExitCode> {
    let every = policies::parse_duration(&args.every)
        .map_err(|e| anyhow::anyhow!("--every {:?}: {e}", args.every))?;
    if !args.run_dir.is_dir() {
        bail!("{} is not a directory", args.run_dir.display());
    }
    let mut watch = Watch::new(&args.run_dir);
    let every = every.max(Duration::from_millis(50));
    if !args.plain && !args.once && full_screen_possible() {
        return tui::run(&mut watch, every, args.top).map(|()| ExitCode::SUCCESS);
    }
    let mut out = std::io::stdout().lock();
    loop {
        watch.poll().context("reading the run directory")?;
        let frame = watch.frame(args.top);
        writeln!(out, "{frame}")?;
        out.flush()?;
        if args.once || watch.finished() {
            return Ok(ExitCode::SUCCESS);
        }
        std::thread::sleep(every);
    }
}

/// Whether the full-screen view can be drawn: standard output is a terminal
/// that is not dumb.
fn full_screen_possible() -> bool {
    let term = std::env::var_os("TERM").unwrap_or_default();
    std::io::stdout().is_terminal() && !term.is_empty() && term != "dumb"
}

/// What one rank's log said so far.
#[derive(Debug, Default)]
struct Rank {
    header: Option<Header>,
    samples: u64,
    last_t: f64,
    closed: bool,
    /// The latest sample: name (with `@object`) -> (sum of the value's
    /// elements, sum of the rates if it has some).
    latest: BTreeMap<String, (f64, Option<f64>)>,
}

/// One line of the events list.
#[derive(Debug, Clone, PartialEq)]
struct Event {
    t: f64,
    rank: u32,
    kind: &'static str,
    text: String,
}

/// The live state of a run directory.
#[derive(Debug)]
pub struct Watch {
    dir: PathBuf,
    /// Each log file followed: a rank's own (with its rank), or a node's
    /// (`None`: its lines say their ranks).
    files: BTreeMap<PathBuf, (Follow, Option<u32>)>,
    ranks: BTreeMap<u32, Rank>,
    events: VecDeque<Event>,
    warnings: VecDeque<Event>,
    damaged: u64,
    /// Each variable's mean across ranks, one value per [`Watch::poll`]
    /// (the last [`HISTORY`]), for the full-screen view's sparklines.
    history: BTreeMap<String, VecDeque<f64>>,
}

/// Events and warnings kept.
const KEEP: usize = 64;

/// Values of history kept per variable (refreshes).
pub const HISTORY: usize = 60;

/// One variable's row: where its latest values are lowest and highest
/// across ranks, their mean, the mean rate and the spread that orders rows.
#[derive(Debug, Clone, PartialEq)]
struct VarRow<'a> {
    name: &'a str,
    lo: (u32, f64),
    hi: (u32, f64),
    mean: f64,
    rate: Option<f64>,
    spread: f64,
}

impl Watch {
    /// A view of `dir`; nothing read yet.
    pub fn new(dir: &Path) -> Watch {
        Watch {
            dir: dir.to_path_buf(),
            files: BTreeMap::new(),
            ranks: BTreeMap::new(),
            events: VecDeque::new(),
            warnings: VecDeque::new(),
            damaged: 0,
            history: BTreeMap::new(),
        }
    }

    /// Reads what the logs gained since the last call (and logs that
    /// appeared).
    pub fn poll(&mut self) -> std::io::Result<()> {
        for (path, rank) in vocab::log_paths(&self.dir)? {
            if let Some(rank) = rank {
                self.ranks.entry(rank).or_default();
            }
            self.files
                .entry(path)
                .or_insert_with_key(|path| (Follow::new(path), rank));
        }
        let mut events = Vec::new();
        let mut warnings = Vec::new();
        for (follow, own) in self.files.values_mut() {
            for (tag, item) in follow.poll_tagged() {
                let Ok((_, record)) = item else {
                    self.damaged += 1;
                    continue;
                };
                // A line of a node's log without its rank is damaged.
                let Some(rank) = own.or(tag) else {
                    self.damaged += 1;
                    continue;
                };
                let state = self.ranks.entry(rank).or_default();
                let t = record.t();
                state.last_t = state.last_t.max(t);
                let event = |kind, text| Event {
                    t,
                    rank,
                    kind,
                    text,
                };
                match record {
                    Record::Header(h) => state.header = Some(h),
                    Record::Sample(s) => {
                        state.samples += 1;
                        state.latest.clear();
                        for v in s.vars.iter() {
                            if v.name.ends_with(".hist") {
                                continue;
                            }
                            let key = match &v.object {
                                Some(o) => format!("{}@{o}", v.name),
                                None => v.name.to_string(),
                            };
                            let value = v.value.iter().filter(|x| x.is_finite()).sum();
                            let rate = v
                                .rate
                                .as_ref()
                                .map(|r| r.iter().filter(|x| x.is_finite()).sum());
                            state.latest.insert(key, (value, rate));
                        }
                    }
                    Record::Close(_) => state.closed = true,
                    Record::Decision(d) if d.fired => events.push(event(
                        "decision",
                        format!(
                            "{} fired {}",
                            d.policy,
                            d.branch.as_ref().map_or("", Branch::as_str)
                        ),
                    )),
                    Record::Write(w) => events.push(event(
                        if w.attempt.outcome.applied() {
                            "write"
                        } else {
                            "refusal"
                        },
                        format!(
                            "{} {} {}: {}",
                            w.policy,
                            w.attempt.cvar,
                            w.attempt.outcome.as_str(),
                            show(w.attempt.readback.as_ref().or(w.attempt.requested.as_ref()))
                        ),
                    )),
                    Record::Steering(c) => events.push(event(
                        "control",
                        format!(
                            "{}: {}{}",
                            if c.request.is_empty() {
                                &c.id
                            } else {
                                &c.request
                            },
                            c.outcome.as_str(),
                            match (&c.message, c.outcome) {
                                (_, SteeringOutcome::NotForThisRank) | (None, _) => String::new(),
                                (Some(m), _) => format!(" ({})", first_line(m)),
                            }
                        ),
                    )),
                    Record::PolicyDisabled(p) => events.push(event(
                        "disabled",
                        format!("{}: {}", p.policy, first_line(&p.reason)),
                    )),
                    Record::Warning(w) => warnings.push(event("warning", first_line(&w.message))),
                    _ => {}
                }
            }
        }
        for (list, new) in [(&mut self.events, events), (&mut self.warnings, warnings)] {
            list.extend(new);
            // The latest KEEP by time (then rank and text), whatever order
            // the files were read in: a node's log interleaves its ranks,
            // rank logs come one after another, and with more than KEEP
            // records the oldest by arrival would differ between the two.
            list.make_contiguous().sort_by(|a, b| {
                (a.t.total_cmp(&b.t))
                    .then(a.rank.cmp(&b.rank))
                    .then(a.kind.cmp(b.kind))
                    .then(a.text.cmp(&b.text))
            });
            while list.len() > KEEP {
                list.pop_front();
            }
        }
        let means: Vec<(String, f64)> = self
            .var_rows()
            .iter()
            .map(|r| (r.name.to_string(), r.mean))
            .collect();
        for (name, mean) in means {
            let h = self.history.entry(name).or_default();
            h.push_back(mean);
            while h.len() > HISTORY {
                h.pop_front();
            }
        }
        Ok(())
    }

    /// The recent means of a variable, oldest first.
    fn history(&self, name: &str) -> impl Iterator<Item = f64> + '_ {
        self.history.get(name).into_iter().flatten().copied()
    }

    /// Every variable's row, largest spread across ranks first.
    fn var_rows(&self) -> Vec<VarRow<'_>> {
        let mut per_var: BTreeMap<&str, Vec<RankValue>> = BTreeMap::new();
        // A rank that finished moves nothing any more: its last rate is
        // not a rate of now, so while some rank runs, only running ranks'
        // rates count (when all finished, their last ones).
        let running = self.ranks.values().any(|r| !r.closed);
        for (&rank, r) in &self.ranks {
            let counts = !running || !r.closed;
            for (name, (value, rate)) in &r.latest {
                per_var
                    .entry(name)
                    .or_default()
                    .push((rank, *value, rate.filter(|_| counts)));
            }
        }
        let mut rows: Vec<VarRow<'_>> = per_var
            .into_iter()
            .filter(|(_, v)| !v.is_empty())
            .map(|(name, v)| {
                let (lo, hi) = extremes(&v);
                let mean = v.iter().map(|x| x.1).sum::<f64>() / v.len() as f64;
                // Each rank's rate is its own, over its own last two
                // samples; ranks sample at different times, so the row's
                // rate is the mean of those, never a difference of means.
                let rates: Vec<f64> = v.iter().filter_map(|x| x.2).collect();
                let rate =
                    (!rates.is_empty()).then(|| rates.iter().sum::<f64>() / rates.len() as f64);
                let spread = (hi.1 - lo.1) / mean.abs().max(1e-12);
                VarRow {
                    name,
                    lo,
                    hi,
                    mean,
                    rate,
                    spread,
                }
            })
            .collect();
        rows.sort_by(|a, b| b.spread.total_cmp(&a.spread));
        rows
    }

    /// The two header lines: what the job is, and where it stands.
    fn header(&self) -> [String; 2] {
        let size = self.size();
        let headers: Vec<&Header> = self
            .ranks
            .values()
            .filter_map(|r| r.header.as_ref())
            .collect();
        let library = headers.first().map_or("?", |h| h.library.as_str());
        let mut hosts: BTreeMap<&str, Vec<u32>> = BTreeMap::new();
        for (rank, r) in &self.ranks {
            if let Some(h) = &r.header {
                hosts.entry(h.host.as_str()).or_default().push(*rank);
            }
        }
        let started = self.ranks.values().filter(|r| r.header.is_some()).count() as u32;
        let finished = self.ranks.values().filter(|r| r.closed).count() as u32;
        let samples: u64 = self.ranks.values().map(|r| r.samples).sum();
        let elapsed = self.ranks.values().map(|r| r.last_t).fold(0.0, f64::max);
        [
            format!(
                "mpit-tuner watch {} ({library}, {size} ranks on {} host{}{})",
                self.dir.display(),
                hosts.len(),
                if hosts.len() == 1 { "" } else { "s" },
                hosts_text(&hosts)
            ),
            format!(
                "ranks: {} alive, {finished} finished, {} not started | samples: {samples} | elapsed: {elapsed:.1}s",
                started.saturating_sub(finished),
                size.saturating_sub(started)
            ),
        ]
    }

    /// The job's size, from the headers (0 before any).
    fn size(&self) -> u32 {
        self.ranks
            .values()
            .filter_map(|r| r.header.as_ref())
            .map(|h| h.size.max(0) as u32)
            .max()
            .unwrap_or(0)
    }

    /// Whether every rank of the job has closed its log.
    pub fn finished(&self) -> bool {
        let size = self.size();
        size > 0 && (0..size).all(|r| self.ranks.get(&r).is_some_and(|s| s.closed))
    }

    /// The frame: a few lines of plain text, at most `top` variables and
    /// events.
    pub fn frame(&self, top: usize) -> String {
        let mut f = String::new();
        let [what, status] = self.header();
        let _ = writeln!(f, "== {what}\n{status}");
        // The variables that differ most across ranks now.
        let rows = self.var_rows();
        let _ = writeln!(
            f,
            "variables (largest spread across ranks now):\n  {:<34} {:>12} {:5} {:>12} {:5} {:>12} {:>12}",
            "name", "min", "rank", "max", "rank", "mean", "rate/s"
        );
        if rows.is_empty() {
            let _ = writeln!(f, "  (no sample yet)");
        }
        for r in rows.iter().take(top) {
            let _ = writeln!(
                f,
                "  {:<34} {:>12} @{:<4} {:>12} @{:<4} {:>12} {:>12}",
                r.name,
                num(r.lo.1),
                r.lo.0,
                num(r.hi.1),
                r.hi.0,
                num(r.mean),
                r.rate.map_or_else(|| "-".to_string(), num)
            );
        }
        let _ = writeln!(f, "latest decisions, writes, refusals, steering:");
        list(&mut f, &self.events, top);
        let _ = writeln!(f, "warnings:");
        list(&mut f, &self.warnings, top.min(4));
        if self.damaged > 0 {
            let _ = writeln!(f, "({} lines not understood)", self.damaged);
        }
        if self.finished() {
            let _ = writeln!(f, "job finished: every rank closed its log");
        }
        f
    }
}

/// The hosts of a job on several, with their ranks, by lowest rank:
/// `: node1 0-1, node2 2-3` (the first 4, then how many more); nothing
/// for one host.
fn hosts_text(hosts: &BTreeMap<&str, Vec<u32>>) -> String {
    if hosts.len() < 2 {
        return String::new();
    }
    let mut by_rank: Vec<(&str, &Vec<u32>)> = hosts.iter().map(|(h, r)| (*h, r)).collect();
    by_rank.sort_by_key(|(_, ranks)| ranks.first().copied());
    let shown: Vec<String> = by_rank
        .iter()
        .take(4)
        .map(|(host, ranks)| format!("{host} {}", tuner_core::decide::format_ranks(ranks)))
        .collect();
    let more = match hosts.len().saturating_sub(4) {
        0 => String::new(),
        n => format!(", {n} more"),
    };
    format!(": {}{more}", shown.join(", "))
}

/// One rank's latest value of a variable: (rank, value, rate).
type RankValue = (u32, f64, Option<f64>);

/// The lowest and highest (rank, value) of a variable's rows.
fn extremes(v: &[RankValue]) -> ((u32, f64), (u32, f64)) {
    let mut lo = (v[0].0, v[0].1);
    let mut hi = lo;
    for &(rank, value, _) in v {
        if value < lo.1 {
            lo = (rank, value);
        }
        if value > hi.1 {
            hi = (rank, value);
        }
    }
    (lo, hi)
}

/// The last `n` events as lines, same text on several ranks merged.
fn list(f: &mut String, events: &VecDeque<Event>, n: usize) {
    if events.is_empty() {
        let _ = writeln!(f, "  (none)");
        return;
    }
    for line in event_lines(events, n) {
        let _ = writeln!(f, "  {line}");
    }
}

/// The last `n` events, oldest first, one line each; the same text from
/// several ranks at about the same time is one line.
fn event_lines(events: &VecDeque<Event>, n: usize) -> Vec<String> {
    let mut merged: Vec<(f64, Vec<u32>, &'static str, &str)> = Vec::new();
    for e in events {
        match merged
            .iter_mut()
            .find(|m| m.2 == e.kind && m.3 == e.text && (m.0 - e.t).abs() < 1.0)
        {
            Some(m) => {
                m.0 = m.0.max(e.t);
                m.1.push(e.rank);
            }
            None => merged.push((e.t, vec![e.rank], e.kind, &e.text)),
        }
    }
    merged.sort_by(|a, b| a.0.total_cmp(&b.0));
    let skip = merged.len().saturating_sub(n);
    merged
        .into_iter()
        .skip(skip)
        .map(|(t, mut ranks, kind, text)| {
            ranks.sort_unstable();
            ranks.dedup();
            let who = tuner_core::decide::format_ranks(&ranks);
            format!("{t:>8.2}s  rank {who:<8} {kind:<9} {text}")
        })
        .collect()
}

fn first_line(text: &str) -> String {
    let line = text.lines().next().unwrap_or("");
    if line.chars().count() > 100 {
        format!("{}...", line.chars().take(100).collect::<String>())
    } else {
        line.to_string()
    }
}

fn show(v: Option<&vocab::Value>) -> String {
    v.and_then(|v| serde_json::to_value(v).ok())
        .map_or_else(|| "?".into(), |j| j.to_string())
}

/// A number in at most 12 characters.
fn num(x: f64) -> String {
    if x == 0.0 || (1e-3..1e9).contains(&x.abs()) {
        let s = format!("{x:.3}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        format!("{x:.3e}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_fit() {
        assert_eq!(num(0.0), "0");
        assert_eq!(num(1.5), "1.5");
        assert_eq!(num(12345.0), "12345");
        assert_eq!(num(1e12), "1.000e12");
    }

    #[test]
    fn hosts_with_their_ranks() {
        let mut hosts: BTreeMap<&str, Vec<u32>> = BTreeMap::new();
        hosts.insert("b", vec![0, 1]);
        assert_eq!(hosts_text(&hosts), "");
        hosts.insert("a", vec![2, 3, 5]);
        assert_eq!(hosts_text(&hosts), ": b 0-1, a 2-3,5");
        for (i, h) in ["c", "d", "e"].into_iter().enumerate() {
            hosts.insert(h, vec![10 + i as u32]);
        }
        assert_eq!(hosts_text(&hosts), ": b 0-1, a 2-3,5, c 10, d 11, 1 more");
    }

    #[test]
    fn the_latest_warnings_are_kept_whatever_the_reading_order() {
        // Rank 0's log is read first, and its two warnings are the latest
        // of the run; rank 1's has more than KEEP older ones. Kept by
        // arrival, rank 0's went first (a CI run's `watch` of rank logs
        // then differed from the same run's node log).
        let dir = tempfile::tempdir().unwrap();
        let warning = |t: f64, text: &str| {
            format!("{{\"type\":\"warning\",\"t\":{t},\"message\":\"{text}\"}}\n")
        };
        let rank0 = warning(0.8, "late one") + &warning(0.9, "late two");
        let rank1: String = (0..KEEP + 6)
            .map(|i| warning(0.01 * i as f64, &format!("early {i}")))
            .collect();
        std::fs::write(dir.path().join("rank-00000.jsonl"), rank0).unwrap();
        std::fs::write(dir.path().join("rank-00001.jsonl"), rank1).unwrap();
        let mut watch = Watch::new(dir.path());
        watch.poll().unwrap();
        let frame = watch.frame(5);
        for text in ["late one", "late two"] {
            assert!(
                frame.contains(&format!("rank 0        warning   {text}")),
                "{frame}"
            );
        }
        assert_eq!(watch.warnings.len(), KEEP);
        assert!(watch.warnings.iter().all(|w| w.text != "early 0"));
    }

    #[test]
    fn rates_are_the_running_ranks_own_rates_combined() {
        // Three ranks sampling at different times: rank 0 at t=2.0 (0.2
        // s/s), rank 1 at t=1.5 (0.4 s/s), rank 2 finished at t=1.0 after
        // 0.9 s/s. A difference of the means of values between refreshes
        // would mix ranks read at different times; the row's rate is the
        // mean of the running ranks' own rates.
        let dir = tempfile::tempdir().unwrap();
        let sample = |t: f64, value: f64, rate: f64| {
            format!(
                "{{\"type\":\"sample\",\"t\":{t},\"seq\":1,\"vars\":[{{\"name\":\"tool.mpi.time\",\"class\":\"TIMER\",\"value\":[{value}],\"delta\":[0.1],\"rate\":[{rate}]}}]}}\n"
            )
        };
        let close = "{\"type\":\"close\",\"t\":1.0,\"reason\":\"finalize\",\"samples\":1,\"objects_untracked\":0,\"objects_short_lived\":0}\n";
        for (rank, text) in [
            (0, sample(1.0, 0.1, 0.1) + &sample(2.0, 0.3, 0.2)),
            (1, sample(1.5, 0.6, 0.4)),
            (2, sample(1.0, 0.9, 0.9) + close),
        ] {
            std::fs::write(dir.path().join(format!("rank-{rank:05}.jsonl")), text).unwrap();
        }
        let mut watch = Watch::new(dir.path());
        watch.poll().unwrap();
        let rows = watch.var_rows();
        let row = rows.iter().find(|r| r.name == "tool.mpi.time").unwrap();
        assert!((row.rate.unwrap() - 0.3).abs() < 1e-12, "{row:?}");
        assert!((row.mean - 0.6).abs() < 1e-12, "{row:?}");
        assert_eq!((row.lo, row.hi), ((0, 0.3), (2, 0.9)));
    }

    #[test]
    fn a_directory_being_written_reads_in_pieces() {
        let dir = tempfile::tempdir().unwrap();
        let mut watch = Watch::new(dir.path());
        watch.poll().unwrap();
        assert!(watch.frame(5).contains("0 ranks"));
        assert!(!watch.finished());
        let log = dir.path().join("rank-00000.jsonl");
        // A partial line is left for later.
        std::fs::write(&log, "{\"type\":\"warning\",\"t\":1.0,\"mess").unwrap();
        watch.poll().unwrap();
        assert!(watch.frame(5).contains("warnings:\n  (none)"));
        let mut text = std::fs::read_to_string(&log).unwrap();
        text.push_str("age\":\"disk full\"}\n{\"type\":\"close\",\"t\":2.0,\"reason\":\"finalize\",\"samples\":0,\"objects_untracked\":0,\"objects_short_lived\":0}\n");
        std::fs::write(&log, text).unwrap();
        watch.poll().unwrap();
        let frame = watch.frame(5);
        assert!(frame.contains("disk full"), "{frame}");
        // No header: the job's size is unknown, so not finished.
        assert!(!watch.finished());
    }
}
