//! `mpit-tuner run`: launches an MPI job under the tuner.
//!
//! It finds `libpreload.so`, validates the options (before anything is
//! launched), puts `LD_PRELOAD` and the `MPIT_TUNER_*` variables in the
//! launcher's environment, makes sure they reach every rank (Open MPI's
//! launcher forwards only what `-x` names; MPICH's Hydra forwards the whole
//! environment), runs the launcher and exits with its status.

use anyhow::{bail, Context, Result};
use clap::Args;
use std::ffi::{OsStr, OsString};
use std::os::unix::fs::DirBuilderExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use tuner_core::collectives::{Collective, COLLECTIVES};
use tuner_core::run::MIN_INTERVAL;

/// The preload library's file name.
pub const LIBRARY: &str = "libpreload.so";

const AFTER_HELP: &str = "\
Example: mpit-tuner run --dir logs --interval 100ms -- mpiexec -n 4 ./app

The options become environment variables of the launcher and, through it, \
of every rank: --dir MPIT_TUNER_DIR, --interval MPIT_TUNER_INTERVAL, --pvars \
MPIT_TUNER_PVARS, --policy MPIT_TUNER_POLICY, --quiet MPIT_TUNER_QUIET=1; \
without --quiet, MPIT_TUNER_VERBOSE=1 unless the environment sets it \
(docs/guide.md#environment-variables). Variables already set in the environment \
(other MPIT_TUNER_* ones too) are passed on as well. LD_PRELOAD gets the \
library in front of what it already holds; the launcher itself runs with it, \
which is harmless (the library does nothing in a process that is not an MPI \
rank).

The library: --lib, else MPIT_TUNER_LIB, else libpreload.so next to this \
program (or in ../lib from it).

Launchers: Open MPI's mpirun/mpiexec forwards only the variables named with \
-x, so for it (a launcher named *.openmpi or orterun, or mpirun/mpiexec \
whose --version says Open MPI) `-x VAR` is added after the launcher's name \
for LD_PRELOAD and every MPIT_TUNER_* variable. MPICH's and Intel MPI's \
Hydra forwards the whole environment. Slurm's srun forwards the environment \
(its --export=ALL default) but gets no LD_PRELOAD: `--task-prolog=` this \
program is added after its name, which gives LD_PRELOAD to each task alone, \
so that srun, slurmstepd and a site's TaskProlog never load the library (a \
SLURM_TASK_PROLOG of yours runs after it; a --task-prolog option is refused). \
The launcher must be the first word of the command (not behind `timeout` or a \
script).

The options are checked before anything is launched: a bad --interval, \
--pvars or policy file is an error (exit status 2). Then the exit status is \
the launcher's own, or 128 + the signal that killed it. Interrupts (Ctrl-C) \
go to the launcher, which stops the job; SIGTERM and SIGHUP sent to \
mpit-tuner are passed on to it.";

/// Options of `mpit-tuner run`.
#[derive(Debug, Args)]
#[command(after_long_help = AFTER_HELP)]
pub struct RunArgs {
    /// Run directory for the per-rank logs and summary.json (default: a new
    /// mpit-tuner-<date>-<jobid> directory in the working directory).
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,

    /// Sampling interval, such as 1s, 100ms or 1ms (default 1s; durations: docs/guide.md#durations).
    #[arg(long, value_name = "DURATION")]
    interval: Option<String>,

    /// PVARs to sample: comma-separated names or regular expressions
    /// (default: all).
    #[arg(long, value_name = "LIST")]
    pvars: Option<String>,

    /// Policy file (TOML; default: the embedded policies.toml; `none`:
    /// monitor only).
    #[arg(long, value_name = "FILE")]
    policy: Option<PathBuf>,

    /// Print nothing on the job's streams (banner, warnings, summary table:
    /// the logs and summary.json keep them); only what no log records (a
    /// log that cannot be written, the tuner stopping on a rank).
    #[arg(long)]
    quiet: bool,

    /// Tune the collective algorithms online, on the application's own
    /// calls (MPICH 4.0/4.1/5.0; Open MPI 4.1/5.0 through candidate
    /// communicators, with OMPI_MCA_coll_tuned_use_dynamic_rules=1 set
    /// unless the environment sets it; other libraries say why not). MODE:
    /// `safe` (only calls whose result cannot depend on the algorithm:
    /// moving data, and reductions of integer, logical and byte types with
    /// predefined operations), `all` (the default without a value:
    /// floating-point reductions too, whose last bits may then change), a
    /// list such as `allreduce,bcast` (in mode `all`), `measure` or `off`
    /// (docs/collective-tuning.md).
    #[arg(long, value_name = "MODE", num_args = 0..=1, default_missing_value = "all")]
    tune_collectives: Option<String>,

    #[command(flatten)]
    launch: Launch,
}

/// Runs `mpit-tuner run`.
pub fn run(args: &RunArgs) -> Result<ExitCode> {
    check_abi(
        &find_library(args.launch.lib.as_deref())?,
        &args.launch.command,
    )?;
    let env = environment(args)?;
    let status = launch(&args.launch.command, &env)?;
    Ok(exit_code(status))
}

/// The preload library and the launcher command, as `run` and `tune`
/// take them.
#[derive(Debug, Args)]
pub struct Launch {
    /// The preload library (default: MPIT_TUNER_LIB, else libpreload.so
    /// next to mpit-tuner).
    #[arg(long, value_name = "PATH")]
    pub lib: Option<PathBuf>,

    /// The launcher and its arguments, after `--`: `mpiexec -n 4 ./app`.
    #[arg(
        value_name = "LAUNCHER",
        required = true,
        num_args = 1..,
        trailing_var_arg = true,
        allow_hyphen_values = true
    )]
    pub command: Vec<OsString>,
}

