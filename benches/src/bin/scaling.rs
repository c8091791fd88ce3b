//! The scaling benchmark (`bash benches/scaling.sh [--short]`, which runs
//! this binary): what the tool costs a job, and what the file system sees
//! of it, as the job grows.
//!
//! For each MPI library (MPICH, then Open MPI; release builds in
//! `target/<library>`) and each job size (4, 16, 64 and 128 ranks by
//! default, on this host, or spread over the nodes of an emulated cluster
//! with `--cluster N`), interleaved run by run, `examples/c/idle.c`:
//!
//! - the trivial job (init, one barrier, finalize) without the tool and
//!   with it (default policies, default interval): the wall time of each,
//!   and their ratio (start-up and finalize cost);
//! - the mostly idle job (`seconds=S`: S seconds of sleep between two
//!   barriers) with the tool: the files and bytes it left in the run
//!   directory, and how often ranks listed the run directory's `control/`
//!   (the close records' `control_listings`, the tool's own counter, over
//!   the job's time), and how many ranks did (one a node is the design).
//!
//! Then it prints, per library, a markdown table (medians over the
//! repetitions; each ratio pairs the two runs of one round) and the same
//! figures projected to 10,000 ranks on 100 nodes from the measured
//! per-node and per-rank figures. Every run must succeed, and every run
//! under the tool must leave a closed log for every rank, with exactly one
//! rank a node listing `control/`: otherwise the command fails (exit
//! status 1) after printing what it has.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use mpit_tuner_benches::jobs::{self, machine, median, Cluster, CommonArgs, Job, Placement};

const USAGE: &str = "\
usage: scaling [--short] [--reps N] [--mpi mpich,openmpi] [--ranks 4,16,64,128]
               [--cluster NODES] [--seconds S] [--no-build]

  --short        CI mode: 1 repetition on 4 and 8 ranks, 1 s idle; checks
                 every variant ran and one rank a node listed control/
  --reps N       repetitions (default 3, --short 1)
  --mpi LIST     libraries, comma-separated (default mpich,openmpi)
  --ranks LIST   job sizes, comma-separated (default 4,16,64,128)
  --cluster N    spread each job over N nodes of an emulated cluster
                 (scripts/cluster.sh, unshaped links; needs root; every
                 size a multiple of N) instead of this host
  --seconds S    the idle job's sleep (default 2, --short 1)
  --no-build     use what target/<library> already holds";

#[derive(Debug, Clone)]
struct Options {
    common: CommonArgs,
    ranks: Vec<u32>,
    nodes: Option<u32>,
    seconds: f64,
}

fn parse_args() -> Result<Options, String> {
    let (mut ranks, mut nodes, mut seconds) = (Vec::new(), None, 0.0);
    let common = jobs::parse_args(USAGE, (1, 3), |a, args| {
        match a {
            "--ranks" => {
                ranks = jobs::list_arg(args.next(), "--ranks")?
                    .iter()
                    .map(|x| {
                        x.parse()
                            .map_err(|_| format!("--ranks: `{x}` is not a number"))
                    })
                    .collect::<Result<_, _>>()?
            }
            "--cluster" => {
                nodes = Some(
                    args.next()
                        .and_then(|v| v.parse().ok())
                        .filter(|&n: &u32| n >= 1)
                        .ok_or("--cluster needs a number of nodes >= 1")?,
                )
            }
            "--seconds" => {
                seconds = args
                    .next()
                    .and_then(|v| v.parse().ok())
                    .filter(|s: &f64| *s >= 0.0 && s.is_finite())
                    .ok_or("--seconds needs a number >= 0")?
            }
            _ => return Ok(false),
        }
        Ok(true)
    })?;
    let mut o = Options {
        common,
        ranks,
        nodes,
        seconds,
    };
    if o.ranks.is_empty() {
        o.ranks = if o.common.short {
            vec![4, 8]
        } else {
            vec![4, 16, 64, 128]
        };
    }
    if o.seconds == 0.0 {
        o.seconds = if o.common.short { 1.0 } else { 2.0 };
    }
    if let Some(bad) = o.ranks.iter().find(|&&r| r == 0) {
        return Err(format!("--ranks: {bad} ranks"));
    }
    if let Some(n) = o.nodes {
        if let Some(bad) = o.ranks.iter().find(|&&r| r % n != 0) {
            return Err(format!(
                "--ranks: {bad} ranks do not spread evenly over {n} nodes"
            ));
        }
    }
    Ok(o)
}

