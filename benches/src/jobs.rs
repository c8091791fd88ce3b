//! MPI jobs for the application-level benchmark commands
//! (`src/bin/overhead.rs`, `src/bin/collectives.rs`): building what they
//! run, running one job under `mpiexec` with a timeout, and describing the
//! machine.

use std::io::Read as _;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The repository's top directory.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("benches/ has a parent")
        .to_path_buf()
}

/// The options every benchmark command takes.
#[derive(Debug, Clone)]
pub struct CommonArgs {
    /// `--short`: CI's quick form of the command.
    pub short: bool,
    /// `--reps N`, or the command's default for `--short` or not.
    pub reps: usize,
    /// `--mpi LIST`: the libraries to measure (default both).
    pub flavors: Vec<String>,
    /// Not `--no-build`: build what the command runs first.
    pub build: bool,
}

/// The arguments after the one a command's own parser is given.
pub type Rest<'a> = dyn Iterator<Item = String> + 'a;

/// A command's parser of its own arguments (see [`parse_args`]).
type OwnArgs<'a> = dyn FnMut(&str, &mut Rest) -> Result<bool, String> + 'a;

/// Parses the command line: `--short`, `--reps N`, `--mpi LIST`,
/// `--no-build` and `-h`/`--help` (prints `usage` and exits) here, every
/// other argument through `other(argument, rest)`, which takes the values
/// it needs from `rest` and returns `Ok(false)` for an argument it does not
/// know. Without `--reps`, `reps` is `default_reps.0` with `--short` and
/// `default_reps.1` without.
pub fn parse_args(
    usage: &str,
    default_reps: (usize, usize),
    mut other: impl FnMut(&str, &mut Rest) -> Result<bool, String>,
) -> Result<CommonArgs, String> {
    parse_from(std::env::args().skip(1), usage, default_reps, &mut other)
}

fn parse_from(
    mut args: impl Iterator<Item = String>,
    usage: &str,
    default_reps: (usize, usize),
    other: &mut OwnArgs,
) -> Result<CommonArgs, String> {
    let mut c = CommonArgs {
        short: false,
        reps: 0,
        flavors: vec!["mpich".into(), "openmpi".into()],
        build: true,
    };
    while let Some(a) = args.next() {
        match a.as_str() {
            "--short" => c.short = true,
            "--no-build" => c.build = false,
            "--reps" => c.reps = reps_arg(args.next())?,
            "--mpi" => c.flavors = flavors_arg(args.next())?,
            "-h" | "--help" => {
                println!("{usage}");
                std::process::exit(0);
            }
            a => {
                if !other(a, &mut args)? {
                    return Err(format!("unknown argument `{a}`"));
                }
            }
        }
    }
    if c.reps == 0 {
        c.reps = if c.short {
            default_reps.0
        } else {
            default_reps.1
        };
    }
    Ok(c)
}

/// The value of `--reps`: a number >= 1.
fn reps_arg(value: Option<String>) -> Result<usize, String> {
    value
        .and_then(|v| v.parse().ok())
        .filter(|&n| n > 0)
        .ok_or_else(|| "--reps needs a number >= 1".to_string())
}

/// The value of `--mpi`: `mpich`, `openmpi` or both, comma-separated.
fn flavors_arg(value: Option<String>) -> Result<Vec<String>, String> {
    let flavors = list_arg(value, "--mpi")?;
    if let Some(bad) = flavors.iter().find(|f| *f != "mpich" && *f != "openmpi") {
        return Err(format!("--mpi: unknown library `{bad}` (mpich, openmpi)"));
    }
    Ok(flavors)
}

/// The value of an option `what` that takes a comma-separated list: its
/// items, trimmed. A missing value, one that is the next option (`--cases
/// --no-build`) and an empty item (`a,,b`) are errors naming `what`.
pub fn list_arg(value: Option<String>, what: &str) -> Result<Vec<String>, String> {
    let value = value
        .filter(|v| !v.starts_with('-'))
        .ok_or_else(|| format!("{what} needs a comma-separated list"))?;
    let items: Vec<String> = value.split(',').map(|s| s.trim().to_string()).collect();
    if items.iter().any(String::is_empty) {
        return Err(format!("{what}: empty item in `{value}`"));
    }
    Ok(items)
}

