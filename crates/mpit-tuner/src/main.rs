//! `mpit-tuner`: the command-line face of mpit-tuner.
//!
//! A thin binary: [`main`] calls [`run`], which parses the command line and
//! hands each subcommand to its module; the MPI_T work itself lives in the
//! `tuner-core` library. Every error ends here, printed once as
//! `mpit-tuner: error: ...` with exit code 2.
//!
//! Subcommands: `list` (every MPI_T variable of the MPI library, with its
//! metadata and, on request, its current value), `run` (launch a job under
//! the tuner), `check` (validate policy files, optionally against the MPI
//! library), `replay` (try a policy file on recorded logs) and `report`
//! (what a finished run did, from its run directory: tables, Markdown, CSV,
//! plots), `schema` (the JSON Schema of the logs and summary.json),
//! `export` (what collective tuning learned, as files the MPI libraries
//! read without the tool), `store` (the tuning store: list, show, forget,
//! merge), `watch` (a live view of a running job), `set`,
//! `pause`, `resume`, `reload` (steering a running job through its run
//! directory), `probe` (what the MPI library supports, measured; the
//! README's matrix). Adding one is a variant of [`Command`] and a module with its
//! `Args` and `run`.
//!
//! Exit status: 2 for every error of the command itself; `check` exits 1
//! when a file has problems; `run` exits with the launcher's status;
//! `report` exits 2 when a directory has nothing to report; the steering
//! commands exit 1 when a rank refused or did not answer.

use anyhow::Result;
use clap::{Parser, Subcommand};
use std::process::ExitCode;

mod check;
mod export;
mod list;
mod probe;
mod replay;
mod report;
mod run;
mod schema;
mod steering;
mod store;
mod table;
mod tune;
mod watch;

