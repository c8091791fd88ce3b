//! The default mode against no tool, on a matrix of collectives, on one
//! host and across emulated nodes, in one command (`bash benches/matrix.sh`,
//! which runs this binary; issue 64).
//!
//! For each MPI library (MPICH, then Open MPI; the release preload and
//! `examples/c/coll_bench.c` built in `target/<library>`), each layout
//! (`host2`: 2 ranks on this host; `NxK`: K ranks on each of N nodes of an
//! emulated cluster, `scripts/cluster.sh`, links shaped by `--link`) and
//! each case (bcast 8 B, 64 KiB, 1 MiB; integer allreduce 8 B, 64 KiB,
//! 1 MiB; integer reduce 8 B; allgather 1 KiB, 1 MiB; alltoall 64 KiB), it
//! sizes the loop by a calibration run without the tool (`--seconds` of
//! calls, 20 at least), then runs these variants interleaved, the order
//! rotated by one each round:
//!
//! - `none`: no tool, the library's own choice;
//! - `default`: the release preload with nothing set but its log
//!   directory and `MPIT_TUNER_QUIET=1`: the default mode (collective
//!   tuning in mode `safe`);
//! - `monitored`: the same with `MPIT_TUNER_COLLECTIVES=off`: what the
//!   tool's presence costs without collective tuning, so that `default /
//!   monitored` is what tuning itself costs or gains;
//! - with `--fixed`, one per algorithm of the collective fixed at start
//!   (no tool; [`fixed::algorithms`]): the best of them and of `none` is
//!   the best fixed algorithm. One whose first rounds took twice `none`'s
//!   time is not run again (it cannot be the best; its median is over the
//!   rounds it ran).
//!
//! It prints per library and layout a markdown table: each case's calls,
//! `none`'s time per call, `default / none` (median of the per-round
//! ratios, min-max), `monitored / none`, with `--fixed` the best fixed algorithm over `none`
//! and `default / best`, what the default mode kept (rank 0's
//! summary.json), the search cost the tool reports (the `cost_us` of its
//! summary, as a share of the loop) and the cost measured (the default's
//! loop minus its calls at the kept algorithm's time, as a share: the
//! kept algorithm's time is `none`'s where the default is kept, else its
//! fixed variant's with `--fixed`).
//!
//! `--gate R`: a case whose median `default / none` is above R after the
//! rounds runs more rounds, up to `--max-reps`, while its median stays
//! above R (small messages on 2 cores are noisy: one round can be 1.8
//! times another); the command fails (exit status 1) if one still is,
//! naming it. Every run must succeed and print its time, and every
//! default run must leave a summary.json naming mode `safe`: otherwise
//! the command fails after printing what it has.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use mpit_tuner_benches::fixed;
use mpit_tuner_benches::jobs::{self, field, machine, spread, Cluster, CommonArgs, Job, Placement};
use tuner_core::collectives::Collective;

const USAGE: &str = "\
usage: matrix [--short] [--reps N] [--mpi mpich,openmpi] [--no-build]
              [--layouts host2,2x1,2x2,4x1] [--link RATE] [--cases LIST]
              [--seconds S] [--fixed] [--gate R] [--max-reps N]
              [--keep-logs DIR] [--store] [--learn-seconds S]

  --short       CI mode: 3 rounds of 0.3 s loops on 2x1, cases allreduce-1m,
                bcast-64k, allgather-1k, reduce-8, --gate 1.10
  --reps N      rounds (default 5, --short 3)
  --mpi LIST    libraries, comma-separated (default mpich,openmpi)
  --no-build    use what target/<library>/release already holds
  --layouts L   host2 (2 ranks here), NxK (K ranks on each of N emulated
                nodes); default host2,2x1,2x2,4x1
  --link RATE   the emulated links' rate (default 1gbit; none: unshaped)
  --cases LIST  bcast-8, bcast-64k, bcast-1m, allreduce-8, allreduce-64k,
                allreduce-1m, reduce-8, allgather-1k, allgather-1m,
                alltoall-64k (default all)
  --seconds S   the loop's length at the library's default (default 1.5)
  --fixed       also every algorithm fixed at start (the best fixed one)
  --gate R      fail when a case's median default / none stays above R
  --max-reps N  rounds at most for a case over the gate (default 3 x reps)
  --keep-logs DIR  keep the tool's run directories in
                DIR/<library>/<layout>/<case>-<variant>-<k> (else removed)
  --store       the default mode with a tuning store of its own per case
                (issue 65): one run of it before the rounds learns, every
                default run of the rounds starts from what the runs before
                it stored (`kept` marks the choices from the store)
  --learn-seconds S  with --store: the first run's loop is S seconds at
                the library's default (default: --seconds), so that a
                search too dear for the rounds' short jobs is paid for
                once, by a long one";

