//! Per-rank logs and the cross-rank summary of real MPI jobs run under
//! `LD_PRELOAD=libpreload.so`: their format, the object lifecycle they
//! record (no handle outlives its communicator), the Fortran entry points,
//! and what an `MPI_Abort` leaves behind.
//!
//! Run one job at a time: `cargo test -p preload -- --test-threads=1`
//! (mpit-testkit also serialises the jobs of one test binary).

mod common;

use common::*;
use serde_json::Value;
use std::collections::BTreeSet;

/// Every performance variable a sample or the summary names was announced
/// in the header (or in a later `catalogue` record, for variables that
/// appeared while the job ran). The tool's own counters (`tool.*`) and the
/// policies' (`policy.*`) are not MPI_T variables and are exempt; a
/// summary's `name:max` is the maximum of `name`.
fn check_variables_announced(log: &RankLog, summary: &Value) {
    let is_pvar = |name: &str| !name.starts_with("tool.") && !name.starts_with("policy.");
    let announced: BTreeSet<String> = log
        .records
        .iter()
        .filter(|r| r["type"] == "header" || r["type"] == "catalogue")
        .flat_map(|r| r["variables"].as_array().cloned().unwrap_or_default())
        .map(|v| v["name"].as_str().expect("variable name").to_string())
        .collect();
    for s in log.samples() {
        for var in s["vars"].as_array().unwrap() {
            let name = var["name"].as_str().unwrap();
            assert!(
                !is_pvar(name) || announced.contains(name),
                "{}: `{name}` sampled but not in the header",
                log.path.display()
            );
        }
    }
    if log.rank == 0 {
        for v in summary["variables"].as_array().unwrap() {
            let full = v["name"].as_str().unwrap();
            let name = full.split(['@', ':']).next().unwrap();
            assert!(
                !is_pvar(name) || announced.contains(name),
                "summary variable `{full}` is not in rank 0's header"
            );
        }
    }
}

/// The tool's totals (`tool.<family>.calls|bytes|time`, `tool.mpi.time`)
/// never go down from one sample to the next, and their rates are never
/// negative (`watch` once showed `tool.mpi.time` at -0.53/s: the time of
/// the calls not timed was rescaled at every sample by the run's mean).
fn check_tool_totals_grow(log: &RankLog) {
    let total = |name: &str| {
        name.starts_with("tool.")
            && [".calls", ".bytes", ".time"]
                .iter()
                .any(|end| name.ends_with(end))
    };
    let mut last: std::collections::BTreeMap<String, f64> = Default::default();
    let mut seen = 0;
    for s in log.samples() {
        for var in s["vars"].as_array().unwrap() {
            let name = var["name"].as_str().unwrap();
            if !total(name) {
                continue;
            }
            seen += 1;
            let value = var["value"][0].as_f64().expect("a total's value");
            let rate = var["rate"][0].as_f64().expect("a total's rate");
            assert!(
                rate >= 0.0,
                "{}: `{name}` rate {rate} at t={}",
                log.path.display(),
                s["t"]
            );
            if let Some(&before) = last.get(name) {
                assert!(
                    value >= before,
                    "{}: `{name}` went down from {before} to {value} at t={}",
                    log.path.display(),
                    s["t"]
                );
            }
            last.insert(name.to_string(), value);
        }
    }
    assert!(seen > 0, "{}: no tool totals sampled", log.path.display());
}

