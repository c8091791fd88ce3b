//! MVAPICH2, the design card's library (issue 40), in real jobs: the
//! build against MVAPICH2's own header (scripts/test.sh's `mvapich2`
//! flavour, MVAPICH2 2.3.7 from scripts/mvapich2.sh), its `mpiexec`, the
//! examples built with its `mpicc`. What is checked: the application's
//! output and every rank's log; the `mv2_*` PVARs sampled; the thesis'
//! policies evaluated on the real counters (what they read on one node
//! without InfiniBand, which of them cannot run and why, and a policy
//! that fires on them); collective tuning saying why it is off online.
//! MVAPICH2's rows of the quirks table are checked against the library by
//! the whole suite in that flavour (mpit's `finalize_quirks_match_the_library`).
//! In the other builds every test says it does not apply.

mod common;

use common::*;
use serde_json::Value;
use std::path::Path;

/// Whether this build is MVAPICH2's; else says why the test does not apply.
fn on_mvapich2(test: &str) -> bool {
    let yes = mpit_sys::BUILD_HEADER_LIBRARY == "mvapich2";
    if !yes {
        mpit_testkit::not_applicable(
            test,
            "MVAPICH2 only: this build's header is not MVAPICH2's (scripts/test.sh's mvapich2 flavour runs it)",
        );
    }
    yes
}

/// `traffic` on 4 ranks with and without the tool (default policies,
/// default collective mode, `extra` settings): both succeed with the same
/// output. Returns the tool's job and the run directory.
fn traffic_under_the_tool(
    tmp: &Path,
    extra: &[(&str, &str)],
) -> (mpit_testkit::Job, std::path::PathBuf) {
    let args = ["allreduces=100", "sends=50", "unexpected=200"];
    let (plain, tooled, dir) = run_both_with(4, &example("traffic"), &args, tmp, extra);
    assert_same_stdout(&plain, &tooled, |_| false);
    (tooled, dir)
}

/// The summary's statistics of `name`, (min, max) over ranks.
fn stats(summary: &Value, name: &str) -> Option<(f64, f64)> {
    summary["variables"]
        .as_array()?
        .iter()
        .find(|v| v["name"] == name)
        .map(|v| (v["min"].as_f64().unwrap(), v["max"].as_f64().unwrap()))
}

/// Every rank's records of `kind` for `policy`.
fn policy_records<'a>(logs: &'a [RankLog], kind: &'a str, policy: &'a str) -> Vec<&'a Value> {
    logs.iter()
        .flat_map(|l| l.of_type(kind))
        .filter(|r| r["policy"] == policy)
        .collect()
}

#[test]
fn a_job_keeps_its_output_and_every_rank_logs_the_mv2_variables() {
    if !on_mvapich2("a_job_keeps_its_output_and_every_rank_logs_the_mv2_variables") {
        return;
    }
    let tmp = tempdir();
    let (tooled, dir) = traffic_under_the_tool(tmp.path(), &[]);
    // Nothing changed (collective tuning cannot run online here, no
    // policy writes): the default run prints nothing.
    assert!(
        !tooled.stderr().contains("mpit-tuner"),
        "the tool printed on a default run that changed nothing:\n{}",
        tooled.stderr()
    );
    let logs = read_run_dir(&dir, 4);
    assert_eq!(logs.len(), 4);
    for log in &logs {
        let at = log.at(0);
        let header = log.header();
        assert_eq!(header["library"], "mvapich2", "{at}");
        assert!(
            header["library_version"]
                .as_str()
                .is_some_and(|v| v.starts_with("MVAPICH2 Version") && v.contains("2.3.7")),
            "{at}: {}",
            header["library_version"]
        );
        assert_eq!(log.records.last().unwrap()["type"], "close", "{at}");
        // The variables MVAPICH2 exports are sampled (how many depends on
        // the build's configuration: only that there are some is checked,
        // and the ones the default policies read).
        let names: Vec<&str> = log.samples()[0]["vars"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|v| v["name"].as_str())
            .collect();
        for needed in [
            "mv2_smp_eager_buffer_max_use",
            "mv2_smp_eager_total_buffer",
            "mv2_vbuf_allocated",
            "mv2_vbuf_freed",
            "mv2_vbuf_available",
        ] {
            assert!(names.contains(&needed), "{at}: {needed} not sampled");
        }
    }
    let doc = check_summary(&dir, 4);
    assert_eq!(doc["library"], "mvapich2");
    assert_eq!(doc["size"], 4);
    // The tool's own reductions at finalize ran on MVAPICH2 (whose
    // MINLOC on pair types fails in this build: the tool uses none).
    let (_, sent) = stats(&doc, "mv2_smp_eager_sent").expect("mv2_smp_eager_sent summarised");
    assert!(
        sent > 0.0,
        "ranks sent messages through shared memory: {sent}"
    );
}

