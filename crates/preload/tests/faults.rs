//! Fault injection: every MPI and MPI_T call the tool makes is made to fail
//! in turn, on one rank and on all ranks, at init, while the job runs and at
//! finalize. In every case the application prints what it prints without the
//! tool and exits 0, and the tool says what it turned off and why (rank 0's
//! standard error, or the logs).
//!
//! The failures come from `tests/faults/faultinject.c`, a test-only preload
//! placed after `libpreload.so` (see its header for the `MPIT_FAULT`
//! grammar): it intercepts the tool's own calls and none of the
//! application's. A failing collective still takes part in the operation and
//! then reports the error, as a library that rejects a call on some ranks
//! after the fact does; a failing local call never reaches the library.
//!
//! Run one job at a time: `cargo test -p preload -- --test-threads=1`.

mod common;

use common::*;
use mpit_testkit::{flavor, Job};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

const RANKS: u32 = 2;
const ARGS: &[&str] = &["allreduces=200", "sends=40", "bytes=1024"];

/// What the application prints without the tool.
fn plain() -> &'static Job {
    static PLAIN: OnceLock<Job> = OnceLock::new();
    PLAIN.get_or_init(|| {
        let job = mpit_testkit::run(mpi_job(RANKS, &example("traffic"), ARGS));
        job.assert_success();
        job
    })
}

