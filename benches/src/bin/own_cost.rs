//! The tool's own cost, every figure of issue 67 in one command (`bash
//! benches/own-cost.sh [--short]`, which runs this binary).
//!
//! For each MPI library (MPICH, then Open MPI; the release preload and the
//! C examples built in `target/<library>`), interleaved round by round
//! (which variant goes first alternates):
//!
//! - **the hot path**: the criterion bench `hot_path` (`cargo bench
//!   --profile release --bench hot_path`, mode `safe`, its tuned 8-byte int64 allreduce in steady
//!   state), once per library: its paired figure, the nanoseconds a tuned
//!   call adds over the library's own (`PMPI_Allreduce`). Where tuning does
//!   not start in one process the row says so and has no figure;
//! - **the loops**: `coll_bench` on 2 ranks, 8-byte allreduces of doubles
//!   (left on the library's choice by mode `safe`), of int64 (tuned) and
//!   8-byte broadcasts, 2,000,000 calls, without the tool and under it in
//!   the default mode: the loop's time (coll_bench's own `time_s`);
//! - **start-up and finalize**: `idle` (init, one barrier, finalize) on 2
//!   and 32 ranks (32 oversubscribe the machine's cores), without the tool
//!   and with it: the job's wall time, and on 2 ranks what the tool added
//!   in milliseconds, and where it went: `idle phases` prints each rank's
//!   `MPI_Init` and `MPI_Finalize` times, so the table splits the added
//!   time into what the slowest rank's `MPI_Init` and `MPI_Finalize` added
//!   (the tool's start and finalize run inside them) and the rest (process
//!   start, loading the library, exit), as rows without a target.
//!
//! It prints per library a markdown table: each figure (median over the
//! rounds of the per-round ratio or difference, min-max), its target
//! and whether the median meets it. Every run must succeed and print its
//! figure: otherwise the command fails (exit status 1) after printing what
//! it has.

use std::fmt::Write as _;
use std::path::Path;
use std::process::{Command, ExitCode};
use std::time::Duration;

use mpit_tuner_benches::jobs::{self, field, machine, spread, CommonArgs, Job};

const USAGE: &str = "\
usage: own_cost [--short] [--reps N] [--mpi mpich,openmpi] [--no-build]

  --short      CI mode: 1 round, 100,000-call loops, 8-rank start-up job, a
               short criterion run; checks every variant ran
  --reps N     rounds (default 5, --short 1)
  --mpi LIST   libraries to measure, comma-separated (default mpich,openmpi)
  --no-build   use what target/<library>/release already holds";

/// The loops' calls (`--short`: fewer).
const CALLS: (u64, u64) = (100_000, 2_000_000);

/// The oversubscribed start-up job's ranks (`--short`: fewer).
const MANY: (u32, u32) = (8, 32);

/// One figure's rounds and how it is judged.
struct Figure {
    what: String,
    /// Per round: the ratio tool / no tool, or the difference (ms, ns).
    values: Vec<f64>,
    unit: &'static str,
    /// `None`: a breakdown of the row above, no target of its own.
    target: Option<f64>,
    /// The no-tool value's median, for the table (`None`: not a pair).
    base: Vec<f64>,
}

impl Figure {
    fn new(what: impl Into<String>, unit: &'static str, target: f64) -> Figure {
        Figure {
            what: what.into(),
            values: Vec::new(),
            unit,
            target: Some(target),
            base: Vec::new(),
        }
    }

    /// A part of the figure above it, without a target.
    fn part(what: impl Into<String>, unit: &'static str) -> Figure {
        Figure {
            target: None,
            ..Figure::new(what, unit, 0.0)
        }
    }

    fn row(&self) -> String {
        if self.values.is_empty() {
            return format!("| {} | n/a | | {} | n/a |\n", self.what, self.target_text());
        }
        let (median, lo, hi) = spread(&self.values);
        let show = |x: f64| match self.unit {
            "x" => format!("{x:.3}"),
            _ => format!("{x:+.1} {}", self.unit),
        };
        let base = if self.base.is_empty() {
            String::new()
        } else {
            let (b, _, _) = spread(&self.base);
            format!("{b:.4} s")
        };
        format!(
            "| {} | **{}** ({}..{}) | {base} | {} | {} |\n",
            self.what,
            show(median),
            show(lo),
            show(hi),
            self.target_text(),
            match self.target {
                None => "",
                Some(t) if median <= t => "met",
                Some(_) => "**missed**",
            }
        )
    }

    fn target_text(&self) -> String {
        match (self.target, self.unit) {
            (None, _) => "(part of the row above)".to_string(),
            (Some(t), "x") => format!("<= {t:.2}"),
            (Some(t), u) => format!("<= {t} {u}"),
        }
    }
}

/// What one library needs: its builds and a scratch directory.
struct Setup<'a> {
    flavor: &'a str,
    preload: std::path::PathBuf,
    coll_bench: std::path::PathBuf,
    idle: std::path::PathBuf,
    scratch: tempfile::TempDir,
}