/// Runs `cmd`; an error says what failed.
pub fn run_checked(cmd: &mut Command, what: &str) -> Result<(), String> {
    let status = cmd
        .status()
        .map_err(|e| format!("{what}: cannot run: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{what} failed ({status})"))
    }
}

/// Builds, for `flavor` (`mpich` or `openmpi`), the release preload in
/// `target/<flavor>` and the C example `program` in
/// `target/<flavor>/bench-examples`; returns (preload, program).
pub fn build(flavor: &str, program: &str, build: bool) -> Result<(PathBuf, PathBuf), String> {
    let root = root();
    let target = root.join("target").join(flavor);
    let examples = target.join("bench-examples");
    if build {
        eprintln!("building for {flavor} (release, {})", target.display());
        run_checked(
            Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
                .current_dir(&root)
                .env("MPICC", format!("mpicc.{flavor}"))
                .args(["build", "--release", "--locked", "--quiet", "--target-dir"])
                .arg(&target)
                .args(["-p", "preload"]),
            "cargo build",
        )?;
        run_checked(
            Command::new("make")
                .current_dir(&root)
                .env_remove("MPICC")
                .args(["--quiet", "-C", "examples"])
                .arg(format!("MPI={flavor}"))
                .arg(format!("OUT={}", examples.display()))
                .arg(examples.join(program)),
            &format!("make {program}"),
        )?;
    }
    let preload = target.join("release").join("libpreload.so");
    let program = examples.join(program);
    for p in [&preload, &program] {
        if !p.exists() {
            return Err(format!(
                "{} is missing (build it, or drop --no-build)",
                p.display()
            ));
        }
    }
    Ok((preload, program))
}

/// Where a job's ranks run on an emulated cluster (`scripts/cluster.sh`):
/// `per_node` ranks on each of the first `nodes` nodes of the cluster
/// `name`, started from its head node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    pub name: String,
    pub nodes: u32,
    pub per_node: u32,
}

/// The variables a job on the cluster forwards to its ranks (Hydra forwards
/// the whole environment; for Open MPI `cluster.sh launch` names these with
/// `-x`): the tool's, the libraries' settings, coll_bench's.
const FORWARD: &str = "LD_PRELOAD MPIT_* MPIR_CVAR_* OMPI_MCA_coll_* COLL_BENCH_* UCX_*";

/// The `mpit-tuner` command: `$MPIT_TUNER_BIN` when set (the benchmarks
/// only read run directories with it, which any flavour's build does;
/// scripts/test.sh passes the one its test phases built), else built
/// (unless `build` is false) for `flavor` in `target/<flavor>` (debug);
/// returns its path.
pub fn cli(flavor: &str, build: bool) -> Result<PathBuf, String> {
    if let Some(bin) = std::env::var_os("MPIT_TUNER_BIN") {
        let bin = PathBuf::from(bin);
        return if bin.is_file() {
            Ok(bin)
        } else {
            Err(format!("MPIT_TUNER_BIN={} is not a file", bin.display()))
        };
    }
    let root = root();
    let target = root.join("target").join(flavor);
    if build {
        run_checked(
            Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
                .current_dir(&root)
                .env("MPICC", format!("mpicc.{flavor}"))
                .args(["build", "--locked", "--quiet", "--target-dir"])
                .arg(&target)
                .args(["-p", "mpit-tuner", "--bin", "mpit-tuner"]),
            "cargo build -p mpit-tuner",
        )?;
    }
    let cli = target.join("debug").join("mpit-tuner");
    if cli.exists() {
        Ok(cli)
    } else {
        Err(format!(
            "{} is missing (build it, or drop --no-build)",
            cli.display()
        ))
    }
}