/// Where the tool's word about a fault must appear.
#[derive(Debug, Clone, Copy)]
enum Said<'a> {
    /// Rank 0's standard error (the tuner never started, so no logs).
    Stderr(&'a str),
    /// Every rank's log that exists, as a warning (or error) record.
    Logs(&'a str),
    /// The standard error or a log, whichever applies.
    Anywhere(&'a str),
    /// Nothing to check but the application: the fault changes nothing the
    /// tool reports (e.g. a query whose failure keeps a safe default).
    Nothing,
}

/// What one job under a fault showed, after the checks every fault gets.
struct Faulted {
    /// Whether the fault library announced at least one injected failure.
    injected: bool,
    /// The ranks' merged standard error.
    stderr: String,
    /// The warning, write and close records of every log, one per line.
    logs: String,
    /// The collective tuning records of every log, one per line, each
    /// with its log's rank (`"rank":N` first).
    tuning: String,
    /// The command and its output, for assertion messages.
    context: String,
}

/// Runs the application under the tool with `fault`, in the default
/// settings (collective tuning on, in mode `safe`); checks that the job
/// succeeds with the application's own output and that whatever logs exist
/// are whole JSON Lines files that start with a header.
fn run_with(fault: &str, policy: Option<&Path>) -> Faulted {
    run_in(fault, policy, "run", &[])
}

/// [`run_with`], with the run directory at `name` in a new temporary
/// directory, and `env` set.
fn run_in(fault: &str, policy: Option<&Path>, name: &str, env: &[(&str, &str)]) -> Faulted {
    let tmp = tempdir();
    let dir = tmp.path().join(name);
    let mut cmd = mpi_job(RANKS, &example("traffic"), ARGS);
    preload(&mut cmd, &dir);
    let preloads = format!("{}:{}", preload_lib().display(), fault_lib().display());
    cmd.env("LD_PRELOAD", preloads).env("MPIT_FAULT", fault);
    for (k, v) in env {
        cmd.env(k, v);
    }
    match policy {
        Some(p) => cmd.env("MPIT_TUNER_POLICY", p),
        None => cmd.env_remove("MPIT_TUNER_POLICY"),
    };
    let job = mpit_testkit::run(cmd);
    let context = format!(
        "fault {fault}: {}\n--- stdout\n{}\n--- stderr\n{}",
        job.command,
        job.stdout(),
        job.stderr()
    );
    assert!(
        job.success(),
        "the job failed ({}): {context}",
        job.output.status
    );
    assert_eq!(
        job.stdout(),
        plain().stdout(),
        "the application's output changed: {context}"
    );
    let mut logs = String::new();
    let mut tuning = String::new();
    if let Ok(entries) = std::fs::read_dir(&dir) {
        for entry in entries.flatten() {
            let path = entry.path();
            if path.extension().is_some_and(|e| e == "jsonl") {
                let records = read_jsonl(&path);
                if let Some(first) = records.first() {
                    assert_eq!(first["type"], "header", "{}: {context}", path.display());
                }
                let rank = records
                    .first()
                    .map_or(-1, |h| h["rank"].as_i64().unwrap_or(-1));
                for r in &records {
                    if r["type"] == "warning" || r["type"] == "write" || r["type"] == "close" {
                        logs.push_str(&r.to_string());
                        logs.push('\n');
                    }
                    if r["type"] == "collective" {
                        tuning.push_str(&format!("\"rank\":{rank} {r}\n"));
                    }
                }
            }
        }
    }
    Faulted {
        injected: job.stderr().contains("faultinject: rank"),
        // The tool writes each of its lines whole (one write), so a message
        // is found in the ranks' merged stderr even when lines interleave.
        stderr: job.stderr().to_string(),
        logs,
        tuning,
        context,
    }
}

/// Runs the application under the tool with `fault`, and checks that the
/// fault was injected and the tool said what `said` expects.
fn inject(fault: &str, policy: Option<&Path>, said: Said<'_>) {
    let f = run_with(fault, policy);
    let Faulted {
        stderr,
        logs,
        context,
        ..
    } = &f;
    assert!(
        f.injected,
        "the fault was never injected (is the call still made?): {context}"
    );
    match said {
        Said::Stderr(text) => assert!(
            stderr.contains(text),
            "expected the tool to say {text:?} on standard error: {context}"
        ),
        Said::Logs(text) => assert!(
            logs.contains(text),
            "expected the logs to say {text:?}:\n{logs}\n{context}"
        ),
        Said::Anywhere(text) => assert!(
            stderr.contains(text) || logs.contains(text),
            "expected the tool to say {text:?}:\n{logs}\n{context}"
        ),
        Said::Nothing => {}
    }
}

/// A policy that writes a LOCAL CVAR the library accepts after `MPI_Init`,
/// in the init phase: the actuator's calls (handle, read, write, read-back,
/// free) are made once per rank.
fn write_policy(dir: &Path) -> PathBuf {
    let cvar = if flavor() == "openmpi" {
        "btl_vader_free_list_max"
    } else if cfg!(mpi_library = "mvapich2") {
        // MVAPICH2 has no MPIR_CVAR_REQUEST_POLL_FREQ; the width error
        // stack lines are cut at is a LOCAL integer that changes nothing
        // the job does.
        "MPIR_CVAR_CHOP_ERROR_STACK"
    } else {
        "MPIR_CVAR_REQUEST_POLL_FREQ"
    };
    let file = dir.join("write.toml");
    std::fs::write(
        &file,
        format!(
            "[[policy]]\nname = \"write-at-init\"\nphase = \"init\"\nthen = [ {{ set = \"{cvar}\", value = 1024 }} ]\n"
        ),
    )
    .expect("a policy file");
    file
}

// ---------------------------------------------------------------------------
// At init: the tuner stays off on every rank, with one message.

#[test]
fn mpi_t_init_fails_on_one_rank() {
    inject(
        "MPI_T_init_thread@1",
        None,
        Said::Stderr("could not start on rank 1"),
    );
}

#[test]
fn catalogue_fails_on_all_ranks() {
    inject(
        "MPI_T_cvar_get_num",
        None,
        Said::Stderr("MPI_T could not be initialised"),
    );
}

#[test]
fn error_handler_cannot_be_swapped_in() {
    inject(
        "PMPI_Comm_get_errhandler@0",
        None,
        Said::Stderr("MPI_Comm_get_errhandler failed"),
    );
    inject(
        "PMPI_Comm_set_errhandler@1",
        None,
        Said::Stderr("MPI_Comm_set_errhandler failed on rank 1"),
    );
}

#[test]
fn error_handler_cannot_be_swapped_in_at_finalize() {
    // Calls 1 and 2 of MPI_Comm_set_errhandler swap MPI_ERRORS_RETURN in
    // on MPI_COMM_WORLD inside MPI_Init and put the application's back;
    // call 3 swaps it in inside MPI_Finalize, for the summary's
    // collectives: failing on rank 1, the summary is off on every rank.
    inject(
        "PMPI_Comm_set_errhandler#3@1",
        None,
        Said::Anywhere("cross-rank summary not written"),
    );
}

/// The start agreement's call: a nonblocking allreduce with MPICH's header
/// (collective tuning tries allreduce's candidates before it, and MPICH
/// reads the algorithm variable in every `MPI_Allreduce`), an
/// `MPI_Allreduce` with Open MPI's and MVAPICH2's.
fn blocking_start() -> bool {
    cfg!(mpi_flavor = "openmpi") || cfg!(mpi_library = "mvapich2")
}

fn start_call() -> &'static str {
    if blocking_start() {
        "MPI_Allreduce"
    } else {
        "MPI_Iallreduce"
    }
}

/// `MPIT_FAULT` for the start agreement's call on the ranks `at` (`""`: every rank, `"@1"`: rank 1).
fn start_fault(at: &str) -> String {
    format!("P{}#1{at}", start_call())
}

/// The summary's first reduction at finalize, as an `MPIT_FAULT` item
/// without its rank: the first `MPI_Allreduce` of the tool where the
/// start agreement is nonblocking, else the second.
fn summary_allreduce() -> &'static str {
    if blocking_start() {
        "PMPI_Allreduce#2"
    } else {
        "PMPI_Allreduce#1"
    }
}

