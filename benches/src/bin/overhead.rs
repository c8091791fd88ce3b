//! The application-level overhead of mpit-tuner, in one command
//! (`bash benches/overhead.sh [--short]`, which runs this binary).
//!
//! For each MPI library (MPICH, then Open MPI; each built in release mode in
//! its own target directory, `target/mpich` and `target/openmpi`, with
//! `MPICC=mpicc.<library>`), it runs, interleaved run by run (A B C A B C
//! ...), on 2 ranks:
//!
//! - `examples/c/pingpong.c`: half round-trip latency of 0 B, 8 B and 1 KiB
//!   messages, without the tuner, with it in monitor mode
//!   (`MPIT_TUNER_POLICY=none`) and with the default policies, at the
//!   default sampling interval (1 s);
//! - `examples/stencil3d`: main-loop runtime without the tuner, and with it
//!   at `MPIT_TUNER_INTERVAL` 1s, 100ms, 10ms and 1ms, each in monitor mode
//!   and with the default policies.
//!
//! Then it prints, per library, a markdown table of the ratio tool / no tool
//! (median, min and max over the repetitions; each repetition's ratio pairs
//! a tool run with the no-tool run of the same round) and a description of
//! the machine. Every run must succeed and print its numbers, and every run
//! under the tuner must leave a log with at least one sample: otherwise the
//! command fails (exit status 1) after printing what it has.
//!
//! Two ranks, not four: the benchmark's machine has 2 cores, and
//! MPICH's ch4 busy-polls, so 4 ranks would measure the oversubscription.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use mpit_tuner_benches::jobs::{self, field, machine, median, root, run_checked, CommonArgs, Job};

const USAGE: &str = "\
usage: overhead [--short] [--reps N] [--mpi mpich,openmpi] [--no-build]

  --short      CI mode: 2 repetitions of short runs (well under 2 minutes for
               both libraries once built); still checks every variant ran
  --reps N     repetitions (default 7, --short 2)
  --mpi LIST   libraries to measure, comma-separated (default mpich,openmpi)
  --no-build   use what target/<library>/release already holds";

fn parse_args() -> Result<CommonArgs, String> {
    jobs::parse_args(USAGE, (2, 7), |_, _| Ok(false))
}

/// The tuner's configuration in one variant, or `None` for no tuner.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Tool {
    interval: Option<&'static str>,
    policies: bool,
}

/// One variant of a program: a label and the tuner's configuration.
#[derive(Debug, Clone, Copy)]
struct Variant {
    label: &'static str,
    tool: Option<Tool>,
}

const PINGPONG_VARIANTS: &[Variant] = &[
    Variant {
        label: "no tool",
        tool: None,
    },
    Variant {
        label: "monitor (POLICY=none), 1s",
        tool: Some(Tool {
            interval: None,
            policies: false,
        }),
    },
    Variant {
        label: "default policies, 1s",
        tool: Some(Tool {
            interval: None,
            policies: true,
        }),
    },
];

const fn tool(label: &'static str, interval: &'static str, policies: bool) -> Variant {
    Variant {
        label,
        tool: Some(Tool {
            interval: Some(interval),
            policies,
        }),
    }
}

const STENCIL_VARIANTS: &[Variant] = &[
    Variant {
        label: "no tool",
        tool: None,
    },
    tool("monitor, 1s", "1s", false),
    tool("default policies, 1s", "1s", true),
    tool("monitor, 100ms", "100ms", false),
    tool("default policies, 100ms", "100ms", true),
    tool("monitor, 10ms", "10ms", false),
    tool("default policies, 10ms", "10ms", true),
    tool("monitor, 1ms", "1ms", false),
    tool("default policies, 1ms", "1ms", true),
];

/// Message sizes of the ping-pong.
const SIZES: &[u32] = &[0, 8, 1024];

/// Per library: where things are.
struct Setup {
    flavor: String,
    preload: PathBuf,
    pingpong: PathBuf,
    stencil: PathBuf,
    scratch: tempfile::TempDir,
}