/// One MPI job.
#[derive(Debug, Clone)]
pub struct Job<'a> {
    /// `mpich` or `openmpi`: which launcher (`mpiexec.<flavor>`) and how it
    /// passes variables to the ranks.
    pub flavor: &'a str,
    /// Ranks.
    pub ranks: u32,
    /// Variables for the ranks only (not the launcher).
    pub env: Vec<(String, String)>,
    /// The program and its arguments.
    pub program: &'a Path,
    pub args: Vec<String>,
    pub timeout: Duration,
    /// On one host (`None`: `mpiexec.<flavor> -n ranks` here) or on the
    /// nodes of an emulated cluster (`ranks` must be `nodes * per_node`).
    pub placement: Option<Placement>,
    /// A line that says the program's work is done (a prefix of a line of
    /// its standard output), and how long the job may take to exit after
    /// it: a job that prints it and then does not exit in time is stopped
    /// and counted as done, with [`Output::hung_after_done`] set. For a
    /// library known to hang in `MPI_Finalize` now and then (Debian's
    /// MPICH 4.0.2 on UCX 1.13 over TCP: openucx/ucx#8738), whose time was
    /// measured before it. `None`: a job must exit by itself.
    pub done: Option<(&'a str, Duration)>,
}

/// What a job printed, and how long it took.
#[derive(Debug, Clone)]
pub struct Output {
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
    /// It printed [`Job::done`]'s line and did not exit within its grace
    /// time: stopped.
    pub hung_after_done: bool,
}

/// Variables of the caller's environment that would change what a job
/// measures: they never reach a job unless [`Job::env`] sets them.
fn inherited_setting(name: &str) -> bool {
    name == "LD_PRELOAD"
        || name.starts_with("MPIT_TUNER")
        || name.starts_with("MPIR_CVAR_")
        || name.starts_with("OMPI_MCA_coll_")
}

/// Runs `job` under `mpiexec.<flavor>` in its own process group, killed
/// (the launcher and its ranks) after the timeout; on a cluster, through
/// `scripts/cluster.sh launch` on its head node. Fails unless it exits with
/// status 0 (or printed [`Job::done`]'s line and hung after it); the error
/// ends with the last lines of its stderr.
pub fn run(job: &Job) -> Result<Output, String> {
    let mpiexec = format!("mpiexec.{}", job.flavor);
    // No tuning store unless the job names one: a measurement must not
    // start from what an earlier benchmark's job learned.
    let mut env = job.env.clone();
    if !env.iter().any(|(k, _)| k == "MPIT_TUNER_STORE") {
        env.push(("MPIT_TUNER_STORE".into(), "off".into()));
    }
    let mut cmd = match &job.placement {
        None => {
            let mut cmd = Command::new(&mpiexec);
            for (k, v) in &env {
                if job.flavor == "openmpi" {
                    cmd.arg("-x").arg(format!("{k}={v}"));
                } else {
                    cmd.arg("-genv").arg(k).arg(v);
                }
            }
            cmd
        }
        Some(p) => {
            let mut cmd = Command::new("bash");
            cmd.arg(root().join("scripts/cluster.sh"))
                .args(["--name", &p.name, "launch", "--per-node"])
                .arg(p.per_node.to_string())
                .arg("--nodes")
                .arg(p.nodes.to_string())
                .args(["--forward", FORWARD, "--"])
                .arg(&mpiexec);
            cmd
        }
    };
    cmd.arg("-n")
        .arg(job.ranks.to_string())
        .arg(job.program)
        .args(&job.args);
    for (k, _) in std::env::vars_os() {
        if k.to_str().is_some_and(inherited_setting) {
            cmd.env_remove(k);
        }
    }
    if job.placement.is_some() {
        // The launcher forwards them (FORWARD) from its environment.
        cmd.envs(env.iter().map(|(k, v)| (k, v)));
    }
    cmd.env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env("OMPI_MCA_rmaps_base_oversubscribe", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let what = format!(
        "{} -n {}{} {} {}",
        mpiexec,
        job.ranks,
        job.placement.as_ref().map_or_else(String::new, |p| format!(
            " ({} nodes x {})",
            p.nodes, p.per_node
        )),
        job.program
            .file_name()
            .map_or_else(String::new, |f| f.to_string_lossy().into_owned()),
        job.args.join(" ")
    );
    let start = Instant::now();
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot run {mpiexec}: {e}"))?;
    let stdout = child.stdout.take().expect("piped stdout");
    let mut stderr = child.stderr.take().expect("piped stderr");
    // When the `done` line arrived.
    let done_at: std::sync::Arc<std::sync::Mutex<Option<Instant>>> = Default::default();
    let marker = job.done.map(|(m, _)| m.to_string());
    let out_reader = {
        let done_at = done_at.clone();
        std::thread::spawn(move || {
            use std::io::BufRead as _;
            let mut s = String::new();
            let mut lines = std::io::BufReader::new(stdout);
            let mut line = String::new();
            while matches!(lines.read_line(&mut line), Ok(n) if n > 0) {
                if marker.as_deref().is_some_and(|m| line.starts_with(m)) {
                    if let Ok(mut at) = done_at.lock() {
                        at.get_or_insert_with(Instant::now);
                    }
                }
                s.push_str(&line);
                line.clear();
            }
            s
        })
    };
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let kill = |child: &mut std::process::Child| {
        // The launcher and its ranks are in their own process group.
        let pgid = child.id() as libc::pid_t;
        // SAFETY: kill(2) on a process group this function created.
        unsafe { libc::kill(-pgid, libc::SIGKILL) };
        let _ = child.wait();
    };
    let mut hung_after_done = false;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Ok(Some(status)),
            Ok(None) if start.elapsed() > job.timeout => {
                kill(&mut child);
                break Err(format!("timed out after {:?}", job.timeout));
            }
            Ok(None) => {
                let done = done_at.lock().ok().and_then(|at| *at);
                if let (Some(at), Some((_, grace))) = (done, job.done) {
                    if at.elapsed() > grace {
                        kill(&mut child);
                        hung_after_done = true;
                        break Ok(None);
                    }
                }
                std::thread::sleep(Duration::from_millis(5))
            }
            Err(e) => break Err(format!("wait failed: {e}")),
        }
    };
    let elapsed = start.elapsed();
    let stdout = out_reader.join().unwrap_or_default();
    let stderr = err_reader.join().unwrap_or_default();
    let fail = |why: String| {
        let tail: Vec<&str> = stderr.lines().rev().take(5).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        Err(format!(
            "{what}: {why}\n  stderr: {}",
            tail.join("\n  stderr: ")
        ))
    };
    match status {
        Ok(Some(s)) if !s.success() => fail(format!("exited with {s}")),
        // Exited with status 0, or stopped after its `done` line.
        Ok(_) => Ok(Output {
            stdout,
            stderr,
            elapsed,
            hung_after_done,
        }),
        Err(why) => fail(why),
    }
}