#[test]
fn start_agreement_fails() {
    // Call 1 is the start agreement (the services' identities and parts,
    // collective tuning's refusals and signature, the logs' layout, the
    // run directory's name); it fails on rank 1 after taking part: that
    // rank goes on as if the others did, and its "no" reaches every rank
    // at the tool's next agreement, the summary's at finalize (see
    // `a_start_agreement_failed_on_one_rank_is_told_at_finalize`).
    inject(
        &start_fault("@1"),
        None,
        Said::Stderr(&format!("{} failed on rank 1", start_call())),
    );
    // Nonblocking, its wait can fail too, the same way.
    if !blocking_start() {
        inject(
            "PMPI_Wait#1@1",
            None,
            Said::Stderr("MPI_Wait failed on rank 1"),
        );
    }
    // Its user-defined operation cannot be made on rank 1: the agreement
    // needs only MPI_MIN, so the rank still takes part, and votes no.
    inject(
        "PMPI_Op_create#1@1",
        None,
        Said::Stderr("MPI_Op_create failed on rank 1"),
    );
    // The summary's first reduction at finalize, failing on every rank:
    // rank 0 writes no summary.
    inject(
        summary_allreduce(),
        None,
        Said::Anywhere("cross-rank summary not written: MPI_Allreduce failed"),
    );
}

/// When the start agreement says no, the tuner is off on every rank, and
/// still each rank leaves a log in the run directory the user named: its
/// header (checked by `run_with`: every log starts with one), the reason,
/// and a `disabled` close. Both when a service cannot open on one rank
/// (its PVAR session) and when the tool's reduction operation cannot be
/// made there.
#[test]
fn a_tuner_that_did_not_start_leaves_every_rank_a_log() {
    // The failing call and rank, as each rank words it ("failed on rank
    // 1: ...", "failed with MPI_ERR_OTHER (failed on rank 1)").
    for (fault, call) in [
        (
            "MPI_T_pvar_session_create@1",
            "cannot create a PVAR session",
        ),
        ("PMPI_Op_create@1", "MPI_Op_create failed"),
    ] {
        let f = run_with(fault, None);
        assert!(f.injected, "the fault was never injected: {}", f.context);
        let closes = f.logs.matches("\"reason\":\"disabled\"").count();
        assert_eq!(
            closes, RANKS as usize,
            "one disabled log per rank:\n{}\n{}",
            f.logs, f.context
        );
        let reasons: Vec<&str> = f
            .logs
            .lines()
            .filter(|l| l.contains("the tuner could not start") && l.contains("rank 1"))
            .collect();
        assert_eq!(
            reasons.len(),
            RANKS as usize,
            "every log says why, naming rank 1:\n{}\n{}",
            f.logs,
            f.context
        );
        // A local failure (the session) is named in rank 1's log only; the
        // others point there.
        assert!(
            reasons.iter().any(|l| l.contains(call)),
            "a log names {call}:\n{}\n{}",
            f.logs,
            f.context
        );
    }
}

/// Asserts that the fault was injected and every rank's log closed at
/// finalize (the tuner ran on every rank to the end).
fn injected_and_finalized(f: &Faulted) {
    assert!(f.injected, "the fault was never injected: {}", f.context);
    assert_eq!(
        f.logs.matches("\"reason\":\"finalize\"").count(),
        RANKS as usize,
        "every rank ran the tuner to finalize:\n{}\n{}",
        f.logs,
        f.context
    );
}

/// The start agreement's call fails on rank 1 after taking part: one
/// agreement cannot tell the others, so the tuner runs on every rank (rank
/// 1 with what the library returned, as the others: its log in the
/// directory the user named), and the tool's next agreement carries rank
/// 1's "no": the summary's at finalize, so rank 0 writes no summary and
/// says why. Collective tuning, on by default, runs on rank 1 too and
/// stops at its first agreed point, every rank with it (rank 1's log says
/// why); with tuning off the same. Every rank's log ends normally.
#[test]
fn a_start_agreement_failed_on_one_rank_is_told_at_finalize() {
    for env in [&[][..], &[("MPIT_TUNER_COLLECTIVES", "off")][..]] {
        let f = run_in(&start_fault("@1"), None, "run", env);
        injected_and_finalized(&f);
        assert!(
            f.stderr
                .lines()
                .any(|l| l.contains("cross-rank summary not written")
                    && l.contains(&format!("{} failed on rank 1", start_call()))),
            "{env:?}: rank 0 says why there is no summary:\n{}",
            f.context
        );
        // Tuning is on by default where this library tunes online: it
        // started on every rank, and rank 1 alone says it stops.
        let started = f.tuning.matches("\"event\":\"start\"").count();
        let stops: Vec<&str> = f
            .tuning
            .lines()
            .filter(|l| {
                l.contains("\"event\":\"reduction_failed\"")
                    && l.contains(&format!("{} failed", start_call()))
                    && l.contains(
                        "on this rank at start: it tunes with what the start agreement returned",
                    )
            })
            .collect();
        if env.is_empty() && !cfg!(mpi_library = "mvapich2") {
            assert_eq!(started, RANKS as usize, "{}\n{}", f.tuning, f.context);
            assert_eq!(stops.len(), 1, "{}\n{}", f.tuning, f.context);
            assert!(stops[0].starts_with("\"rank\":1 "), "{stops:?}");
        } else {
            assert_eq!((started, stops.len()), (0, 0), "{env:?}: {}", f.tuning);
        }
    }
}

