//! Policies in real MPI jobs (declarative TOML policies, scope-safe CVAR
//! actuation): per-rank pre-init writes read back after MPI_Init, a
//! periodic write with its cooldown and complete audit records, the ALL_EQ
//! rule, a policy disabled for a missing variable with one aggregated
//! message, refusals by the library, and a typo in the file.

mod common;

use common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// Runs `program args` on `ranks` ranks under the tool with `policy` (a file
/// path, or TOML text written to a temporary file); checks the application's
/// output is unchanged; returns the logs and the tool's stderr.
fn with_policy(
    ranks: u32,
    program: &Path,
    args: &[&str],
    policy: &str,
    tmp: &Path,
) -> (Vec<RankLog>, String) {
    let file = if policy.contains("[[policy]]") {
        let f = tmp.join("policy.toml");
        std::fs::write(&f, policy).unwrap();
        f
    } else {
        repo_root().join(policy)
    };
    let plain = mpit_testkit::run(mpi_job(ranks, program, args));
    plain.assert_success();
    let dir = tmp.join("run");
    let mut cmd = mpi_job(ranks, program, args);
    preload(&mut cmd, &dir);
    cmd.env("MPIT_TUNER_POLICY", &file);
    let tooled = mpit_testkit::run(cmd);
    tooled.assert_success();
    assert_same_stdout(&plain, &tooled, |_| false);
    (read_run_dir(&dir, ranks), tooled.stderr())
}

fn records<'a>(log: &'a RankLog, kind: &'a str, policy: &'a str) -> Vec<&'a Value> {
    log.of_type(kind)
        .filter(|r| r["policy"] == policy)
        .collect()
}

fn numbers(v: &Value) -> Vec<f64> {
    v.as_array()
        .unwrap_or_else(|| panic!("not an array: {v}"))
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect()
}

/// Every audit record of a write carries the fields an audit needs.
fn check_write_record(w: &Value) {
    for key in [
        "t",
        "policy",
        "phase",
        "cvar",
        "old",
        "requested",
        "readback",
        "outcome",
        "source",
    ] {
        assert!(w.get(key).is_some(), "write record without `{key}`: {w}");
    }
}

fn churn() -> PathBuf {
    example("comm_churn")
}

/// The MPICH flavour: MPICH and MVAPICH2 (MPICH's ABI, its own variables).
#[cfg(mpi_flavor = "mpich")]
mod mpich {
    use super::*;

    /// A LOCAL-scope integer CVAR that is harmless to write, before and
    /// after MPI_Init: MPICH's request poll frequency; MVAPICH2 2.3.7 has
    /// no MPIR_CVAR_REQUEST_POLL_FREQ: there MPIR_CVAR_CHOP_ERROR_STACK,
    /// the width error stacks are chopped to (default 0, no chopping; it
    /// only shapes error messages).
    #[cfg(mpi_library = "mpich")]
    const LOCAL: &str = "MPIR_CVAR_REQUEST_POLL_FREQ";
    #[cfg(mpi_library = "mvapich2")]
    const LOCAL: &str = "MPIR_CVAR_CHOP_ERROR_STACK";

    /// A policy file with a periodic write of an ALL_EQ CVAR, and the name
    /// of its policy: MPICH's example (MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM,
    /// which MVAPICH2 2.3.7 lacks); on MVAPICH2 the same policy on its
    /// ALL_EQ integer MPIR_CVAR_BCAST_SHORT_MSG_SIZE.
    #[cfg(mpi_library = "mpich")]
    const ALL_EQ_PERIODIC: (&str, &str) = (
        "examples/policies/broken/alleq-periodic.toml",
        "switch-allreduce-algorithm",
    );
    #[cfg(mpi_library = "mvapich2")]
    const ALL_EQ_PERIODIC: (&str, &str) = (
        r#"
[[policy]]
name  = "switch-bcast-short-size"
every = "1s"
when  = "time > 10"
then  = [ { set = "MPIR_CVAR_BCAST_SHORT_MSG_SIZE", value = 4096 } ]
"#,
        "switch-bcast-short-size",
    );