/// The exit status of `mpit-tuner` for a launcher's: its own, or 128 + the
/// signal that killed it.
pub fn exit_code(status: std::process::ExitStatus) -> ExitCode {
    match (status.code(), status.signal()) {
        (Some(code), _) => ExitCode::from((code & 0xff) as u8),
        (None, Some(signal)) => ExitCode::from((128 + signal).clamp(0, 255) as u8),
        (None, None) => ExitCode::from(1),
    }
}

/// Runs the launcher `command` with `env` added to its environment, the
/// variables forwarded to every rank (`-x` for Open MPI's launcher) and
/// SIGTERM/SIGHUP relayed; returns its status.
pub fn launch(
    command: &[OsString],
    env: &[(OsString, OsString)],
) -> Result<std::process::ExitStatus> {
    let Some(launcher) = command.first() else {
        bail!("no launcher given after `--`");
    };
    let mut cmd = Command::new(launcher);
    let mut env = env.to_vec();
    if is_open_mpi(launcher) {
        for name in forwarded(&env) {
            cmd.arg("-x").arg(name);
        }
    } else if is_srun(launcher) {
        srun_task_prolog(&mut cmd, &command[1..], &mut env)?;
    }
    cmd.args(&command[1..])
        .envs(env.iter().map(|(k, v)| (k, v)));
    let mut child = cmd
        .spawn()
        .with_context(|| format!("cannot run `{}`", launcher.to_string_lossy()))?;
    let relay = relay_signals(child.id());
    let status = child
        .wait()
        .with_context(|| format!("waiting for `{}`", launcher.to_string_lossy()));
    if let Some(relay) = relay {
        relay.close();
    }
    status
}

use tuner_core::services::collectives::OPENMPI_DYNAMIC_RULES_ENV;

/// `LD_PRELOAD` with the library in front of what the environment holds.
pub fn preload(lib: Option<&Path>) -> Result<(OsString, OsString)> {
    let lib = find_library(lib)?;
    let mut preload = lib.as_os_str().to_os_string();
    if let Some(existing) = std::env::var_os("LD_PRELOAD").filter(|v| !v.is_empty()) {
        let ours = lib.as_os_str();
        let others: Vec<&str> = existing
            .to_str()
            .unwrap_or_default()
            .split([':', ' '])
            .filter(|e| !e.is_empty() && OsStr::new(e) != ours)
            .collect();
        if !others.is_empty() {
            preload.push(":");
            preload.push(others.join(":"));
        }
    }
    Ok(("LD_PRELOAD".into(), preload))
}