/// A run directory's name too long for the start agreement follows in a
/// broadcast; when that fails on one rank, the tuner is off everywhere.
#[test]
fn run_directory_broadcast_fails_on_one_rank() {
    let long = format!("{}/{}", "d".repeat(150), "e".repeat(150));
    let f = run_in("PMPI_Bcast#1@1", None, &long, &[]);
    assert!(f.injected, "the fault was never injected: {}", f.context);
    assert!(
        f.stderr.contains("MPI_Bcast failed on rank 1"),
        "{}",
        f.context
    );
    // The start agreement's call fails on rank 1: that rank still makes
    // the broadcast (it decides from its own MPIT_TUNER_DIR, not from the
    // agreement's result, which it does not have), so nobody waits.
    let f = run_in(&start_fault("@1"), None, &long, &[]);
    assert!(f.injected, "the fault was never injected: {}", f.context);
    assert!(
        f.stderr
            .contains(&format!("{} failed on rank 1", start_call())),
        "{}",
        f.context
    );
    // Without the fault, the long name reaches every rank.
    let f = run_in("PMPI_Bcast#99", None, &long, &[]);
    assert_eq!(
        f.logs.matches("\"reason\":\"finalize\"").count(),
        RANKS as usize,
        "every rank's log in the long-named directory:\n{}",
        f.context
    );
}

#[test]
fn pvar_session_fails_on_one_rank() {
    inject(
        "MPI_T_pvar_session_create@1",
        None,
        Said::Anywhere("could not start on rank 1"),
    );
}

#[test]
fn summary_reduction_fails_on_rank_0() {
    // The summary's mixed reduction at finalize (the start agreement is an
    // allreduce on Open MPI only): failing on rank 0, the summary is not
    // written, and rank 0 says why.
    inject(
        &format!("{}@0", summary_allreduce()),
        None,
        Said::Anywhere("cross-rank summary not written"),
    );
}

#[test]
fn library_version_unknown() {
    inject(
        "MPI_Get_library_version",
        None,
        Said::Logs("did not say its version"),
    );
}

// ---------------------------------------------------------------------------
// While the job runs.

#[test]
fn cvar_writes_fail() {
    let tmp = tempdir();
    inject(
        "MPI_T_cvar_write",
        Some(&write_policy(tmp.path())),
        Said::Logs("MPI_T_cvar_write failed"),
    );
}

#[test]
fn pvar_reads_fail() {
    if flavor() != "openmpi" {
        // MPICH exports no PVARs: MPI_T_pvar_read is never called.
        println!("pvar_reads_fail: not applicable: MPICH exports no PVARs");
        return;
    }
    inject(
        "MPI_T_pvar_read#2+",
        None,
        Said::Logs("MPI_T_pvar_read failed"),
    );
    inject(
        "MPI_T_pvar_handle_alloc@1",
        None,
        Said::Logs("MPI_T_pvar_handle_alloc failed"),
    );
}

#[test]
fn queries_of_the_hot_path_fail() {
    // A datatype size the library will not give: those calls count 0 bytes,
    // told at finalize. A thread level it will not give: the counters stay
    // in their safe mode.
    inject(
        "PMPI_Type_size",
        None,
        Said::Logs("MPI_Type_size failed for"),
    );
    inject("PMPI_Query_thread", None, Said::Nothing);
}

/// The sizes of the predefined datatypes are asked once, after init: the
/// program's 200 allreduces and 80 sends and receives, all of predefined
/// datatypes, never ask again (the 100th call of `PMPI_Type_size` and every
/// later one would fail; the headers here define under 60 predefined
/// datatypes). Their bytes are counted all the same (`traffic.rs` checks the
/// counts exactly).
#[test]
fn predefined_datatype_sizes_are_asked_once() {
    let f = run_with("PMPI_Type_size#100+", None);
    assert!(!f.injected, "{}", f.context);
    assert!(!f.logs.contains("MPI_Type_size"), "{}", f.context);
    // Every call fails: the sizes are asked at each call instead, and the
    // init says so once per rank.
    let f = run_with("PMPI_Type_size", None);
    assert!(f.injected, "{}", f.context);
    let said = f
        .stderr
        .lines()
        .filter(|l| l.contains("MPI_Type_size failed after init for"))
        .count();
    assert_eq!(said, RANKS as usize, "{}", f.context);
}