/// The number after `"key":` in a JSON line, or after `key=` in a text line.
pub fn field(line: &str, key: &str) -> Option<f64> {
    let start = line
        .find(&format!("\"{key}\":"))
        .map(|i| i + key.len() + 3)
        .or_else(|| line.find(&format!("{key}=")).map(|i| i + key.len() + 1))?;
    let rest = &line[start..];
    let end = rest
        .find(|c: char| !(c.is_ascii_digit() || matches!(c, '.' | '-' | '+' | 'e' | 'E')))
        .unwrap_or(rest.len());
    rest[..end].parse().ok()
}

/// The median (NaN for none).
pub fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => f64::NAN,
        _ if n % 2 == 1 => v[n / 2],
        _ => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// (median, min, max), NaN for none.
pub fn spread(v: &[f64]) -> (f64, f64, f64) {
    if v.is_empty() {
        return (f64::NAN, f64::NAN, f64::NAN);
    }
    let min = v.iter().copied().fold(f64::INFINITY, f64::min);
    let max = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    (median(v), min, max)
}

/// The library's version line (`mpichversion`, `ompi_info --version`).
pub fn library_version(flavor: &str) -> String {
    let out = match flavor {
        "mpich" => Command::new("mpichversion").output(),
        _ => Command::new("ompi_info").arg("--version").output(),
    };
    out.ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| {
            s.lines()
                .find(|l| !l.trim().is_empty())
                .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        })
        .unwrap_or_else(|| "unknown version".into())
}

/// Cores, CPU, kernel and load average.
pub fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let nproc = std::thread::available_parallelism().map_or(0, |n| n.get());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    format!(
        "{nproc} cores (nproc), {cpu}, Linux {kernel}, load average {}",
        load()
    )
}

/// The load averages (1, 5, 15 minutes).
pub fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// The emulated cluster a benchmark command brought up
/// (`scripts/cluster.sh`), removed when dropped (and, should the process
/// die first, by the next `up` on the machine: it is owned by this
/// process).
pub struct Cluster {
    pub name: String,
}

