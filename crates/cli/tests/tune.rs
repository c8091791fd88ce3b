//! `mpit-tuner tune` on a real job: one run with the library's defaults,
//! one per algorithm of the collective asked for (set in the environment
//! before start), each measured on the application's own calls; the
//! choices in tune.json follow from the measurements, a run that fails is
//! left out, and tune.env holds the library's own settings.

mod common;

use common::{code, command, example, launcher, mpit_tuner, preload_lib, printed};
use serde_json::Value;

fn tune(dir: &std::path::Path, extra_env: &[(&str, &str)]) -> Value {
    preload_lib();
    let bench = example("coll_bench");
    let mut args = vec![
        "tune",
        "--dir",
        dir.to_str().unwrap(),
        "--collectives",
        "alltoall",
        "--",
    ];
    let launch = launcher(2);
    args.extend(launch.iter().map(String::as_str));
    // 4 KiB per rank, 40 calls: 4 windows of 8 after the warm-up.
    args.extend([bench.to_str().unwrap(), "alltoall", "4096", "40"]);
    let mut cmd = command(&args);
    for (k, v) in extra_env {
        cmd.env(k, v);
    }
    let job = mpit_testkit::run(cmd);
    assert_eq!(code(&job), Some(0), "{}", printed(&job));
    let text = std::fs::read_to_string(dir.join("tune.json")).expect("tune.json");
    serde_json::from_str(&text).expect("tune.json parses")
}

#[test]
fn every_algorithm_is_measured_and_the_choice_follows_from_the_numbers() {
    let tmp = common::tempdir();
    let dir = tmp.path().join("tune");
    // MPICH: with fallback=error, an algorithm the call cannot use fails
    // the run (pairwise_sendrecv_replace needs MPI_IN_PLACE).
    let json = tune(&dir, &[("MPIR_CVAR_COLLECTIVE_FALLBACK", "error")]);
    let runs = json["runs"].as_array().expect("runs");
    assert!(
        runs[0]["collective"].is_null() && runs[0]["ok"] == true,
        "{json:#}"
    );
    // One run per algorithm of the variable but the one set at start, as
    // the default run's `algorithms` record lists them.
    // The default run's `algorithms` record lists them: every item but the
    // one set at start (`auto` in MPICH, `ignore` in Open MPI).
    let log = common::read_jsonl(&dir.join("run-000-default/rank-00000.jsonl"));
    let record = log
        .iter()
        .find(|r| r["event"] == "algorithms" && r["collective"] == "alltoall")
        .expect("an algorithms record");
    let start = record["value"].as_i64().unwrap();
    let algorithms: Vec<String> = record["algorithms"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["value"].as_i64() != Some(start))
        .map(|a| a["name"].as_str().unwrap().to_string())
        .collect();
    if cfg!(mpi_flavor = "mpich") {
        // MPICH's names in value order, as the tuner knows them for 4.0-4.1
        // and (with `k_brucks` inserted) 5.0.
        let mpich4 = [
            "brucks",
            "nb",
            "pairwise",
            "pairwise_sendrecv_replace",
            "scattered",
        ];
        let mpich5 = [
            "brucks",
            "k_brucks",
            "nb",
            "pairwise",
            "pairwise_sendrecv_replace",
            "scattered",
        ];
        assert!(
            algorithms == mpich4 || algorithms == mpich5,
            "{algorithms:?}"
        );
    }
    let tried: Vec<String> = runs[1..]
        .iter()
        .map(|r| r["algorithm"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(tried, algorithms, "{json:#}");
    for r in &runs[1..] {
        assert_eq!(r["collective"], "alltoall");
        let (var, _) = (
            r["setting"][0].as_str().unwrap(),
            r["setting"][1].as_str().unwrap(),
        );
        if cfg!(mpi_flavor = "mpich") {
            assert_eq!(var, "MPIR_CVAR_ALLTOALL_INTRA_ALGORITHM");
        } else {
            assert_eq!(var, "OMPI_MCA_coll_tuned_alltoall_algorithm");
        }
    }
    if cfg!(mpi_flavor = "mpich") {
        let failed: Vec<&str> = runs
            .iter()
            .filter(|r| r["ok"] == false)
            .map(|r| r["algorithm"].as_str().unwrap())
            .collect();
        assert_eq!(failed, ["pairwise_sendrecv_replace"], "{json:#}");
    }
    // The bin of 4 KiB messages on 2 ranks, measured by the default run
    // and by every run that worked; the choice is the fastest if it beats
    // the default by the margin, else the default.
    let choices = json["choices"].as_array().unwrap();
    let c = choices
        .iter()
        .find(|c| c["collective"] == "alltoall" && c["bin"][0] == 4096)
        .unwrap_or_else(|| panic!("no choice for alltoall 4 KiB: {json:#}"));
    assert_eq!(c["comm_size"], 2);
    assert!(c["calls"].as_u64().unwrap() >= 32, "{c}");
    let measured = c["measured"].as_array().unwrap();
    let ok_runs = runs[1..].iter().filter(|r| r["ok"] == true).count();
    assert_eq!(measured.len(), 1 + ok_runs, "{c}");
    let default_us = c["default_us"].as_f64().unwrap();
    assert!(default_us > 0.0);
    let best = measured[1..]
        .iter()
        .min_by(|a, b| a[1].as_f64().unwrap().total_cmp(&b[1].as_f64().unwrap()))
        .unwrap();
    let margin = json["margin"].as_f64().unwrap();
    let expected = if best[1].as_f64().unwrap() < default_us * (1.0 - margin) {
        best[0].clone()
    } else {
        measured[0][0].clone()
    };
    assert_eq!(c["chosen"], expected, "{c}");
    // tune.env: what json's settings say, as export lines.
    let env = std::fs::read_to_string(dir.join("tune.env")).unwrap();
    let settings = json["settings"].as_array().unwrap();
    for s in settings {
        let line = format!(
            "export {}={}",
            s[0].as_str().unwrap(),
            s[1].as_str().unwrap()
        );
        assert!(env.lines().any(|l| l == line), "{line} not in\n{env}");
    }
    if settings.is_empty() {
        assert!(env.contains("nothing to set"), "{env}");
    }
}

#[test]
fn bad_options_fail_before_launching() {
    preload_lib();
    let tmp = common::tempdir();
    let marker = tmp.path().join("launched");
    for (opts, said) in [
        (
            &["--collectives", "allgatherz"][..],
            "`allgatherz` is not a collective",
        ),
        (&["--margin", "1.5"][..], "--margin 1.5"),
    ] {
        let mut args = vec!["tune", "--dir", tmp.path().to_str().unwrap()];
        args.extend(opts);
        args.extend(["--", "touch", marker.to_str().unwrap()]);
        let out = mpit_tuner(&args);
        assert_eq!(code(&out), Some(2), "{}", printed(&out));
        assert!(out.stderr().contains(said), "{}", printed(&out));
        assert!(!marker.exists(), "launched despite {opts:?}");
    }
}