/// The variables to set in the launcher's environment, options validated.
fn environment(args: &RunArgs) -> Result<Vec<(OsString, OsString)>> {
    let mut env: Vec<(OsString, OsString)> = Vec::new();
    let mut set = |k: &str, v: &OsStr| env.push((k.into(), v.to_os_string()));
    let (name, value) = preload(args.launch.lib.as_deref())?;
    set(&name.to_string_lossy(), &value);
    if let Some(text) = &args.interval {
        match policies::parse_duration(text) {
            Ok(d) if d >= MIN_INTERVAL => {}
            Ok(_) => bail!("--interval {text}: the shortest sampling interval is 1ms"),
            Err(e) => bail!("--interval {text}: {e}"),
        }
        set("MPIT_TUNER_INTERVAL", OsStr::new(text));
    }
    if let Some(list) = &args.pvars {
        for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            regex::Regex::new(&format!("^(?:{item})$"))
                .with_context(|| format!("--pvars: `{item}` is not a valid name or regex"))?;
        }
        set("MPIT_TUNER_PVARS", OsStr::new(list));
    }
    if let Some(policy) = &args.policy {
        if policy.as_os_str() == "none" {
            set("MPIT_TUNER_POLICY", OsStr::new("none"));
        } else {
            let source = std::fs::read_to_string(policy)
                .with_context(|| format!("cannot read policy file {}", policy.display()))?;
            policies::PolicySet::parse(&source, &policy.display().to_string()).map_err(|e| {
                anyhow::anyhow!(
                    "the policy file has errors; nothing was launched:\n{e:#}\n\
                     (`mpit-tuner check --against-mpi {}` also checks its variables)",
                    policy.display()
                )
            })?;
            set("MPIT_TUNER_POLICY", absolute(policy)?.as_os_str());
        }
    }
    if let Some(dir) = &args.dir {
        let dir = absolute(dir)?;
        // Mode 0700, as the tuner creates it: steering requests come from
        // whoever may write in it.
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .with_context(|| format!("cannot create the run directory {}", dir.display()))?;
        set("MPIT_TUNER_DIR", dir.as_os_str());
    }
    // Run from here, the job says everything on rank 0's terminal (the
    // tuning line at start, the finalize table); a job the library was
    // preloaded into without it says one line at most.
    if args.quiet {
        set("MPIT_TUNER_QUIET", OsStr::new("1"));
    } else if std::env::var_os("MPIT_TUNER_VERBOSE").is_none() {
        set("MPIT_TUNER_VERBOSE", OsStr::new("1"));
    }
    if let Some(list) = &args.tune_collectives {
        let mode = ["off", "safe", "all", "tune", "measure"].contains(&list.as_str());
        if !mode {
            for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                if Collective::parse(item).is_none() {
                    // One word may be a misspelt mode; in a list, a collective.
                    let mode = if list.contains(',') {
                        ""
                    } else {
                        "a mode (off, safe, all, measure) nor "
                    };
                    bail!(
                        "--tune-collectives: `{item}` is not {mode}a collective the tuner knows ({})",
                        COLLECTIVES.map(|c| c.name()).join(", ")
                    );
                }
            }
        }
        set("MPIT_TUNER_COLLECTIVES", OsStr::new(list));
        // Open MPI 4.1 reads a forced algorithm only with its dynamic
        // rules on, a setting it reads only at start (off: the fixed
        // decision rules, which on without a rules file or a forced
        // algorithm it still uses). Other libraries ignore it; a user's
        // own setting stays.
        if list != "off" && std::env::var_os(OPENMPI_DYNAMIC_RULES_ENV).is_none() {
            set(OPENMPI_DYNAMIC_RULES_ENV, OsStr::new("1"));
        }
    }
    Ok(env)
}

