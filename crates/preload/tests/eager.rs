//! Environment actions in real MPI jobs: per-rank pre-init environment
//! settings, as in the thesis' eager-threshold experiment.
//!
//! The setting is the eager limit of the library the build uses: Open MPI's
//! `OMPI_MCA_btl_vader_eager_limit` (its CVAR `btl_vader_eager_limit` is
//! READONLY), MPICH's `UCX_RNDV_THRESH` (no CVAR at all), MVAPICH2's
//! `MV2_SMP_EAGERSIZE` (shared memory; no CVAR either, read from the
//! environment in MPI_Init). The behaviour test is `examples/c/eager_probe.c`:
//! rank 0 sends 32 KiB to rank 1 and says whether the send completed before
//! rank 1 posted its receive, which only an eager send does. The sender's
//! own setting decides the protocol, so a policy on `ranks = "0"` changes
//! the answer and one on `ranks = "1"` does not. On Open MPI the library's
//! own view after MPI_Init is read back too, through MPI_T, by an
//! init-phase policy.
//!
//! On Open MPI and MPICH a 32 KiB send is rendezvous by default and the
//! setting raises the limit to 64 KiB (the send becomes eager). MVAPICH2
//! 2.3.7's default shared-memory eager size depends on the processor and
//! on CMA (8 to 64 KiB; here 32 KiB sends were eager: 60000 bytes eager,
//! 65536 not), and it refuses to start with an eager size of half its
//! queue length or more ("MV2_SMP_EAGERSIZE should not exceed half of
//! MV2_SMP_QUEUE_LENGTH"), whose default depends on the processor too. So
//! its jobs here start from 64 KiB with a 256 KiB queue, set in their
//! environment, the setting lowers the limit to 8 KiB and the send becomes
//! rendezvous: the same mechanism, observed the other way round
//! ([`SETTING_MAKES_EAGER`]).
//!
//! What is checked: the action takes effect before init and only on the
//! selected ranks; each selected rank's log has its `setenv` record and the
//! others none; `dry_run` records the decision and changes nothing; an
//! environment action in a phase after init is refused when the file is
//! loaded, with the reason, and the job still runs (monitor mode).

mod common;

use common::*;
use serde_json::Value;
use std::path::Path;

/// The environment variable that sets the eager limit of this build's MPI
/// library, and a value that changes the protocol of a 32 KiB message: on
/// Open MPI and MPICH it makes it eager, on MVAPICH2 rendezvous.
#[cfg(mpi_flavor = "openmpi")]
const VAR: &str = "OMPI_MCA_btl_vader_eager_limit";
#[cfg(mpi_library = "mpich")]
const VAR: &str = "UCX_RNDV_THRESH";
#[cfg(mpi_library = "mvapich2")]
const VAR: &str = "MV2_SMP_EAGERSIZE";
#[cfg(not(mpi_library = "mvapich2"))]
const VALUE: &str = "65536";
#[cfg(mpi_library = "mvapich2")]
const VALUE: &str = "8192";

/// The protocol of the probe's 32 KiB send on a rank that applied
/// `VAR=VALUE`: eager (Open MPI, MPICH: the limit raised from a default
/// below 32 KiB) or rendezvous (MVAPICH2: the limit lowered from the 64 KiB
/// its jobs start with here, [`probe_job`]). Without the setting it is the other one.
const SETTING_MAKES_EAGER: bool = cfg!(not(mpi_library = "mvapich2"));

/// The example policy for this build's library.
#[cfg(mpi_flavor = "openmpi")]
const EXAMPLE: &str = "examples/policies/openmpi-eager-64k.toml";
#[cfg(mpi_library = "mpich")]
const EXAMPLE: &str = "examples/policies/mpich-ucx-rndv-64k.toml";
#[cfg(mpi_library = "mvapich2")]
const EXAMPLE: &str = "examples/policies/mvapich2-eager.toml";

/// On Open MPI, an init-phase policy that records the library's view of the
/// eager limit after MPI_Init (the decision's `inputs`).
#[cfg(mpi_flavor = "openmpi")]
const READBACK: &str = r#"
[[policy]]
name  = "readback"
phase = "init"
when  = "cvar:btl_vader_eager_limit >= 65536"
then  = [ { note = "64 KiB or more" } ]
otherwise = [ { note = "below 64 KiB" } ]
"#;
#[cfg(mpi_flavor = "mpich")]
const READBACK: &str = "";

/// What one probe job left: the probe's verdict, the logs, stderr.
struct Probe {
    eager: bool,
    logs: Vec<RankLog>,
    stderr: String,
}