/// The end-to-end test: 4 ranks of an application that creates and frees
/// communicators, under the preload. One valid JSON Lines log per rank
/// (header first with the format version, close last, every line JSON),
/// `summary.json`, the summary table once on rank 0's stderr, and every
/// communicator's handles released before the communicator is freed.
#[test]
fn four_ranks_one_valid_log_per_rank_and_summary() {
    let tmp = tempdir();
    let dir = tmp.path().join("run");
    let mut cmd = mpi_job(RANKS, &example("comm_churn"), &["3", "hold=100"]);
    preload(&mut cmd, &dir);
    // Verbose (what `mpit-tuner run` sets): rank 0 prints the summary
    // table, once.
    cmd.env("MPIT_TUNER_VERBOSE", "1");
    let job = mpit_testkit::run(cmd);
    job.assert_success();
    assert!(
        job.stdout().starts_with("comm_churn: ranks=4 "),
        "{}",
        job.stdout()
    );
    let stderr = job.stderr();
    assert_eq!(
        count(&stderr, "mpit-tuner: 4 ranks, "),
        1,
        "the summary table, once, from rank 0:\n{stderr}"
    );
    assert!(stderr.contains(&dir.display().to_string()), "{stderr}");

    let logs = read_run_dir(&dir, RANKS);
    let summary = check_summary(&dir, RANKS);
    for log in &logs {
        check_complete_log(log, RANKS);
        let config = &log.records[0]["config"];
        assert_eq!(config["interval"], 0.01, "{}: interval", log.path.display());
        assert_eq!(
            config["dir"],
            dir.to_str().unwrap(),
            "{}",
            log.path.display()
        );
        assert_eq!(config["quiet"], false);
        let life = check_objects(log);
        assert!(
            life.objects.contains_key("world"),
            "{}: MPI_COMM_WORLD is tracked",
            log.path.display()
        );
        // comm_churn holds its communicators for 100 ms: a 10 ms sampler
        // sees them come and go.
        assert!(
            !life.comms().is_empty(),
            "{}: no communicator created by the application was tracked",
            log.path.display()
        );
        check_variables_announced(log, &summary);
        check_tool_totals_grow(log);
    }
    assert_eq!(
        summary["samples_rank0"],
        logs[0].records.last().unwrap()["samples"],
        "summary.json counts rank 0's samples"
    );
    #[cfg(mpi_flavor = "openmpi")]
    check_pml_ob1(&logs, &summary);
}