    /// A periodic policy writing [`LOCAL`] while its condition holds, at
    /// most every 200 ms and at most 5 times: MPICH's example file; on
    /// MVAPICH2 the same policy on its own LOCAL CVAR (its example file).
    #[cfg(mpi_library = "mpich")]
    const ADAPTIVE: &str = "examples/policies/mpich-adaptive-poll.toml";
    #[cfg(mpi_library = "mvapich2")]
    const ADAPTIVE: &str = "examples/policies/mvapich2-adaptive-chop.toml";

    /// A pre-init policy gives each rank its own value of a LOCAL CVAR; an
    /// init-phase policy reads it back after MPI_Init.
    #[test]
    fn pre_init_values_differ_per_rank_and_survive_init() {
        let tmp = tempdir();
        let policy = format!(
            r#"
[[policy]]
name  = "per-rank-poll"
phase = "pre-init"
then  = [ {{ set = "{LOCAL}", value = "8 + rank" }} ]

[[policy]]
name  = "check-poll"
phase = "init"
when  = "{LOCAL} == 8 + rank"
then  = [ {{ note = "per-rank value in effect after MPI_Init" }} ]
otherwise = [ {{ note = "per-rank value lost" }} ]
"#
        );
        let policy = policy.as_str();
        let (logs, _) = with_policy(4, &churn(), &["2"], policy, tmp.path());
        for log in &logs {
            let expected = 8.0 + f64::from(log.rank);
            let writes = records(log, "write", "per-rank-poll");
            assert_eq!(writes.len(), 1, "{}", log.path.display());
            check_write_record(writes[0]);
            assert_eq!(writes[0]["phase"], "pre-init");
            assert_eq!(writes[0]["outcome"], "written");
            assert_eq!(numbers(&writes[0]["requested"]), vec![expected]);
            assert_eq!(numbers(&writes[0]["readback"]), vec![expected]);
            let check = records(log, "decision", "check-poll");
            let fired = check
                .iter()
                .find(|d| d["fired"] == true)
                .expect("init decision");
            assert_eq!(fired["branch"], "then", "{fired}");
            assert_eq!(
                numbers(&fired["inputs"][LOCAL]),
                vec![expected],
                "rank {} after MPI_Init: {fired}",
                log.rank
            );
        }
    }

    /// A periodic policy writes a LOCAL CVAR while its condition holds,
    /// never twice within its cooldown, at most max_writes times, and every
    /// attempt is audited.
    #[test]
    fn periodic_write_respects_cooldown_and_is_audited() {
        let tmp = tempdir();
        let (logs, _) = with_policy(2, &churn(), &["6", "hold=150"], ADAPTIVE, tmp.path());
        for log in &logs {
            let writes = records(log, "write", "adaptive-poll");
            assert!(
                writes.len() >= 2,
                "{}: {} writes",
                log.path.display(),
                writes.len()
            );
            assert!(writes.len() <= 5, "max_writes = 5");
            let times: Vec<f64> = writes.iter().map(|w| w["t"].as_f64().unwrap()).collect();
            for pair in times.windows(2) {
                assert!(
                    pair[1] - pair[0] >= 0.2 - 1e-9,
                    "cooldown broken: {times:?}"
                );
            }
            for w in &writes {
                check_write_record(w);
                assert_eq!(w["outcome"], "written", "{w}");
                assert_eq!(w["readback"], w["requested"], "{w}");
                assert!(
                    w["t"].as_f64().unwrap() > 0.05,
                    "condition time > 0.05: {w}"
                );
            }
            // The skipped evaluations say why.
            assert!(
                log.of_type("decision").any(|d| d["reason"]
                    .as_str()
                    .is_some_and(|r| r.starts_with("cooldown"))),
                "no cooldown decision logged"
            );
        }
    }