/// Runtime autotuner for MPI applications, built on the MPI Tools
/// Information Interface (MPI_T).
#[derive(Debug, Parser)]
#[command(name = "mpit-tuner", version, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// List the MPI_T control and performance variables of the MPI library.
    ///
    /// Works as a single process (`mpit-tuner list`) and under a launcher
    /// (`mpiexec -n 4 mpit-tuner list`), where rank 0 prints.
    List(list::ListArgs),

    /// Run an MPI job under the tuner: `mpit-tuner run -- mpiexec -n 4 ./app`.
    ///
    /// Sets LD_PRELOAD (libpreload.so) and the MPIT_TUNER_* variables
    /// for the launcher and makes sure they reach every rank (adds `-x` for
    /// Open MPI's launcher); exits with the launcher's status.
    Run(run::RunArgs),

    /// Tune the collective algorithms across runs (for libraries that read
    /// them only at start): reruns the job with each algorithm set before
    /// start, measures the application's own calls, writes the best.
    ///
    /// `mpit-tuner tune -- mpiexec -n 4 ./app`: tune.json and tune.env in
    /// --dir.
    Tune(tune::TuneArgs),

    /// Check policy files: syntax and semantics, and with --against-mpi
    /// every variable against the MPI library.
    ///
    /// Prints every problem as FILE:LINE:COLUMN with the line and a caret,
    /// and `FILE: ok (N policies)` for good files; exits 1 if a file has an
    /// error (or a variable the library lacks, with --against-mpi).
    Check(check::CheckArgs),

    /// Try a policy file offline on recorded per-rank logs, run directories
    /// or hand-written traces.
    ///
    /// Prints, per rank, the decisions and writes the policies would have
    /// made (time, policy, branch, CVAR old -> new, refusals), or the
    /// records as JSON Lines with --json.
    Replay(replay::ReplayArgs),

    /// Report what a finished run did, from its run directory.
    ///
    /// What the tool changed first, then run facts, top variables,
    /// cross-rank statistics and classes, message sizes, every CVAR change
    /// with time and rank, policies, recommendations, collective tuning
    /// and warnings on the terminal; --markdown, --csv, and
    /// plots (SVG and PNG) in RUN_DIR/report/. A damaged or partial run
    /// directory is reported as such, with what could still be read.
    Report(report::Args),

    /// Watch a running job from its run directory: ranks alive, samples,
    /// the variables that differ most across ranks, the latest decisions,
    /// writes, steering answers and warnings.
    ///
    /// Reads only the run directory (from another shell or node on a
    /// shared file system). Full-screen on a terminal (q, Esc or Ctrl-C
    /// quit), plain-text frames on pipes, dumb terminals, --plain and
    /// --once; ends when every rank closed its log.
    Watch(watch::WatchArgs),

    /// Write a CVAR in a running job: `mpit-tuner set RUN_DIR NAME=VALUE`.
    ///
    /// Every selected rank checks the request as it checks a policy's
    /// write (scope, type, range), writes, reads back, and answers in its
    /// log; prints the answers per rank. Exits 1 if a rank refused or did
    /// not answer in time.
    ///
    /// ALL_EQ and GROUP_EQ variables are never written by a rank alone. A
    /// collective's algorithm variable that online collective tuning
    /// drives (on MPICH 4.0/4.1/5.0, by default or with MPIT_TUNER_COLLECTIVES), such as
    /// MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM=recursive_doubling (an
    /// algorithm's name or its number; `auto` is the default), pins that
    /// collective's algorithm on every rank at the next agreed point of
    /// each communicator, and its search stops: the answers say "applied
    /// at the next agreed point", the `pinned` collective records where it
    /// took effect. Such a request is for every rank: --ranks and --hosts
    /// are refused. Any other ALL_EQ or GROUP_EQ variable, or any while
    /// online tuning is off (for example Open MPI 4.1 started without its
    /// dynamic rules), is refused with what is missing.
    Set(steering::SetArgs),

    /// Pause one policy (or all) of a running job.
    Pause(steering::PauseArgs),

    /// Resume one paused policy (or all) of a running job.
    Resume(steering::PauseArgs),

    /// Replace the policies of a running job by a policy file.
    ///
    /// Every rank compiles and checks the file before it replaces its
    /// policies; a file with errors changes nothing and each rank's answer
    /// names the line and column.
    Reload(steering::ReloadArgs),
    /// Measure what the MPI library supports: variables before and after
    /// MPI_Init, sampling, bound handles, CVAR writes before and after
    /// MPI_Init, environment settings, collective tuning.
    ///
    /// `mpiexec -n 2 mpit-tuner probe --json` (rank 0 prints);
    /// `mpit-tuner probe --matrix A.json B.json` prints the README's
    /// support matrix from such outputs; with `--check README.md` it
    /// compares them with the README's table.
    Probe(probe::ProbeArgs),

    /// Print the JSON Schema of the log records or of summary.json
    /// (generated from the types the tool writes them with), or check a
    /// run directory against the format with --check.
    Schema(schema::Args),

    /// The tuning store: what earlier runs' collective tuning learned, from
    /// which later runs start (docs/tuning-store.md).
    ///
    /// `store list` (its jobs), `store show` (their entries), `store forget`
    /// (remove some), `store merge FROM...` (add other stores' entries, the
    /// newest kept). Changes are made under the store's lock, as a job's.
    Store(store::Args),

    /// Export what a run's collective tuning learned, for runs without the
    /// tool: an Open MPI dynamic rules file, an MPICH selection JSON, a
    /// pre-init policy.
    ///
    /// Reads the `collective` decision records of RUN_DIR (per communicator
    /// size, collective and message-size bin) and writes the formats that
    /// fit the library the run was made with, into RUN_DIR/export/ unless
    /// -o says where. With --store, the tuning store's entries instead.
    Export(export::Args),
}

fn main() -> ExitCode {
    // Run by slurmstepd as the task prolog `mpit-tuner run` gave srun.
    if let Some(code) = run::task_prolog() {
        return code;
    }
    match run() {
        Ok(code) => code,
        // `mpit-tuner list | head`: the reader has what it wanted.
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mpit-tuner: error: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn run() -> Result<ExitCode> {
    let cli = Cli::parse();
    match cli.command {
        Command::List(args) => list::run(&args).map(|()| ExitCode::SUCCESS),
        Command::Run(args) => run::run(&args),
        Command::Tune(args) => tune::run(&args),
        Command::Check(args) => check::run(&args),
        Command::Replay(args) => replay::run(&args).map(|()| ExitCode::SUCCESS),
        Command::Report(args) => report::run(&args),
        Command::Schema(args) => schema::run(&args),
        Command::Export(args) => export::run(&args).map(|()| ExitCode::SUCCESS),
        Command::Store(args) => store::run(&args),
        Command::Watch(args) => watch::run(&args),
        Command::Set(args) => steering::set(&args),
        Command::Pause(args) => steering::pause(&args, true),
        Command::Resume(args) => steering::pause(&args, false),
        Command::Reload(args) => steering::reload(&args),
        Command::Probe(args) => probe::run(&args),
    }
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn broken_pipe_is_recognised_through_context() {
        let io = std::io::Error::from(std::io::ErrorKind::BrokenPipe);
        let e = anyhow::Error::from(io).context("writing the table");
        assert!(is_broken_pipe(&e));
        assert!(!is_broken_pipe(&anyhow::anyhow!("other")));
    }
}
