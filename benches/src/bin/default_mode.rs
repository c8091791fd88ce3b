//! What collective tuning's default mode costs a job of sub-microsecond
//! collectives, in one command (`bash benches/default-mode.sh [--short]`,
//! which runs this binary; issue 39, item 4).
//!
//! For each MPI library (MPICH, then Open MPI; the release preload and
//! `examples/c/coll_bench.c` built in `target/<library>`), on 2 ranks (one
//! a core on the benchmark's machine), it runs `coll_bench` with 8-byte
//! allreduces of doubles (`allreduce`: left on the library's choice by
//! mode `safe`'s class check) and of 64-bit integers (`allreduce_int`:
//! tuned), each for a short job (200,000 calls, about 0.15 s: the search
//! is a visible part of it) and a long one (2,000,000 calls: the steady
//! state), under the release preload with `MPIT_TUNER_COLLECTIVES=off`
//! and in the default mode, interleaved run by run (off, default, off,
//! ...; which goes first alternates by round). Every run is quiet
//! (`MPIT_TUNER_QUIET=1`) and logs into a scratch directory.
//!
//! It prints per library a markdown table: each case's time of the loop
//! (coll_bench's own `time_s`) with tuning off and in the default mode
//! (medians), the ratio default / off (median of the per-round ratios,
//! min-max), and for the default mode what the search cost as the tuner
//! measured it (`cost_us` of summary.json, the trials' time beyond the
//! fastest candidate) as a share of the loop, and the algorithm kept.
//! Every run must succeed, print its time and, in the default mode, leave
//! a summary.json that names mode `safe`: otherwise the command fails
//! (exit status 1) after printing what it has.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use mpit_tuner_benches::jobs::{self, field, machine, spread, CommonArgs, Job};

const USAGE: &str = "\
usage: default_mode [--short] [--reps N] [--mpi mpich,openmpi] [--no-build]

  --short      CI mode: 1 repetition, 20,000 and 200,000 calls; checks
               every variant ran and the default mode tuned
  --reps N     repetitions (default 9, --short 1)
  --mpi LIST   libraries to measure, comma-separated (default mpich,openmpi)
  --no-build   use what target/<library>/release already holds";

fn parse_args() -> Result<CommonArgs, String> {
    jobs::parse_args(USAGE, (1, 9), |_, _| Ok(false))
}

/// One case: coll_bench's collective and its calls.
#[derive(Debug, Clone, Copy)]
struct Case {
    collective: &'static str,
    calls: u64,
}

/// What the default mode's run said besides its time.
#[derive(Debug, Clone, Default)]
struct Tuned {
    /// The search's cost as the tuner measured it (us, summed over the
    /// searches of rank 0's summary).
    cost_us: f64,
    /// The algorithms kept ("auto", or "none" when nothing was searched).
    kept: String,
}

/// One run: its loop time, and what the default mode did.
fn run(
    flavor: &str,
    preload: &Path,
    program: &Path,
    case: Case,
    default_mode: bool,
    dir: &Path,
) -> Result<(f64, Option<Tuned>), String> {
    let _ = std::fs::remove_dir_all(dir);
    let mut env = vec![
        ("LD_PRELOAD".to_string(), preload.display().to_string()),
        ("MPIT_TUNER_DIR".to_string(), dir.display().to_string()),
        ("MPIT_TUNER_QUIET".to_string(), "1".to_string()),
    ];
    if !default_mode {
        env.push(("MPIT_TUNER_COLLECTIVES".into(), "off".into()));
    }
    let args = vec![
        case.collective.to_string(),
        "8".to_string(),
        case.calls.to_string(),
    ];
    let out = jobs::run(&Job {
        flavor,
        ranks: 2,
        env,
        program,
        args: args.clone(),
        timeout: Duration::from_secs(120),
        placement: None,
        done: None,
    })?;
    let what = format!("coll_bench {}", args.join(" "));
    let time = out
        .stdout
        .lines()
        .find_map(|l| field(l, "time_s"))
        .ok_or_else(|| format!("{what}: no time_s in its output: {}", out.stdout))?;
    if !default_mode {
        return Ok((time, None));
    }
    let summary = std::fs::read_to_string(dir.join("summary.json"))
        .map_err(|e| format!("{what}: no summary.json in {}: {e}", dir.display()))?;
    let doc: serde_json::Value =
        serde_json::from_str(&summary).map_err(|e| format!("{what}: summary.json: {e}"))?;
    if doc["collective_mode"] != "safe" {
        return Err(format!(
            "{what}: the default mode is not `safe` in summary.json: {}",
            doc["collective_mode"]
        ));
    }
    let searches = doc["collectives"].as_array().cloned().unwrap_or_default();
    let cost_us = searches
        .iter()
        .filter_map(|s| s["cost_us"].as_f64())
        .fold(0.0, |a, b| a + b);
    let kept: Vec<String> = searches
        .iter()
        .filter_map(|s| s["chosen"].as_str().map(str::to_string))
        .collect();
    Ok((
        time,
        Some(Tuned {
            cost_us,
            kept: if kept.is_empty() {
                "none".into()
            } else {
                kept.join(", ")
            },
        }),
    ))
}