/// One case: coll_bench's collective and bytes.
#[derive(Debug, Clone, Copy)]
struct Case {
    key: &'static str,
    label: &'static str,
    /// coll_bench's COLL.
    coll: &'static str,
    collective: Collective,
    bytes: u64,
}

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;

const fn case(
    key: &'static str,
    label: &'static str,
    coll: &'static str,
    collective: Collective,
    bytes: u64,
) -> Case {
    Case {
        key,
        label,
        coll,
        collective,
        bytes,
    }
}

const CASES: &[Case] = &[
    case("bcast-8", "bcast 8 B", "bcast", Collective::Bcast, 8),
    case(
        "bcast-64k",
        "bcast 64 KiB",
        "bcast",
        Collective::Bcast,
        64 * KIB,
    ),
    case("bcast-1m", "bcast 1 MiB", "bcast", Collective::Bcast, MIB),
    case(
        "allreduce-8",
        "allreduce int 8 B",
        "allreduce_int",
        Collective::Allreduce,
        8,
    ),
    case(
        "allreduce-64k",
        "allreduce int 64 KiB",
        "allreduce_int",
        Collective::Allreduce,
        64 * KIB,
    ),
    case(
        "allreduce-1m",
        "allreduce int 1 MiB",
        "allreduce_int",
        Collective::Allreduce,
        MIB,
    ),
    case(
        "reduce-8",
        "reduce int 8 B",
        "reduce_int",
        Collective::Reduce,
        8,
    ),
    case(
        "allgather-1k",
        "allgather 1 KiB",
        "allgather",
        Collective::Allgather,
        KIB,
    ),
    case(
        "allgather-1m",
        "allgather 1 MiB",
        "allgather",
        Collective::Allgather,
        MIB,
    ),
    case(
        "alltoall-64k",
        "alltoall 64 KiB",
        "alltoall",
        Collective::Alltoall,
        64 * KIB,
    ),
];

const SHORT_CASES: &[&str] = &["allreduce-1m", "bcast-64k", "allgather-1k", "reduce-8"];

/// Where a case runs: `per_node` ranks on this host (`nodes` 0) or on each
/// of `nodes` emulated nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Layout {
    nodes: u32,
    per_node: u32,
}

impl Layout {
    fn ranks(self) -> u32 {
        self.nodes.max(1) * self.per_node
    }

    fn parse(s: &str) -> Result<Layout, String> {
        if let Some(n) = s.strip_prefix("host") {
            let per_node = n.parse().ok().filter(|&n: &u32| n >= 2);
            return per_node
                .map(|per_node| Layout { nodes: 0, per_node })
                .ok_or_else(|| format!("--layouts: `{s}`: hostN needs N >= 2"));
        }
        let (n, k) = s
            .split_once('x')
            .ok_or_else(|| format!("--layouts: `{s}` is neither hostN nor NxK"))?;
        match (n.parse::<u32>(), k.parse::<u32>()) {
            (Ok(nodes), Ok(per_node)) if nodes >= 2 && per_node >= 1 => {
                Ok(Layout { nodes, per_node })
            }
            _ => Err(format!("--layouts: `{s}`: NxK needs N >= 2 nodes, K >= 1")),
        }
    }
}

impl Layout {
    /// As `--layouts` names it: `host2`, `2x1`.
    fn key(self) -> String {
        if self.nodes == 0 {
            format!("host{}", self.per_node)
        } else {
            format!("{}x{}", self.nodes, self.per_node)
        }
    }
}

