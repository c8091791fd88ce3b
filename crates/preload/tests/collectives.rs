//! Online collective tuning in real MPI jobs.
//!
//! `examples/c/coll_check.c` checks every result of the seven tunable
//! collectives, bit for bit (integer data), on five communicators whose
//! collectives interleave (world, a dup, the rows and columns of a 2-D
//! grid, an even/odd split), from 0 bytes to 4 MiB; its reductions also
//! run with a non-commutative user-defined operation (composing affine
//! maps, on a derived datatype), whose result depends on the order the
//! algorithm combines the ranks' operands in. Under the most
//! aggressive tuning (a window of one call, every algorithm the library
//! has) its output must be the same as without the tool, on an odd and a
//! power-of-two number of ranks, and the tuning records of every
//! communicator must be identical on all its ranks: that is what makes the
//! switching safe. The same holds on 2 nodes of the emulated cluster
//! (`scripts/cluster.sh`), where Open MPI 5.0 leaves the communicators
//! over both nodes untuned.
//!
//! `examples/c/coll_witness.c` re-checks, without the tool, the fact the
//! tuner's support table rests on: when a value written through MPI_T after
//! `MPI_Init` takes effect (MPICH 4.0: at the next call; Open MPI 4.1: only
//! for communicators created afterwards; MVAPICH2 2.3.7: never, only a
//! setting made before start). Its verdict must be the table's
//! (`support()`) for the library version it ran on.

mod common;

use common::*;
use mpit_testkit::Job;
use serde_json::Value;
use std::collections::BTreeMap;

/// coll_check under the tool with collective tuning asked for (`env` may
/// say otherwise).
fn tuned(ranks: u32, args: &[&str], dir: &std::path::Path, env: &[(&str, &str)]) -> Job {
    check_job(ranks, args, dir, None, env)
}

/// [`tuned`] with the fault-injection library loaded after the tool,
/// injecting `fault` (`MPIT_FAULT`). (Its tests are MPICH's.)
#[cfg_attr(not(mpi_flavor = "mpich"), allow(dead_code))]
fn faulted(
    ranks: u32,
    args: &[&str],
    dir: &std::path::Path,
    fault: &str,
    env: &[(&str, &str)],
) -> Job {
    check_job(ranks, args, dir, Some(fault), env)
}

fn check_job(
    ranks: u32,
    args: &[&str],
    dir: &std::path::Path,
    fault: Option<&str>,
    env: &[(&str, &str)],
) -> Job {
    tuned_job(
        mpi_job(ranks, &example("coll_check"), args),
        dir,
        fault,
        env,
    )
}