impl Setup<'_> {
    /// A 2-rank (or `ranks`) job of `program`, with the tool (its run
    /// directory `dir`) or without.
    fn job<'s>(
        &'s self,
        program: &'s Path,
        ranks: u32,
        args: &[String],
        dir: Option<&Path>,
    ) -> Job<'s> {
        let mut env = Vec::new();
        if let Some(dir) = dir {
            let _ = std::fs::remove_dir_all(dir);
            env.push(("LD_PRELOAD".to_string(), self.preload.display().to_string()));
            env.push(("MPIT_TUNER_DIR".to_string(), dir.display().to_string()));
            env.push(("MPIT_TUNER_QUIET".to_string(), "1".to_string()));
        }
        Job {
            flavor: self.flavor,
            ranks,
            env,
            program,
            args: args.to_vec(),
            timeout: Duration::from_secs(300),
            placement: None,
            done: None,
        }
    }
}

/// A loop's time (coll_bench's `time_s`).
fn loop_time(setup: &Setup, args: &[String], dir: Option<&Path>) -> Result<f64, String> {
    let out = jobs::run(&setup.job(&setup.coll_bench, 2, args, dir))?;
    out.stdout
        .lines()
        .find_map(|l| field(l, "time_s"))
        .ok_or_else(|| {
            format!(
                "coll_bench {}: no time_s in: {}",
                args.join(" "),
                out.stdout
            )
        })
}

/// A trivial job's wall time (s).
fn trivial_time(setup: &Setup, ranks: u32, dir: Option<&Path>) -> Result<f64, String> {
    Ok(trivial_job(setup, ranks, dir, false)?.0)
}

/// A trivial job's wall time and, with `phases`, the slowest rank's
/// `MPI_Init` and `MPI_Finalize` times (s; NaN when not every rank's line
/// came through).
fn trivial_job(
    setup: &Setup,
    ranks: u32,
    dir: Option<&Path>,
    phases: bool,
) -> Result<(f64, f64, f64), String> {
    let args = if phases {
        vec!["phases".to_string()]
    } else {
        Vec::new()
    };
    let out = jobs::run(&setup.job(&setup.idle, ranks, &args, dir))?;
    if !out.stdout.contains("idle:") {
        return Err(format!("idle on {ranks} ranks printed: {}", out.stdout));
    }
    let lines: Vec<&str> = out
        .stdout
        .lines()
        .filter(|l| l.starts_with("idle-phases:"))
        .collect();
    if phases && lines.len() != ranks as usize {
        // The ranks' lines are merged by the launcher: a lost or broken
        // one leaves this round's split out, never the job's figure.
        eprintln!(
            "own_cost: idle phases on {ranks} ranks printed {} phase lines (of {ranks}): \
             this round's split left out",
            lines.len()
        );
        return Ok((out.elapsed.as_secs_f64(), f64::NAN, f64::NAN));
    }
    let slowest = |key: &str| {
        lines
            .iter()
            .filter_map(|l| field(l, key))
            .fold(0.0, f64::max)
    };
    Ok((
        out.elapsed.as_secs_f64(),
        slowest("init_s"),
        slowest("finalize_s"),
    ))
}