/// The probe's verdict from its output line.
fn verdict(stdout: &str) -> bool {
    let line = stdout
        .lines()
        .find(|l| l.starts_with("eager_probe: "))
        .unwrap_or_else(|| panic!("no eager_probe line in:\n{stdout}"));
    assert!(line.starts_with("eager_probe: bytes=32768 "), "{line}");
    match line.rsplit("completed_before_receive=").next() {
        Some("yes") => true,
        Some("no") => false,
        _ => panic!("unexpected probe line: {line}"),
    }
}

/// Whether the variable this test sets reaches the library of the run
/// (its logs say which): MPICH 5.0 sends 32 KiB between ranks of a node
/// through its own shared memory, not through UCX, so `UCX_RNDV_THRESH`
/// changes nothing there (measured on 5.0.2 with eager_probe; so do
/// `MPIR_CVAR_CH4_SHM_POSIX_IQUEUE_CELL_SIZE`, `MPIR_CVAR_CH4_CMA_ENABLE=0`
/// and `MPIR_CVAR_CH4_IPC_CMA_P2P_THRESHOLD`). When it does not, the test
/// says so and stops.
fn setting_applies(test: &str, logs: &[RankLog]) -> bool {
    let header = check_header(&logs[0], 2);
    let library =
        mpit::quirks::LibraryVersion::parse(header["library_version"].as_str().unwrap_or_default());
    let mpich5 = library.library == mpit::Library::Mpich
        && library
            .version
            .is_some_and(|v| v >= mpit::quirks::Version(5, 0, 0));
    if mpich5 && VAR.starts_with("UCX_") {
        mpit_testkit::not_applicable(
            test,
            &format!(
                "{library} does not send 32 KiB through UCX between ranks of a node, so {VAR} \
                 cannot make it eager (measured); no eager-limit setting of MPICH 5's shared \
                 memory is known yet"
            ),
        );
        return false;
    }
    true
}

/// eager_probe on 2 ranks, without the tool. On MVAPICH2 the job starts
/// from a known eager size: its default depends on the processor and on
/// CMA (8 to 64 KiB), and so does its queue length (32 KiB to 4 MiB), which
/// must exceed twice the eager size; the policies' `setenv` overrides the
/// eager size on the ranks they select.
fn probe_job() -> std::process::Command {
    let mut cmd = mpi_job(2, &example("eager_probe"), &[]);
    if cfg!(mpi_library = "mvapich2") {
        cmd.env("MV2_SMP_EAGERSIZE", "65536")
            .env("MV2_SMP_QUEUE_LENGTH", "262144");
    }
    cmd
}

/// eager_probe on 2 ranks without the tool.
fn probe_plain() -> bool {
    let job = mpit_testkit::run(probe_job());
    job.assert_success();
    verdict(&job.stdout())
}

/// eager_probe on 2 ranks under the tool with `policy` (TOML text, or a
/// path relative to the repository).
fn probe(policy: &str, tmp: &Path) -> Probe {
    let file = if policy.contains("[[policy]]") {
        let f = tmp.join("policy.toml");
        std::fs::write(&f, policy).unwrap();
        f
    } else {
        repo_root().join(policy)
    };
    let dir = tmp.join("run");
    let mut cmd = probe_job();
    preload(&mut cmd, &dir);
    cmd.env("MPIT_TUNER_POLICY", &file);
    let job = mpit_testkit::run(cmd);
    job.assert_success();
    let logs = read_run_dir(&dir, 2);
    for log in &logs {
        check_complete_log(log, 2);
    }
    Probe {
        eager: verdict(&job.stdout()),
        logs,
        stderr: job.stderr(),
    }
}

/// A pre-init policy that sets the eager variable on `ranks`, plus the
/// read-back policy on Open MPI.
fn eager_policy(ranks: &str, dry_run: bool) -> String {
    format!(
        r#"
[[policy]]
name    = "eager-env"
phase   = "pre-init"
ranks   = "{ranks}"
dry_run = {dry_run}
then    = [ {{ setenv = "{VAR}", value = "{VALUE}" }} ]
{READBACK}"#
    )
}

/// The `setenv` records of one rank's log.
fn setenvs(log: &RankLog) -> Vec<&Value> {
    log.of_type("setenv").collect()
}

/// Checks one `setenv` audit record.
fn check_setenv(r: &Value, policy: &str, dry_run: bool) {
    assert_eq!(r["policy"], policy, "{r}");
    assert_eq!(r["phase"], "pre-init", "{r}");
    assert_eq!(r["name"], VAR, "{r}");
    assert_eq!(r["value"], VALUE, "{r}");
    assert_eq!(r["dry_run"], dry_run, "{r}");
    assert_eq!(r["error"], Value::Null, "{r}");
    assert!(r["t"].is_number(), "{r}");
}