/// Open MPI binds `pml_ob1_unexpected_msgq_length` and
/// `pml_ob1_posted_recvq_length` to communicators (one element per rank of
/// the communicator): the logs sample them on MPI_COMM_WORLD and on the
/// communicators the application creates later, and the summary has them.
#[cfg(mpi_flavor = "openmpi")]
fn check_pml_ob1(logs: &[RankLog], summary: &Value) {
    const VARS: [&str; 2] = [
        "pml_ob1_unexpected_msgq_length",
        "pml_ob1_posted_recvq_length",
    ];
    for log in logs {
        let name = log.path.display();
        let life = check_objects(log);
        for r in log.of_type("object") {
            if r["event"] == "created" && !r["object"].as_str().unwrap().starts_with("win") {
                assert!(
                    r["handles"].as_u64().unwrap() >= 2,
                    "{name}: communicator without pml_ob1 handles: {r}"
                );
            }
        }
        for var in VARS {
            let samples: Vec<(&str, usize)> = log
                .samples()
                .iter()
                .flat_map(|s| s["vars"].as_array().unwrap())
                .filter(|v| v["name"] == var)
                .map(|v| {
                    let object = v["object"]
                        .as_str()
                        .unwrap_or_else(|| panic!("{name}: {var} without an object: {v}"));
                    let len = v["value"].as_array().map_or(0, Vec::len);
                    (object, len)
                })
                .collect();
            let on_world: Vec<_> = samples.iter().filter(|(o, _)| *o == "world").collect();
            assert!(!on_world.is_empty(), "{name}: no {var} on world");
            // One element per rank of the communicator: 4 on the world, 2 on
            // every communicator comm_churn creates at 4 ranks (even/odd
            // split, its dup, the lower half).
            assert!(
                on_world.iter().all(|(_, len)| *len == RANKS as usize),
                "{name}: {var}@world has not {RANKS} elements"
            );
            let comms: BTreeSet<&str> = samples
                .iter()
                .filter(|(o, _)| o.starts_with("comm"))
                .map(|(o, _)| *o)
                .collect();
            assert!(
                !comms.is_empty(),
                "{name}: {var} never sampled on a communicator the application created \
                 (tracked: {:?})",
                life.comms()
            );
            assert!(
                samples
                    .iter()
                    .filter(|(o, _)| o.starts_with("comm"))
                    .all(|(_, len)| *len == 2),
                "{name}: {var} on a 2-rank communicator has not 2 elements"
            );
        }
    }
    let names: Vec<&str> = summary["variables"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    for var in VARS {
        let full = format!("{var}@world");
        assert!(
            names.contains(&full.as_str()),
            "summary.json has no {full}: {names:?}"
        );
    }
}

/// Runs the Fortran example with `args` with and without the preload: the
/// same output, and one complete log per rank with samples.
fn fortran_intercepted(args: &[&str], init: &str) {
    let test = format!("fortran_intercepted({args:?})");
    let Some(basics) = fortran_example(&test) else {
        return;
    };
    let tmp = tempdir();
    let (plain, tooled, dir) = run_both(RANKS, &basics, args, tmp.path());
    assert!(
        plain
            .stdout()
            .starts_with(&format!("basics: ranks=4 init={init} ")),
        "{}",
        plain.stdout()
    );
    assert_same_stdout(&plain, &tooled, |_| false);
    for log in read_run_dir(&dir, RANKS) {
        check_complete_log(&log, RANKS);
    }
    check_summary(&dir, RANKS);
}

/// `MPI_INIT` and `MPI_FINALIZE` from Fortran start and stop the tuner.
#[test]
fn fortran_mpi_init_is_intercepted() {
    fortran_intercepted(&[], "MPI_INIT");
}

/// `MPI_INIT_THREAD` from Fortran starts the tuner too.
#[test]
fn fortran_mpi_init_thread_is_intercepted() {
    fortran_intercepted(&["multiple"], "MPI_INIT_THREAD(multiple)");
}

/// An application that calls `MPI_Abort` mid-run exits as it does without
/// the tool, and leaves a log for every rank whose every line parses: the
/// header of every rank, and on the aborting rank the samples flushed by
/// the `MPI_Abort` wrapper.
#[test]
fn mpi_abort_leaves_logs_whose_every_line_parses() {
    let tmp = tempdir();
    let program = example("abort");
    // Rank 0 sleeps 600 ms (about 60 samples) before MPI_Abort.
    let args = ["600"];
    let plain = mpit_testkit::run(mpi_job(RANKS, &program, &args));
    let dir = tmp.path().join("run");
    let mut cmd = mpi_job(RANKS, &program, &args);
    preload(&mut cmd, &dir);
    let tooled = mpit_testkit::run(cmd);
    assert!(
        !plain.success(),
        "abort should fail without the tool: {plain:?}"
    );
    assert_eq!(
        tooled.output.status.code(),
        plain.output.status.code(),
        "exit status with the tool ({}) and without ({})\n--- stderr with\n{}",
        tooled.output.status,
        plain.output.status,
        tooled.stderr()
    );
    assert_same_stdout(&plain, &tooled, |_| false);

    // The launcher kills ranks 1.. when rank 0 aborts, maybe in the middle
    // of a write: their last line may be cut. Rank 0 seals its log before
    // the abort goes ahead: its file is whole.
    let logs = read_run_dir_killed(&dir, RANKS, |rank| rank != 0);
    for log in &logs {
        check_header(log, RANKS);
        assert!(
            log.of_type("close").next().is_none(),
            "{}: a close record in a job that never finalized",
            log.path.display()
        );
        check_objects(log);
    }
    let rank0 = &logs[0];
    assert!(
        !rank0.samples().is_empty(),
        "{}: the MPI_Abort wrapper did not flush rank 0's samples",
        rank0.path.display()
    );
    assert!(
        rank0.of_type("warning").any(
            |w| w["abort"] == true && w["message"].as_str().unwrap_or("").contains("MPI_Abort")
        ),
        "{}: no record of the MPI_Abort (a warning with `abort` set)",
        rank0.path.display()
    );
}
