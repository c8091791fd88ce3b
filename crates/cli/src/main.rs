//! `mpit-tuner`: the command-line face of mpit-tuner.
//!
//! A thin binary: [`main`] calls [`run`], which parses the command line and
//! hands each subcommand to its module; the MPI_T work itself lives in the
//! `tuner-core` library. Every error ends here, printed once as
//! `mpit-tuner: error: ...` with exit code 2.
//!
//! Subcommands: `list` (every MPI_T variable of the MPI library, with its
//! metadata and, on request, its current value). Adding one is a variant of
//! [`Command`] and a module with its `Args` and `run`.

use anyhow::Result;
use clap::{Parser, Subcommand};
use std::process::ExitCode;

mod list;
mod table;

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
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        // `mpit-tuner list | head`: the reader has what it wanted.
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mpit-tuner: error: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn run() -> Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::List(args) => list::run(&args),
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