    /// A periodic policy that writes an ALL_EQ CVAR is rejected when the
    /// file is loaded, with the explanation; nothing is written.
    #[test]
    fn periodic_all_eq_write_is_rejected_at_load() {
        let tmp = tempdir();
        let (policy, name) = ALL_EQ_PERIODIC;
        let (logs, stderr) = with_policy(2, &churn(), &["2"], policy, tmp.path());
        assert_eq!(
            count(&stderr, &format!("policy {name} disabled on ranks 0-1")),
            1,
            "{stderr}"
        );
        assert!(
            stderr.contains("ALL_EQ") && stderr.contains("pre-init"),
            "{stderr}"
        );
        for log in &logs {
            assert_eq!(log.of_type("write").count(), 0);
            assert_eq!(records(log, "policy_disabled", name).len(), 1);
        }
    }

    /// A policy naming a variable this MPI lacks is disabled with one
    /// message for the whole job, and another policy still acts.
    #[test]
    fn missing_variable_disables_one_policy_with_one_message() {
        let tmp = tempdir();
        // The thesis' research build's PVAR: MVAPICH2 2.3.7 has
        // mv2_vbuf_allocated, not the per-pool mv2_vbuf_allocated_array.
        let policy = format!(
            r#"
[[policy]]
name  = "vbuf"
every = "10ms"
when  = "any(mv2_vbuf_allocated_array - mv2_vbuf_max_use_array > 10)"
then  = [ {{ set = "MPIR_CVAR_VBUF_POOL_CONTROL", value = 1 }} ]

[[policy]]
name  = "poll"
phase = "init"
then  = [ {{ set = "{LOCAL}", value = 12 }} ]
"#
        );
        let policy = policy.as_str();
        let (logs, stderr) = with_policy(4, &churn(), &["2"], policy, tmp.path());
        assert_eq!(
            count(
                &stderr,
                "policy vbuf disabled on ranks 0-3: MPI library does not export mv2_vbuf_allocated_array"
            ),
            1,
            "{stderr}"
        );
        for log in &logs {
            let writes = records(log, "write", "poll");
            assert_eq!(writes.len(), 1);
            assert_eq!(writes[0]["outcome"], "written");
            assert!(records(log, "write", "vbuf").is_empty());
        }
    }

    /// A file of 140 policies, each naming a variable no library has: the
    /// start agreement carries the first 64 (rank 0 says each is disabled
    /// on every rank, and summary.json has no quantity of theirs), rank 0
    /// speaks of the others for itself. And 140 policies that run
    /// everywhere and never fire: their 280 quantities
    /// (`policy.NAME.writes`, `.refused`) go beyond the 255 names the
    /// summary's broadcast carries, so the places after them (by hash)
    /// must agree on every rank: summary.json has every one of them,
    /// counted over both ranks.
    #[test]
    fn many_policies_reach_the_summary_and_rank_0_messages() {
        let tmp = tempdir();
        let policy: String = (0..140)
            .map(|i| {
                format!(
                    "[[policy]]\nname = \"p{i:03}\"\nphase = \"init\"\nthen = [ {{ set = \"mv2_no_such_variable_{i}\", value = 1 }} ]\n\n"
                )
            })
            .chain((0..140).map(|i| {
                format!(
                    "[[policy]]\nname = \"q{i:03}\"\nphase = \"init\"\nwhen = \"time < 0\"\nthen = [ {{ note = \"never\" }} ]\n\n"
                )
            }))
            .collect();
        let (_, stderr) = with_policy(2, &churn(), &["2"], &policy, tmp.path());
        assert_eq!(
            count(&stderr, "policy p000 disabled on ranks 0-1: "),
            1,
            "{stderr}"
        );
        assert_eq!(
            count(&stderr, "policy p063 disabled on ranks 0-1: "),
            1,
            "{stderr}"
        );
        assert_eq!(
            count(
                &stderr,
                "policy p139 disabled on rank 0 at least (the start agreement carries the first 64 policies): "
            ),
            1,
            "{stderr}"
        );
        let summary: Value = serde_json::from_str(
            &std::fs::read_to_string(tmp.path().join("run/summary.json")).unwrap(),
        )
        .unwrap();
        let variables = summary["variables"].as_array().unwrap();
        for i in 0..64 {
            let name = format!("policy.p{i:03}.");
            assert!(
                !variables
                    .iter()
                    .any(|v| v["name"].as_str().unwrap().starts_with(&name)),
                "{name}* in summary.json: disabled on every rank"
            );
        }
        for i in 0..140 {
            for what in ["writes", "refused"] {
                let name = format!("policy.q{i:03}.{what}");
                let v = variables
                    .iter()
                    .find(|v| v["name"] == name.as_str())
                    .unwrap_or_else(|| panic!("no {name} in summary.json"));
                assert_eq!(v["ranks"], 2, "{v}");
                assert_eq!(v["max"], 0.0, "{v}");
            }
        }
        assert!(!stderr.contains("not the same on every rank"), "{stderr}");
    }