fn cluster_script(name: &str) -> Command {
    let mut cmd = Command::new("bash");
    cmd.arg(root().join("scripts/cluster.sh"))
        .args(["--name", name]);
    cmd
}

impl Cluster {
    /// Brings up `nodes` nodes with links shaped to `link` (`none`:
    /// unshaped), for the command `who` (named in what it prints).
    pub fn up(nodes: u32, link: &str, who: &str) -> Result<Cluster, String> {
        let pid = std::process::id().to_string();
        let name = format!("mpitb-{pid}");
        let mut up = cluster_script(&name);
        up.args(["up", &nodes.to_string(), "--owner", &pid]);
        if link != "none" {
            up.args(["--link", link]);
        }
        let out = up
            .output()
            .map_err(|e| format!("cannot run scripts/cluster.sh: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "scripts/cluster.sh up {nodes} failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        eprintln!("{who}: emulated cluster {name}: {nodes} nodes, links {link}");
        Ok(Cluster { name })
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = cluster_script(&self.name)
            .arg("down")
            .stdout(Stdio::null())
            .status();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str], other: &mut OwnArgs) -> Result<CommonArgs, String> {
        parse_from(args.iter().map(|a| a.to_string()), "usage", (2, 7), other)
    }

    #[test]
    fn common_options_and_the_command_s_own() {
        let mut seen = Vec::new();
        let c = parse(
            &[
                "--short",
                "--ranks",
                "4,8",
                "--mpi",
                "openmpi",
                "--no-build",
            ],
            &mut |a, rest| {
                if a != "--ranks" {
                    return Ok(false);
                }
                seen.push(rest.next().ok_or("--ranks needs a list")?);
                Ok(true)
            },
        )
        .unwrap();
        assert!(c.short && !c.build);
        assert_eq!(c.reps, 2, "--short's default");
        assert_eq!(c.flavors, ["openmpi"]);
        assert_eq!(seen, ["4,8"]);

        let c = parse(&["--reps", "3"], &mut |_, _| Ok(false)).unwrap();
        assert_eq!((c.short, c.reps, c.build), (false, 3, true));
        assert_eq!(c.flavors, ["mpich", "openmpi"]);
        assert_eq!(parse(&[], &mut |_, _| Ok(false)).unwrap().reps, 7);
    }

    #[test]
    fn bad_arguments_are_named() {
        let none = &mut |_: &str, _: &mut Rest| Ok(false);
        assert_eq!(
            parse(&["--ranks", "4"], none).unwrap_err(),
            "unknown argument `--ranks`"
        );
        assert_eq!(
            parse(&["--reps", "0"], none).unwrap_err(),
            "--reps needs a number >= 1"
        );
        assert_eq!(
            parse(&["--reps"], none).unwrap_err(),
            "--reps needs a number >= 1"
        );
        assert_eq!(
            parse(&["--mpi", "mpich,intel"], none).unwrap_err(),
            "--mpi: unknown library `intel` (mpich, openmpi)"
        );
        assert_eq!(
            parse(&["--mpi", "--short"], none).unwrap_err(),
            "--mpi needs a comma-separated list"
        );
        let failing =
            &mut |_: &str, _: &mut Rest| Err::<bool, _>("--link needs a rate".to_string());
        assert_eq!(
            parse(&["--link"], failing).unwrap_err(),
            "--link needs a rate"
        );
    }

    #[test]
    fn lists_are_trimmed_and_checked() {
        let l = |v: Option<&str>| list_arg(v.map(String::from), "--cases");
        assert_eq!(l(Some("a, b ,c")).unwrap(), ["a", "b", "c"]);
        assert_eq!(l(Some("a")).unwrap(), ["a"]);
        assert_eq!(l(None).unwrap_err(), "--cases needs a comma-separated list");
        assert_eq!(
            l(Some("--no-build")).unwrap_err(),
            "--cases needs a comma-separated list"
        );
        assert_eq!(
            l(Some("a,,b")).unwrap_err(),
            "--cases: empty item in `a,,b`"
        );
        assert_eq!(l(Some("")).unwrap_err(), "--cases: empty item in ``");
    }
}
