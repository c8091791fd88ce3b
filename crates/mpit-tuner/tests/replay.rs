//! `mpit-tuner replay` as users run it: on a hand-written trace of the
//! thesis' VBUF scenario with the default policy set, and on the run
//! directory of a real job that `mpit-tuner run` produced.

mod common;

use common::{code, example, fixture, launcher, mpit_tuner, preload_lib, printed, repo_root};
use serde_json::Value as Json;
use std::path::Path;

/// The records `replay --json` printed.
fn records(job: &mpit_testkit::Job) -> Vec<Json> {
    job.stdout()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

/// The table of one rank: from its `== rank N` line to the next.
fn section(out: &str, rank: u32) -> &str {
    let start = out
        .find(&format!("== rank {rank} of "))
        .unwrap_or_else(|| panic!("no section for rank {rank}:\n{out}"));
    let rest = &out[start..];
    match rest[1..].find("\n== rank ") {
        Some(end) => &rest[..end + 1],
        None => rest,
    }
}

/// The position of `needle` in `text`, after `from`.
fn position(text: &str, needle: &str, from: usize) -> usize {
    from + text[from..]
        .find(needle)
        .unwrap_or_else(|| panic!("expected {needle:?} after byte {from} in:\n{text}"))
}

#[test]
fn the_thesis_scenario_with_the_default_policies() {
    let policies = repo_root().join("policies.toml");
    let trace = fixture("thesis-vbuf.trace.jsonl");
    let args = [
        "replay",
        "--policy",
        policies.to_str().unwrap(),
        trace.to_str().unwrap(),
    ];
    let job = mpit_tuner(&args);
    assert_eq!(code(&job), Some(0), "{}", printed(&job));
    let out = job.stdout();

    // Rank 0: wasteful pools, then busy ones: pool control on with the
    // reduced values at max-use, later off again.
    let rank0 = section(&out, 0);
    assert!(
        rank0.contains("(30 samples, 0.000 s to 29.000 s)"),
        "{rank0}"
    );
    let on = position(rank0, "fired then (condition holds)", 0);
    let on = position(rank0, "set MPIR_CVAR_VBUF_POOL_CONTROL: 0 -> 1", on);
    let reduced = position(
        rank0,
        "set MPIR_CVAR_VBUF_POOL_REDUCED_VALUE: [64, 32, 32, 16] -> [60, 5, 2, 1]",
        on,
    );
    let off = position(rank0, "fired otherwise (condition does not hold)", reduced);
    position(rank0, "set MPIR_CVAR_VBUF_POOL_CONTROL: 1 -> 0", off);
    assert!(rank0.contains("free-unused-vbufs: fired 2 times, wrote 3 times, refused 0 times"));
    assert!(rank0.contains(
        "final values: MPIR_CVAR_VBUF_POOL_CONTROL = 0, MPIR_CVAR_VBUF_POOL_REDUCED_VALUE = [60, 5, 2, 1]"
    ));
    // The default policies for other libraries are disabled, with reasons.
    assert!(
        rank0.contains("vbuf-watch: disabled (`mv2_vbuf_allocated` is not in the replayed data")
    );

    // Rank 1 never wastes: pool control stays off.
    let rank1 = section(&out, 1);
    assert!(
        rank1.contains("set MPIR_CVAR_VBUF_POOL_CONTROL: 0 -> 0"),
        "{rank1}"
    );
    assert!(!rank1.contains("REDUCED_VALUE:"), "{rank1}");

    // --json: the same writes as audit records.
    let mut json_args = args.to_vec();
    json_args.insert(1, "--json");
    let job = mpit_tuner(&json_args);
    assert_eq!(code(&job), Some(0), "{}", printed(&job));
    let writes: Vec<(u64, String, Json, Json)> = records(&job)
        .into_iter()
        .filter(|r| r["type"] == "write")
        .map(|w| {
            assert_eq!(w["outcome"], "written", "{w}");
            assert_eq!(w["readback"], w["requested"], "{w}");
            (
                w["rank"].as_u64().unwrap(),
                w["cvar"].as_str().unwrap().to_string(),
                w["old"].clone(),
                w["requested"].clone(),
            )
        })
        .collect();
    let control = "MPIR_CVAR_VBUF_POOL_CONTROL".to_string();
    let reduced = "MPIR_CVAR_VBUF_POOL_REDUCED_VALUE".to_string();
    assert_eq!(
        writes,
        vec![
            (0, control.clone(), Json::from(vec![0]), Json::from(vec![1])),
            (
                0,
                reduced,
                Json::from(vec![64, 32, 32, 16]),
                Json::from(vec![60, 5, 2, 1])
            ),
            (0, control.clone(), Json::from(vec![1]), Json::from(vec![0])),
            (1, control, Json::from(vec![0]), Json::from(vec![0])),
        ]
    );
}

#[test]
fn bad_inputs_fail_clearly() {
    let policies = repo_root().join("policies.toml");
    let job = mpit_tuner(&[
        "replay",
        "--policy",
        policies.to_str().unwrap(),
        "/nonexistent/rank-00000.jsonl",
    ]);
    assert_eq!(code(&job), Some(2), "{}", printed(&job));
    assert!(job
        .stderr()
        .contains("mpit-tuner: error: cannot read /nonexistent/rank-00000.jsonl"));

    let broken = fixture("broken-policies/unknown-key.toml");
    let trace = fixture("thesis-vbuf.trace.jsonl");
    let job = mpit_tuner(&[
        "replay",
        "--policy",
        broken.to_str().unwrap(),
        trace.to_str().unwrap(),
    ]);
    assert_eq!(code(&job), Some(2), "{}", printed(&job));
    assert!(job
        .stderr()
        .contains("unknown-key.toml:6:1: error: unknown field `cooldwon`"));

    let dir = common::tempdir();
    let bad = dir.path().join("bad.jsonl");
    std::fs::write(&bad, "{\"t\": 0}\n{\"t\": \"soon\"}\n").unwrap();
    let job = mpit_tuner(&[
        "replay",
        "--policy",
        policies.to_str().unwrap(),
        bad.to_str().unwrap(),
    ]);
    assert_eq!(code(&job), Some(2), "{}", printed(&job));
    assert!(
        job.stderr().contains("bad.jsonl:2: not a trace line"),
        "{}",
        printed(&job)
    );
}

/// Runs comm_churn on 2 ranks under `mpit-tuner run` with `run_args`,
/// logs in `dir`.
fn record_run(dir: &Path, run_args: &[&str]) {
    preload_lib();
    let churn = example("comm_churn");
    let mut args = vec![
        "run",
        "--dir",
        dir.to_str().unwrap(),
        "--interval",
        "10ms",
        "--quiet",
    ];
    args.extend(run_args);
    args.push("--");
    let launch = launcher(2);
    args.extend(launch.iter().map(String::as_str));
    args.extend([churn.to_str().unwrap(), "4", "hold=100"]);
    let job = mpit_tuner(&args);
    assert_eq!(code(&job), Some(0), "{}", printed(&job));
}

/// The records of every rank, by rank, from `replay --json`.
fn replay_json(policy: &Path, dir: &Path) -> Vec<Vec<Json>> {
    let job = mpit_tuner(&[
        "replay",
        "--json",
        "--policy",
        policy.to_str().unwrap(),
        dir.to_str().unwrap(),
    ]);
    assert_eq!(code(&job), Some(0), "{}", printed(&job));
    let mut ranks: Vec<Vec<Json>> = vec![Vec::new(), Vec::new()];
    for r in records(&job) {
        ranks[r["rank"].as_u64().unwrap() as usize].push(r);
    }
    for (rank, rs) in ranks.iter().enumerate() {
        assert_eq!(rs[0]["type"], "replay", "rank {rank}");
        assert!(
            rs[0]["samples"].as_u64().unwrap() > 0,
            "rank {rank}: {}",
            rs[0]
        );
    }
    ranks
}

/// Records a run of comm_churn with the default sampling, replays the
/// policy `name` (`when`, every 10 ms, a note when it holds) over it, and
/// returns each rank's first decision that fired, having checked that
/// every rank has one, with its note, and no policy was disabled. (MPICH
/// exports no PVARs.)
#[cfg_attr(mpi_library = "mpich", allow(dead_code))]
fn a_sampled_pvar_policy_fires(name: &str, when: &str) -> Vec<Json> {
    let tmp = common::tempdir();
    let dir = tmp.path().join("run");
    record_run(&dir, &[]);
    let policy = tmp.path().join("watch.toml");
    std::fs::write(
        &policy,
        format!(
            "[[policy]]\nname  = \"{name}\"\nevery = \"10ms\"\nwhen  = \"{when}\"\n\
             then  = [ {{ note = \"sampled\" }} ]\n"
        ),
    )
    .unwrap();
    replay_json(&policy, &dir)
        .iter()
        .enumerate()
        .map(|(rank, records)| {
            let fired = records
                .iter()
                .find(|r| r["type"] == "decision" && r["fired"] == true)
                .unwrap_or_else(|| panic!("rank {rank}: no decision fired: {records:#?}"));
            assert_eq!(fired["policy"], name);
            assert!(records.iter().any(|r| r["type"] == "note"));
            assert!(!records.iter().any(|r| r["type"] == "policy_disabled"));
            fired.clone()
        })
        .collect()
}

/// Open MPI: a policy over a PVAR the run sampled (bound to
/// MPI_COMM_WORLD) makes decisions on both ranks.
#[cfg(mpi_flavor = "openmpi")]
#[test]
fn replay_of_a_real_run_directory() {
    let fired =
        a_sampled_pvar_policy_fires("queue-watch", "max(pml_ob1_unexpected_msgq_length) >= 0");
    for (rank, fired) in fired.iter().enumerate() {
        let seen = &fired["inputs"]["pml_ob1_unexpected_msgq_length"];
        assert_eq!(
            seen.as_array().map(Vec::len),
            Some(2),
            "rank {rank}: {fired}"
        );
    }
}

/// MVAPICH2: a policy over the shared-memory channel's PVARs the run
/// sampled (comm_churn's messages between the two ranks of this node)
/// fires on both ranks with the values the run read.
#[cfg(mpi_library = "mvapich2")]
#[test]
fn replay_of_a_real_run_directory() {
    let fired = a_sampled_pvar_policy_fires("smp-watch", "mv2_smp_eager_total_buffer > 0");
    for (rank, fired) in fired.iter().enumerate() {
        let seen = fired["inputs"]["mv2_smp_eager_total_buffer"][0].as_f64();
        assert!(seen.is_some_and(|v| v > 0.0), "rank {rank}: {fired}");
    }
}

/// MPICH (no PVARs): the run's policy wrote a CVAR at init, so its log has
/// the value before; a replayed policy over that CVAR starts from it and
/// doubles it until it reaches 64.
#[cfg(mpi_library = "mpich")]
#[test]
fn replay_of_a_real_run_directory() {
    let tmp = common::tempdir();
    let dir = tmp.path().join("run");
    let init = tmp.path().join("init.toml");
    std::fs::write(
        &init,
        r#"
[[policy]]
name  = "start-poll"
phase = "init"
then  = [ { set = "MPIR_CVAR_REQUEST_POLL_FREQ", value = 16 } ]
"#,
    )
    .unwrap();
    record_run(&dir, &["--policy", init.to_str().unwrap()]);
    let policy = tmp.path().join("double.toml");
    std::fs::write(
        &policy,
        r#"
[[policy]]
name  = "poll-more"
every = "10ms"
when  = "MPIR_CVAR_REQUEST_POLL_FREQ < 64"
then  = [ { set = "MPIR_CVAR_REQUEST_POLL_FREQ", value = "MPIR_CVAR_REQUEST_POLL_FREQ * 2" } ]
"#,
    )
    .unwrap();
    for (rank, records) in replay_json(&policy, &dir).iter().enumerate() {
        // The starting value: the recorded write's old value.
        let log = common::read_jsonl(&dir.join(format!("rank-{rank:05}.jsonl")));
        let recorded = log
            .iter()
            .find(|r| r["type"] == "write")
            .unwrap_or_else(|| panic!("rank {rank}: the run's init policy wrote nothing"));
        let start = recorded["old"][0].as_i64().unwrap();
        assert!(start > 0 && start < 64, "{recorded}");
        let writes: Vec<(i64, i64)> = records
            .iter()
            .filter(|r| r["type"] == "write")
            .map(|w| {
                assert_eq!(w["outcome"], "written", "{w}");
                (
                    w["old"][0].as_i64().unwrap(),
                    w["requested"][0].as_i64().unwrap(),
                )
            })
            .collect();
        let mut expected = Vec::new();
        let mut v = start;
        while v < 64 {
            expected.push((v, v * 2));
            v *= 2;
        }
        // As many doublings as the run had samples for.
        assert!(!writes.is_empty(), "rank {rank}: {records:#?}");
        assert_eq!(writes, expected[..writes.len()], "rank {rank}");
        assert!(records
            .iter()
            .any(|r| r["type"] == "decision" && r["fired"] == true && r["policy"] == "poll-more"));
    }
}
