//! What the `check`, `replay` and `run` tests share: the built binary, the
//! preload library next to it, the example programs, fixtures, and running
//! `mpit-tuner` with a clean environment under a timeout (one job at a time,
//! through mpit-testkit); and a running job to steer ([`steering`]).
#![allow(dead_code, unused_imports)] // each test binary uses a different part

pub mod steering;

use mpit_testkit::{flavor, launcher_env, timeout, Job};
use serde_json::Value as Json;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The `mpit-tuner` binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_mpit-tuner");

pub use mpit_testkit::repo_root;

/// A file under `crates/mpit-tuner/tests/fixtures`.
pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// The profile directory of the binary (`target/debug`).
fn profile_dir() -> &'static Path {
    Path::new(BIN)
        .parent()
        .expect("the binary is in a directory")
}

/// `libpreload.so` next to the binary, where `mpit-tuner run` looks for
/// it. Cargo builds it only with the preload crate: fails with the command
/// that builds it.
pub fn preload_lib() -> PathBuf {
    let so = profile_dir().join("libpreload.so");
    assert!(
        so.is_file(),
        "{} is missing: `mpit-tuner run` needs the preload library next to it; build it \
         with `cargo build -p preload` (with the same MPICC and --target-dir as \
         these tests), or `cargo build --workspace --lib --bins`",
        so.display()
    );
    so
}

pub use mpit_testkit::example;

/// `mpit-tuner ARGS` as a plain process under a timeout, without a preload
/// or tuner settings from the caller's environment, with what MPI jobs need
/// here (Open MPI as root, oversubscription).
pub fn command(args: &[&str]) -> Command {
    command_within(timeout(), args)
}

/// [`command`] with `secs` seconds to run (a command that runs several
/// jobs, one after the other).
pub fn command_within(secs: u64, args: &[&str]) -> Command {
    let mut cmd = Command::new("timeout");
    cmd.args(["-k", "10", &secs.to_string(), BIN]).args(args);
    clean_env(&mut cmd);
    launcher_env(&mut cmd);
    cmd
}

/// Removes a preload and every `MPIT_TUNER*` setting of the caller.
pub fn clean_env(cmd: &mut Command) {
    cmd.env_remove("LD_PRELOAD");
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("MPIT_TUNER") {
            cmd.env_remove(key);
        }
    }
}

/// Runs `mpit-tuner ARGS` (holding the job lock).
pub fn mpit_tuner(args: &[&str]) -> Job {
    mpit_testkit::run(command(args))
}

/// The exit code of a job.
pub fn code(job: &Job) -> Option<i32> {
    job.output.status.code()
}

/// Everything a job printed, for messages.
pub fn printed(job: &Job) -> String {
    format!(
        "{}\n--- stdout\n{}\n--- stderr\n{}",
        job.command,
        job.stdout(),
        job.stderr()
    )
}

/// A fresh temporary directory.
pub fn tempdir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("mpit-cli-test-")
        .tempdir()
        .expect("a temporary directory")
}

/// The launcher of this build and its options for a 2-rank job, as
/// arguments after `mpit-tuner run ... --`.
pub fn launcher(ranks: u32) -> Vec<String> {
    let mut args = vec![
        mpit_testkit::mpiexec_path().display().to_string(),
        "-n".into(),
        ranks.to_string(),
    ];
    if flavor() == "openmpi" {
        args.push("--oversubscribe".into());
    }
    args
}

/// Every record of a JSON Lines file (each line must parse).
pub fn read_jsonl(path: &Path) -> Vec<Json> {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    text.lines()
        .enumerate()
        .map(|(i, l)| {
            serde_json::from_str(l)
                .unwrap_or_else(|e| panic!("{}:{}: not JSON ({e}): {l}", path.display(), i + 1))
        })
        .collect()
}