fn absolute(path: &Path) -> Result<PathBuf> {
    std::path::absolute(path).with_context(|| format!("cannot resolve {}", path.display()))
}

/// `libpreload.so`: `--lib`, `MPIT_TUNER_LIB`, or next to this program.
fn find_library(explicit: Option<&Path>) -> Result<PathBuf> {
    let chosen = match explicit {
        Some(p) => Some((p.to_path_buf(), "--lib")),
        None => std::env::var_os("MPIT_TUNER_LIB")
            .filter(|v| !v.is_empty())
            .map(|v| (PathBuf::from(v), "MPIT_TUNER_LIB")),
    };
    let path = match chosen {
        Some((path, from)) => {
            if !path.is_file() {
                bail!("{from} {}: no such file", path.display());
            }
            path
        }
        None => {
            let exe = std::env::current_exe().context("cannot locate the mpit-tuner program")?;
            let dir = exe.parent().unwrap_or(Path::new("/"));
            let candidates = [dir.join(LIBRARY), dir.join("../lib").join(LIBRARY)];
            match candidates.iter().find(|p| p.is_file()) {
                Some(p) => p.clone(),
                None => bail!(
                    "cannot find the preload library {LIBRARY}: looked for {} and {}; build it \
                     with `cargo build -p preload` into the same target directory \
                     as mpit-tuner, or give its path with --lib or MPIT_TUNER_LIB",
                    candidates[0].display(),
                    candidates[1].display()
                ),
            }
        }
    };
    let path = absolute(&path)?;
    let text = path.to_string_lossy();
    if text.contains([':', ' ']) {
        bail!(
            "{}: LD_PRELOAD cannot hold a path with a space or a colon; copy or link the \
             library elsewhere and use --lib",
            path.display()
        );
    }
    Ok(path)
}

/// The three ABIs a preload library can be built for.
const ABIS: [&str; 3] = ["mpich", "openmpi", "standard"];

/// How to build the preload library for `abi` (for messages).
fn build_hint(abi: &str) -> &'static str {
    match abi {
        "openmpi" => "MPICC=mpicc.openmpi cargo build --release --target-dir target/openmpi (or MPICC=$MPIT_OMPI5_MPICC for Open MPI 5)",
        "standard" => "MPICC=$MPIT_MPICH5_MPICC_ABI cargo build --release --target-dir target/mpi-abi (MPICH's mpicc_abi)",
        _ => "MPICC=mpicc.mpich cargo build --release --target-dir target/mpich (or the mpicc of MPICH 5, MVAPICH2, Intel MPI)",
    }
}

/// The ABI the preload library `lib` was built for, from the marker it
/// carries (`mpit-tuner-abi=<abi>;`); `None` for a file without one.
pub fn library_abi(lib: &Path) -> Option<&'static str> {
    let bytes = std::fs::read(lib).ok()?;
    let marker = b"mpit-tuner-abi=";
    let at = bytes.windows(marker.len()).position(|w| w == marker)? + marker.len();
    let rest = &bytes[at..bytes.len().min(at + 16)];
    ABIS.into_iter()
        .find(|abi| rest.starts_with(abi.as_bytes()) && rest.get(abi.len()) == Some(&b';'))
}

/// The ABI of the MPI library an ELF program names in its `DT_NEEDED`
/// entries: `libmpi_abi.so` is the standard ABI, `libmpi.so.40` Open MPI's,
/// `libmpi.so.12` and `libmpich.so` MPICH's; `None` when `path` is not an
/// ELF file or names none of them.
pub fn program_abi(path: &Path) -> Option<&'static str> {
    use std::io::Read;
    let mut magic = [0u8; 4];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .ok()?;
    if &magic != b"\x7fELF" {
        // Not a program (an option, a number, an input file): never read.
        return None;
    }
    let bytes = std::fs::read(path).ok()?;
    let names: [(&[u8], &str); 4] = [
        (b"libmpi_abi.so", "standard"),
        (b"libmpi.so.40", "openmpi"),
        (b"libmpi.so.12", "mpich"),
        (b"libmpich.so", "mpich"),
    ];
    names
        .into_iter()
        .find(|(name, _)| bytes.windows(name.len()).any(|w| w == *name))
        .map(|(_, abi)| abi)
}