fn prepare(flavor: &str, build: bool) -> Result<Setup, String> {
    let root = root();
    let target = root.join("target").join(flavor);
    let examples = target.join("bench-examples");
    if build {
        eprintln!(
            "overhead: building for {flavor} (release, {})",
            target.display()
        );
        run_checked(
            Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
                .current_dir(&root)
                .env("MPICC", format!("mpicc.{flavor}"))
                .args(["build", "--release", "--locked", "--quiet", "--target-dir"])
                .arg(&target)
                .args(["-p", "preload", "-p", "stencil3d"]),
            "cargo build",
        )?;
        run_checked(
            Command::new("make")
                .current_dir(&root)
                .env_remove("MPICC")
                .args(["--quiet", "-C", "examples"])
                .arg(format!("MPI={flavor}"))
                .arg(format!("OUT={}", examples.display()))
                .arg(examples.join("pingpong")),
            "make pingpong",
        )?;
    }
    let setup = Setup {
        flavor: flavor.to_string(),
        preload: target.join("release").join("libpreload.so"),
        pingpong: examples.join("pingpong"),
        stencil: target.join("release").join("stencil3d"),
        scratch: tempfile::Builder::new()
            .prefix("mpit-overhead-")
            .tempdir()
            .map_err(|e| format!("cannot create a scratch directory: {e}"))?,
    };
    for p in [&setup.preload, &setup.pingpong, &setup.stencil] {
        if !p.exists() {
            return Err(format!(
                "{} is missing (build it, or drop --no-build)",
                p.display()
            ));
        }
    }
    Ok(setup)
}

/// What one run produced.
struct RunOutput {
    stdout: String,
    elapsed: Duration,
}