/// The eager limit Open MPI reported after MPI_Init in this rank (the
/// read-back policy's input); `None` on MPICH, which has no such CVAR.
fn limit_after_init(log: &RankLog) -> Option<f64> {
    if READBACK.is_empty() {
        return None;
    }
    let d = log
        .of_type("decision")
        .find(|d| d["policy"] == "readback" && d["fired"] == true)
        .unwrap_or_else(|| panic!("{}: no read-back decision", log.path.display()));
    let v = d["inputs"]["btl_vader_eager_limit"][0]
        .as_f64()
        .unwrap_or_else(|| panic!("{}: read-back without value: {d}", log.path.display()));
    Some(v)
}

/// The action is applied before MPI_Init and only on the selected ranks:
/// selecting the sender (rank 0) changes the protocol of its 32 KiB send
/// (to eager; to rendezvous on MVAPICH2), selecting only the receiver does
/// not; only selected ranks log a `setenv` record;
/// on Open MPI the library itself reports 65536 after MPI_Init on the
/// selected rank and its default on the other.
#[test]
fn environment_action_applies_before_init_on_selected_ranks_only() {
    assert_eq!(
        probe_plain(),
        !SETTING_MAKES_EAGER,
        "without the tool a 32 KiB send must use the library's default protocol (eager = {}), or this test proves nothing",
        !SETTING_MAKES_EAGER
    );
    let mut defaults = Vec::new();
    for selected in [0u32, 1] {
        let tmp = tempdir();
        let run = probe(&eager_policy(&selected.to_string(), false), tmp.path());
        if !setting_applies(
            "environment_action_applies_before_init_on_selected_ranks_only",
            &run.logs,
        ) {
            return;
        }
        assert_eq!(
            run.eager,
            if selected == 0 {
                SETTING_MAKES_EAGER
            } else {
                !SETTING_MAKES_EAGER
            },
            "policy on rank {selected} only: the probe's sender is rank 0 (eager = {})\n{}",
            run.eager,
            run.stderr
        );
        for log in &run.logs {
            let records = setenvs(log);
            if log.rank == selected {
                assert_eq!(records.len(), 1, "{}", log.path.display());
                check_setenv(records[0], "eager-env", false);
            } else {
                assert!(
                    records.is_empty(),
                    "{}: rank not selected, yet {records:?}",
                    log.path.display()
                );
            }
            if let Some(limit) = limit_after_init(log) {
                if log.rank == selected {
                    assert_eq!(limit, 65536.0, "{}", log.path.display());
                } else {
                    defaults.push(limit);
                }
            }
        }
    }
    if !READBACK.is_empty() {
        assert_eq!(defaults.len(), 2);
        assert_eq!(defaults[0], defaults[1], "the default on both ranks");
        assert!(
            defaults[0] < 32768.0,
            "Open MPI's default eager limit {} would already make 32 KiB eager",
            defaults[0]
        );
    }
}

/// `hosts`: of two environment policies, only the one whose pattern
/// matches this node runs (on every rank), and the send changes protocol.
#[test]
fn hosts_select_the_node() {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .expect("the host name")
        .trim()
        .to_string();
    // A pattern that matches this host only through its wildcard.
    let pattern = format!("{}*", &host[..host.len().div_ceil(2)]);
    let policy = format!(
        r#"
[[policy]]
name  = "this-node"
phase = "pre-init"
hosts = ["no-such-node", "{pattern}"]
then  = [ {{ setenv = "{VAR}", value = "{VALUE}" }} ]

[[policy]]
name  = "other-nodes"
phase = "pre-init"
hosts = "no-such-node-*"
then  = [ {{ setenv = "MPIT_TUNER_TEST_OTHER_NODES", value = "1" }} ]
"#
    );
    let tmp = tempdir();
    let run = probe(&policy, tmp.path());
    if !setting_applies("hosts_select_the_node", &run.logs) {
        return;
    }
    assert_eq!(
        run.eager, SETTING_MAKES_EAGER,
        "hosts = {pattern:?} on {host}: not applied"
    );
    for log in &run.logs {
        let records = setenvs(log);
        assert_eq!(records.len(), 1, "{}: {records:?}", log.path.display());
        check_setenv(records[0], "this-node", false);
    }
}