/// Refuses, before anything is launched, a preload library built for
/// another ABI than the launcher's or the program's (it would crash the
/// ranks, or find no MPI to work with), saying which build to use. The
/// program is the first argument after the launcher that is an ELF file.
fn check_abi(lib: &Path, command: &[OsString]) -> Result<()> {
    let Some(abi) = library_abi(lib) else {
        return Ok(());
    };
    if let Some(launcher) = command.first() {
        if abi == "mpich" && is_open_mpi(launcher) {
            bail!(
                "{} is built for MPICH's ABI, but `{}` is Open MPI's launcher: use the Open MPI \
                 build of libpreload.so (--lib or MPIT_TUNER_LIB; build it with {})",
                lib.display(),
                launcher.to_string_lossy(),
                build_hint("openmpi")
            );
        }
    }
    let program = command
        .iter()
        .skip(1)
        .map(Path::new)
        .find_map(|p| program_abi(p).map(|a| (p, a)));
    if let Some((program, wanted)) = program {
        if wanted != abi {
            bail!(
                "{} is built for the {abi} ABI, but {} uses the {wanted} ABI: use a \
                 libpreload.so built for it (--lib or MPIT_TUNER_LIB; build it with {})",
                lib.display(),
                program.display(),
                build_hint(wanted)
            );
        }
    }
    Ok(())
}

/// The variable that carries `LD_PRELOAD`'s value to srun's tasks, for
/// [`task_prolog`].
pub const SRUN_PRELOAD: &str = "MPIT_TUNER_SRUN_PRELOAD";
/// The user's own task prolog (their `SLURM_TASK_PROLOG`), which
/// [`task_prolog`] runs after its line.
pub const SRUN_TASK_PROLOG: &str = "MPIT_TUNER_SRUN_TASK_PROLOG";

/// Whether the launcher is Slurm's `srun`.
pub fn is_srun(launcher: &OsStr) -> bool {
    Path::new(launcher).file_name() == Some(OsStr::new("srun"))
}

/// srun gets the preload for its tasks only: not `LD_PRELOAD` in its own
/// environment (srun, and everything slurmstepd runs with the task's
/// environment, such as a site's TaskProlog, would load the library), but
/// `--task-prolog=` this program, which slurmstepd runs before each task
/// and whose `export LD_PRELOAD=...` line sets it for the task alone
/// ([`task_prolog`]). A `--task-prolog` of the user's would replace it: refused.
fn srun_task_prolog(
    cmd: &mut Command,
    args: &[OsString],
    env: &mut Vec<(OsString, OsString)>,
) -> Result<()> {
    if let Some(given) = args.iter().find(|a| {
        let a = a.to_string_lossy();
        a == "--task-prolog" || a.starts_with("--task-prolog=")
    }) {
        bail!(
            "`{}`: mpit-tuner run preloads the tool into srun's tasks through srun's              --task-prolog, which yours would replace; set SLURM_TASK_PROLOG to your              prolog instead (mpit-tuner's runs it after its own line), or launch              `srun ... env LD_PRELOAD=LIB ./app` yourself (docs/guide.md#slurm)",
            given.to_string_lossy()
        );
    }
    let exe = std::env::current_exe().context("cannot locate the mpit-tuner program")?;
    let mut prolog = OsString::from("--task-prolog=");
    prolog.push(exe.as_os_str());
    cmd.arg(prolog);
    for (k, _) in env.iter_mut().filter(|(k, _)| k == "LD_PRELOAD") {
        *k = SRUN_PRELOAD.into();
    }
    // srun itself must not load a preload the caller set either.
    cmd.env_remove("LD_PRELOAD");
    if let Some(theirs) = std::env::var_os("SLURM_TASK_PROLOG").filter(|v| !v.is_empty()) {
        env.push((SRUN_TASK_PROLOG.into(), theirs));
    }
    Ok(())
}

