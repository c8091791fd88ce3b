//! The application cannot tell the tool is there: the C, Fortran and Rust
//! examples print exactly what they print without it (and the tool did
//! run: its logs are there), at both thread levels; `MPIT_TUNER=off`
//! leaves no trace at all.
//!
//! Run one job at a time: `cargo test -p preload -- --test-threads=1`.

mod common;

use common::*;
use std::path::Path;

/// Runs `program args` with and without the preload: the same standard
/// output (except lines `ignore` drops), and a complete log per rank.
fn unchanged_and_logged(program: &Path, args: &[&str], ignore: impl Fn(&str) -> bool) -> String {
    let tmp = tempdir();
    let (plain, tooled, dir) = run_both(RANKS, program, args, tmp.path());
    assert_same_stdout(&plain, &tooled, ignore);
    for log in read_run_dir(&dir, RANKS) {
        check_complete_log(&log, RANKS);
    }
    check_summary(&dir, RANKS);
    plain.stdout()
}

/// C: communicators and windows created and freed every iteration.
#[test]
fn c_example_output_unchanged() {
    let out = unchanged_and_logged(&example("comm_churn"), &["3"], |_| false);
    assert!(out.contains("checksum="), "{out}");
}

/// Fortran, through `MPI_INIT`.
#[test]
fn fortran_example_output_unchanged() {
    let Some(basics) = fortran_example("fortran_example_output_unchanged") else {
        return;
    };
    let out = unchanged_and_logged(&basics, &[], |_| false);
    assert!(out.starts_with("basics: ranks=4 init=MPI_INIT "), "{out}");
}

/// Rust (rsmpi): the 3-D stencil; only its `time:` line may differ.
#[test]
fn rust_example_output_unchanged() {
    let out = unchanged_and_logged(&stencil3d(), &["--iters", "20"], |l| l.starts_with("time:"));
    assert!(out.contains("\nresult: sum="), "{out}");
}

/// An application that initialises with `MPI_THREAD_SINGLE` works under the
/// tool (whose helper thread then calls only MPI_T routines).
#[test]
fn thread_single_works() {
    let out = unchanged_and_logged(&example("comm_churn"), &["single", "2"], |_| false);
    assert!(out.contains("thread_level=single"), "{out}");
}

/// An application that initialises with `MPI_THREAD_MULTIPLE` works too.
#[test]
fn thread_multiple_works() {
    let out = unchanged_and_logged(&example("comm_churn"), &["multiple", "2"], |_| false);
    assert!(out.contains("thread_level=multiple"), "{out}");
}

/// An application that uses MPI_T itself, asking for `MPI_THREAD_SINGLE`
/// in every round, while the tool's helper thread uses MPI_T: the same
/// output, every lookup found. MPICH keeps one "threaded" flag for the
/// process, set by the latest `MPI_T_init_thread`, and takes its MPI_T
/// lock only while it is set; before the preload asked the library for
/// `MPI_THREAD_MULTIPLE` on the application's behalf (and told it the level
/// it asked for), the application's call could turn the lock off under the
/// helper's feet: MPICH 5.0.2 aborted in `MPI_T_cvar_get_index` (an unlock
/// of a lock it never took), by chance, in a CI run of
/// `an_algorithm_the_application_writes_itself_is_left_to_it`.
#[test]
fn an_application_using_mpi_t_below_thread_multiple_works() {
    let out = unchanged_and_logged(&example("mpit_app_init"), &["500"], |_| false);
    assert!(out.contains("mpit_app_init: provided "), "{out}");
    assert!(
        out.contains("500 of 500 lookups found their variable on every rank"),
        "{out}"
    );
    assert!(out.contains("mpit_app_init: MPI_Query_thread "), "{out}");
}

/// `MPIT_TUNER=off` with an application that initialises MPI_T itself
/// after `MPI_Init`: the same output, thread levels included. The preload
/// used to ask for `MPI_THREAD_MULTIPLE` on the application's behalf even
/// with the tool off, and Open MPI 4.1's first `MPI_T_init_thread` sets
/// the thread level of the whole process: `MPI_Query_thread` said
/// "multiple" after it.
#[test]
fn tuner_off_leaves_the_thread_level_alone() {
    let tmp = tempdir();
    let program = example("mpit_app_init");
    let plain = mpit_testkit::run(mpi_job(RANKS, &program, &["3"]));
    plain.assert_success();
    let mut cmd = mpi_job(RANKS, &program, &["3"]);
    preload(&mut cmd, &tmp.path().join("run"));
    cmd.env("MPIT_TUNER", "off");
    let off = mpit_testkit::run(cmd);
    off.assert_success();
    assert_same_stdout(&plain, &off, |_| false);
    assert!(
        plain.stdout().contains("mpit_app_init: MPI_Query_thread "),
        "{}",
        plain.stdout()
    );
}