/// The hot-path bench's paired figure for the tuned int64 allreduce (ns a
/// call over the library), `None` where tuning does not start in one
/// process.
fn hot_path(flavor: &str, short: bool) -> Result<Option<f64>, String> {
    let root = jobs::root();
    let time = if short { "0.2" } else { "2" };
    let out = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .current_dir(&root)
        .env("MPICC", format!("mpicc.{flavor}"))
        .env("HOT_PATH_COLLECTIVES", "safe")
        // The release profile: scripts/test.sh built the benches there.
        .args([
            "bench",
            "--profile",
            "release",
            "--locked",
            "--quiet",
            "--target-dir",
        ])
        .arg(root.join("target").join(flavor))
        .args(["-p", "mpit-tuner-benches", "--bench", "hot_path", "--"])
        .args([
            "--warm-up-time",
            "0.5",
            "--measurement-time",
            time,
            "tuning on",
        ])
        .output()
        .map_err(|e| format!("cargo bench --bench hot_path: cannot run: {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!(
            "cargo bench --bench hot_path failed ({}):\n{}\n{}",
            out.status,
            stdout,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    if stdout.contains("collective tuning did not start") {
        return Ok(None);
    }
    let line = stdout
        .lines()
        .find(|l| l.starts_with("hot_path: allreduce_8B_int(world), collective tuning on"))
        .ok_or_else(|| format!("hot_path printed no tuned int64 row:\n{stdout}"))?;
    let added = line
        .rsplit_once("added ")
        .and_then(|(_, rest)| rest.split_whitespace().next()?.parse::<f64>().ok())
        .ok_or_else(|| format!("no `added N ns` in: {line}"))?;
    Ok(Some(added))
}

/// Every figure of one library.
fn measure(flavor: &str, o: &CommonArgs) -> Result<Vec<Figure>, String> {
    let (preload, coll_bench) = jobs::build(flavor, "coll_bench", o.build)?;
    let (_, idle) = jobs::build(flavor, "idle", o.build)?;
    let setup = Setup {
        flavor,
        preload,
        coll_bench,
        idle,
        scratch: tempfile::tempdir().map_err(|e| format!("a scratch directory: {e}"))?,
    };
    let calls = if o.short { CALLS.0 } else { CALLS.1 };
    let many = if o.short { MANY.0 } else { MANY.1 };
    let mut hot = Figure::new(
        "hot path: a settled tuned 8-byte int64 allreduce over the library (criterion, 1 rank)",
        "ns",
        5.0,
    );
    eprintln!("own_cost: {flavor}: the hot-path bench");
    match hot_path(flavor, o.short)? {
        Some(ns) => hot.values.push(ns),
        None => {
            hot.what
                .push_str(": tuning did not start in one process with this library");
        }
    }
    let loops: Vec<(&str, &str)> = vec![
        (
            "allreduce",
            "allreduce of a double (class check, the library's choice)",
        ),
        ("allreduce_int", "allreduce of an int64 (tuned)"),
        ("bcast", "bcast"),
    ];
    let mut loop_figures: Vec<Figure> = loops
        .iter()
        .map(|(_, what)| {
            Figure::new(
                format!("2 ranks, {calls} 8-byte {what}: the loop, tool / no tool"),
                "x",
                1.01,
            )
        })
        .collect();
    let mut added = Figure::new("start-up and finalize, 2 ranks: added wall time", "ms", 5.0);
    let mut in_init = Figure::part("of which MPI_Init (the slowest rank's) added", "ms");
    let mut in_finalize = Figure::part("of which MPI_Finalize (the slowest rank's) added", "ms");
    let mut elsewhere = Figure::part(
        "of which the rest (process start, loading the library, exit)",
        "ms",
    );
    let mut trivial = Figure::new(
        format!("start-up and finalize, {many} ranks (oversubscribed): tool / no tool"),
        "x",
        1.3,
    );
    for round in 0..o.reps {
        eprintln!(
            "own_cost: {flavor}: round {}/{} (load average {})",
            round + 1,
            o.reps,
            jobs::load()
        );
        let first_tool = round % 2 == 1;
        let dir = setup.scratch.path().join(format!("r{round}"));
        let pair = |f: &mut dyn FnMut(Option<&Path>) -> Result<f64, String>| {
            if first_tool {
                let t = f(Some(&dir))?;
                Ok::<_, String>((f(None)?, t))
            } else {
                let n = f(None)?;
                Ok((n, f(Some(&dir))?))
            }
        };
        for ((collective, _), figure) in loops.iter().zip(loop_figures.iter_mut()) {
            let args = vec![collective.to_string(), "8".into(), calls.to_string()];
            let (none, tool) = pair(&mut |d| loop_time(&setup, &args, d))?;
            figure.values.push(tool / none);
            figure.base.push(none);
        }
        let mut runs = Vec::new();
        let (none, tool) = pair(&mut |d| {
            let r = trivial_job(&setup, 2, d, true)?;
            runs.push((d.is_some(), r));
            Ok(r.0)
        })?;
        added.values.push((tool - none) * 1e3);
        added.base.push(none);
        let of = |with: bool| runs.iter().find(|(w, _)| *w == with).map(|(_, r)| *r);
        let split = |r: &(f64, f64, f64)| r.1.is_finite() && r.2.is_finite();
        if let (Some(n), Some(t)) = (of(false).filter(split), of(true).filter(split)) {
            let init = (t.1 - n.1) * 1e3;
            let fin = (t.2 - n.2) * 1e3;
            in_init.values.push(init);
            in_finalize.values.push(fin);
            elsewhere.values.push((t.0 - n.0) * 1e3 - init - fin);
        }
        let (none, tool) = pair(&mut |d| trivial_time(&setup, many, d))?;
        trivial.values.push(tool / none);
        trivial.base.push(none);
    }
    let mut figures = vec![hot];
    figures.extend(loop_figures);
    figures.extend([added, in_init, in_finalize, elsewhere]);
    figures.push(trivial);
    Ok(figures)
}

fn main() -> ExitCode {
    let o = match jobs::parse_args(USAGE, (1, 5), |_, _| Ok(false)) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# The tool's own cost (issue 67)\n\nMachine: {}\n",
        machine()
    );
    let mut failed = false;
    for flavor in &o.flavors {
        match measure(flavor, &o) {
            Ok(figures) => {
                let _ = write!(
                    out,
                    "{} ({}), {} rounds interleaved:\n\n| figure | median (min..max) | no tool (median) | target | |\n|---|---|---|---|---|\n",
                    flavor,
                    jobs::library_version(flavor),
                    o.reps
                );
                for f in &figures {
                    out.push_str(&f.row());
                }
                out.push('\n');
            }
            Err(e) => {
                eprintln!("own_cost: {flavor}: {e}");
                failed = true;
            }
        }
    }
    print!("{out}");
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