// ---------------------------------------------------------------------------
// At finalize: the summary is turned off on every rank alike; logs close.

#[test]
fn summary_reductions_fail_everywhere() {
    // What MVAPICH2 2.3.7 does to MPI_DOUBLE_INT + MPI_MINLOC, for any
    // reduction: the job goes on and ends well.
    inject(
        "PMPI_Reduce",
        None,
        Said::Stderr("cross-rank summary not written"),
    );
}

#[test]
fn summary_fails_on_one_rank() {
    // The tool's only MPI_Reduce is the summary's (collective tuning makes
    // no call of its own at start).
    inject(
        "PMPI_Reduce#1@1",
        None,
        Said::Anywhere("cross-rank summary not written"),
    );
    // The gather of every rank's signature and host.
    inject("PMPI_Gather@1", None, Said::Anywhere("MPI_Gather failed"));
}

#[test]
fn frees_fail_at_finalize() {
    inject(
        "PMPI_Op_free",
        None,
        Said::Logs("freeing the tool's reduction operation"),
    );
    inject(
        "MPI_T_pvar_session_free",
        None,
        Said::Logs("freeing the PVAR session"),
    );
    // MPICH's MPI_T_finalize runs after MPI_Finalize, when the log is closed;
    // Open MPI 4.1's is skipped (it crashes there).
    if flavor() == "openmpi" {
        println!("MPI_T_finalize: not called on Open MPI after MPI_Finalize (ompi#11485)");
    } else {
        inject(
            "MPI_T_finalize",
            None,
            Said::Stderr("MPI_T_finalize failed"),
        );
    }
}

// ---------------------------------------------------------------------------
// A job that dies right after MPI_Init still says who started.

#[test]
fn headers_are_on_disk_when_mpi_init_returns() {
    // With the periodic flush an hour away, only the flush at the end of
    // MPI_Init can have written anything: wait for every rank's header,
    // then kill the job (no MPI_Finalize, no MPI_Abort).
    let tmp = tempdir();
    let dir = tmp.path().join("run");
    let logs: Vec<PathBuf> = (0..RANKS)
        .map(|r| dir.join(format!("rank-{r:05}.jsonl")))
        .collect();
    let _guard = mpit_testkit::job_lock();
    let err = tmp.path().join("stderr");
    let (mut child, watched) = mpit_testkit::spawn_watched(
        &err,
        std::time::Duration::from_secs(60),
        |stderr| {
            let mut cmd = mpi_job(RANKS, &example("traffic"), &["allreduces=100000000"]);
            preload(&mut cmd, &dir);
            cmd.env("MPIT_TUNER_FLUSH", "1h")
                .stdout(std::process::Stdio::null())
                .stderr(stderr)
                .spawn()
                .expect("the job starts")
        },
        || {
            logs.iter()
                .all(|p| std::fs::metadata(p).is_ok_and(|m| m.len() > 0))
        },
    );
    // The ranks (their pids from the headers on disk, read leniently: the
    // job still runs), then the launcher and what it started.
    let pids: Vec<u64> = logs
        .iter()
        .filter_map(|p| {
            let text = std::fs::read_to_string(p).ok()?;
            let header: serde_json::Value = serde_json::from_str(text.lines().next()?).ok()?;
            header["pid"].as_u64()
        })
        .collect();
    mpit_testkit::kill_job(&mut child, &pids);
    assert!(
        watched == mpit_testkit::Watched::Ready,
        "{watched:?}: not every rank's header on disk within 60 s of MPI_Init in {}; the job \
         said:\n{}",
        dir.display(),
        std::fs::read_to_string(&err).unwrap_or_default()
    );
    for path in &logs {
        // Killed: a flush of a full buffer in progress may be cut.
        let records = read_jsonl_ending(path, true);
        assert_eq!(records[0]["type"], "header", "{}", path.display());
        assert!(
            records.iter().all(|r| r["type"] != "close"),
            "{}: the job was killed, yet the log is closed",
            path.display()
        );
    }
}