/// How long a run on the cluster may take to exit after its work, seconds.
const HANG_GRACE_S: u64 = 60;

/// What one run under the tool left in its run directory.
#[derive(Debug, Clone, Default)]
struct Left {
    files: usize,
    bytes: u64,
    /// Sum of the close records' `control_listings`.
    listings: u64,
    /// Ranks whose count is above 0, by host.
    listers: BTreeMap<String, u32>,
    /// Seconds the tool ran (the largest close record's `t`).
    seconds: f64,
    /// Whether the logs were written one file a node (the headers' layout).
    node_layout: bool,
}

/// Counts the files and bytes under `dir` and reads each rank's header
/// (its host) and close record (its listings). Fails when a rank's log is
/// missing or does not end with a close record.
fn inspect(dir: &Path, ranks: u32) -> Result<Left, String> {
    let mut left = Left::default();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let entries =
            std::fs::read_dir(&d).map_err(|e| format!("cannot list {}: {e}", d.display()))?;
        for e in entries.flatten() {
            let meta = e.metadata().map_err(|e| e.to_string())?;
            if meta.is_dir() {
                stack.push(e.path());
            } else {
                left.files += 1;
                left.bytes += meta.len();
            }
        }
    }
    // Either layout: a log a rank, or a node's shared by its ranks.
    let logs: BTreeMap<u32, vocab::RankFile> = vocab::rank_files(dir)
        .map_err(|e| format!("cannot list {}: {e}", dir.display()))?
        .into_iter()
        .map(|f| (f.rank, f))
        .collect();
    for rank in 0..ranks {
        let log = logs
            .get(&rank)
            .ok_or(format!("rank {rank}: no log in {}", dir.display()))?;
        let records: Vec<vocab::Record<'static>> = log
            .records()
            .map_err(|e| format!("rank {rank}: cannot read {}: {e}", log.describe()))?
            .filter_map(|r| r.ok().map(|(_, r)| r))
            .collect();
        let Some(vocab::Record::Header(header)) = records.first() else {
            return Err(format!("rank {rank}: no header in {}", log.describe()));
        };
        let Some(vocab::Record::Close(close)) = records.last() else {
            return Err(format!(
                "rank {rank}: {} has no close record",
                log.describe()
            ));
        };
        let n = close.control_listings.ok_or(format!(
            "rank {rank}: no control_listings in its close record"
        ))?;
        left.listings += n;
        left.node_layout |= header.layout == vocab::record::LogLayout::Node;
        let entry = left.listers.entry(header.host.clone()).or_insert(0);
        if n > 0 {
            *entry += 1;
        }
        left.seconds = left.seconds.max(close.t);
    }
    Ok(left)
}

/// The figures of one job size.
#[derive(Debug, Default)]
struct Row {
    plain: Vec<f64>,
    tool: Vec<f64>,
    ratio: Vec<f64>,
    left: Vec<Left>,
    /// Runs stopped after their work because they hung in MPI_Finalize.
    hung: u32,
}

struct Setup<'a> {
    flavor: &'a str,
    preload: PathBuf,
    program: PathBuf,
    scratch: tempfile::TempDir,
    cluster: Option<&'a Cluster>,
    /// Nodes a job spreads over (1: this host).
    nodes: u32,
}