#[test]
fn the_default_policies_read_the_real_counters_or_say_why_they_cannot() {
    if !on_mvapich2("the_default_policies_read_the_real_counters_or_say_why_they_cannot") {
        return;
    }
    let tmp = tempdir();
    let (_, dir) = traffic_under_the_tool(tmp.path(), &[]);
    let logs = read_run_dir(&dir, 4);
    // The thesis' VBUF policy needs the research build's per-pool arrays
    // and pool-control CVARs: disabled, naming what is missing.
    let disabled = policy_records(&logs, "policy_disabled", "free-unused-vbufs");
    assert_eq!(disabled.len(), 4, "every rank disables free-unused-vbufs");
    assert!(
        disabled[0].to_string().contains("mv2_vbuf_allocated_array"),
        "{}",
        disabled[0]
    );
    // Open MPI's queue watches are not for this library.
    for policy in ["unexpected-queue-watch", "posted-queue-watch"] {
        assert_eq!(
            policy_records(&logs, "policy_disabled", policy).len(),
            4,
            "{policy}"
        );
    }
    // The released build's policies run on its real counters; each rank's
    // decisions carry what they read.
    for (policy, inputs) in [
        (
            "smp-eager-pressure",
            &["mv2_smp_eager_buffer_max_use", "mv2_smp_eager_total_buffer"][..],
        ),
        (
            "vbuf-watch",
            &["mv2_vbuf_allocated", "mv2_vbuf_freed", "mv2_vbuf_available"][..],
        ),
    ] {
        assert!(
            policy_records(&logs, "policy_disabled", policy).is_empty(),
            "{policy}"
        );
        for log in &logs {
            let decisions: Vec<&Value> = log
                .of_type("decision")
                .filter(|r| r["policy"] == policy)
                .collect();
            assert!(
                !decisions.is_empty(),
                "{}: no decision of {policy}",
                log.path.display()
            );
            for d in &decisions {
                for input in inputs {
                    assert!(
                        d["inputs"][input].as_array().is_some_and(|v| !v.is_empty()),
                        "{}: {policy} decided without reading {input}: {d}",
                        log.path.display()
                    );
                }
            }
        }
    }
    // What they read on one node without InfiniBand: a real shared-memory
    // eager pool, and a high-water mark this build leaves at 0, so neither
    // fires (docs/libraries.md, "MVAPICH2").
    let doc = check_summary(&dir, 4);
    let (total, _) = stats(&doc, "mv2_smp_eager_total_buffer").expect("total summarised");
    assert!(
        total > 0.0,
        "the shared-memory eager pool has a size: {total}"
    );
}

#[test]
fn a_policy_on_the_real_counters_fires_and_recommends() {
    if !on_mvapich2("a_policy_on_the_real_counters_fires_and_recommends") {
        return;
    }
    // smp-eager-pressure's shape, on a counter that moves on one node:
    // messages sent eagerly through shared memory.
    let tmp = tempdir();
    let policy = tmp.path().join("policy.toml");
    std::fs::write(
        &policy,
        "[[policy]]\n\
         name = \"smp-eager-traffic\"\n\
         every = \"50ms\"\n\
         when = \"mv2_smp_eager_sent > 10 && mv2_smp_eager_total_buffer > 0\"\n\
         then = [ { recommend = \"eager traffic through shared memory\" } ]\n\
         max_writes = 1\n",
    )
    .unwrap();
    let (_, dir) = traffic_under_the_tool(
        tmp.path(),
        &[("MPIT_TUNER_POLICY", policy.to_str().unwrap())],
    );
    let logs = read_run_dir(&dir, 4);
    let fired: Vec<&Value> = policy_records(&logs, "decision", "smp-eager-traffic")
        .into_iter()
        .filter(|d| d["fired"] == true && d["branch"] == "then")
        .collect();
    assert!(
        !fired.is_empty(),
        "smp-eager-traffic never fired on the real counters"
    );
    for d in &fired {
        let sent = d["inputs"]["mv2_smp_eager_sent"][0].as_f64().unwrap();
        assert!(sent > 10.0, "fired on {sent} eager messages: {d}");
    }
    assert!(
        !policy_records(&logs, "recommendation", "smp-eager-traffic").is_empty(),
        "no recommendation record"
    );
}