/// `cmd` (an MPI job without the tool) under the tool with collective
/// tuning asked for, `fault` injected after it when given.
fn tuned_job(
    mut cmd: std::process::Command,
    dir: &std::path::Path,
    fault: Option<&str>,
    env: &[(&str, &str)],
) -> Job {
    preload(&mut cmd, dir);
    cmd.env("MPIT_TUNER_COLLECTIVES", "tune");
    if let Some(fault) = fault {
        let preloads = format!("{}:{}", preload_lib().display(), fault_lib().display());
        cmd.env("LD_PRELOAD", preloads).env("MPIT_FAULT", fault);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    mpit_testkit::run(cmd)
}

/// coll_fingerprint (`1024 calls=<calls>`) on `ranks` ranks under the
/// tool, tuning allreduce only with windows of one call, no policy, the
/// fault-injection library loaded after the tool injecting `fault`; logs
/// in `dir`.
fn fingerprint_faulted(
    ranks: u32,
    calls: u32,
    extra: &[&str],
    fault: &str,
    dir: &std::path::Path,
) -> Job {
    let calls = format!("calls={calls}");
    let args: Vec<&str> = ["1024", &calls]
        .into_iter()
        .chain(extra.iter().copied())
        .collect();
    let mut cmd = mpi_job(ranks, &example("coll_fingerprint"), &args);
    preload(&mut cmd, dir);
    let preloads = format!("{}:{}", preload_lib().display(), fault_lib().display());
    cmd.env("LD_PRELOAD", preloads)
        .env("MPIT_FAULT", fault)
        .env("MPIT_TUNER_POLICY", "none")
        .env("MPIT_TUNER_COLLECTIVES", "allreduce")
        .env("MPIT_TUNER_COLLECTIVES_WINDOW", "1");
    if cfg!(mpi_flavor = "openmpi") {
        cmd.env(DYNAMIC_RULES.0, DYNAMIC_RULES.1);
    }
    mpit_testkit::run(cmd)
}

/// Whether online collective tuning can run with this build's library;
/// else says why the test does not apply. MVAPICH2 2.3.7 reads its
/// algorithm variables at start only, so the tool keeps online tuning off
/// there and says why (tests/mvapich2.rs), and `mpit-tuner tune` tunes it
/// across runs instead (crates/mpit-tuner/tests/tune.rs).
fn online_tuning_here(test: &str) -> bool {
    if cfg!(mpi_library = "mvapich2") {
        mpit_testkit::not_applicable(
            test,
            "online collective tuning is off on MVAPICH2 2.3.7, which reads its algorithm \
             variables at start only (tests/mvapich2.rs checks that the tool says so; \
             `mpit-tuner tune` tunes it across runs)",
        );
        return false;
    }
    true
}

/// The `collective` records of a rank, without their time.
fn tuning_records(log: &RankLog) -> Vec<Value> {
    log.of_type("collective")
        .map(|r| {
            let mut r = r.clone();
            r.as_object_mut().unwrap().remove("t");
            r
        })
        .collect()
}

/// The message of a rank's one `start` record of collective tuning
/// (asserted: exactly one).
fn start_message(log: &RankLog) -> String {
    let start: Vec<Value> = tuning_records(log)
        .into_iter()
        .filter(|r| r["event"] == "start")
        .collect();
    assert_eq!(start.len(), 1, "rank {}: {start:?}", log.rank);
    start[0]["message"].as_str().unwrap().to_string()
}

/// The allreduce candidates rank 0's start line lists on a job's standard
/// error (`collective tuning on: allreduce (a, b, ...); ...`). (Its tests
/// are MPICH's.)
#[cfg_attr(not(mpi_flavor = "mpich"), allow(dead_code))]
fn allreduce_candidates(err: &str) -> &str {
    err.split_once("collective tuning on: allreduce (")
        .and_then(|(_, rest)| rest.split_once(')'))
        .map(|(list, _)| list)
        .unwrap_or_else(|| panic!("no allreduce candidates in:\n{err}"))
}

/// Asserts that every communicator's records are the same on all the ranks
/// that have them; returns the records by communicator label.
fn same_on_every_rank(logs: &[RankLog]) -> BTreeMap<String, Vec<Value>> {
    let mut by_comm: BTreeMap<String, (u32, Vec<Value>)> = BTreeMap::new();
    for log in logs {
        let mut mine: BTreeMap<String, Vec<Value>> = BTreeMap::new();
        for r in tuning_records(log) {
            let comm = r["comm"].as_str().unwrap_or_default().to_string();
            if !comm.is_empty() {
                mine.entry(comm).or_default().push(r);
            }
        }
        for (comm, records) in mine {
            match by_comm.get(&comm) {
                None => {
                    by_comm.insert(comm, (log.rank, records));
                }
                Some((first, theirs)) => assert_eq!(
                    &records, theirs,
                    "communicator {comm}: rank {} and rank {first} logged different tuning",
                    log.rank
                ),
            }
        }
    }
    by_comm.into_iter().map(|(k, (_, v))| (k, v)).collect()
}

#[test]
fn the_witness_says_when_a_written_algorithm_takes_effect() {
    if cfg!(mpi_library = "mvapich2") {
        the_witness_on_mvapich2();
        return;
    }
    let mut cmd = mpi_job(3, &example("coll_witness"), &[]);
    if cfg!(mpi_flavor = "openmpi") {
        cmd.env("OMPI_MCA_coll_tuned_use_dynamic_rules", "1");
    }
    let job = mpit_testkit::run(cmd);
    job.assert_success();
    let out = job.stdout();
    let expected = if cfg!(mpi_flavor = "mpich") {
        // MPICH 4.0: the next call uses the written value.
        "coll_witness: MPIR_CVAR_ALLTOALL_INTRA_ALGORITHM: next call"
    } else {
        // Open MPI 4.1: the write is accepted, the running communicator
        // ignores it, a new one uses it.
        "coll_witness: coll_tuned_allgather_algorithm: next communicator"
    };
    assert!(out.contains(expected), "{out}\n{}", job.stderr());
    assert!(out.contains("default back accepted, then ok"), "{out}");
    the_table_agrees_with_the_witness("this build's library", &out);
}

/// MVAPICH2 2.3.7: alltoall's `inplace_alltoall` (its value from the
/// tuner's table, the argument of coll_witness) gets a strided send wrong.
/// Set in the environment, the first call already fails (the control: the
/// witness sees the algorithm); written after `MPI_Init`, no call fails,
/// on the same communicator or a new one: "start only", as the support
/// table says.
fn the_witness_on_mvapich2() {
    use tuner_core::collectives::{mvapich2_named, Collective};
    let version = mpit::quirks::LibraryVersion::parse("MVAPICH2 Version : 2.3.7");
    let value = mvapich2_named(version, Collective::Alltoall)
        .expect("MVAPICH2 2.3.7's alltoall algorithms")
        .into_iter()
        .find(|(name, _)| name == "inplace_alltoall")
        .expect("inplace_alltoall in the table")
        .1
        .to_string();
    let variable = "MPIR_CVAR_ALLTOALL_COLLECTIVE_ALGORITHM";
    let mut control = mpi_job(3, &example("coll_witness"), &[value.as_str()]);
    control.env(variable, &value);
    let control = mpit_testkit::run(control);
    control.assert_success();
    assert!(
        control.stdout().contains("coll_witness: default fails;"),
        "{variable}={value} in the environment should make the strided alltoall wrong:\n{}\n{}",
        control.stdout(),
        control.stderr()
    );
    let job = mpit_testkit::run(mpi_job(3, &example("coll_witness"), &[value.as_str()]));
    job.assert_success();
    let out = job.stdout();
    assert!(
        out.contains(&format!(
            "coll_witness: default ok; write {variable}={value} accepted; same communicator ok; \
             new communicator ok; default back accepted, then ok"
        )),
        "{out}\n{}",
        job.stderr()
    );
    assert!(
        out.contains(&format!("coll_witness: {variable}: start only")),
        "{out}"
    );
    the_table_agrees_with_the_witness("this build's library", &out);
}

/// The witness's verdict is what the support table says for the library
/// version the witness printed: the table is measured, not assumed.
fn the_table_agrees_with_the_witness(name: &str, out: &str) {
    use tuner_core::collectives::support;
    let version = out
        .lines()
        .find_map(|l| l.strip_prefix("coll_witness: library: "))
        .unwrap_or_else(|| panic!("{name}: no library line: {out}"));
    let verdict = out
        .lines()
        .filter_map(|l| l.strip_prefix("coll_witness: "))
        .find_map(|l| l.split_once(": ").filter(|(k, _)| k.contains('_')))
        .map(|(_, v)| v)
        .unwrap_or_else(|| panic!("{name}: no verdict: {out}"));
    let table = support(mpit::quirks::LibraryVersion::parse(version));
    assert_eq!(
        verdict,
        table.when(),
        "{name}: the witness measured `{verdict}` on {version}, the support table says \
         {table:?}"
    );
}

/// The witness again under the registry wheels (MPICH 5.0.2,
/// in its own ABI and in the MPI-5 standard ABI, and Open MPI 5.0.11),
/// whatever library this build is for: the facts behind `support()` and
/// `mpich5_algorithms` for those versions. The wheels are found through
/// the variables `scripts/mpi-wheels.sh` prints; without them the case is
/// skipped and says why.
#[test]
fn the_witness_under_the_mpi5_wheels() {
    let cases = [
        (
            "MPICH 5.0.2",
            "MPIT_MPICH5_MPICC",
            "MPIT_MPICH5_MPIEXEC",
            "coll_witness: MPIR_CVAR_ALLTOALL_INTRA_ALGORITHM: next call",
        ),
        (
            "MPICH 5.0.2, MPI-5 standard ABI",
            "MPIT_MPICH5_MPICC_ABI",
            "MPIT_MPICH5_MPIEXEC",
            "coll_witness: MPIR_CVAR_ALLTOALL_INTRA_ALGORITHM: next call",
        ),
        (
            "Open MPI 5.0.11",
            "MPIT_OMPI5_MPICC",
            "MPIT_OMPI5_MPIEXEC",
            "coll_witness: coll_tuned_allgather_algorithm: next communicator",
        ),
    ];
    let tmp = tempdir();
    for (name, cc, exec, expected) in cases {
        let (Some(cc), Some(exec)) = (std::env::var_os(cc), std::env::var_os(exec)) else {
            eprintln!(
                "skipped {name}: {cc} and {exec} are not set (eval \"$(bash scripts/mpi-wheels.sh)\")"
            );
            continue;
        };
        let program = tmp.path().join(format!("coll_witness-{}", name.len()));
        let status = std::process::Command::new(&cc)
            .arg("-o")
            .arg(&program)
            .arg(repo_root().join("examples/c/coll_witness.c"))
            .status()
            .unwrap_or_else(|e| panic!("{name}: cannot run {cc:?}: {e}"));
        assert!(status.success(), "{name}: {cc:?} failed");
        let mut cmd = std::process::Command::new("timeout");
        cmd.arg(mpit_testkit::timeout().to_string())
            .arg(&exec)
            .args(["-n", "3"])
            .arg(&program)
            .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
            // Open MPI 5's launcher (PRRTE) ignores OMPI_MCA_rmaps_*.
            .env("PRTE_MCA_rmaps_default_mapping_policy", ":oversubscribe")
            .env("OMPI_MCA_coll_tuned_use_dynamic_rules", "1")
            // The wheels' programs find their library through RUNPATH.
            .env_remove("LD_LIBRARY_PATH");
        clean_env(&mut cmd);
        let job = mpit_testkit::run(cmd);
        job.assert_success();
        let out = job.stdout();
        assert!(out.contains(expected), "{name}: {out}\n{}", job.stderr());
        assert!(
            out.contains("default back accepted, then ok"),
            "{name}: {out}"
        );
        the_table_agrees_with_the_witness(name, &out);
    }
}

/// Open MPI 4.1 reads a forced algorithm only with its dynamic rules on,
/// a setting it reads only at start: set as `mpit-tuner run
/// --tune-collectives` sets it (other libraries ignore it).
const DYNAMIC_RULES: (&str, &str) = ("OMPI_MCA_coll_tuned_use_dynamic_rules", "1");

#[test]
fn every_result_is_right_under_the_most_aggressive_tuning() {
    if !online_tuning_here("every_result_is_right_under_the_most_aggressive_tuning") {
        return;
    }
    // 3 and 4 ranks on a 2-core machine: even with the progress throttle
    // that testkit's launcher_env sets, MPICH 5 needs far longer than
    // MPICH 4 here, and 8 rounds still give every communicator its searches.
    // On Open MPI every call of a candidate runs on the candidate's own
    // communicator.
    for ranks in [3, 4] {
        let tmp = tempdir();
        let plain = mpit_testkit::run(mpi_job(ranks, &example("coll_check"), &["8"]));
        plain.assert_success();
        let dir = tmp.path().join("run");
        // Windows of exactly one call from the job's first call on.
        let job = tuned(
            ranks,
            &["8"],
            &dir,
            &[("MPIT_TUNER_COLLECTIVES_WINDOW", "1"), DYNAMIC_RULES],
        );
        job.assert_success();
        assert_same_stdout(&plain, &job, |_| false);
        assert!(
            job.stderr().contains("collective tuning on: allreduce"),
            "{}",
            job.stderr()
        );
        let logs = read_run_dir(&dir, ranks);
        for log in &logs {
            let message = start_message(log);
            for c in [
                "allreduce",
                "bcast",
                "reduce ",
                "allgather",
                "alltoall",
                "reduce_scatter_block",
                "barrier",
            ] {
                assert!(message.contains(c), "rank {}: {message}", log.rank);
            }
            assert!(message.contains("window 1 calls"), "{message}");
            if cfg!(mpi_flavor = "openmpi") {
                // What this version never runs right on every call is left
                // out at start, with one record, and is not a candidate.
                let (collective, name) = if mpit_testkit::open_mpi_major() >= Some(5) {
                    ("allgather", "sparbit")
                } else {
                    ("alltoall", "modified_bruck")
                };
                let listed = message
                    .split("; ")
                    .find(|s| s.starts_with(&format!("{collective} (")))
                    .unwrap_or_else(|| panic!("no {collective} in {message}"));
                assert!(!listed.contains(name), "rank {}: {listed}", log.rank);
                let said = tuning_records(log).into_iter().any(|r| {
                    r["event"] == "skipped"
                        && r["message"].as_str().is_some_and(|m| {
                            m.contains(&format!("coll_tuned_{collective}_algorithm: `{name}`"))
                                && m.ends_with("never tried")
                        })
                });
                assert!(said, "rank {}: no record leaves out {name}", log.rank);
            }
        }
        let by_comm = same_on_every_rank(&logs);
        // World, dup and the column and parity communicators of two ranks
        // or more (communicators of one rank are not tuned): 4 on 3 ranks
        // (a 3x1 grid), 8 on 4 (2x2).
        let expected = if ranks == 3 { 4 } else { 8 };
        assert_eq!(by_comm.len(), expected, "{:?}", by_comm.keys());
        let all: Vec<&Value> = by_comm.values().flatten().collect();
        let decisions = all.iter().filter(|r| r["event"] == "decision").count();
        assert!(decisions >= 20, "only {decisions} decisions");
        // Candidates other than the default really ran.
        assert!(
            all.iter()
                .any(|r| r["event"] == "trial" && r["value"].as_i64() > Some(0)),
            "no trial of another algorithm"
        );
        for r in &all {
            assert!(
                ![
                    "reduction_failed",
                    "write_failed",
                    "setup_failed",
                    "call_failed",
                    "stopped"
                ]
                .contains(&r["event"].as_str().unwrap()),
                "{r}"
            );
        }
        if cfg!(mpi_flavor = "openmpi") {
            // two_proc is left out on every communicator of more than two
            // processes, and tried on those of two.
            let excluded = |size: i64| {
                all.iter().any(|r| {
                    r["event"] == "excluded"
                        && r["comm_size"] == size
                        && r["message"].as_str().unwrap().contains("`two_proc`")
                })
            };
            assert!(excluded(i64::from(ranks)), "{all:?}");
            assert!(!excluded(2), "{all:?}");
            assert!(
                all.iter()
                    .any(|r| r["event"] == "trial" && r["algorithm"] == "two_proc"),
                "two_proc never tried on a communicator of two"
            );
        }
    }
}

/// The default, nothing asked (no `MPIT_TUNER_COLLECTIVES`, Open MPI's
/// dynamic rules left to the tool), with windows of one call: every
/// result of `coll_check` (floating-point reductions, which stay on the
/// library's choice, a non-commutative user-defined operation on a derived
/// datatype, integer reductions and data movement, which are tuned) is bit
/// for bit that of the run without the tool; tuning started in mode
/// `safe` on every rank, searched, and rank 0 said nothing at start. On
/// MVAPICH2, where online tuning is off, the results are checked the same
/// way and every rank's log says why tuning is off.
#[test]
fn every_result_is_right_in_the_default_mode() {
    let ranks = 4;
    let tmp = tempdir();
    let plain = mpit_testkit::run(mpi_job(ranks, &example("coll_check"), &["8"]));
    plain.assert_success();
    let dir = tmp.path().join("run");
    let mut cmd = mpi_job(ranks, &example("coll_check"), &["8"]);
    preload(&mut cmd, &dir);
    cmd.env("MPIT_TUNER_COLLECTIVES_WINDOW", "1");
    let job = mpit_testkit::run(cmd);
    job.assert_success();
    assert_same_stdout(&plain, &job, |_| false);
    assert!(
        !job.stderr().contains("collective tuning"),
        "{}",
        job.stderr()
    );
    let logs = read_run_dir(&dir, ranks);
    if cfg!(mpi_library = "mvapich2") {
        // Off on every rank with the reason in the log, and nothing said
        // on the job's streams (above): the default asked for nothing.
        for log in &logs {
            let records = tuning_records(log);
            assert_eq!(records.len(), 1, "rank {}: {records:?}", log.rank);
            assert_eq!(records[0]["event"], "off", "rank {}", log.rank);
            let why = records[0]["message"].as_str().unwrap_or_default();
            assert!(why.contains("keeps the algorithm chosen at start"), "{why}");
        }
        return;
    }
    for log in &logs {
        let message = start_message(log);
        assert!(
            message.contains(" in mode safe; window 1 calls"),
            "{message}"
        );
    }
    let by_comm = same_on_every_rank(&logs);
    let all: Vec<&Value> = by_comm.values().flatten().collect();
    assert!(
        all.iter().any(|r| r["event"] == "decision"),
        "no search ended: {all:?}"
    );
    for r in &all {
        assert!(
            ![
                "reduction_failed",
                "write_failed",
                "setup_failed",
                "call_failed",
                "stopped"
            ]
            .contains(&r["event"].as_str().unwrap()),
            "{r}"
        );
    }
    assert_eq!(check_summary(&dir, ranks)["collective_mode"], "safe");
}

/// The distinct piece patterns per rank that `coll_fingerprint calls=N`
/// printed.
fn fingerprints(out: &str) -> Vec<u32> {
    assert!(out.contains("40 allreduces ok"), "{out}");
    per_rank(out, "distinct op lengths:")
}

/// The numbers after `label` on its line, one a rank (`1 | 2 | 2`).
fn per_rank(out: &str, label: &str) -> Vec<u32> {
    out.split(label)
        .nth(1)
        .unwrap_or_else(|| panic!("no {label:?} in {out}"))
        .lines()
        .next()
        .unwrap()
        .split('|')
        .map(|n| n.trim().parse().unwrap())
        .collect()
}

/// The candidates really run, on each library its own way (MPICH: the
/// variable written around the call; Open MPI: the call on the candidate's
/// communicator): the pieces a user-defined sum is handed differ from
/// algorithm to algorithm, so tuned calls leave more distinct patterns
/// than the library's own choice alone. MPICH 5.0.2 is the exception: it
/// hands this sum the same pieces under every candidate (measured: 1 | 2 |
/// 2 | 2 with and without the tool, every trial logged), so there only the
/// results and the trials are checked; `coll_witness` shows that its
/// written algorithm takes effect.
#[test]
fn the_candidates_algorithms_really_run() {
    if !online_tuning_here("the_candidates_algorithms_really_run") {
        return;
    }
    let args = ["1024", "calls=40"];
    let plain = mpit_testkit::run(mpi_job(4, &example("coll_fingerprint"), &args));
    plain.assert_success();
    let untuned = fingerprints(&plain.stdout());
    let tmp = tempdir();
    let dir = tmp.path().join("run");
    let mut cmd = mpi_job(4, &example("coll_fingerprint"), &args);
    preload(&mut cmd, &dir);
    cmd.env("MPIT_TUNER_COLLECTIVES", "allreduce")
        .env("MPIT_TUNER_COLLECTIVES_WINDOW", "1")
        .env(DYNAMIC_RULES.0, DYNAMIC_RULES.1);
    let job = mpit_testkit::run(cmd);
    job.assert_success();
    let out = job.stdout();
    let tuned = fingerprints(&out);
    assert_eq!(tuned.len(), 4, "{out}");
    let logs = read_run_dir(&dir, 4);
    let library = mpit::quirks::LibraryVersion::parse(
        logs[0].header()["library_version"]
            .as_str()
            .unwrap_or_default(),
    );
    let mpich5 = cfg!(mpi_flavor = "mpich")
        && library
            .version
            .is_some_and(|v| v >= mpit::quirks::Version(5, 0, 0));
    if !mpich5 {
        assert!(
            tuned.iter().sum::<u32>() > untuned.iter().sum::<u32>(),
            "{library}: without the tool {untuned:?}, tuned {tuned:?}\n{}",
            job.stderr()
        );
    }
    let by_comm = same_on_every_rank(&logs);
    let trials = by_comm
        .values()
        .flatten()
        .filter(|r| r["event"] == "trial" && r["value"].as_i64() > Some(0))
        .count();
    assert!(trials >= 2, "{by_comm:?}");
}

/// An algorithm forced in the environment at start is the default the
/// search measures first, and MPICH's own selection (`auto`, which the
/// shipped policy lists) becomes a candidate like the others.
#[cfg(mpi_flavor = "mpich")]
#[test]
fn an_algorithm_forced_at_start_is_the_default_and_auto_a_candidate() {
    if !online_tuning_here("an_algorithm_forced_at_start_is_the_default_and_auto_a_candidate") {
        return;
    }
    let tmp = tempdir();
    let dir = tmp.path().join("run");
    let mut cmd = mpi_job(2, &example("coll_bench"), &["allreduce", "1024", "50"]);
    preload(&mut cmd, &dir);
    cmd.env("MPIT_TUNER_COLLECTIVES", "allreduce")
        .env("MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM", "recursive_doubling");
    let job = mpit_testkit::run(cmd);
    job.assert_success();
    // The shipped table's names this MPICH has, the forced one first:
    // 4.0's, or 5.0's (which has more; 4.1 would have its own, and there
    // is no 4.1 here).
    let err = job.stderr();
    let allreduce = allreduce_candidates(&err);
    assert!(
        [
            "recursive_doubling, auto, nb, smp, reduce_scatter_allgather",
            "recursive_doubling, auto, nb, smp, recursive_multiplying, reduce_scatter_allgather, \
             tree, recexch, ring, k_reduce_scatter_allgather"
        ]
        .contains(&allreduce),
        "{err}"
    );
    assert!(job
        .stdout()
        .contains("coll_bench: allreduce bytes=1024 iters=50"));
}

/// `MPIR_CVAR_COLLECTIVE_FALLBACK=error` makes MPICH fail a call whose
/// forced algorithm cannot serve its arguments, and `print` makes it print
/// a line on the rank; the tuner tries such candidates (the witness below:
/// coll_check has barriers that `smp` cannot serve). So the calls it
/// switches run with `silent`, and the application's own calls keep the
/// setting: the job succeeds, prints what it prints without the tool, and
/// the start record says so.
#[cfg(mpi_flavor = "mpich")]
#[test]
fn a_candidate_mpich_cannot_use_falls_back_whatever_the_fallback_setting() {
    if !online_tuning_here("a_candidate_mpich_cannot_use_falls_back_whatever_the_fallback_setting")
    {
        return;
    }
    let ranks = 4;
    let fell_back = |job: &Job| {
        let err = job.stderr();
        err.contains("cannot be applied") || err.contains("not usable for the provided arguments")
    };
    let mut witness = mpi_job(ranks, &example("coll_check"), &["1"]);
    witness
        .env("MPIR_CVAR_BARRIER_INTRA_ALGORITHM", "smp")
        .env("MPIR_CVAR_COLLECTIVE_FALLBACK", "print");
    let witness = mpit_testkit::run(witness);
    witness.assert_success();
    assert!(
        witness.stderr().contains("Barrier smp cannot be applied"),
        "coll_check no longer has a barrier `smp` cannot serve:\n{}",
        witness.stderr()
    );
    let plain = mpit_testkit::run(mpi_job(ranks, &example("coll_check"), &["2"]));
    plain.assert_success();
    for setting in ["error", "print"] {
        let tmp = tempdir();
        let dir = tmp.path().join("run");
        let job = tuned(
            ranks,
            &["2"],
            &dir,
            &[
                ("MPIT_TUNER_COLLECTIVES_WINDOW", "1"),
                ("MPIR_CVAR_COLLECTIVE_FALLBACK", setting),
            ],
        );
        job.assert_success();
        assert_same_stdout(&plain, &job, |_| false);
        assert!(!fell_back(&job), "{setting}: {}", job.stderr());
        let said = format!("MPIR_CVAR_COLLECTIVE_FALLBACK is {setting}: the calls switched");
        assert!(job.stderr().contains(&said), "{}", job.stderr());
        let logs = read_run_dir(&dir, ranks);
        for log in &logs {
            let records = tuning_records(log);
            let start = records.iter().find(|r| r["event"] == "start");
            let message = start
                .and_then(|r| r["message"].as_str())
                .unwrap_or_default();
            assert!(message.contains(&said), "rank {}: {message}", log.rank);
            for r in &records {
                assert!(
                    !["write_failed", "stopped", "reduction_failed"]
                        .contains(&r["event"].as_str().unwrap_or_default()),
                    "rank {}: {r}",
                    log.rank
                );
            }
        }
        // The candidate the witness showed unusable really ran.
        let tried_smp = same_on_every_rank(&logs).values().flatten().any(|r| {
            r["event"] == "trial" && r["collective"] == "barrier" && r["algorithm"] == "smp"
        });
        assert!(tried_smp, "{setting}: no trial of barrier `smp`");
    }
}

/// MPICH refusing, on one rank, to change the fallback variable
/// (faultinject's `=VARIABLE` rule fails the writes of a new value). At
/// start the tuner proves it can set `silent` and the application's value
/// back: refused there, tuning is off on every rank, and the logs name the
/// variable on that rank and that rank on the others. Refused on a call
/// (the third change on rank 1 is its first switched call: the start's
/// round trip made two), tuning stops on every rank at the next agreed
/// point. Either way the job succeeds with the results it has without the
/// tool.
#[cfg(mpi_flavor = "mpich")]
#[test]
fn the_fallback_variable_refused_on_one_rank_stops_tuning_on_all() {
    if !online_tuning_here("the_fallback_variable_refused_on_one_rank_stops_tuning_on_all") {
        return;
    }
    let ranks = 3;
    let var = "MPIR_CVAR_COLLECTIVE_FALLBACK";
    let plain = mpit_testkit::run(mpi_job(ranks, &example("coll_check"), &["2"]));
    plain.assert_success();
    for (at_start, fault, setting) in [
        (true, format!("MPI_T_cvar_write={var}@1"), "error"),
        (false, format!("MPI_T_cvar_write={var}#3@1"), "print"),
    ] {
        let tmp = tempdir();
        let dir = tmp.path().join("run");
        let env = [("MPIT_TUNER_COLLECTIVES_WINDOW", "1"), (var, setting)];
        let job = faulted(ranks, &["2"], &dir, &fault, &env);
        job.assert_success();
        assert_same_stdout(&plain, &job, |_| false);
        let err = job.stderr();
        assert!(
            err.contains(&format!("faultinject: rank 1: MPI_T_cvar_write of {var}")),
            "{fault}: the fault was not injected:\n{err}"
        );
        let logs = read_run_dir(&dir, ranks);
        for log in &logs {
            let records = tuning_records(log);
            let with = |event: &str| -> Vec<String> {
                records
                    .iter()
                    .filter(|r| r["event"] == event)
                    .map(|r| r["message"].as_str().unwrap_or_default().to_string())
                    .collect()
            };
            let trials = with("trial").len();
            if at_start {
                assert_eq!(trials, 0, "{fault}: rank {} tuned", log.rank);
                let off = with("off");
                assert_eq!(off.len(), 1, "{fault}: rank {}: {records:?}", log.rank);
                if log.rank == 1 {
                    assert!(
                        off[0].starts_with(&format!("{var}: `silent` ("))
                            && off[0].contains("refused"),
                        "{fault}: {off:?}"
                    );
                } else {
                    assert!(
                        with("skipped").iter().any(|n| n
                            .ends_with(": not tuned: rank 1 cannot tune it (its log says why)")),
                        "{fault}: rank {}: {records:?}",
                        log.rank
                    );
                }
            } else {
                assert!(trials > 0, "{fault}: rank {} never tuned", log.rank);
                let failed = with("write_failed");
                if log.rank == 1 {
                    assert_eq!(failed.len(), 1, "{fault}: {failed:?}");
                    assert!(failed[0].contains(var), "{fault}: {failed:?}");
                } else {
                    assert!(failed.is_empty(), "{fault}: rank {}: {failed:?}", log.rank);
                }
                assert!(
                    !with("stopped").is_empty(),
                    "{fault}: rank {} did not stop",
                    log.rank
                );
            }
        }
        if at_start {
            assert!(
                err.contains("mpit-tuner: collective tuning is off: "),
                "{err}"
            );
        } else {
            same_on_every_rank(&logs);
        }
    }
}

/// With `OMPI_MCA_coll_tuned_use_dynamic_rules=0` at start (a user's
/// setting, which the tool leaves): Open MPI 4.1 cannot turn the dynamic
/// rules on later, so tuning is off and says what to set; 5.0 turns them
/// on through MPI_T around each candidate communicator it creates, and
/// tunes. Without the variable, the tool sets it inside `MPI_Init`, and
/// both tune (the default mode, nothing asked).
#[cfg(mpi_flavor = "openmpi")]
#[test]
fn open_mpi_without_dynamic_rules_at_start() {
    let tmp = tempdir();
    let plain = mpit_testkit::run(mpi_job(3, &example("coll_check"), &["2"]));
    plain.assert_success();
    // Unset: the tool sets it, and tuning runs in its default mode.
    let dir = tmp.path().join("unset");
    let mut cmd = mpi_job(3, &example("coll_check"), &["2"]);
    preload(&mut cmd, &dir);
    cmd.env("MPIT_TUNER_COLLECTIVES_WINDOW", "1")
        .env_remove(DYNAMIC_RULES.0);
    let job = mpit_testkit::run(cmd);
    job.assert_success();
    assert_same_stdout(&plain, &job, |_| false);
    for log in &read_run_dir(&dir, 3) {
        let message = start_message(log);
        assert!(message.contains(" in mode safe;"), "{message}");
    }
    let dir = tmp.path().join("run");
    // Windows of one call: candidates run within the job's 2 rounds.
    let job = tuned(
        3,
        &["2"],
        &dir,
        &[
            ("MPIT_TUNER_COLLECTIVES_WINDOW", "1"),
            (DYNAMIC_RULES.0, "0"),
        ],
    );
    job.assert_success();
    assert_same_stdout(&plain, &job, |_| false);
    let logs = read_run_dir(&dir, 3);
    let version = logs[0].header()["library_version"]
        .as_str()
        .unwrap()
        .to_string();
    let major_minor = mpit::quirks::LibraryVersion::parse(&version).major_minor();
    if major_minor < Some((5, 0)) {
        assert!(
            job.stderr().contains("collective tuning is off: ")
                && job
                    .stderr()
                    .contains("OMPI_MCA_coll_tuned_use_dynamic_rules=1"),
            "{}",
            job.stderr()
        );
        for log in &logs {
            let records = tuning_records(log);
            assert_eq!(records.len(), 1, "rank {}: {records:?}", log.rank);
            assert_eq!(records[0]["event"], "off");
        }
    } else {
        assert!(
            job.stderr().contains("collective tuning on: allreduce"),
            "{version}: {}",
            job.stderr()
        );
        let by_comm = same_on_every_rank(&logs);
        assert!(
            by_comm
                .values()
                .flatten()
                .any(|r| r["event"] == "trial" && r["value"].as_i64() > Some(0)),
            "{by_comm:?}"
        );
    }
}

/// Open MPI: a candidate communicator that one rank's library fails to
/// create (an error, or a null communicator) turns tuning off on that
/// communicator on every rank, at the call that needed it; every call then
/// runs the library's own choice on the application's communicator. The
/// tool's second `MPI_Comm_create_group` in each process is that of the
/// first candidate (the first is collective tuning's private communicator
/// of the application's; the tool's own calls at `MPI_Init` make none).
#[cfg(mpi_flavor = "openmpi")]
#[test]
fn a_candidate_communicator_one_rank_cannot_make_turns_tuning_off_on_all() {
    for fault in [
        "PMPI_Comm_create_group#2@1",
        "PMPI_Comm_create_group#2@1:null",
    ] {
        let tmp = tempdir();
        let dir = tmp.path().join("run");
        let job = fingerprint_faulted(4, 40, &[], fault, &dir);
        job.assert_success();
        // Every call ran the library's own choice, and every result is right.
        assert!(
            job.stdout()
                .contains("40 allreduces ok; distinct op lengths: 1 | 1 | 1 | 1"),
            "{fault}: {}\n{}",
            job.stdout(),
            job.stderr()
        );
        // Rank 1 says what its library did on its standard error; the
        // records say the same on every rank.
        let own = if fault.ends_with(":null") {
            "MPI_COMM_NULL returned for the whole group"
        } else {
            "MPI_Comm_create_group failed with"
        };
        assert!(
            job.stderr().lines().any(
                |l| l.starts_with("mpit-tuner[rank 1]: collective tuning: ") && l.contains(own)
            ),
            "{fault}: {}",
            job.stderr()
        );
        let mut messages = Vec::new();
        for log in read_run_dir(&dir, 4) {
            let records = tuning_records(&log);
            let failed: Vec<&Value> = records
                .iter()
                .filter(|r| r["event"] == "setup_failed")
                .collect();
            assert_eq!(failed.len(), 1, "{fault}: rank {}: {records:?}", log.rank);
            let message = failed[0]["message"].as_str().unwrap();
            assert!(
                message.starts_with(
                    "creating the communicator of allreduce `basic_linear`: \
                     MPI_Comm_create_group failed on rank 1"
                ) && !message.contains("MPI_SUCCESS"),
                "{fault}: rank {}: {message}",
                log.rank
            );
            messages.push(message.to_string());
            // Nothing but the default was measured, and nothing decided.
            assert!(
                records.iter().all(|r| r["event"] != "decision"
                    && (r["event"] != "trial" || r["value"] == 0)),
                "{fault}: rank {}: {records:?}",
                log.rank
            );
        }
        messages.dedup();
        assert_eq!(messages.len(), 1, "{fault}: {messages:?}");
    }
}

/// A tuner reduction at an agreed point that returns an error on one rank
/// only (faultinject's collectives take part, then fail). That rank goes on
/// with what the reduction returned, as its peers do, and every rank stops
/// tuning at the next agreed point: no rank runs another algorithm than its
/// peers, so no call fails or hangs. (Before, that rank left the
/// communicator's searches and ran the default while its peers ran the
/// next candidate: MPICH ended the job with a bad termination.) From the
/// tool's 8th `MPI_Allreduce` in the process on (after the start on all
/// four libraries here), every one fails on rank 1; 200 calls leave agreed
/// points after it whatever the library's start made.
#[test]
fn a_reduction_that_fails_on_one_rank_stops_tuning_on_all() {
    if !online_tuning_here("a_reduction_that_fails_on_one_rank_stops_tuning_on_all") {
        return;
    }
    let ranks = 3;
    let tmp = tempdir();
    let dir = tmp.path().join("run");
    let job = fingerprint_faulted(ranks, 200, &[], "PMPI_Allreduce#8+@1", &dir);
    job.assert_success();
    assert!(
        job.stdout().contains("200 allreduces ok"),
        "{}\n{}",
        job.stdout(),
        job.stderr()
    );
    let logs = read_run_dir(&dir, ranks);
    let mut rest = Vec::new();
    for log in &logs {
        let records = tuning_records(log);
        let failed: Vec<&Value> = records
            .iter()
            .filter(|r| r["event"] == "reduction_failed")
            .collect();
        if log.rank == 1 {
            assert!(
                !failed.is_empty(),
                "no agreed point after the tool's 8th MPI_Allreduce on rank 1 (or tuning never \
                 started): {records:?}"
            );
            let message = failed[0]["message"].as_str().unwrap();
            assert!(
                message.starts_with("MPI_Allreduce failed")
                    && message.contains("going on with what it returned"),
                "{message}"
            );
        } else {
            assert!(failed.is_empty(), "rank {}: {failed:?}", log.rank);
        }
        assert!(
            records.iter().any(|r| r["event"] == "stopped"),
            "rank {}: {records:?}",
            log.rank
        );
        // Apart from that record, every rank logged the same tuning.
        let same: Vec<Value> = records
            .into_iter()
            .filter(|r| r["event"] != "reduction_failed")
            .collect();
        rest.push(same);
    }
    assert!(rest.windows(2).all(|w| w[0] == w[1]), "{rest:#?}");
}

/// `MPI_Type_size` fails on one rank for one tuned call (the 60th of the
/// program's loop of 200 allreduces of a derived datatype, whose size the
/// tuner asks at each call; a predefined one's it asked once): that rank cannot
/// tell the call's size bin, which its peers know. It counts the call in
/// the bin of the last allreduce on the communicator and stops tuning;
/// every rank stops at the next agreed point, and the results are right.
/// (Counted in the bin of 0 bytes instead, the call would put that rank's
/// agreed points one call after its peers', and the job would hang.)
#[test]
fn a_datatype_size_that_fails_on_one_rank_stops_tuning_on_all() {
    if !online_tuning_here("a_datatype_size_that_fails_on_one_rank_stops_tuning_on_all") {
        return;
    }
    let ranks = 3;
    let tmp = tempdir();
    let dir = tmp.path().join("run");
    let job = fingerprint_faulted(
        ranks,
        200,
        &["derived"],
        "PMPI_Type_size=derived#60@1",
        &dir,
    );
    job.assert_success();
    assert!(
        job.stdout().contains("200 allreduces ok"),
        "{}\n{}",
        job.stdout(),
        job.stderr()
    );
    let logs = read_run_dir(&dir, ranks);
    for log in &logs {
        let records = tuning_records(log);
        let failed: Vec<&Value> = records
            .iter()
            .filter(|r| r["event"] == "call_failed")
            .collect();
        if log.rank == 1 {
            assert_eq!(failed.len(), 1, "rank 1: {records:?}");
            let message = failed[0]["message"].as_str().unwrap();
            assert!(
                message.starts_with("MPI_Type_size failed on this rank")
                    && message.contains("size bin of the last allreduce"),
                "{message}"
            );
        } else {
            assert!(failed.is_empty(), "rank {}: {failed:?}", log.rank);
        }
        assert!(
            records.iter().any(|r| r["event"] == "stopped"),
            "rank {}: {records:?}",
            log.rank
        );
    }
}

/// Tuning on real nodes: coll_check on 2 ranks on each of the 2 nodes of
/// the emulated cluster (`scripts/cluster.sh`: network and UTS namespaces
/// of this machine, joined by a bridge; the ranks of a node share memory,
/// those of two nodes talk over TCP, and the launcher's locality is real).
/// Every result is the same as without the tool, and every communicator's
/// records are the same on all its ranks. Open MPI 5.0 runs the
/// collectives of a communicator over several nodes in coll/han, which
/// copies the forced algorithms on its own schedule: the tuner leaves
/// those out and tunes the communicators within one node. MPICH and Open
/// MPI 4.1 (coll/han not used by default) tune them all.
#[test]
fn tuning_on_two_nodes_is_agreed_and_every_result_right() {
    const TEST: &str = "tuning_on_two_nodes_is_agreed_and_every_result_right";
    let Some(cluster) = mpit_testkit::cluster::cluster_for(TEST, 2) else {
        return;
    };
    let per_node = 2;
    let check = example("coll_check");
    let plain = mpit_testkit::run(cluster_job(cluster, per_node, &check, &["2"]));
    plain.assert_success();
    let tmp = tempdir();
    let dir = tmp.path().join("run");
    let job = tuned_job(
        cluster_job(cluster, per_node, &check, &["2"]),
        &dir,
        None,
        &[("MPIT_TUNER_COLLECTIVES_WINDOW", "1"), DYNAMIC_RULES],
    );
    job.assert_success();
    assert_same_stdout(&plain, &job, |_| false);
    let logs = read_run_dir(&dir, 4);
    // Each communicator's nodes, from the hosts of the ranks that logged it.
    let mut hosts_of: BTreeMap<String, std::collections::BTreeSet<String>> = BTreeMap::new();
    for log in &logs {
        let host = cluster.host_of(log.rank, per_node);
        assert_eq!(log.header()["host"], host.as_str(), "rank {}", log.rank);
        for r in tuning_records(log) {
            if let Some(comm) = r["comm"].as_str() {
                hosts_of
                    .entry(comm.to_string())
                    .or_default()
                    .insert(host.clone());
            }
        }
    }
    let by_comm = same_on_every_rank(&logs);
    let tried = |records: &[Value]| {
        records
            .iter()
            .any(|r| r["event"] == "trial" && r["value"].as_i64() > Some(0))
    };
    let excluded = |records: &[Value]| {
        records.iter().any(|r| {
            r["event"] == "excluded"
                && r["message"]
                    .as_str()
                    .is_some_and(|m| m.starts_with("this communicator spans several nodes"))
        })
    };
    let spanning: Vec<&String> = hosts_of.keys().filter(|c| hosts_of[*c].len() > 1).collect();
    assert!(
        !spanning.is_empty() && spanning.len() < by_comm.len(),
        "coll_check has communicators within one node and over both: {hosts_of:?}"
    );
    let guarded = mpit_testkit::open_mpi_major() >= Some(5);
    for (comm, records) in &by_comm {
        let spans = hosts_of[comm].len() > 1;
        if guarded && spans {
            assert!(excluded(records), "{comm} spans nodes: {records:?}");
            assert!(!tried(records), "a candidate ran on {comm}, over nodes");
        } else {
            assert!(
                !excluded(records),
                "{comm} ({:?}): {records:?}",
                hosts_of[comm]
            );
        }
    }
    // Candidates ran where they may: on a communicator over both nodes
    // (MPICH, Open MPI 4.1), within one node (Open MPI 5).
    assert!(
        by_comm
            .iter()
            .any(|(comm, records)| (hosts_of[comm].len() > 1) != guarded && tried(records)),
        "no candidate ran on a communicator {}: {by_comm:?}",
        if guarded {
            "within one node"
        } else {
            "over both nodes"
        }
    );
}

#[test]
fn thread_multiple_keeps_tuning_off_and_says_why() {
    let tmp = tempdir();
    let dir = tmp.path().join("run");
    let job = tuned(2, &["2", "multiple"], &dir, &[]);
    job.assert_success();
    assert!(
        job.stdout().contains("coll_check: all results correct"),
        "{}",
        job.stdout()
    );
    for log in read_run_dir(&dir, 2) {
        let records = tuning_records(&log);
        assert_eq!(records.len(), 1, "rank {}: {records:?}", log.rank);
        assert_eq!(records[0]["event"], "off");
        assert!(
            records[0]["message"]
                .as_str()
                .unwrap()
                .contains("MPI_THREAD_MULTIPLE"),
            "{}",
            records[0]
        );
    }
}

#[cfg(mpi_flavor = "mpich")]
#[test]
fn bad_settings_are_named_and_the_rest_runs() {
    let tmp = tempdir();
    let dir = tmp.path().join("run");
    let mut cmd = mpi_job(2, &example("coll_check"), &["2"]);
    preload(&mut cmd, &dir);
    cmd.env("MPIT_TUNER_COLLECTIVES", "allreduce,frobnicate")
        .env("MPIT_TUNER_COLLECTIVES_WINDOW", "zero");
    let job = mpit_testkit::run(cmd);
    job.assert_success();
    let err = job.stderr();
    assert!(
        err.contains("MPIT_TUNER_COLLECTIVES: `frobnicate` is not a collective"),
        "{err}"
    );
    assert!(
        err.contains("MPIT_TUNER_COLLECTIVES_WINDOW=\"zero\""),
        "{err}"
    );
    if cfg!(mpi_library = "mvapich2") {
        assert!(err.contains("collective tuning is off: MVAPICH2"), "{err}");
        assert!(job.stdout().contains("coll_check: all results correct"));
        return;
    }
    assert!(
        err.contains("collective tuning on: allreduce (auto"),
        "{err}"
    );
    assert!(!err.contains("collective tuning on: allreduce (auto, nb, smp, recursive_doubling, reduce_scatter_allgather); bcast"), "{err}");
    assert!(job.stdout().contains("coll_check: all results correct"));
}

/// A candidate one rank's library refuses when it is tried at start is
/// dropped on every rank (a value refused at run time on one rank would run
/// that call with another algorithm than its peers), with the reason; the
/// other candidates are tuned and every result is right. On rank 1 the
/// third change of allreduce's variable is the trial of `smp` (`nb` and the
/// default back come first), whatever the tool writes to other variables.
#[cfg(mpi_flavor = "mpich")]
#[test]
fn a_candidate_refused_on_one_rank_is_dropped_on_all() {
    if !online_tuning_here("a_candidate_refused_on_one_rank_is_dropped_on_all") {
        return;
    }
    let tmp = tempdir();
    let plain = mpit_testkit::run(mpi_job(3, &example("coll_check"), &["4"]));
    plain.assert_success();
    let dir = tmp.path().join("run");
    let job = faulted(
        3,
        &["4"],
        &dir,
        "MPI_T_cvar_write=MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM#3@1",
        &[
            ("MPIT_TUNER_POLICY", "none"),
            ("MPIT_TUNER_COLLECTIVES", "allreduce,bcast"),
        ],
    );
    job.assert_success();
    assert_same_stdout(&plain, &job, |_| false);
    // MPICH 4.0: auto, nb, smp, recursive_doubling, reduce_scatter_allgather;
    // 5.0 has more after recursive_doubling. `smp` is gone in both.
    let err = job.stderr();
    let allreduce = allreduce_candidates(&err);
    assert!(
        allreduce.starts_with("auto, nb, recursive_doubling, ") && !allreduce.contains("smp"),
        "{err}"
    );
    assert!(err.contains("); bcast (auto, binomial"), "{err}");
    for log in read_run_dir(&dir, 3) {
        let notes: Vec<String> = tuning_records(&log)
            .iter()
            .filter(|r| r["event"] == "skipped")
            .map(|r| r["message"].as_str().unwrap().to_string())
            .collect();
        assert!(
            notes.iter().any(|n| n
                == "MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM: `smp` (2) dropped: refused on rank 1"),
            "rank {}: {notes:?}",
            log.rank
        );
        // Only rank 1 saw the refusal itself, with the library's error.
        let own = notes.iter().any(|n| n.contains("`smp` (2) refused:"));
        assert_eq!(own, log.rank == 1, "rank {}: {notes:?}", log.rank);
    }
    same_on_every_rank(&read_run_dir(&dir, 3));
}

/// A rank that takes a candidate at start but cannot write the default
/// back holds the candidate for the rest of the job: every rank must then
/// hold it too, or that rank's calls would run another algorithm than its
/// peers' (and the job would hang in the tool's own reduction). The
/// collective is not tuned, the other one is, and the job's results are
/// those of the untuned run. Allreduce (whose variable the tool's own
/// reductions read) and bcast.
#[cfg(mpi_flavor = "mpich")]
#[test]
fn a_rank_stuck_on_a_candidate_at_start_takes_every_rank_with_it() {
    if !online_tuning_here("a_rank_stuck_on_a_candidate_at_start_takes_every_rank_with_it") {
        return;
    }
    let plain = mpit_testkit::run(mpi_job(3, &example("coll_check"), &["2"]));
    plain.assert_success();
    for (stuck, var, held, other) in [
        (
            "allreduce",
            "MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM",
            "`nb` (1)",
            "bcast (auto, binomial",
        ),
        (
            "bcast",
            "MPIR_CVAR_BCAST_INTRA_ALGORITHM",
            "`binomial` (1)",
            "allreduce (auto, nb",
        ),
    ] {
        let tmp = tempdir();
        let dir = tmp.path().join("run");
        // Rank 1 takes the first candidate (the first change) and no change
        // after it.
        let fault = format!("MPI_T_cvar_write={var}#2+@1");
        let env = [
            ("MPIT_TUNER_POLICY", "none"),
            ("MPIT_TUNER_COLLECTIVES", "allreduce,bcast"),
            ("MPIT_TUNER_COLLECTIVES_WINDOW", "1"),
        ];
        let job = faulted(3, &["2"], &dir, &fault, &env);
        job.assert_success();
        assert_same_stdout(&plain, &job, |_| false);
        let err = job.stderr();
        assert!(
            err.contains(&format!("mpit-tuner: collective tuning on: {other}")),
            "{stuck}: {err}"
        );
        assert!(!err.contains(&format!("{stuck} (")), "{stuck}: {err}");
        let name = held.split('`').nth(1).unwrap();
        let logs = read_run_dir(&dir, 3);
        for log in &logs {
            let records = tuning_records(log);
            let notes: Vec<&str> = records
                .iter()
                .filter(|r| r["event"] == "skipped")
                .map(|r| r["message"].as_str().unwrap())
                .collect();
            assert!(
                notes.contains(
                    &format!(
                        "{var}: rank 1 holds {held} and cannot write the default back: every \
                         rank keeps `{name}` for the rest of the job, so that all run the same \
                         algorithm"
                    )
                    .as_str()
                ),
                "{stuck}: rank {}: {notes:?}",
                log.rank
            );
            let own = notes
                .iter()
                .any(|n| n.starts_with(&format!("{var}: writing the default back failed: ")));
            assert_eq!(own, log.rank == 1, "{stuck}: rank {}: {notes:?}", log.rank);
            assert!(
                !records
                    .iter()
                    .any(|r| r["event"] == "trial" && r["collective"] == stuck),
                "{stuck}: rank {} tuned it",
                log.rank
            );
        }
        same_on_every_rank(&logs);
    }
}

/// An application that writes an algorithm variable itself, through
/// MPI_T, mid-run on every rank: its value is left alone (it reads back at
/// the end, after calls the tuner would have switched), every rank logs
/// the write and stops tuning. Before the preload watched these writes the
/// tuner's next switch put its default over the application's value. A
/// write of the value set now changes nothing and tuning goes on.
#[cfg(mpi_flavor = "mpich")]
#[test]
fn an_algorithm_the_application_writes_itself_is_left_to_it() {
    if !online_tuning_here("an_algorithm_the_application_writes_itself_is_left_to_it") {
        return;
    }
    let var = "MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM";
    // 3 is recursive_doubling in MPICH 4.0 and 5.0; 0 is auto, the default.
    for (value, seen) in [("3", true), ("0", false)] {
        let args = [var, value];
        let plain = mpit_testkit::run(mpi_job(3, &example("coll_app_writes"), &args));
        plain.assert_success();
        assert!(
            plain.stdout().contains(&format!(
                "coll_app_writes: {var} = {value} on every rank at the end: yes"
            )),
            "{}",
            plain.stdout()
        );
        let tmp = tempdir();
        let dir = tmp.path().join("run");
        let mut cmd = mpi_job(3, &example("coll_app_writes"), &args);
        preload(&mut cmd, &dir);
        cmd.env("MPIT_TUNER_POLICY", "none")
            .env("MPIT_TUNER_COLLECTIVES", "tune")
            .env("MPIT_TUNER_COLLECTIVES_WINDOW", "1");
        let job = mpit_testkit::run(cmd);
        job.assert_success();
        assert_same_stdout(&plain, &job, |_| false);
        let logs = read_run_dir(&dir, 3);
        for log in &logs {
            let records = tuning_records(log);
            let wrote: Vec<&Value> = records
                .iter()
                .filter(|r| r["event"] == "application_wrote")
                .collect();
            let stopped = records.iter().any(|r| r["event"] == "stopped");
            if seen {
                assert_eq!(wrote.len(), 1, "rank {}: {records:?}", log.rank);
                assert_eq!(wrote[0]["collective"], "allreduce");
                assert_eq!(
                    wrote[0]["message"],
                    format!(
                        "{var}: the application wrote `recursive_doubling` (3) itself: the tool \
                         never writes it again, and tuning stops on every rank at the next \
                         agreed point"
                    )
                );
                assert!(stopped, "rank {} did not stop: {records:?}", log.rank);
            } else {
                assert!(
                    wrote.is_empty() && !stopped,
                    "rank {}: {records:?}",
                    log.rank
                );
                assert!(
                    records.iter().any(|r| r["event"] == "trial"),
                    "rank {} never tuned",
                    log.rank
                );
            }
        }
        same_on_every_rank(&logs);
    }
}

/// Tuning declared in a policy file: `tune = true` turns it on without the
/// environment, the file's candidates and window are used, a name the
/// library lacks is skipped with the reason, and `MPIT_TUNER_COLLECTIVES=off`
/// still wins.
#[test]
fn a_policy_file_declares_what_to_tune() {
    if !online_tuning_here("a_policy_file_declares_what_to_tune") {
        return;
    }
    let tmp = tempdir();
    let file = tmp.path().join("tune.toml");
    std::fs::write(
        &file,
        r#"
[collectives]
tune = true
window = 2
min_window_time = "0"
settle = "0"
# Unpriced: this test is about what the file declares, on a short job.
search_budget = 0
[collectives.algorithms.mpich]
allreduce = ["recursive_doubling", "ring"]
[collectives.algorithms.openmpi]
allreduce = ["recursive_doubling", "ring"]
"#,
    )
    .unwrap();
    let plain = mpit_testkit::run(mpi_job(2, &example("coll_check"), &["8"]));
    plain.assert_success();
    for off in [false, true] {
        let dir = tmp.path().join(format!("run-{off}"));
        let mut cmd = mpi_job(2, &example("coll_check"), &["8"]);
        preload(&mut cmd, &dir);
        cmd.env("MPIT_TUNER_POLICY", &file)
            .env(DYNAMIC_RULES.0, DYNAMIC_RULES.1);
        if off {
            cmd.env("MPIT_TUNER_COLLECTIVES", "off");
        }
        let job = mpit_testkit::run(cmd);
        job.assert_success();
        assert_same_stdout(&plain, &job, |_| false);
        let logs = read_run_dir(&dir, 2);
        for log in &logs {
            let records = tuning_records(log);
            if off {
                assert!(records.is_empty(), "rank {}: {records:?}", log.rank);
                continue;
            }
            let events: Vec<&str> = records.iter().filter_map(|r| r["event"].as_str()).collect();
            if cfg!(mpi_flavor = "mpich") {
                // MPICH 4.1 added `ring` to allreduce's algorithms; 4.0
                // lacks it, and the tuner leaves it out there, saying so.
                let header = check_header(log, 2);
                let library = mpit::quirks::LibraryVersion::parse(
                    header["library_version"].as_str().unwrap_or_default(),
                );
                let has_ring = library
                    .version
                    .is_some_and(|v| v >= mpit::quirks::Version(4, 1, 0));
                let start = records.iter().find(|r| r["event"] == "start").unwrap();
                let skipped_ring = records.iter().any(|r| {
                    r["event"] == "skipped"
                        && r["message"].as_str().unwrap().starts_with(
                            "algorithms of another MPICH series than this one (mpich 4.",
                        )
                        && r["message"]
                            .as_str()
                            .unwrap()
                            .ends_with(", left out: allreduce ring")
                });
                if has_ring {
                    assert_eq!(
                        start["message"],
                        "tuning allreduce (auto, recursive_doubling, ring) in mode all; window 2 calls"
                    );
                    assert!(!skipped_ring, "{library}: {records:?}");
                } else {
                    assert_eq!(
                        start["message"],
                        "tuning allreduce (auto, recursive_doubling) in mode all; window 2 calls"
                    );
                    assert!(skipped_ring, "{library}: {records:?}");
                }
                assert!(events.contains(&"decision"), "{events:?}");
                assert!(records
                    .iter()
                    .filter(|r| r["collective"].is_string())
                    .all(|r| r["collective"] == "allreduce"));
            } else {
                // Open MPI's own choice (`ignore`) first, then the table's.
                let start = records.iter().find(|r| r["event"] == "start").unwrap();
                assert_eq!(
                    start["message"],
                    "tuning allreduce (ignore, recursive_doubling, ring) in mode all; window 2 calls"
                );
                assert!(events.contains(&"decision"), "{events:?}");
            }
        }
        if !off {
            same_on_every_rank(&logs);
        }
    }
}

/// `coll_classes` (`rounds`, with `ints` or not) on 4 ranks, without the
/// tool and under it in `mode` (`None`: the default, nothing asked, and
/// Open MPI's dynamic rules left to the tool) with windows of one call and
/// no policy; both must succeed with the same output. Returns the logs and
/// summary.
fn classes_run(
    rounds: u32,
    ints: bool,
    mode: Option<&str>,
    dir: &std::path::Path,
) -> (Vec<RankLog>, Value) {
    let rounds = rounds.to_string();
    let mut args = vec![rounds.as_str()];
    if ints {
        args.push("ints");
    }
    let program = example("coll_classes");
    let plain = mpit_testkit::run(mpi_job(4, &program, &args));
    plain.assert_success();
    let mut cmd = mpi_job(4, &program, &args);
    preload(&mut cmd, dir);
    cmd.env("MPIT_TUNER_POLICY", "none")
        .env("MPIT_TUNER_COLLECTIVES_WINDOW", "1");
    if let Some(mode) = mode {
        cmd.env("MPIT_TUNER_COLLECTIVES", mode)
            .env(DYNAMIC_RULES.0, DYNAMIC_RULES.1);
    }
    let job = mpit_testkit::run(cmd);
    job.assert_success();
    // Asked for, rank 0 says tuning started; by default only the logs do.
    assert_eq!(
        job.stderr().contains("collective tuning on:"),
        mode.is_some(),
        "{}",
        job.stderr()
    );
    assert!(
        plain.stdout().contains("coll_classes: "),
        "{}",
        plain.stdout()
    );
    // The floating-point results' bits and the integers are the library's
    // own.
    assert_same_stdout(&plain, &job, |l| l.contains("user op patterns"));
    // The user-defined operation ran under no algorithm but the library's
    // own choice: never more distinct piece patterns on a rank than
    // without the tool (MPICH 5.0.2 hands a communicator's first call other
    // pieces, 2 patterns; the tool's own calls at start made that first
    // call before the application's, 1).
    let (mine, own) = (patterns(&job.stdout()), patterns(&plain.stdout()));
    assert_eq!(mine.len(), own.len());
    assert!(
        mine.iter().zip(&own).all(|(m, o)| m <= o),
        "user op patterns with the tool {mine:?}, without {own:?}"
    );
    let logs = read_run_dir(dir, 4);
    same_on_every_rank(&logs);
    (logs, check_summary(dir, 4))
}

/// The distinct piece patterns per rank that `coll_classes` printed.
fn patterns(out: &str) -> Vec<u32> {
    per_rank(out, "user op patterns")
}

/// The events of `collective` in a rank's tuning records.
fn events_of(log: &RankLog, collective: &str) -> Vec<String> {
    tuning_records(log)
        .iter()
        .filter(|r| r["collective"] == collective)
        .filter_map(|r| r["event"].as_str().map(str::to_string))
        .collect()
}

/// The default mode, `safe`, never hands the tuner a floating-point
/// reduction (doubles
/// summed, `MPI_DOUBLE_INT` with `MPI_MINLOC`) nor one with a user-defined
/// operation (on a struct of an int and a double): with nothing else to
/// reduce, allreduce is never tried nor decided, while the bcast of the
/// same rounds is searched; every result, bits of the doubles included, is
/// the library's own, and the user-defined operation was handed no more
/// kinds of pieces than without the tool (the default ran every call).
#[test]
fn the_default_mode_leaves_floating_point_reductions_on_the_default() {
    if !online_tuning_here("the_default_mode_leaves_floating_point_reductions_on_the_default") {
        return;
    }
    let tmp = tempdir();
    let dir = tmp.path().join("run");
    let (logs, summary) = classes_run(120, false, None, &dir);
    for log in &logs {
        let message = start_message(log);
        assert!(message.contains(" in mode safe;"), "{message}");
        let allreduce = events_of(log, "allreduce");
        assert!(
            !allreduce.iter().any(|e| e == "trial" || e == "decision"),
            "rank {}: allreduce was searched: {allreduce:?}",
            log.rank
        );
        let bcast = events_of(log, "bcast");
        assert!(
            bcast.iter().any(|e| e == "trial"),
            "rank {}: bcast was not searched: {bcast:?}",
            log.rank
        );
    }
    assert_eq!(summary["collective_mode"], "safe", "{summary}");
}

/// Beside them, on the same communicator and in the same size bin (32
/// bytes), integer allreduces with `MPI_SUM` and `MPI_BXOR` are searched:
/// the two classes are kept apart (the agreed points count the integer
/// calls only, the same on every rank), and every result is the library's
/// own. Asked for explicitly (`safe`), as by default.
#[test]
fn mode_safe_tunes_integer_reductions_beside_floating_point_ones() {
    if !online_tuning_here("mode_safe_tunes_integer_reductions_beside_floating_point_ones") {
        return;
    }
    let tmp = tempdir();
    let dir = tmp.path().join("run");
    let (logs, summary) = classes_run(120, true, Some("safe"), &dir);
    for log in &logs {
        let trials: Vec<Value> = tuning_records(log)
            .into_iter()
            .filter(|r| r["collective"] == "allreduce" && r["event"] == "trial")
            .collect();
        assert!(
            trials.iter().any(|r| r["bin"][0] == 0),
            "rank {}: the integer allreduces were not searched: {trials:?}",
            log.rank
        );
    }
    assert_eq!(summary["collective_mode"], "safe", "{summary}");
}