impl Setup<'_> {
    fn job(&self, ranks: u32, seconds: f64, tool: Option<&Path>) -> Job<'_> {
        let mut env = Vec::new();
        if let Some(dir) = tool {
            env.push(("LD_PRELOAD".to_string(), self.preload.display().to_string()));
            env.push(("MPIT_TUNER_DIR".into(), dir.display().to_string()));
            env.push(("MPIT_TUNER_QUIET".into(), "1".into()));
        }
        let placement = self.cluster.map(|c| Placement {
            name: c.name.clone(),
            nodes: self.nodes,
            per_node: ranks / self.nodes,
        });
        Job {
            flavor: self.flavor,
            ranks,
            env,
            program: &self.program,
            args: vec![format!("seconds={seconds}")],
            timeout: Duration::from_secs(120 + 2 * u64::from(ranks)),
            // On the cluster, Debian's MPICH hangs now and then in
            // MPI_Finalize (openucx/ucx#8738): a run still there a minute
            // after its work (the tool's finalize takes seconds here) is
            // stopped, its wall time not used.
            done: placement
                .as_ref()
                .map(|_| ("idle:", Duration::from_secs(HANG_GRACE_S))),
            placement,
        }
    }
}

/// Runs every size of one library, `reps` rounds interleaved.
fn measure(setup: &Setup, o: &Options) -> Result<BTreeMap<u32, Row>, String> {
    let mut rows: BTreeMap<u32, Row> = BTreeMap::new();
    for rep in 0..o.common.reps {
        eprintln!(
            "scaling: {}: repetition {}/{} (load average {})",
            setup.flavor,
            rep + 1,
            o.common.reps,
            jobs::load()
        );
        for &ranks in &o.ranks {
            let row = rows.entry(ranks).or_default();
            let plain = jobs::run(&setup.job(ranks, 0.0, None))?;
            let dir = setup.scratch.path().join(format!("r{ranks}-{rep}-trivial"));
            let tool = jobs::run(&setup.job(ranks, 0.0, Some(&dir)))?;
            if !tool.hung_after_done {
                inspect(&dir, ranks)?;
            }
            let (p, t) = (plain.elapsed.as_secs_f64(), tool.elapsed.as_secs_f64());
            row.hung += u32::from(plain.hung_after_done) + u32::from(tool.hung_after_done);
            if !plain.hung_after_done && !tool.hung_after_done {
                row.plain.push(p);
                row.tool.push(t);
                row.ratio.push(t / p);
            }
            let dir = setup.scratch.path().join(format!("r{ranks}-{rep}-idle"));
            let idle = jobs::run(&setup.job(ranks, o.seconds, Some(&dir)))?;
            row.hung += u32::from(idle.hung_after_done);
            let left = inspect(&dir, ranks)?;
            // One a node; every rank where /dev/shm cannot hold the
            // node's shared listing (the ranks then list themselves).
            let nodes = setup.nodes as usize;
            let each = if tempfile::tempfile_in("/dev/shm").is_ok() {
                1
            } else {
                ranks / setup.nodes
            };
            if left.listers.len() != nodes || left.listers.values().any(|&n| n != each) {
                return Err(format!(
                    "{} ranks: the ranks that listed control/, by host: {:?}; {each} a node expected",
                    ranks, left.listers
                ));
            }
            row.left.push(left);
        }
    }
    Ok(rows)
}

/// Seconds with two decimals, `n/a` for none.
fn seconds(x: f64) -> String {
    if x.is_nan() {
        "n/a".into()
    } else {
        format!("{x:.2}")
    }
}