/// Names of the entries of a directory.
fn entries(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

/// `MPIT_TUNER=off`: the preload is loaded but does nothing. No run
/// directory, neither the one `MPIT_TUNER_DIR` names nor the default one in
/// the working directory (which a run without `off` does create), nothing
/// on stderr, the same output.
#[test]
fn tuner_off_leaves_no_trace() {
    let tmp = tempdir();
    let program = example("comm_churn");
    let args = ["2"];
    let plain = mpit_testkit::run(mpi_job(RANKS, &program, &args));
    plain.assert_success();

    // With MPIT_TUNER_DIR.
    let dir = tmp.path().join("run");
    let mut cmd = mpi_job(RANKS, &program, &args);
    preload(&mut cmd, &dir);
    cmd.env("MPIT_TUNER", "off");
    let off = mpit_testkit::run(cmd);
    off.assert_success();
    assert_same_stdout(&plain, &off, |_| false);
    assert!(!dir.exists(), "MPIT_TUNER=off created {}", dir.display());
    assert!(
        !off.stderr().contains("mpit-tuner"),
        "MPIT_TUNER=off printed:\n{}",
        off.stderr()
    );

    // Without: the default run directory would go to the working directory.
    let cwd = tmp.path().join("cwd");
    std::fs::create_dir(&cwd).unwrap();
    let mut cmd = mpi_job(RANKS, &program, &args);
    preload(&mut cmd, &dir);
    cmd.env_remove("MPIT_TUNER_DIR")
        .env("MPIT_TUNER", "off")
        .current_dir(&cwd);
    let off = mpit_testkit::run(cmd);
    off.assert_success();
    assert_same_stdout(&plain, &off, |_| false);
    assert_eq!(
        entries(&cwd),
        Vec::<String>::new(),
        "MPIT_TUNER=off wrote to the working directory"
    );

    // The control: the same run with the tuner on creates the default
    // directory `mpit-tuner-<date>-<jobid>` there.
    let mut cmd = mpi_job(RANKS, &program, &args);
    preload(&mut cmd, &dir);
    cmd.env_remove("MPIT_TUNER_DIR").current_dir(&cwd);
    let on = mpit_testkit::run(cmd);
    on.assert_success();
    assert_same_stdout(&plain, &on, |_| false);
    let created = entries(&cwd);
    assert!(
        created.len() == 1 && created[0].starts_with("mpit-tuner-"),
        "expected one default run directory in {}: {created:?}",
        cwd.display()
    );
    for log in read_run_dir(&cwd.join(&created[0]), RANKS) {
        check_complete_log(&log, RANKS);
    }
}

/// A job's stderr lines, sorted, each `[host:pid]` prefix made
/// `[host:PID]`: what stays the same from run to run.
fn library_lines(stderr: &str) -> Vec<String> {
    let mut lines: Vec<String> = stderr
        .lines()
        .map(|l| match (l.strip_prefix('['), l.find(']')) {
            (Some(rest), Some(end)) => match rest[..end - 1].rsplit_once(':') {
                Some((host, pid)) if pid.chars().all(|c| c.is_ascii_digit()) => {
                    format!("[{host}:PID]{}", &l[end + 1..])
                }
                _ => l.to_string(),
            },
            _ => l.to_string(),
        })
        .collect();
    lines.sort();
    lines
}

/// `MPIT_TUNER_QUIET=1` means quiet: with collective tuning on (whose
/// banner rank 0 prints at start) and a bad `MPIT_TUNER_REFRESH` (a
/// warning), a quiet run prints exactly what the application prints
/// without the tool: stdout byte for byte, stderr line for line (the
/// library's own warnings without their pids and order); the same run
/// without quiet says both things, and either way every rank's log holds
/// them (the warning, collective tuning's start or off record).
#[test]
fn quiet_means_quiet() {
    let tmp = tempdir();
    let program = example("comm_churn");
    let args = ["2"];
    let plain = mpit_testkit::run(mpi_job(RANKS, &program, &args));
    plain.assert_success();
    let tooled = |name: &str, quiet: bool| {
        let dir = tmp.path().join(name);
        let mut cmd = mpi_job(RANKS, &program, &args);
        preload(&mut cmd, &dir);
        cmd.env("MPIT_TUNER_COLLECTIVES", "tune")
            .env("MPIT_TUNER_REFRESH", "often");
        if quiet {
            cmd.env("MPIT_TUNER_QUIET", "1");
        }
        let job = mpit_testkit::run(cmd);
        job.assert_success();
        for log in read_run_dir(&dir, RANKS) {
            check_complete_log(&log, RANKS);
            assert!(
                log.of_type("warning").any(|w| w["message"]
                    .as_str()
                    .unwrap_or("")
                    .contains("MPIT_TUNER_REFRESH")),
                "{name}: no warning about MPIT_TUNER_REFRESH in a log"
            );
            assert!(
                log.of_type("collective")
                    .any(|r| r["event"] == "start" || r["event"] == "off"),
                "{name}: no start or off record of collective tuning in a log"
            );
        }
        job
    };

    let quiet = tooled("quiet", true);
    assert_eq!(
        quiet.stdout(),
        plain.stdout(),
        "stdout differs with MPIT_TUNER_QUIET=1"
    );
    // The library's own lines (Open MPI 5 warns from every rank, each
    // line prefixed `[host:pid]`, in the order the ranks wrote them) are
    // compared without their pids and order; the tool adds none.
    assert!(!quiet.stderr().contains("mpit-tuner"), "{}", quiet.stderr());
    assert_eq!(
        library_lines(&quiet.stderr()),
        library_lines(&plain.stderr()),
        "stderr differs with MPIT_TUNER_QUIET=1"
    );

    let loud = tooled("loud", false);
    assert_same_stdout(&plain, &loud, |_| false);
    let stderr = loud.stderr();
    assert!(stderr.contains("MPIT_TUNER_REFRESH"), "{stderr}");
    assert!(stderr.contains("mpit-tuner: collective tuning"), "{stderr}");
}