/// This program as srun's task prolog (given by [`srun_task_prolog`]):
/// slurmstepd runs it without arguments, with the task's environment,
/// before each task, and sets the variables it prints as `export NAME=VALUE`
/// for the task. Prints `LD_PRELOAD`, then runs the user's own task prolog
/// if there was one. `None` when this is not such a run.
pub fn task_prolog() -> Option<ExitCode> {
    if std::env::args_os().len() != 1 {
        return None;
    }
    let preload = std::env::var_os(SRUN_PRELOAD).filter(|v| !v.is_empty())?;
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    // A failed write cannot be told to anyone but slurmd's log; the task
    // then runs without the tool.
    if writeln!(out, "export LD_PRELOAD={}", preload.to_string_lossy())
        .and_then(|()| out.flush())
        .is_err()
    {
        eprintln!("mpit-tuner: task prolog: cannot write LD_PRELOAD for the task");
    }
    drop(out);
    if let Some(theirs) = std::env::var_os(SRUN_TASK_PROLOG).filter(|v| !v.is_empty()) {
        match Command::new(&theirs).status() {
            Ok(status) if !status.success() => eprintln!(
                "mpit-tuner: task prolog: {} ended with {status}",
                theirs.to_string_lossy()
            ),
            Ok(_) => {}
            Err(e) => eprintln!(
                "mpit-tuner: task prolog: cannot run {}: {e}",
                theirs.to_string_lossy()
            ),
        }
    }
    Some(ExitCode::SUCCESS)
}

/// Whether the launcher is Open MPI's, which forwards only the variables
/// named with `-x`.
pub fn is_open_mpi(launcher: &OsStr) -> bool {
    let name = Path::new(launcher)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if name.ends_with(".openmpi") || name == "orterun" {
        return true;
    }
    if !matches!(name.as_str(), "mpirun" | "mpiexec") {
        return false;
    }
    // Open MPI 4: "mpiexec (OpenRTE) 4.1.4"; 5: "mpirun (Open MPI) 5.0.3".
    Command::new(launcher)
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .map(|o| {
            let text = [o.stdout, o.stderr].concat();
            let text = String::from_utf8_lossy(&text);
            text.contains("Open MPI") || text.contains("OpenRTE")
        })
        .unwrap_or(false)
}

/// The names to forward with `-x`: `LD_PRELOAD` and every `MPIT_TUNER*`
/// variable the launcher will have (set here or inherited).
fn forwarded(env: &[(OsString, OsString)]) -> Vec<OsString> {
    let mut names: Vec<OsString> = env.iter().map(|(k, _)| k.clone()).collect();
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("MPIT_TUNER") && !names.contains(&k) {
            names.push(k);
        }
    }
    names
}