fn table(flavor: &str, rows: &BTreeMap<u32, Row>, o: &Options, nodes: u32) -> String {
    let mut s = format!(
        "\n### {} ({}), {}\n\n| ranks | nodes | trivial job, no tool (s) | with the tool (s) | tool / no tool | files in the run directory | bytes | `control/` listings per second (all ranks) | ranks that listed |\n|---|---|---|---|---|---|---|---|---|\n",
        flavor,
        jobs::library_version(flavor),
        match o.nodes {
            Some(n) => format!("{n} emulated nodes"),
            None => "one host".into(),
        }
    );
    for (ranks, row) in rows {
        let left = |f: &dyn Fn(&Left) -> f64| median(&row.left.iter().map(f).collect::<Vec<_>>());
        let (rmed, rmin, rmax) = jobs::spread(&row.ratio);
        s.push_str(&format!(
            "| {ranks} | {nodes} | {} | {} | {} | {:.0} | {:.0} | {:.1} | {:.0} |\n",
            seconds(median(&row.plain)),
            seconds(median(&row.tool)),
            if row.ratio.is_empty() {
                "n/a (every round hung)".to_string()
            } else {
                format!("**{rmed:.2}** ({rmin:.2}-{rmax:.2})")
            },
            left(&|l| l.files as f64),
            left(&|l| l.bytes as f64),
            left(&|l| l.listings as f64 / l.seconds.max(1e-3)),
            left(&|l| l.listers.values().sum::<u32>() as f64),
        ));
    }
    let hung: u32 = rows.values().map(|r| r.hung).sum();
    if hung > 0 {
        s.push_str(&format!(
            "\n{hung} runs printed their line and then hung in MPI_Finalize (stopped after {HANG_GRACE_S} s; \
             Debian's MPICH 4.0.2 on UCX over TCP, openucx/ucx#8738): their logs are used, \
             the wall times of their round are not.\n"
        ));
    }
    // The projection, from the largest size measured.
    if let Some((&ranks, row)) = rows.iter().next_back() {
        // Per node, the logs grow with nodes: what is not summary.json
        // is a node's; per rank, every file counts a rank's.
        let node_layout = row.left.iter().all(|l| l.node_layout);
        let files_projected = median(
            &row.left
                .iter()
                .map(|l| {
                    if node_layout {
                        (l.files as f64 - 1.0).max(0.0) / f64::from(nodes) * 100.0 + 1.0
                    } else {
                        l.files as f64 / f64::from(ranks) * 10_000.0
                    }
                })
                .collect::<Vec<_>>(),
        );
        let layout = if node_layout {
            format!(
                "the logs were written one file a node at {ranks} ranks: {:.0} a node, and summary.json",
                median(
                    &row.left
                        .iter()
                        .map(|l| (l.files as f64 - 1.0).max(0.0) / f64::from(nodes))
                        .collect::<Vec<_>>()
                )
            )
        } else {
            "the logs were written one file a rank".to_string()
        };
        let listings_per_node = median(
            &row.left
                .iter()
                .map(|l| l.listings as f64 / l.seconds.max(1e-3) / f64::from(nodes))
                .collect::<Vec<_>>(),
        );
        let bytes_per_rank = median(
            &row.left
                .iter()
                .map(|l| l.bytes as f64 / f64::from(ranks))
                .collect::<Vec<_>>(),
        );
        s.push_str(&format!(
            "\nProjected to 10,000 ranks on 100 nodes from {ranks} ranks: about {:.0} files \
             ({layout}), {:.0} listings of \
             `control/` a second ({listings_per_node:.1} a node and second; one rank a node \
             lists; one a rank would make {:.0}), {:.1} MB written in {:.0} s of idle job \
             ({bytes_per_rank:.0} bytes a rank).\n",
            files_projected,
            listings_per_node * 100.0,
            listings_per_node * 10_000.0,
            bytes_per_rank * 10_000.0 / 1e6,
            o.seconds,
        ));
    }
    s
}

fn main() -> ExitCode {
    let o = match parse_args() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("scaling: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let cluster = match o.nodes {
        Some(n) => match Cluster::up(n, "none", "scaling") {
            Ok(c) => Some(c),
            Err(e) => {
                eprintln!("scaling: {e}");
                return ExitCode::from(1);
            }
        },
        None => None,
    };
    let mut out = String::new();
    let mut failed = false;
    for flavor in &o.common.flavors {
        let (preload, program) = match jobs::build(flavor, "idle", o.common.build) {
            Ok(p) => p,
            Err(e) => {
                eprintln!("scaling: {flavor}: {e}");
                failed = true;
                continue;
            }
        };
        let setup = Setup {
            flavor,
            preload,
            program,
            scratch: tempfile::Builder::new()
                .prefix("mpit-scaling-")
                .tempdir()
                .expect("a scratch directory"),
            cluster: cluster.as_ref(),
            nodes: o.nodes.unwrap_or(1),
        };
        match measure(&setup, &o) {
            Ok(rows) => out.push_str(&table(flavor, &rows, &o, setup.nodes)),
            Err(e) => {
                eprintln!("scaling: {flavor}: {e}");
                failed = true;
            }
        }
    }
    println!("{out}");
    println!("\nMachine: {}", machine());
    if failed {
        eprintln!("scaling: FAILED (see above)");
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}