/// The example policy of this library, as a user would apply it: every
/// rank sets the variable before init and the 32 KiB send becomes eager.
/// On MVAPICH2 the example raises the shared-memory eager size to 64 KiB,
/// with a 256 KiB queue (the send is eager, as in [`probe_job`]'s
/// starting point, so the verdict alone
/// proves little there) and writes the ALL_EQ CVAR
/// `MPIR_CVAR_IBA_EAGER_THRESHOLD` before init on every rank: its init-phase
/// read-back must see 64 KiB on every rank.
#[test]
fn example_policy_makes_32k_messages_eager() {
    let tmp = tempdir();
    let run = probe(EXAMPLE, tmp.path());
    if !setting_applies("example_policy_makes_32k_messages_eager", &run.logs) {
        return;
    }
    assert!(run.eager, "{EXAMPLE} did not make the send eager");
    for log in &run.logs {
        let records = setenvs(log);
        // MVAPICH2's example sets the queue length its eager size needs too.
        let expected = if cfg!(mpi_library = "mvapich2") { 2 } else { 1 };
        assert_eq!(records.len(), expected, "{}", log.path.display());
        assert_eq!(records[0]["name"], VAR);
        assert_eq!(records[0]["error"], Value::Null);
        #[cfg(mpi_library = "mvapich2")]
        {
            assert_eq!(records[0]["value"], "65536", "{}", records[0]);
            assert_eq!(records[1]["name"], "MV2_SMP_QUEUE_LENGTH", "{}", records[1]);
            assert_eq!(records[1]["value"], "262144", "{}", records[1]);
            assert_eq!(records[1]["error"], Value::Null);
        }
    }
    #[cfg(mpi_library = "mvapich2")]
    for log in &run.logs {
        let d = log
            .of_type("decision")
            .find(|d| d["policy"] == "iba-eager-readback" && d["fired"] == true)
            .unwrap_or_else(|| panic!("{}: no read-back decision", log.path.display()));
        assert_eq!(d["branch"], "then", "{d}");
        assert_eq!(
            d["inputs"]["MPIR_CVAR_IBA_EAGER_THRESHOLD"][0], 65536.0,
            "{d}"
        );
    }
    #[cfg(mpi_flavor = "openmpi")]
    for log in &run.logs {
        let d = log
            .of_type("decision")
            .find(|d| d["policy"] == "eager-limit-readback" && d["fired"] == true)
            .expect("the example's read-back decision");
        assert_eq!(d["branch"], "then", "{d}");
        assert_eq!(d["inputs"]["btl_vader_eager_limit"][0], 65536.0, "{d}");
    }
}

/// `dry_run`: every rank records the decision and the variable it would
/// set, marked as a dry run, and the library keeps its default (the 32 KiB
/// send keeps the default protocol).
#[test]
fn dry_run_setenv_is_recorded_but_changes_nothing() {
    let tmp = tempdir();
    let run = probe(&eager_policy("all", true), tmp.path());
    assert_eq!(
        run.eager, !SETTING_MAKES_EAGER,
        "a dry run changed the protocol"
    );
    for log in &run.logs {
        let records = setenvs(log);
        assert_eq!(records.len(), 1, "{}", log.path.display());
        check_setenv(records[0], "eager-env", true);
        let d = log
            .of_type("decision")
            .find(|d| d["policy"] == "eager-env")
            .expect("a decision record");
        assert_eq!(
            (&d["fired"], &d["write"]),
            (&Value::Bool(true), &Value::Bool(false))
        );
        if let Some(limit) = limit_after_init(log) {
            assert!(limit < 65536.0, "{}: {limit}", log.path.display());
        }
    }
}

/// An environment action in a phase after MPI_Init is refused when the file
/// is loaded, with the position and the reason on rank 0's stderr; the job
/// runs on, monitoring only: nothing is set, nothing changes.
#[test]
fn environment_action_after_init_is_refused_at_load_time() {
    for phase in ["init", "periodic", "finalize"] {
        let tmp = tempdir();
        let policy = format!(
            "[[policy]]\nname  = \"late-env\"\nphase = \"{phase}\"\nthen  = [ {{ setenv = \"{VAR}\", value = \"{VALUE}\" }} ]\n"
        );
        let run = probe(&policy, tmp.path());
        assert_eq!(
            run.eager, !SETTING_MAKES_EAGER,
            "phase {phase}: the protocol changed"
        );
        let file = tmp.path().join("policy.toml").display().to_string();
        let expected = format!(
            "{file}:4:22: error: `setenv` is only allowed in phase \"pre-init\" (this policy is \"{phase}\"): the MPI library reads its environment during MPI_Init, so a variable set later can not take effect"
        );
        assert!(
            run.stderr.contains(&expected),
            "phase {phase}: expected on stderr:\n{expected}\n--- got:\n{}",
            run.stderr
        );
        assert_eq!(
            count(&run.stderr, "policies not loaded, monitoring only"),
            1,
            "once, from rank 0:\n{}",
            run.stderr
        );
        for log in &run.logs {
            assert!(setenvs(log).is_empty(), "{}", log.path.display());
            assert_eq!(log.of_type("decision").count(), 0);
        }
    }
}