#[test]
fn collective_tuning_says_why_it_is_off() {
    if !on_mvapich2("collective_tuning_says_why_it_is_off") {
        return;
    }
    // Asked for: rank 0 says why not, once; the job runs unchanged.
    let tmp = tempdir();
    let (tooled, _) = traffic_under_the_tool(tmp.path(), &[("MPIT_TUNER_COLLECTIVES", "safe")]);
    let err = tooled.stderr();
    assert_eq!(
        count(&err, "collective tuning is off: MVAPICH2 2.3.7"),
        1,
        "{err}"
    );
    assert!(err.contains("keeps the algorithm chosen at start"), "{err}");
    assert!(err.contains("set it in the environment instead"), "{err}");
}

/// MVAPICH2's quirk the tool works around everywhere: in a build without
/// Fortran (as here), MPI_MINLOC on the C pair types fails
/// (`MPI_DOUBLE_INT`, `MPI_2INT`: src/mpi/coll/opminloc.c sends them to an
/// error unless Fortran is built). The tool's own reductions use no pair
/// type (crates/mpit/src/collective.rs), so its summary, which ranks the
/// minimum and maximum of every variable, is written on MVAPICH2 (the first
/// test); this one shows the quirk is real, so that the work-around stays.
#[test]
fn minloc_on_pair_types_fails_here() {
    if !on_mvapich2("minloc_on_pair_types_fails_here") {
        return;
    }
    let tmp = tempdir();
    let source = tmp.path().join("minloc.c");
    std::fs::write(
        &source,
        r#"#include <mpi.h>
#include <stdio.h>
int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    struct { double v; int i; } d = {1.0 * rank, rank}, dmin;
    struct { int v; int i; } n = {rank, rank}, nmin;
    int sum = 0, one = 1;
    int rc_d = MPI_Allreduce(&d, &dmin, 1, MPI_DOUBLE_INT, MPI_MINLOC, MPI_COMM_WORLD);
    int rc_n = MPI_Allreduce(&n, &nmin, 1, MPI_2INT, MPI_MINLOC, MPI_COMM_WORLD);
    int rc_s = MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        printf("double_int %s, 2int %s, int sum %s %d\n", rc_d == MPI_SUCCESS ? "ok" : "failed",
               rc_n == MPI_SUCCESS ? "ok" : "failed", rc_s == MPI_SUCCESS ? "ok" : "failed", sum);
    MPI_Finalize();
    return 0;
}
"#,
    )
    .unwrap();
    let program = tmp.path().join("minloc");
    let cc = std::process::Command::new(mpit_testkit::mpicc())
        .arg(&source)
        .arg("-o")
        .arg(&program)
        .output()
        .expect("the MPI compiler wrapper runs");
    assert!(
        cc.status.success(),
        "{}",
        String::from_utf8_lossy(&cc.stderr)
    );
    let job = mpit_testkit::run(mpi_job(2, &program, &[]));
    job.assert_success();
    assert!(
        job.stdout()
            .contains("double_int failed, 2int failed, int sum ok 2"),
        "{}",
        job.stdout()
    );
}

/// `mpit-tuner watch` and `report` read an MVAPICH2 run: the library, the
/// `mv2_*` variables, the default policies' decisions and the ones that
/// cannot run here. The binary is the build's (scripts/test.sh builds it
/// before the tests).
#[test]
fn watch_and_report_read_an_mvapich2_run() {
    if !on_mvapich2("watch_and_report_read_an_mvapich2_run") {
        return;
    }
    let bin = profile_dir().join("mpit-tuner");
    assert!(
        bin.is_file(),
        "{} is missing: build it with `{}`",
        bin.display(),
        cargo_hint("-p mpit-tuner")
    );
    let tmp = tempdir();
    let (_, dir) = traffic_under_the_tool(tmp.path(), &[]);
    let run = |args: &[&str]| {
        let out = std::process::Command::new(&bin)
            .args(args)
            .output()
            .expect("mpit-tuner runs");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "mpit-tuner {args:?}: {}\n{text}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        text
    };
    let dir_arg = dir.to_str().unwrap();
    let frame = run(&["watch", dir_arg, "--once", "--plain", "--top", "2000"]);
    for needed in [
        "(mvapich2, 4 ranks on 1 host)",
        "ranks: 0 alive, 4 finished, 0 not started",
        "  mv2_",
        "disabled  free-unused-vbufs: MPI library does not export mv2_vbuf_allocated_array",
        "smp-eager-pressure",
        "job finished: every rank closed its log",
    ] {
        assert!(frame.contains(needed), "no {needed:?} in:\n{frame}");
    }
    let report = run(&["report", dir_arg]);
    for needed in [
        "library   MVAPICH2 Version : 2.3.7",
        "Collective tuning was off: MVAPICH2 2.3.7 accepts a write",
        "free-unused-vbufs (mv2_vbuf_allocated_array)",
    ] {
        assert!(
            report.contains(needed),
            "no {needed:?} in the report:\n{report}"
        );
    }
}