/// While the launcher runs: interrupts from the terminal (SIGINT, SIGQUIT)
/// reach it directly (same process group), so this process only survives
/// them and waits for its status; SIGTERM and SIGHUP sent to this process
/// alone are passed on to the launcher. Installed after the launcher
/// started, so it inherits default handlers. A relay that cannot be set up
/// is said, and the job runs on without it.
fn relay_signals(pid: u32) -> Option<signal_hook::iterator::Handle> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGQUIT, SIGTERM};
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        eprintln!("mpit-tuner: cannot relay signals to the launcher: process id {pid}");
        return None;
    };
    let mut signals = match signal_hook::iterator::Signals::new([SIGINT, SIGQUIT, SIGTERM, SIGHUP])
    {
        Ok(signals) => signals,
        Err(e) => {
            eprintln!("mpit-tuner: cannot relay signals to the launcher: {e}");
            return None;
        }
    };
    let handle = signals.handle();
    std::thread::spawn(move || {
        for signal in signals.forever() {
            if signal == SIGTERM || signal == SIGHUP {
                // SAFETY: kill(2) with our child's process id.
                if unsafe { libc::kill(pid, signal) } != 0 {
                    let e = std::io::Error::last_os_error();
                    // ESRCH: the launcher already ended; its status follows.
                    if e.raw_os_error() != Some(libc::ESRCH) {
                        eprintln!(
                            "mpit-tuner: cannot pass signal {signal} on to the launcher: {e}"
                        );
                    }
                }
            }
        }
    });
    Some(handle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn launchers_are_recognised_by_name() {
        assert!(is_open_mpi(OsStr::new("/usr/bin/mpirun.openmpi")));
        assert!(is_open_mpi(OsStr::new("orterun")));
        assert!(!is_open_mpi(OsStr::new("mpiexec.mpich")));
        assert!(!is_open_mpi(OsStr::new("srun")));
        assert!(is_srun(OsStr::new("/usr/bin/srun")));
        assert!(!is_srun(OsStr::new("sbatch")));
        assert!(!is_open_mpi(OsStr::new("bash")));
    }

    #[test]
    fn libraries_and_programs_of_another_abi_are_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let lib = tmp.path().join("libpreload.so");
        std::fs::write(&lib, b"\x7fELF....mpit-tuner-abi=standard;....").unwrap();
        assert_eq!(library_abi(&lib), Some("standard"));
        let app = |name: &str, needed: &[u8]| {
            let path = tmp.path().join(name);
            std::fs::write(
                &path,
                [b"\x7fELF\0\0".as_slice(), needed, b"\0libc.so.6"].concat(),
            )
            .unwrap();
            OsString::from(path)
        };
        let abi_app = app("abi_app", b"libmpi_abi.so.1");
        let mpich_app = app("mpich_app", b"libmpi.so.12");
        let ompi_app = app("ompi_app", b"libmpi.so.40");
        assert_eq!(program_abi(Path::new(&abi_app)), Some("standard"));
        assert_eq!(program_abi(Path::new(&mpich_app)), Some("mpich"));
        assert_eq!(program_abi(Path::new(&ompi_app)), Some("openmpi"));
        assert_eq!(program_abi(&lib.with_file_name("missing")), None);
        let launch = |program: &OsString| {
            vec![
                OsString::from("mpiexec.hydra"),
                OsString::from("-n"),
                OsString::from("2"),
                program.clone(),
            ]
        };
        check_abi(&lib, &launch(&abi_app)).unwrap();
        let err = check_abi(&lib, &launch(&mpich_app))
            .unwrap_err()
            .to_string();
        assert!(err.contains("built for the standard ABI"), "{err}");
        assert!(err.contains("uses the mpich ABI"), "{err}");
        assert!(err.contains("target/mpich"), "{err}");
        let err = check_abi(&lib, &launch(&ompi_app)).unwrap_err().to_string();
        assert!(err.contains("target/openmpi"), "{err}");
        // A library without the marker (an older build) is not judged.
        let old = tmp.path().join("old.so");
        std::fs::write(&old, b"\x7fELF").unwrap();
        assert_eq!(library_abi(&old), None);
        check_abi(&old, &launch(&ompi_app)).unwrap();
        // MPICH's ABI under Open MPI's launcher, by name.
        std::fs::write(&lib, b"mpit-tuner-abi=mpich;").unwrap();
        let err = check_abi(&lib, &[OsString::from("mpirun.openmpi")])
            .unwrap_err()
            .to_string();
        assert!(err.contains("Open MPI's launcher"), "{err}");
    }

    #[test]
    fn forwarded_names_include_inherited_tuner_variables() {
        let env = vec![(OsString::from("LD_PRELOAD"), OsString::from("/x.so"))];
        let names = forwarded(&env);
        assert_eq!(names[0], "LD_PRELOAD");
        assert!(names
            .iter()
            .skip(1)
            .all(|n| n.to_string_lossy().starts_with("MPIT_TUNER")));
    }
}