    /// A typo in the policy file: one `file:line:column` message on rank 0,
    /// and the job runs (monitoring only) with the same output.
    #[test]
    fn a_typo_is_reported_with_its_position() {
        let tmp = tempdir();
        let policy = "[[policy]]\nname = \"t\"\nwhen = \"any(x >)\"\n";
        let file = tmp.path().join("typo.toml");
        std::fs::write(&file, policy).unwrap();
        let plain = mpit_testkit::run(mpi_job(2, &churn(), &["2"]));
        let mut cmd = mpi_job(2, &churn(), &["2"]);
        preload(&mut cmd, &tmp.path().join("run"));
        cmd.env("MPIT_TUNER_POLICY", &file);
        let tooled = mpit_testkit::run(cmd);
        tooled.assert_success();
        assert_same_stdout(&plain, &tooled, |_| false);
        let stderr = tooled.stderr();
        let position = format!("{}:3:", file.display());
        assert_eq!(count(&stderr, &position), 1, "{stderr}");
        assert!(stderr.contains("monitoring only"), "{stderr}");
    }
}

#[cfg(mpi_flavor = "openmpi")]
mod openmpi {
    use super::*;

    /// Open MPI refuses most writes after MPI_Init: logged as a refusal,
    /// the application's output unchanged.
    #[test]
    fn refused_write_after_init_is_logged() {
        let tmp = tempdir();
        let (logs, _) = with_policy(
            2,
            &churn(),
            &["2"],
            "examples/policies/openmpi-refused-after-init.toml",
            tmp.path(),
        );
        for log in &logs {
            let writes = records(log, "write", "hugepage-priority");
            assert_eq!(writes.len(), 1);
            check_write_record(writes[0]);
            assert_eq!(writes[0]["outcome"], "refused_now", "{}", writes[0]);
            assert!(writes[0]["error"]
                .as_str()
                .unwrap()
                .contains("MPI_T_ERR_CVAR_SET_NOT_NOW"));
            assert_eq!(writes[0]["readback"], writes[0]["old"]);
        }
    }

    /// A write Open MPI accepts after init is read back.
    #[test]
    fn accepted_write_is_read_back() {
        let tmp = tempdir();
        let (logs, _) = with_policy(
            2,
            &churn(),
            &["3", "hold=100"],
            "examples/policies/openmpi-free-list.toml",
            tmp.path(),
        );
        // Open MPI 5.0 refuses the old name after MPI_Init and accepts the
        // new one (btl_sm_free_list_max); 4.1 accepts the old one.
        let five = open_mpi_5(&logs);
        for log in &logs {
            let writes = records(log, "write", "grow-vader-free-list");
            assert_eq!(writes.len(), 1, "max_writes = 1");
            if five {
                assert_eq!(writes[0]["outcome"], "refused_now", "{}", writes[0]);
            } else {
                assert_eq!(writes[0]["outcome"], "written");
                assert_eq!(numbers(&writes[0]["readback"]), vec![1024.0]);
            }
        }
        if five {
            let tmp = tempdir();
            let (logs, _) = with_policy(
                2,
                &churn(),
                &["3", "hold=100"],
                "examples/policies/openmpi5-free-list.toml",
                tmp.path(),
            );
            for log in &logs {
                let writes = records(log, "write", "grow-sm-free-list");
                assert_eq!(writes.len(), 1, "max_writes = 1");
                assert_eq!(writes[0]["outcome"], "written", "{}", writes[0]);
                assert_eq!(numbers(&writes[0]["readback"]), vec![1024.0]);
            }
        }
    }

