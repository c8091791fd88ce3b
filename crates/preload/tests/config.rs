//! Bad configuration never stops the job: one clear message on rank 0
//! naming the variable and the value, then the default (or no tuner), and
//! the application's output is unchanged.

mod common;

use common::*;
use mpit_testkit::Job;
use std::path::Path;

/// comm_churn on 4 ranks without the tool (the reference output).
fn reference() -> Job {
    let job = mpit_testkit::run(mpi_job(RANKS, &example("comm_churn"), &["2"]));
    job.assert_success();
    job
}

/// comm_churn on 4 ranks under the preload with logs to `dir` and `env`.
fn tooled(dir: &Path, env: &[(&str, &str)]) -> Job {
    let mut cmd = mpi_job(RANKS, &example("comm_churn"), &["2"]);
    preload(&mut cmd, dir);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let job = mpit_testkit::run(cmd);
    job.assert_success();
    job
}

/// The lines of `text` that contain `needle`.
fn lines_with<'a>(text: &'a str, needle: &str) -> Vec<&'a str> {
    text.lines().filter(|l| l.contains(needle)).collect()
}

/// `MPIT_TUNER_INTERVAL=soon`: one message (from rank 0 only, in a 4-rank
/// job) naming the variable and the value; the default interval (1 s) is
/// used; the job completes with the same output.
#[test]
fn bad_interval_one_message_and_default_used() {
    let plain = reference();
    let tmp = tempdir();
    let dir = tmp.path().join("run");
    let job = tooled(&dir, &[("MPIT_TUNER_INTERVAL", "soon")]);
    assert_same_stdout(&plain, &job, |_| false);
    let stderr = job.stderr();
    assert_eq!(
        count(&stderr, "MPIT_TUNER_INTERVAL"),
        1,
        "expected one message naming MPIT_TUNER_INTERVAL:\n{stderr}"
    );
    let line = lines_with(&stderr, "MPIT_TUNER_INTERVAL")[0];
    assert!(
        line.contains("soon") && line.contains("mpit-tuner"),
        "the message names the value and the tool: {line}"
    );
    for log in read_run_dir(&dir, RANKS) {
        check_complete_log(&log, RANKS);
        assert_eq!(
            log.records[0]["config"]["interval"],
            1.0,
            "{}: the default interval",
            log.path.display()
        );
    }
}

/// An unwritable `MPIT_TUNER_DIR`: one message naming the variable and the
/// path, the tuner off, the job completes with the same output.
fn unwritable_dir(plain: &Job, dir: &Path) {
    let job = tooled(dir, &[]);
    assert_same_stdout(plain, &job, |_| false);
    let stderr = job.stderr();
    assert_eq!(
        count(&stderr, "MPIT_TUNER_DIR"),
        1,
        "expected one message naming MPIT_TUNER_DIR ({}):\n{stderr}",
        dir.display()
    );
    let line = lines_with(&stderr, "MPIT_TUNER_DIR")[0];
    assert!(
        line.contains(&dir.display().to_string()) && line.contains("mpit-tuner"),
        "the message names the directory and the tool: {line}"
    );
    assert!(!dir.exists(), "{} exists", dir.display());
}

/// A run directory under a regular file, and one under /proc (which
/// refuses new entries even to root).
#[test]
fn unwritable_dir_one_message_and_job_completes() {
    let plain = reference();
    let tmp = tempdir();
    let file = tmp.path().join("a-file");
    std::fs::write(&file, "not a directory\n").unwrap();
    unwritable_dir(&plain, &file.join("run"));
    assert!(file.is_file());
    unwritable_dir(&plain, Path::new("/proc/mpit-tuner-forbidden/run"));
}