/// The per-node layout after `kill -9` of a rank in the middle of its
/// run: what every rank wrote before stays readable in the node's log
/// (every line a whole record of its writer, but at most one line of the
/// killed rank, cut short by the kill), each rank's header first. The
/// other ranks are stopped first and killed while stopped, so that only
/// the victim can be killed in the middle of a write.
#[test]
fn node_log_stays_readable_after_kill_9() {
    let tmp = tempdir();
    let dir = tmp.path().join("run");
    let _guard = mpit_testkit::job_lock();
    let err = tmp.path().join("stderr");
    let sampled = |dir: &Path| {
        let Ok(text) = std::fs::read_to_string(node_log_of(dir)?) else {
            return None;
        };
        let ranks: std::collections::BTreeSet<&str> = text
            .lines()
            .filter(|l| l.contains("\"type\":\"sample\""))
            .filter_map(|l| l.strip_prefix("{\"writer\":")?.split(',').next())
            .collect();
        (ranks.len() == RANKS as usize).then_some(text.len())
    };
    let (mut child, watched) = mpit_testkit::spawn_watched(
        &err,
        std::time::Duration::from_secs(60),
        |stderr| {
            let mut cmd = mpi_job(RANKS, &example("traffic"), &["allreduces=100000000"]);
            preload(&mut cmd, &dir);
            cmd.env("MPIT_TUNER_LOG_LAYOUT", "node")
                .env("MPIT_TUNER_INTERVAL", "5ms")
                .env("MPIT_TUNER_FLUSH", "5ms")
                .stdout(std::process::Stdio::null())
                .stderr(stderr)
                .spawn()
                .expect("the job starts")
        },
        || sampled(&dir).is_some(),
    );
    // Rank 1, which may be writing at this moment, goes first. The other
    // ranks are stopped before it (a stop lets a write in progress end:
    // only a fatal signal cuts one short) and killed while stopped, so
    // that no write of theirs is cut by the kills that end the job: a cut
    // line of theirs would be this test's own doing, not the writer's.
    let pids: std::collections::BTreeMap<u32, u64> = node_log_of(&dir)
        .map(|p| read_node_log_lenient(&p).0)
        .unwrap_or_default()
        .iter()
        .filter_map(|(rank, records)| Some((*rank, records.first()?["pid"].as_u64()?)))
        .collect();
    let others: Vec<u64> = pids
        .iter()
        .filter(|(rank, _)| **rank != 1)
        .map(|(_, pid)| *pid)
        .collect();
    let stopped = others.iter().all(|pid| stop(*pid));
    let victim = pids.get(&1).copied();
    let order: Vec<u64> = victim.iter().chain(&others).copied().collect();
    mpit_testkit::kill_job(&mut child, &order);
    assert!(
        watched == mpit_testkit::Watched::Ready && victim.is_some() && pids.len() == RANKS as usize,
        "{watched:?}: not every rank sampling in one node log within 60 s in {} (pids by \
         rank: {pids:?}); the job said:\n{}",
        dir.display(),
        std::fs::read_to_string(&err).unwrap_or_default()
    );
    assert!(
        stopped,
        "ranks {others:?} did not stop within 60 s of SIGSTOP"
    );
    let path = node_log_of(&dir).expect("the node's log");
    let names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".jsonl"))
        .collect();
    assert_eq!(names.len(), 1, "one log for the one node: {names:?}");
    let (per_rank, cut) = read_node_log_lenient(&path);
    assert_eq!(
        per_rank.keys().copied().collect::<Vec<_>>(),
        (0..RANKS).collect::<Vec<_>>()
    );
    for (rank, records) in &per_rank {
        assert_eq!(records[0]["type"], "header", "rank {rank}");
        assert_eq!(records[0]["rank"], *rank, "rank {rank}");
        assert_eq!(records[0]["layout"], "node", "rank {rank}");
        assert!(
            records.iter().any(|r| r["type"] == "sample"),
            "rank {rank} sampled"
        );
    }
    assert!(
        cut.iter().all(|(writer, _)| *writer == Some(1)) && cut.len() <= 1,
        "only the killed rank may leave a line cut short: {cut:?}"
    );
}