    /// Whether the run's library is Open MPI 5 or later (its logs say).
    fn open_mpi_5(logs: &[RankLog]) -> bool {
        let header = check_header(&logs[0], 2);
        mpit::quirks::LibraryVersion::parse(header["library_version"].as_str().unwrap_or_default())
            .version
            .is_some_and(|v| v >= mpit::quirks::Version(5, 0, 0))
    }

    /// A CVAR whose component Open MPI unloaded during MPI_Init would crash
    /// the library if touched: the tuner refuses, and the job completes.
    #[test]
    fn unloaded_component_variable_is_not_touched() {
        let tmp = tempdir();
        let policy = r#"
[[policy]]
name = "touch-ucx"
every = "10ms"
then = [ { set = "opal_common_ucx_verbose", value = 1 } ]
max_writes = 1
"#;
        let (logs, _) = with_policy(2, &churn(), &["3", "hold=50"], policy, tmp.path());
        // Open MPI 5.0 (the registry wheel) builds its components into the
        // library: nothing is unloaded, the variable is live, and the check
        // must not refuse it (measured on 5.0.11: written and read back).
        let five = open_mpi_5(&logs);
        for log in &logs {
            let writes = records(log, "write", "touch-ucx");
            assert!(!writes.is_empty());
            if five {
                assert_eq!(writes[0]["outcome"], "written", "{}", writes[0]);
                assert_eq!(numbers(&writes[0]["readback"]), vec![1.0]);
            } else {
                assert_eq!(writes[0]["outcome"], "refused", "{}", writes[0]);
                assert!(writes[0]["error"].as_str().unwrap().contains("unloaded"));
            }
        }
    }
}

/// Services set up differently across ranks (here rank 1 runs no policies
/// and asks for collective tuning, rank 0 runs the default policies and
/// does not): each is off on every rank with one record saying why, and
/// sampling goes on; the application's output is unchanged.
#[test]
fn services_set_up_differently_across_ranks_are_off_everywhere() {
    let tmp = tempdir();
    let dir = tmp.path().join("run");
    // The launcher gives every rank the same environment: a shell in
    // front of the program changes rank 1's.
    let script = "case \"${PMI_RANK:-$OMPI_COMM_WORLD_RANK}\" in 1) \
                  export MPIT_TUNER_POLICY=none MPIT_TUNER_COLLECTIVES=tune;; esac; \
                  exec \"$0\" \"$@\"";
    let program = churn();
    let program = program.to_str().unwrap();
    let plain = mpit_testkit::run(mpi_job(2, Path::new("sh"), &["-c", script, program, "2"]));
    plain.assert_success();
    let mut cmd = mpi_job(2, Path::new("sh"), &["-c", script, program, "2"]);
    preload(&mut cmd, &dir);
    let tooled = mpit_testkit::run(cmd);
    tooled.assert_success();
    assert_same_stdout(&plain, &tooled, |_| false);
    let stderr = tooled.stderr();
    for (service, said) in [
        ("policies", "the policy files differ across ranks"),
        ("collective tuning", "asked for on some ranks only"),
    ] {
        assert_eq!(
            count(&stderr, said),
            1,
            "rank 0 says it once ({service}):\n{stderr}"
        );
        for log in read_run_dir(&dir, 2) {
            let warned = log
                .of_type("warning")
                .filter(|w| w["message"].as_str().is_some_and(|m| m.contains(said)))
                .count();
            assert_eq!(warned, 1, "rank {} logs why {service} is off", log.rank);
            assert!(!log.samples().is_empty(), "rank {} still samples", log.rank);
            assert_eq!(log.of_type("decision").count(), 0, "rank {}", log.rank);
            assert_eq!(log.of_type("collective").count(), 0, "rank {}", log.rank);
        }
    }
}
