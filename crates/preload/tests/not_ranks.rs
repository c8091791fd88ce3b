//! With `LD_PRELOAD=libpreload.so` in the environment, processes that
//! are not MPI ranks run exactly as without it: `mpiexec` itself (and its
//! proxies), shells, a program without MPI. Same stdout, same stderr, exit
//! 0, no run directory.
//!
//! To make any activity of the library visible, these runs also carry a bad
//! `MPIT_TUNER_INTERVAL` and no `MPIT_TUNER_QUIET`: a library that read its
//! configuration or started anything outside `MPI_Init` would complain.

mod common;

use common::*;
use mpit_testkit::Job;
use std::path::Path;
use std::process::Command;

/// Runs `cmd` as built by `make` twice, without and with the preload, and
/// asserts identical results; returns the plain job.
fn unchanged(make: impl Fn() -> Command) -> Job {
    let tmp = tempdir();
    let dir = tmp.path().join("run");
    let mut cmd = make();
    clean_env(&mut cmd);
    let plain = mpit_testkit::run(cmd);
    let mut cmd = make();
    clean_env(&mut cmd);
    cmd.env("LD_PRELOAD", preload_lib())
        .env("MPIT_TUNER_DIR", &dir)
        .env("MPIT_TUNER_INTERVAL", "soon");
    let tooled = mpit_testkit::run(cmd);
    plain.assert_success();
    tooled.assert_success();
    assert_eq!(
        tooled.stdout(),
        plain.stdout(),
        "stdout differs with the preload: {}",
        tooled.command
    );
    assert_eq!(
        tooled.stderr(),
        plain.stderr(),
        "stderr differs with the preload: {}",
        tooled.command
    );
    assert!(
        !tooled.stderr().contains("mpit-tuner") && !tooled.stderr().contains("MPIT_TUNER"),
        "{}",
        tooled.stderr()
    );
    assert!(
        !dir.exists(),
        "a process that is no MPI rank created the run directory: {}",
        tooled.command
    );
    plain
}

/// A command under `timeout`, so that a hang fails the test.
fn timed(program: impl AsRef<std::ffi::OsStr>, args: &[&str]) -> Command {
    let mut cmd = Command::new("timeout");
    cmd.arg("-k")
        .arg("10")
        .arg(mpit_testkit::timeout().to_string())
        .arg(program)
        .args(args);
    mpit_testkit::launcher_env(&mut cmd);
    cmd
}

/// `mpiexec --version`.
#[test]
fn mpiexec_version_unchanged() {
    let job = unchanged(|| timed(mpit_testkit::mpiexec_path(), &["--version"]));
    assert!(!job.stdout().is_empty() || !job.stderr().is_empty());
}

/// `mpiexec -n 1 true`: the launcher, its proxy and a non-MPI program.
#[test]
fn mpiexec_running_true_unchanged() {
    unchanged(|| mpit_testkit::mpiexec(1, "true"));
}

/// `mpiexec -n 2 bash -c 'echo hi'`: a shell under the launcher.
#[test]
fn mpiexec_running_a_shell_unchanged() {
    let job = unchanged(|| {
        let mut cmd = mpit_testkit::mpiexec(2, "bash");
        cmd.args(["-c", "echo hi"]);
        cmd
    });
    assert_eq!(job.stdout(), "hi\nhi\n");
}

/// `bash -c true` and `bash -c 'echo hi'`.
#[test]
fn shells_unchanged() {
    let job = unchanged(|| timed("bash", &["-c", "true"]));
    assert_eq!(job.stdout(), "");
    assert_eq!(job.stderr(), "");
    let job = unchanged(|| timed("bash", &["-c", "echo hi"]));
    assert_eq!(job.stdout(), "hi\n");
    assert_eq!(job.stderr(), "");
}

/// A program without MPI.
#[test]
fn non_mpi_program_unchanged() {
    let program = example("not_mpi");
    let job = unchanged(|| timed(Path::new(&program), &[]));
    assert_eq!(
        job.stdout(),
        "not_mpi: n=100 sum=5050 sum_of_squares=338350\n"
    );
    assert_eq!(job.stderr(), "");
}