/// Runs `program args` on 2 ranks, under the tuner as `tool` says, with a
/// timeout. Checks the exit status and, under the tuner, that it sampled.
fn run(
    setup: &Setup,
    tool: Option<Tool>,
    program: &Path,
    args: &[String],
    timeout: Duration,
    seq: usize,
) -> Result<RunOutput, String> {
    let mut env: Vec<(String, String)> = Vec::new();
    let dir = setup.scratch.path().join(format!("run-{seq}"));
    if let Some(t) = tool {
        env.push(("LD_PRELOAD".into(), setup.preload.display().to_string()));
        env.push(("MPIT_TUNER_DIR".into(), dir.display().to_string()));
        env.push(("MPIT_TUNER_QUIET".into(), "1".into()));
        if let Some(i) = t.interval {
            env.push(("MPIT_TUNER_INTERVAL".into(), i.into()));
        }
        if !t.policies {
            env.push(("MPIT_TUNER_POLICY".into(), "none".into()));
        }
    }
    let out = jobs::run(&Job {
        flavor: &setup.flavor,
        ranks: 2,
        env,
        program,
        args: args.to_vec(),
        timeout,
        placement: None,
        done: None,
    })?;
    if tool.is_some() {
        if let Err(why) = check_tuner_ran(&dir) {
            let tail: Vec<&str> = out.stderr.lines().rev().take(5).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            return Err(format!(
                "{} {}: {why}\n  stderr: {}",
                program.display(),
                args.join(" "),
                tail.join("\n  stderr: ")
            ));
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
    Ok(RunOutput {
        stdout: out.stdout,
        elapsed: out.elapsed,
    })
}

/// The tuner's log of rank 0 exists, has a header and closes after at
/// least one sample: proof that the variant ran under the tuner.
fn check_tuner_ran(dir: &Path) -> Result<(), String> {
    let log = vocab::read::rank_file(dir, 0)
        .map_err(|e| format!("the tuner left no log ({}: {e})", dir.display()))?;
    let records: Vec<vocab::Record<'static>> = log
        .records()
        .map_err(|e| format!("{}: {e}", log.describe()))?
        .map(|r| r.map(|(_, r)| r).map_err(|d| d.to_string()))
        .collect::<Result<_, _>>()?;
    if !matches!(records.first(), Some(vocab::Record::Header(_))) {
        return Err(format!("{} has no header", log.describe()));
    }
    let samples = records
        .iter()
        .rev()
        .find_map(|r| match r {
            vocab::Record::Close(c) => Some(c.samples),
            _ => None,
        })
        .ok_or_else(|| format!("{} was not closed (no finalize record)", log.describe()))?;
    if samples < 1 {
        return Err(format!("the tuner took no sample ({})", log.describe()));
    }
    Ok(())
}

/// Samples of one measured quantity: values per variant, in repetition
/// order.
type Samples = BTreeMap<(usize, usize), Vec<f64>>;

/// Parameters of the runs.
struct Sizes {
    pingpong_iters: u64,
    stencil_args: Vec<String>,
    timeout: Duration,
}

fn sizes(short: bool) -> Sizes {
    if short {
        Sizes {
            pingpong_iters: 20_000,
            stencil_args: vec![
                "--iters".into(),
                "300".into(),
                "--compute-us".into(),
                "100".into(),
            ],
            timeout: Duration::from_secs(60),
        }
    } else {
        Sizes {
            pingpong_iters: 400_000,
            stencil_args: vec![
                "--iters".into(),
                "5000".into(),
                "--compute-us".into(),
                "100".into(),
            ],
            timeout: Duration::from_secs(300),
        }
    }
}

/// Everything measured on one library.
struct Measured {
    flavor: String,
    version: String,
    /// (size index, variant) -> latencies in us.
    pingpong: Samples,
    /// (0, variant) -> runtimes in s.
    stencil: Samples,
    errors: Vec<String>,
    /// Time spent building, and running.
    build: Duration,
    wall: Duration,
}

fn measure(opts: &CommonArgs, flavor: &str) -> Measured {
    let started = Instant::now();
    let mut m = Measured {
        flavor: flavor.to_string(),
        version: String::new(),
        pingpong: BTreeMap::new(),
        stencil: BTreeMap::new(),
        errors: Vec::new(),
        build: Duration::ZERO,
        wall: Duration::ZERO,
    };
    let setup = match prepare(flavor, opts.build) {
        Ok(s) => s,
        Err(e) => {
            m.errors.push(e);
            return m;
        }
    };
    m.build = started.elapsed();
    let started = Instant::now();
    m.version = jobs::library_version(&setup.flavor);
    let sz = sizes(opts.short);
    let pp_args: Vec<String> = std::iter::once(sz.pingpong_iters.to_string())
        .chain(SIZES.iter().map(u32::to_string))
        .collect();
    let mut seq = 0usize;
    // One discarded run of each program first: the first run after a build
    // pays for cold caches.
    for (program, args) in [
        (&setup.pingpong, &pp_args),
        (&setup.stencil, &sz.stencil_args),
    ] {
        seq += 1;
        if let Err(e) = run(&setup, None, program, args, sz.timeout, seq) {
            m.errors.push(format!("warm-up: {e}"));
        }
    }
    for rep in 0..opts.reps {
        eprintln!("overhead: {flavor}: repetition {}/{}", rep + 1, opts.reps);
        for (vi, v) in PINGPONG_VARIANTS.iter().enumerate() {
            seq += 1;
            match run(&setup, v.tool, &setup.pingpong, &pp_args, sz.timeout, seq) {
                Ok(out) => {
                    for (si, size) in SIZES.iter().enumerate() {
                        let line = out.stdout.lines().find(|l| {
                            l.starts_with("latency:")
                                && field(l, "bytes").is_some_and(|b| b == f64::from(*size))
                        });
                        match line.and_then(|l| field(l, "usec")) {
                            Some(us) if us > 0.0 => {
                                m.pingpong.entry((si, vi)).or_default().push(us)
                            }
                            _ => m.errors.push(format!(
                                "pingpong ({}) printed no latency for {size} B",
                                v.label
                            )),
                        }
                    }
                }
                Err(e) => m.errors.push(format!("pingpong ({}): {e}", v.label)),
            }
        }
        for (vi, v) in STENCIL_VARIANTS.iter().enumerate() {
            seq += 1;
            match run(
                &setup,
                v.tool,
                &setup.stencil,
                &sz.stencil_args,
                sz.timeout,
                seq,
            ) {
                Ok(out) => {
                    let runtime = out
                        .stdout
                        .lines()
                        .find(|l| l.starts_with("time:"))
                        .and_then(|l| field(l, "runtime_s"));
                    match runtime {
                        Some(s) if s > 0.0 => m.stencil.entry((0, vi)).or_default().push(s),
                        _ => m.errors.push(format!(
                            "stencil3d ({}) printed no runtime (ran {:.1}s)",
                            v.label,
                            out.elapsed.as_secs_f64()
                        )),
                    }
                }
                Err(e) => m.errors.push(format!("stencil3d ({}): {e}", v.label)),
            }
        }
    }
    m.wall = started.elapsed();
    m
}

/// Per-repetition ratios of `variant` to the baseline (variant 0) of the
/// same quantity: (median, min, max), or `None` without data.
fn ratios(samples: &Samples, q: usize, variant: usize) -> Option<(f64, f64, f64)> {
    let base = samples.get(&(q, 0))?;
    let tool = samples.get(&(q, variant))?;
    if base.len() != tool.len() || base.is_empty() {
        return None;
    }
    let r: Vec<f64> = tool.iter().zip(base).map(|(t, b)| t / b).collect();
    let min = r.iter().copied().fold(f64::INFINITY, f64::min);
    let max = r.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    Some((median(&r), min, max))
}

fn table(m: &Measured, opts: &CommonArgs) -> String {
    let mut t = String::new();
    let sz = sizes(opts.short);
    let _ = writeln!(
        t,
        "### {} ({}), 2 ranks, {} repetitions{}: runs took {:.0} s (build {:.0} s)\n",
        m.flavor,
        m.version,
        opts.reps,
        if opts.short { ", --short" } else { "" },
        m.wall.as_secs_f64(),
        m.build.as_secs_f64()
    );
    let _ = writeln!(
        t,
        "| benchmark | variant | median ratio | min | max | no tool (median) | tool (median) |"
    );
    let _ = writeln!(t, "|---|---|---|---|---|---|---|");
    for (si, size) in SIZES.iter().enumerate() {
        let base = m.pingpong.get(&(si, 0)).map_or(f64::NAN, |v| median(v));
        for (vi, v) in PINGPONG_VARIANTS.iter().enumerate().skip(1) {
            let tool = m.pingpong.get(&(si, vi)).map_or(f64::NAN, |v| median(v));
            let (r, lo, hi) = ratios(&m.pingpong, si, vi).unwrap_or((f64::NAN, f64::NAN, f64::NAN));
            let _ = writeln!(
                t,
                "| ping-pong {size} B latency | {} | {r:.3} | {lo:.3} | {hi:.3} | {base:.3} us | {tool:.3} us |",
                v.label
            );
        }
    }
    let base = m.stencil.get(&(0, 0)).map_or(f64::NAN, |v| median(v));
    for (vi, v) in STENCIL_VARIANTS.iter().enumerate().skip(1) {
        let tool = m.stencil.get(&(0, vi)).map_or(f64::NAN, |v| median(v));
        let (r, lo, hi) = ratios(&m.stencil, 0, vi).unwrap_or((f64::NAN, f64::NAN, f64::NAN));
        let _ = writeln!(
            t,
            "| stencil3d runtime | {} | {r:.3} | {lo:.3} | {hi:.3} | {base:.3} s | {tool:.3} s |",
            v.label
        );
    }
    let _ = writeln!(
        t,
        "\nping-pong: {} round trips per size per run; stencil3d: {} (2 ranks, 32 KiB halo messages)",
        sz.pingpong_iters,
        sz.stencil_args.join(" ")
    );
    t
}

fn main() -> ExitCode {
    let opts = match parse_args() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("overhead: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let machine_before = machine();
    let results: Vec<Measured> = opts.flavors.iter().map(|f| measure(&opts, f)).collect();
    println!("## mpit-tuner overhead (tool / no tool)\n");
    println!(
        "Machine: {machine_before} (at start); {} at the end.",
        machine()
    );
    println!(
        "Ratios pair each run under the tuner with the no-tool run of the same round \
         (variants interleaved run by run); min and max are over the rounds.\n"
    );
    let mut failed = false;
    for m in &results {
        print!("{}", table(m, &opts));
        // Every variant must have produced a number in every round.
        let expected_pp = SIZES.len() * PINGPONG_VARIANTS.len();
        let got_pp = m.pingpong.values().filter(|v| v.len() == opts.reps).count();
        let got_st = m.stencil.values().filter(|v| v.len() == opts.reps).count();
        if got_pp != expected_pp || got_st != STENCIL_VARIANTS.len() || !m.errors.is_empty() {
            failed = true;
            println!(
                "\n**{}: incomplete**: {got_pp}/{expected_pp} ping-pong and {got_st}/{} stencil3d \
                 variants ran every round.",
                m.flavor,
                STENCIL_VARIANTS.len()
            );
            for e in &m.errors {
                println!("- {e}");
            }
        }
        println!();
    }
    if failed {
        eprintln!("overhead: some variants did not run or printed no numbers (see above)");
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