/// Stops process `pid` (SIGSTOP) and waits until every thread of it is
/// stopped, at most 60 s; whether it did. A thread in the middle of a
/// `write` to a file ends the write first.
fn stop(pid: u64) -> bool {
    let sent = Command::new("kill")
        .args(["-STOP", &pid.to_string()])
        .status()
        .is_ok_and(|s| s.success());
    let task = PathBuf::from(format!("/proc/{pid}/task"));
    let all_stopped = || {
        std::fs::read_dir(&task).is_ok_and(|threads| {
            threads.filter_map(|t| t.ok()).all(|t| {
                mpit_testkit::proc_stat_field(t.path().join("stat"), 0)
                    .is_some_and(|state| state == "T" || state == "t")
            })
        })
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while sent && !all_stopped() {
        if std::time::Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    sent
}

/// The node log in a run directory, if there is one.
fn node_log_of(dir: &Path) -> Option<PathBuf> {
    std::fs::read_dir(dir).ok()?.find_map(|e| {
        let path = e.ok()?.path();
        let name = path.file_name()?.to_str()?;
        (name.starts_with("node-") && name.ends_with(".jsonl")).then_some(path)
    })
}

/// A node's log read as it may be after a kill: the whole records per
/// writer, and the lines that are not (with the writer they start with).
#[allow(clippy::type_complexity)]
fn read_node_log_lenient(
    path: &Path,
) -> (
    std::collections::BTreeMap<u32, Vec<serde_json::Value>>,
    Vec<(Option<u32>, String)>,
) {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut whole: std::collections::BTreeMap<u32, Vec<serde_json::Value>> = Default::default();
    let mut cut = Vec::new();
    // A last line without its newline is one being written.
    let complete = match text.rfind('\n') {
        Some(end) => &text[..=end],
        None => "",
    };
    for line in complete.lines().filter(|l| !l.trim().is_empty()) {
        let writer = line
            .strip_prefix("{\"writer\":")
            .and_then(|r| r.split(',').next()?.parse().ok());
        match (writer, serde_json::from_str::<serde_json::Value>(line)) {
            (Some(w), Ok(v)) if v["type"].is_string() => whole.entry(w).or_default().push(v),
            _ => cut.push((writer, line.chars().take(80).collect())),
        }
    }
    (whole, cut)
}

// ---------------------------------------------------------------------------
// Every other call, in turn.

/// Where a call of the sweep is made in the test job.
#[derive(Clone, Copy)]
enum Made {
    /// On both libraries.
    Both,
    /// Only under Open MPI (MPICH exports no PVARs, enumerations or
    /// nested categories; MVAPICH2 2.3.7 no enumerations).
    OpenMpi,
    /// Under the libraries that export PVARs and nested categories: Open
    /// MPI and MVAPICH2 (not MPICH).
    WithPvars,
    /// Only where the library exports non-continuous PVARs, which must be
    /// started and stopped: MVAPICH2 (most of its `mv2_*` PVARs), not MPICH
    /// or Open MPI.
    NonContinuous,
    /// Not in a job: the call belongs to the command-line tool.
    Never(&'static str),
}

/// One row of the sweep.
struct Row {
    /// `MPIT_FAULT` items (comma-separated, each without `@RANK`).
    fault: &'static str,
    /// Whether the job runs the write policy (else the default policies).
    write: bool,
    made: Made,
    /// What the tool must say (standard error or logs) when it is made.
    said: &'static str,
}

const fn row(fault: &'static str, write: bool, made: Made, said: &'static str) -> Row {
    Row {
        fault,
        write,
        made,
        said,
    }
}

/// The calls the tests above do not fail one by one. `MPI_Error_class` and
/// `MPI_Error_string` are called only to describe another failure, so they
/// fail together with one.
const SWEEP: &[Row] = &[
    row(
        "MPI_T_cvar_get_info",
        false,
        Made::Both,
        "MPI_T_cvar_get_info failed",
    ),
    row(
        "MPI_T_pvar_get_num",
        false,
        Made::Both,
        "MPI_T_pvar_get_num failed",
    ),
    row(
        "MPI_T_category_get_num",
        false,
        Made::Both,
        "MPI_T_category_get_num failed",
    ),
    row(
        "MPI_T_category_get_info",
        false,
        Made::Both,
        "MPI_T_category_get_info failed",
    ),
    row(
        "MPI_T_category_get_cvars",
        false,
        Made::Both,
        "MPI_T_category_get_cvars failed",
    ),
    row(
        "MPI_T_pvar_get_info",
        false,
        Made::WithPvars,
        "MPI_T_pvar_get_info failed",
    ),
    row(
        "MPI_T_category_get_pvars",
        false,
        Made::WithPvars,
        "MPI_T_category_get_pvars failed",
    ),
    row(
        "MPI_T_category_get_categories",
        false,
        Made::WithPvars,
        "MPI_T_category_get_categories failed",
    ),
    row(
        "MPI_T_enum_get_info",
        false,
        Made::OpenMpi,
        "MPI_T_enum_get_info failed",
    ),
    row(
        "MPI_T_enum_get_item",
        false,
        Made::OpenMpi,
        "MPI_T_enum_get_item failed",
    ),
    row(
        "MPI_T_pvar_handle_free",
        false,
        Made::WithPvars,
        "MPI_T_pvar_handle_free failed",
    ),
    row(
        "MPI_T_pvar_handle_alloc:null",
        false,
        Made::WithPvars,
        "MPI_T_PVAR_HANDLE_NULL",
    ),
    row(
        "MPI_T_pvar_session_create:null",
        false,
        Made::Both,
        "MPI_T_PVAR_SESSION_NULL",
    ),
    row(
        "MPI_T_cvar_handle_alloc",
        true,
        Made::Both,
        "MPI_T_cvar_handle_alloc failed",
    ),
    row(
        "MPI_T_cvar_handle_alloc:null",
        true,
        Made::Both,
        "MPI_T_CVAR_HANDLE_NULL",
    ),
    row(
        "MPI_T_cvar_read",
        true,
        Made::Both,
        "MPI_T_cvar_read failed",
    ),
    row(
        "MPI_T_cvar_handle_free",
        true,
        Made::Both,
        "MPI_T_cvar_handle_free failed",
    ),
    row(
        "PMPI_Errhandler_free",
        false,
        Made::Both,
        "MPI_Errhandler_free failed",
    ),
    row(
        "PMPI_Group_free",
        false,
        Made::Never(
            "the tool makes a communicator only for collective tuning (collectives.rs tests it)",
        ),
        "",
    ),
    row(
        "PMPI_Type_free",
        false,
        Made::Both,
        "freeing the tool's reduction operation",
    ),
    row("PMPI_Comm_rank", false, Made::Both, "MPI_Comm_rank failed"),
    row("PMPI_Comm_size", false, Made::Both, "MPI_Comm_size failed"),
    row(
        "PMPI_Error_class,PMPI_Comm_size",
        false,
        Made::Both,
        "MPI_Comm_size failed",
    ),
    row(
        "PMPI_Error_string,PMPI_Comm_size",
        false,
        Made::Both,
        "MPI_Comm_size failed",
    ),
    row(
        "MPI_T_cvar_get_index",
        true,
        Made::Never("the command-line tool's lookups; the preload uses the catalogue"),
        "",
    ),
    row(
        "MPI_T_pvar_get_index",
        false,
        Made::Never("the command-line tool's lookups; the preload uses the catalogue"),
        "",
    ),
    row(
        "MPI_T_pvar_start",
        false,
        Made::NonContinuous,
        "MPI_T_pvar_start failed",
    ),
    row(
        "MPI_T_pvar_stop",
        false,
        Made::NonContinuous,
        "MPI_T_pvar_stop failed",
    ),
];

/// Each call of [`SWEEP`] fails on every rank, then on rank 1 only: the
/// application is unchanged and the tool names the failure. A call the
/// table says is not made must indeed never be injected (one job, the
/// fault on every rank), so the table stays true when the tool changes.
#[test]
fn every_other_call_fails_in_turn() {
    let tmp = tempdir();
    let policy = write_policy(tmp.path());
    for row in SWEEP {
        let made = match row.made {
            Made::Both => true,
            Made::OpenMpi => flavor() == "openmpi",
            Made::WithPvars => flavor() == "openmpi" || cfg!(mpi_library = "mvapich2"),
            Made::NonContinuous => cfg!(mpi_library = "mvapich2"),
            Made::Never(_) => false,
        };
        let one_rank = row
            .fault
            .split(',')
            .map(|item| match item.split_once(':') {
                Some((name, how)) => format!("{name}@1:{how}"),
                None => format!("{item}@1"),
            })
            .collect::<Vec<_>>()
            .join(",");
        // A call not made on any rank is not made on rank 1 either: one job.
        let faults = if made {
            vec![row.fault.to_string(), one_rank]
        } else {
            vec![row.fault.to_string()]
        };
        for fault in faults {
            let f = run_with(&fault, row.write.then_some(policy.as_path()));
            if made {
                assert!(
                    f.injected,
                    "{fault}: the fault was never injected: {}",
                    f.context
                );
                assert!(
                    f.stderr.contains(row.said) || f.logs.contains(row.said),
                    "{fault}: expected the tool to say {:?}:\n{}\n{}",
                    row.said,
                    f.logs,
                    f.context
                );
                if row.fault == "MPI_T_pvar_start" {
                    // Hundreds of variables refused: one warning per rank
                    // for those bound to no object, one for those of
                    // MPI_COMM_WORLD (traffic's one communicator), not one
                    // per variable.
                    let warned = f.logs.matches("cannot start").count();
                    assert!(
                        (1..=2 * RANKS as usize).contains(&warned),
                        "{fault}: {warned} start warnings in the logs of {RANKS} ranks:\n{}",
                        f.logs
                    );
                }
            } else {
                assert!(
                    !f.injected,
                    "{fault}: the table says this call is not made here, yet it was: {}",
                    f.context
                );
                let why = match row.made {
                    Made::Never(why) => why,
                    Made::NonContinuous => {
                        "only for non-continuous PVARs, which MPICH and Open MPI do not export"
                    }
                    _ if cfg!(mpi_library = "mvapich2") => "MVAPICH2 2.3.7 exports no enumerations",
                    _ => "MPICH exports no PVARs, enumerations or nested categories",
                };
                println!("{fault}: not made in a {} job: {why}", flavor());
            }
        }
    }
}