/// A case's rounds.
#[derive(Debug, Default)]
struct Rounds {
    off: Vec<f64>,
    default: Vec<f64>,
    tuned: Vec<Tuned>,
}

fn measure(o: &CommonArgs, flavor: &str, scratch: &Path) -> Result<String, String> {
    let (preload, program) = jobs::build(flavor, "coll_bench", o.build)?;
    let (short, long) = if o.short {
        (20_000, 200_000)
    } else {
        (200_000, 2_000_000)
    };
    let cases: Vec<Case> = ["allreduce", "allreduce_int"]
        .into_iter()
        .flat_map(|c| {
            [short, long].map(|calls| Case {
                collective: c,
                calls,
            })
        })
        .collect();
    let mut rounds: Vec<Rounds> = cases.iter().map(|_| Rounds::default()).collect();
    let dir: PathBuf = scratch.join(flavor);
    for round in 0..o.reps {
        eprintln!("default_mode: {flavor}, round {} of {}", round + 1, o.reps);
        for (case, r) in cases.iter().zip(rounds.iter_mut()) {
            let order = if round % 2 == 0 {
                [false, true]
            } else {
                [true, false]
            };
            for default_mode in order {
                let (time, tuned) = run(flavor, &preload, &program, *case, default_mode, &dir)?;
                if default_mode {
                    r.default.push(time);
                    r.tuned.extend(tuned);
                } else {
                    r.off.push(time);
                }
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    let mut t = String::new();
    let _ = writeln!(
        t,
        "\n{} ({}), 2 ranks, 8-byte allreduce, {} rounds:\n",
        flavor,
        jobs::library_version(flavor),
        o.reps
    );
    t.push_str(
        "| datatype | calls | off (s) | default (s) | default / off | search cost / loop (tuner's) | kept |\n\
         |---|---|---|---|---|---|---|\n",
    );
    for (case, r) in cases.iter().zip(&rounds) {
        let ratios: Vec<f64> = r.off.iter().zip(&r.default).map(|(a, b)| b / a).collect();
        let (ratio, lo, hi) = spread(&ratios);
        let shares: Vec<f64> = r
            .tuned
            .iter()
            .zip(&r.default)
            .map(|(x, time)| x.cost_us * 1e-6 / time)
            .collect();
        let (share, share_lo, share_hi) = spread(&shares);
        let cost = if r.tuned.iter().all(|x| x.kept == "none") {
            "none searched".to_string()
        } else {
            format!(
                "{:.2}% ({:.2}-{:.2}%)",
                share * 100.0,
                share_lo * 100.0,
                share_hi * 100.0
            )
        };
        let mut kept: Vec<&str> = r.tuned.iter().map(|x| x.kept.as_str()).collect();
        kept.sort_unstable();
        kept.dedup();
        let _ = writeln!(
            t,
            "| {} | {} | {:.4} | {:.4} | {:.3} ({:.3}-{:.3}) | {} | {} |",
            if case.collective == "allreduce" {
                "double (class check: not tuned)"
            } else {
                "int64 (tuned)"
            },
            case.calls,
            jobs::median(&r.off),
            jobs::median(&r.default),
            ratio,
            lo,
            hi,
            cost,
            kept.join("; ")
        );
    }
    Ok(t)
}

fn main() -> ExitCode {
    let o = match parse_args() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("default_mode: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let scratch = match tempfile::Builder::new()
        .prefix("mpit-default-mode-")
        .tempdir()
    {
        Ok(d) => d,
        Err(e) => {
            eprintln!("default_mode: cannot create a scratch directory: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut failed = false;
    println!("# Collective tuning's default mode on sub-microsecond allreduces");
    println!("\nMachine: {}", machine());
    for flavor in &o.flavors {
        match measure(&o, flavor, scratch.path()) {
            Ok(table) => println!("{table}"),
            Err(e) => {
                eprintln!("default_mode: {flavor}: {e}");
                failed = true;
            }
        }
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