impl std::fmt::Display for Layout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.nodes == 0 {
            write!(f, "{} ranks on one host", self.per_node)
        } else {
            write!(
                f,
                "{} emulated nodes x {} rank{}",
                self.nodes,
                self.per_node,
                if self.per_node == 1 { "" } else { "s" }
            )
        }
    }
}

#[derive(Debug, Clone)]
struct Options {
    common: CommonArgs,
    layouts: Vec<Layout>,
    link: String,
    cases: Vec<Case>,
    seconds: f64,
    fixed: bool,
    gate: Option<f64>,
    max_reps: Option<usize>,
    keep_logs: Option<PathBuf>,
    store: bool,
    /// The learning run's loop (s) with `--store`; `None`: `seconds`.
    learn_seconds: Option<f64>,
}

/// The value of an option `what` that takes seconds: a positive number.
fn positive_seconds(value: Option<String>, what: &str) -> Result<f64, String> {
    value
        .and_then(|v| v.parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s > 0.0)
        .ok_or_else(|| format!("{what} needs a positive number"))
}

fn parse_args() -> Result<Options, String> {
    let mut layouts = None;
    let mut link = "1gbit".to_string();
    let mut cases = None;
    let mut seconds = None;
    let mut fixed = false;
    let mut gate = None;
    let mut max_reps = None;
    let mut keep_logs = None;
    let mut store = false;
    let mut learn_seconds = None;
    let common = jobs::parse_args(USAGE, (3, 5), |a, rest| {
        match a {
            "--layouts" => {
                let l = jobs::list_arg(rest.next(), "--layouts")?;
                layouts = Some(
                    l.iter()
                        .map(|s| Layout::parse(s))
                        .collect::<Result<Vec<_>, _>>()?,
                );
            }
            "--link" => link = rest.next().ok_or("--link needs a rate (1gbit, none)")?,
            "--cases" => {
                let l = jobs::list_arg(rest.next(), "--cases")?;
                let mut v = Vec::new();
                for k in l {
                    let c = CASES
                        .iter()
                        .find(|c| c.key == k)
                        .ok_or_else(|| format!("--cases: unknown case `{k}`"))?;
                    v.push(*c);
                }
                cases = Some(v);
            }
            "--seconds" => seconds = Some(positive_seconds(rest.next(), "--seconds")?),
            "--fixed" => fixed = true,
            "--store" => store = true,
            "--learn-seconds" => {
                learn_seconds = Some(positive_seconds(rest.next(), "--learn-seconds")?)
            }
            "--gate" => {
                gate = Some(
                    rest.next()
                        .and_then(|v| v.parse::<f64>().ok())
                        .filter(|r| r.is_finite() && *r >= 1.0)
                        .ok_or("--gate needs a ratio >= 1")?,
                )
            }
            "--max-reps" => {
                max_reps = Some(
                    rest.next()
                        .and_then(|v| v.parse::<usize>().ok())
                        .filter(|&n| n >= 1)
                        .ok_or("--max-reps needs a number >= 1")?,
                )
            }
            "--keep-logs" => {
                keep_logs = Some(PathBuf::from(
                    rest.next().ok_or("--keep-logs needs a directory")?,
                ))
            }
            _ => return Ok(false),
        }
        Ok(true)
    })?;
    if learn_seconds.is_some() && !store {
        return Err("--learn-seconds is the learning run of --store: give --store too".into());
    }
    let short = common.short;
    let default_layouts = if short {
        vec![Layout {
            nodes: 2,
            per_node: 1,
        }]
    } else {
        ["host2", "2x1", "2x2", "4x1"]
            .iter()
            .map(|s| Layout::parse(s).expect("a layout"))
            .collect()
    };
    let default_cases: Vec<Case> = if short {
        CASES
            .iter()
            .filter(|c| SHORT_CASES.contains(&c.key))
            .copied()
            .collect()
    } else {
        CASES.to_vec()
    };
    Ok(Options {
        layouts: layouts.unwrap_or(default_layouts),
        link,
        cases: cases.unwrap_or(default_cases),
        seconds: seconds.unwrap_or(if short { 0.3 } else { 1.5 }),
        fixed,
        gate: gate.or(short.then_some(1.10)),
        max_reps,
        keep_logs,
        store,
        learn_seconds,
        common,
    })
}

/// What a default-mode run said besides its time.
#[derive(Debug, Clone, Default)]
struct Tuned {
    /// The search cost the tool reports (us, rank 0's summary).
    cost_us: f64,
    /// The algorithms kept, or "left" (not searched), "none" (no search
    /// ended).
    kept: String,
}

/// One variant of a case.
#[derive(Debug, Clone)]
struct Variant {
    label: String,
    env: Vec<(String, String)>,
    tool: bool,
}

/// The variants' places: none, default, monitored, then the fixed ones.
const MONITORED: usize = 2;

/// See [`Rounds::hopeless`].
const HOPELESS: f64 = 2.0;

/// How long one run may take (a fixed algorithm's: see [`Rounds::round`]).
const RUN_TIMEOUT: Duration = Duration::from_secs(300);

struct Runner<'a> {
    flavor: &'a str,
    preload: &'a Path,
    program: &'a Path,
    placement: Option<Placement>,
    ranks: u32,
    scratch: PathBuf,
    /// `--keep-logs`: where this library's and layout's run directories
    /// go, and how many went there.
    keep: Option<(PathBuf, std::cell::Cell<u32>)>,
}

impl Runner<'_> {
    /// One run: its loop's seconds, and for the default mode what the
    /// tool did.
    fn run(
        &self,
        case: Case,
        iters: u64,
        v: &Variant,
        timeout: Duration,
    ) -> Result<(f64, Option<Tuned>), String> {
        let dir = self.scratch.join("run");
        let _ = std::fs::remove_dir_all(&dir);
        let mut env = v.env.clone();
        if v.tool {
            env.extend([
                ("LD_PRELOAD".to_string(), self.preload.display().to_string()),
                ("MPIT_TUNER_DIR".to_string(), dir.display().to_string()),
                ("MPIT_TUNER_QUIET".to_string(), "1".to_string()),
            ]);
        }
        let args = vec![
            case.coll.to_string(),
            case.bytes.to_string(),
            iters.to_string(),
        ];
        let what = format!("{} coll_bench {}", v.label, args.join(" "));
        let result = self.run_in(&dir, env, args, &what, v, timeout);
        if let (true, Some((keep, n))) = (v.tool, &self.keep) {
            n.set(n.get() + 1);
            let to = keep.join(format!("{}-{}-{}", case.key, v.label, n.get()));
            let moved = std::fs::create_dir_all(keep).and_then(|()| std::fs::rename(&dir, &to));
            if let Err(e) = moved {
                eprintln!(
                    "matrix: cannot keep {} as {}: {e}",
                    dir.display(),
                    to.display()
                );
            }
        }
        result
    }

    fn run_in(
        &self,
        dir: &Path,
        env: Vec<(String, String)>,
        args: Vec<String>,
        what: &str,
        v: &Variant,
        timeout: Duration,
    ) -> Result<(f64, Option<Tuned>), String> {
        let out = jobs::run(&Job {
            flavor: self.flavor,
            ranks: self.ranks,
            env,
            program: self.program,
            args,
            timeout,
            placement: self.placement.clone(),
            // Debian's MPICH 4.0.2 over TCP hangs in MPI_Finalize now and
            // then (openucx/ucx#8738): its time is printed before.
            done: self
                .placement
                .as_ref()
                .map(|_| ("coll_bench:", Duration::from_secs(20))),
        })
        .map_err(|e| format!("{what}: {e}"))?;
        let time = out
            .stdout
            .lines()
            .find_map(|l| field(l, "time_s"))
            .ok_or_else(|| format!("{what}: no time_s in its output: {}", out.stdout))?;
        if !v.tool || v.label == "monitored" {
            return Ok((time, None));
        }
        if out.hung_after_done {
            // No summary: stopped in MPI_Finalize.
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
        let outcomes = doc["collectives"].as_array().cloned().unwrap_or_default();
        let cost_us = outcomes
            .iter()
            .filter_map(|s| s["cost_us"].as_f64())
            .sum::<f64>();
        let kept: Vec<String> = outcomes
            .iter()
            .map(|s| match (s["chosen"].as_str(), s["searches"].as_u64()) {
                (Some(c), Some(0)) => format!("left ({c})"),
                (Some(c), _) if s["from_store"] == true => format!("{c} (store)"),
                (Some(c), _) => c.to_string(),
                (None, _) => "none".to_string(),
            })
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
}

/// A case's measurements.
struct Rounds {
    case: Case,
    iters: u64,
    variants: Vec<Variant>,
    /// [variant][round] seconds.
    times: Vec<Vec<f64>>,
    tuned: Vec<Tuned>,
}

impl Rounds {
    fn ratios(&self, v: usize) -> Vec<f64> {
        self.times[v]
            .iter()
            .zip(&self.times[0])
            .map(|(t, none)| t / none)
            .collect()
    }

    /// A fixed algorithm whose runs so far took [`HOPELESS`] times
    /// `none`'s: it cannot be the best fixed one, and is not run again
    /// (MPICH's scatter-allgather bcasts of 8 bytes on 2x2: 10 ms a call,
    /// 80 s a round).
    fn hopeless(&self, v: usize) -> bool {
        let fixed = v > MONITORED && !self.variants[v].tool;
        fixed
            && !self.times[v].is_empty()
            && !self.times[0].is_empty()
            && jobs::median(&self.times[v]) > HOPELESS * jobs::median(&self.times[0])
    }

    /// The best fixed variant (none included): its index.
    fn best(&self) -> usize {
        (0..self.variants.len())
            .filter(|&v| !self.variants[v].tool)
            .min_by(|&a, &b| jobs::median(&self.times[a]).total_cmp(&jobs::median(&self.times[b])))
            .unwrap_or(0)
    }

    fn round(&mut self, runner: &Runner, k: usize) -> Result<(), String> {
        let n = self.variants.len();
        for i in 0..n {
            let v = (i + k) % n;
            if self.hopeless(v) {
                continue;
            }
            // A fixed algorithm gets 4 times none's loop and 30 s: one
            // slower than that is hopeless (MPICH's scatter-allgather bcast
            // of 8 bytes on 2x2, 10 ms a call, took over 300 s for a loop
            // sized to 1 s at the default).
            let fixed = v > MONITORED && !self.variants[v].tool;
            let timeout = match (fixed, self.times[0].is_empty()) {
                (true, false) => {
                    Duration::from_secs_f64(2.0 * HOPELESS * jobs::median(&self.times[0]) + 30.0)
                }
                _ => RUN_TIMEOUT,
            };
            match runner.run(self.case, self.iters, &self.variants[v], timeout) {
                Ok((t, tuned)) => {
                    self.times[v].push(t);
                    self.tuned.extend(tuned);
                }
                Err(e) if fixed && e.contains("timed out") => {
                    eprintln!("matrix: {e}: hopeless, not run again");
                    self.times[v].push(f64::INFINITY);
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

fn variants(o: &Options, flavor: &str, case: Case, ranks: u32) -> Vec<Variant> {
    let mut v = vec![
        Variant {
            label: "none".into(),
            env: Vec::new(),
            tool: false,
        },
        Variant {
            label: "default".into(),
            env: Vec::new(),
            tool: true,
        },
        Variant {
            label: "monitored".into(),
            env: vec![("MPIT_TUNER_COLLECTIVES".into(), "off".into())],
            tool: true,
        },
    ];
    if o.fixed {
        v.extend(
            fixed::algorithms(flavor, case.collective, ranks)
                .into_iter()
                .map(|a| Variant {
                    label: a.name,
                    env: a.env,
                    tool: false,
                }),
        );
    }
    v
}

/// Calls for about `seconds` at the library's default, from a calibration
/// run without the tool (20 at least, 5,000,000 at most).
fn calibrate(runner: &Runner, case: Case, seconds: f64) -> Result<u64, String> {
    let none = Variant {
        label: "calibration".into(),
        env: Vec::new(),
        tool: false,
    };
    let mut iters = 20u64;
    loop {
        let (t, _) = runner.run(case, iters, &none, RUN_TIMEOUT)?;
        if t >= 0.1 * seconds || iters >= 5_000_000 {
            let per_call = t / iters as f64;
            return Ok(((seconds / per_call.max(1e-9)) as u64).clamp(20, 5_000_000));
        }
        iters = iters.saturating_mul(10);
    }
}

fn measure(
    o: &Options,
    flavor: &str,
    layout: Layout,
    scratch: &Path,
    failures: &mut Vec<String>,
) -> Result<String, String> {
    let (preload, program) = jobs::build(flavor, "coll_bench", o.common.build)?;
    let cluster = if layout.nodes > 0 {
        Some(Cluster::up(layout.nodes, &o.link, "matrix")?)
    } else {
        None
    };
    let runner = Runner {
        flavor,
        preload: &preload,
        program: &program,
        placement: cluster.as_ref().map(|c| Placement {
            name: c.name.clone(),
            nodes: layout.nodes,
            per_node: layout.per_node,
        }),
        ranks: layout.ranks(),
        scratch: scratch.join(flavor),
        keep: o
            .keep_logs
            .as_ref()
            .map(|k| (k.join(flavor).join(layout.key()), std::cell::Cell::new(0))),
    };
    let mut all = Vec::new();
    for case in &o.cases {
        let iters = calibrate(&runner, *case, o.seconds)?;
        let mut variants = variants(o, flavor, *case, layout.ranks());
        if o.store {
            // The first run of the job learns; the rounds' runs start
            // from the store.
            let store = runner.scratch.join(format!("{}.store.json", case.key));
            variants[1]
                .env
                .push(("MPIT_TUNER_STORE".into(), store.display().to_string()));
            let learn = o.learn_seconds.unwrap_or(o.seconds);
            let calls = ((iters as f64 * learn / o.seconds) as u64).max(iters);
            eprintln!(
                "matrix: {flavor}, {layout}, {}: the first run, into the store ({calls} calls)",
                case.label
            );
            let timeout = RUN_TIMEOUT.max(Duration::from_secs_f64(4.0 * learn + 60.0));
            runner.run(*case, calls, &variants[1], timeout)?;
        }
        let mut r = Rounds {
            case: *case,
            iters,
            times: vec![Vec::new(); variants.len()],
            variants,
            tuned: Vec::new(),
        };
        for k in 0..o.common.reps {
            eprintln!(
                "matrix: {flavor}, {layout}, {}, {iters} calls, round {} of {}",
                case.label,
                k + 1,
                o.common.reps
            );
            r.round(&runner, k)?;
        }
        if let Some(gate) = o.gate {
            let most = o.max_reps.unwrap_or(3 * o.common.reps);
            while jobs::median(&r.ratios(1)) > gate && r.times[0].len() < most {
                eprintln!(
                    "matrix: {flavor}, {layout}, {}: default / none {:.3} over {gate}: one more round",
                    case.label,
                    jobs::median(&r.ratios(1))
                );
                let k = r.times[0].len();
                r.round(&runner, k)?;
            }
            let m = jobs::median(&r.ratios(1));
            if m > gate {
                failures.push(format!(
                    "{flavor}, {layout}, {}: default / none {m:.3} over {gate} after {} rounds",
                    case.label,
                    r.times[0].len()
                ));
            }
        }
        all.push(r);
    }
    drop(cluster);
    let _ = std::fs::remove_dir_all(scratch.join(flavor));
    Ok(table(o, flavor, layout, &all))
}

fn table(o: &Options, flavor: &str, layout: Layout, all: &[Rounds]) -> String {
    let mut t = String::new();
    let _ = writeln!(
        t,
        "\n{} ({}), {layout}{}{}:\n",
        flavor,
        jobs::library_version(flavor),
        if layout.nodes > 0 {
            format!(", links {}", o.link)
        } else {
            String::new()
        },
        match (o.store, o.learn_seconds) {
            (true, Some(l)) => format!(
                ", default with a tuning store (every run after the first, a loop of {l} s at the library's default)"
            ),
            (true, None) => ", default with a tuning store (every run after the first)".to_string(),
            _ => String::new(),
        }
    );
    if o.fixed {
        t.push_str(
            "| case | calls | rounds | none (us/call) | default / none | monitored / none | best fixed / none | default / best | kept | search cost, reported | measured |\n\
             |---|---|---|---|---|---|---|---|---|---|---|\n",
        );
    } else {
        t.push_str(
            "| case | calls | rounds | none (us/call) | default / none | monitored / none | kept | search cost, reported | measured |\n\
             |---|---|---|---|---|---|---|---|---|\n",
        );
    }
    for r in all {
        let (ratio, lo, hi) = spread(&r.ratios(1));
        let none_us = jobs::median(&r.times[0]) / r.iters as f64 * 1e6;
        let default_s = jobs::median(&r.times[1]);
        let mut kept: Vec<&str> = r.tuned.iter().map(|x| x.kept.as_str()).collect();
        kept.sort_unstable();
        kept.dedup();
        let reported: Vec<f64> = r
            .tuned
            .iter()
            .zip(&r.times[1])
            .map(|(x, time)| x.cost_us * 1e-6 / time)
            .collect();
        let reported = if reported.is_empty() {
            "n/a".to_string()
        } else {
            format!("{:.2}%", jobs::median(&reported) * 100.0)
        };
        // The kept algorithm's loop: none's where every run kept the
        // default, else that algorithm's fixed variant.
        let only = (kept.len() == 1).then(|| kept[0].trim_end_matches(" (store)"));
        let kept_time = match only {
            Some(k) if k == "none" || k.starts_with("left") => Some(jobs::median(&r.times[0])),
            Some(k) => r
                .variants
                .iter()
                .position(|v| !v.tool && v.label == k)
                .map(|v| jobs::median(&r.times[v]))
                .or_else(|| {
                    // The default's own name (auto, ignore): none's loop.
                    (k == "auto" || k == "ignore").then(|| jobs::median(&r.times[0]))
                }),
            None => None,
        };
        let measured = kept_time.map_or("n/a".to_string(), |k| {
            format!("{:.2}%", (default_s - k) / default_s * 100.0)
        });
        let (m, m_lo, m_hi) = spread(&r.ratios(MONITORED));
        let _ = write!(
            t,
            "| {} | {} | {} | {:.2} | **{:.3}** ({:.3}-{:.3}) | {:.3} ({:.3}-{:.3}) |",
            r.case.label,
            r.iters,
            r.times[0].len(),
            none_us,
            ratio,
            lo,
            hi,
            m,
            m_lo,
            m_hi
        );
        if o.fixed {
            let best = r.best();
            let b = jobs::median(&r.times[best]);
            let _ = write!(
                t,
                " {:.3} ({}) | {:.3} |",
                b / jobs::median(&r.times[0]),
                r.variants[best].label,
                default_s / b
            );
        }
        let _ = writeln!(t, " {} | {} | {} |", kept.join("; "), reported, measured);
    }
    t
}

fn main() -> ExitCode {
    let o = match parse_args() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("matrix: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let scratch = match tempfile::Builder::new().prefix("mpit-matrix-").tempdir() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("matrix: cannot create a scratch directory: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut failed = false;
    let mut over = Vec::new();
    println!("# The default mode against no tool, on a matrix of collectives");
    println!("\nMachine: {}", machine());
    for flavor in &o.common.flavors {
        for layout in &o.layouts {
            match measure(&o, flavor, *layout, scratch.path(), &mut over) {
                Ok(table) => println!("{table}"),
                Err(e) => {
                    eprintln!("matrix: {flavor}, {layout}: {e}");
                    failed = true;
                }
            }
        }
    }
    for f in &over {
        eprintln!("matrix: over the gate: {f}");
    }
    if failed || !over.is_empty() {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
