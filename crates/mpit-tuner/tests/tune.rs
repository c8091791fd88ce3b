//! `mpit-tuner tune` on a real job: one run with the library's defaults,
//! one per algorithm of the collective asked for (set in the environment
//! before start), each measured on the application's own calls; the
//! choices in tune.json follow from the measurements, a run that fails is
//! left out, and tune.env holds the library's own settings.

mod common;

use common::{code, command, command_within, example, launcher, mpit_tuner, preload_lib, printed};
use serde_json::Value;

fn tune(dir: &std::path::Path, extra_env: &[(&str, &str)]) -> (Value, String) {
    let (json, _, stderr) = tune_with(dir, &[], extra_env);
    (json, stderr)
}

/// `mpit-tuner tune` of alltoall on 2 ranks: tune.json, and what it
/// printed on standard output and standard error.
fn tune_with(
    dir: &std::path::Path,
    options: &[&str],
    extra_env: &[(&str, &str)],
) -> (Value, String, String) {
    preload_lib();
    let bench = example("coll_bench");
    let mut args = vec![
        "tune",
        "--dir",
        dir.to_str().unwrap(),
        "--collectives",
        "alltoall",
    ];
    args.extend(options);
    args.push("--");
    let launch = launcher(2);
    args.extend(launch.iter().map(String::as_str));
    // 4 KiB per rank, 40 calls: 4 windows of 8 after the warm-up.
    args.extend([bench.to_str().unwrap(), "alltoall", "4096", "40"]);
    // One job per run: the default and five algorithms per round; each
    // gets the time of one test job.
    let mut cmd = command_within(12 * mpit_testkit::timeout(), &args);
    for (k, v) in extra_env {
        cmd.env(k, v);
    }
    let job = mpit_testkit::run(cmd);
    assert_eq!(code(&job), Some(0), "{}", printed(&job));
    let text = std::fs::read_to_string(dir.join("tune.json")).expect("tune.json");
    (
        serde_json::from_str(&text).expect("tune.json parses"),
        job.stdout(),
        job.stderr(),
    )
}

/// The time per call rank 0 measured for alltoall of 4 KiB per rank on 2
/// ranks in one run directory.
fn measured_4k(run: &std::path::Path) -> f64 {
    let log = common::read_jsonl(&run.join("rank-00000.jsonl"));
    log.iter()
        .find(|r| {
            r["event"] == "measured"
                && r["collective"] == "alltoall"
                && r["bin"][0] == 4096
                && r["comm_size"] == 2
        })
        .and_then(|r| r["time_us"].as_f64())
        .unwrap_or_else(|| panic!("no measurement of alltoall 4 KiB in {}", run.display()))
}

#[test]
fn repetitions_are_interleaved_the_median_is_compared_and_export_files_written() {
    let tmp = common::tempdir();
    let dir = tmp.path().join("tune");
    let (json, stdout, _) = tune_with(
        &dir,
        &["--reps", "2"],
        &[("MPIR_CVAR_COLLECTIVE_FALLBACK", "error")],
    );
    let runs = json["runs"].as_array().expect("runs");
    // Round 1 (the default, then every algorithm), then round 2 in the
    // same order.
    let settings = runs.len() / 2;
    assert_eq!(runs.len(), 2 * settings, "{json:#}");
    for (i, r) in runs.iter().enumerate() {
        let round = if i < settings { 1 } else { 2 };
        assert_eq!(r["round"], round, "{r}");
        assert_eq!(r["algorithm"], runs[i % settings]["algorithm"], "{json:#}");
        let dir = r["dir"].as_str().unwrap();
        assert!(dir.ends_with(&format!("-r{round}")), "{dir}");
    }
    // The default's time compared is the median (here: the mean) of its
    // two runs' measurements.
    let c = json["choices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["collective"] == "alltoall" && c["bin"][0] == 4096)
        .unwrap_or_else(|| panic!("no choice for alltoall 4 KiB: {json:#}"))
        .clone();
    let d1 = measured_4k(std::path::Path::new(runs[0]["dir"].as_str().unwrap()));
    let d2 = measured_4k(std::path::Path::new(
        runs[settings]["dir"].as_str().unwrap(),
    ));
    let default_us = c["default_us"].as_f64().unwrap();
    assert!(
        (default_us - (d1 + d2) / 2.0).abs() <= 1e-9 * default_us.max(1.0),
        "default {default_us} from runs {d1} and {d2}"
    );
    // The export files of what was chosen, as `mpit-tuner export` writes
    // them; the pre-init policy is one `mpit-tuner check` accepts.
    let export = dir.join("export");
    let policy = export.join("collectives-pre-init.toml");
    assert!(policy.is_file(), "{stdout}");
    assert!(
        stdout.contains(&format!("export: {}", policy.display())),
        "{stdout}"
    );
    let own = if cfg!(mpi_flavor = "mpich") {
        "mpich-coll-selection.json"
    } else {
        "coll-tuned-rules.conf"
    };
    let other = if cfg!(mpi_flavor = "mpich") {
        "coll-tuned-rules.conf"
    } else {
        "mpich-coll-selection.json"
    };
    assert!(
        stdout.contains(&format!("export: not written: {other}")),
        "{stdout}"
    );
    // The library's own format: written, or left out with the reason.
    assert!(
        export.join(own).is_file() || stdout.contains(&format!("export: not written: {own}")),
        "{stdout}"
    );
    let check = mpit_testkit::run(command(&["check", policy.to_str().unwrap()]));
    assert_eq!(code(&check), Some(0), "{}", printed(&check));
}

#[test]
fn every_algorithm_is_measured_and_the_choice_follows_from_the_numbers() {
    let tmp = common::tempdir();
    let dir = tmp.path().join("tune");
    // MPICH: with fallback=error, an algorithm the call cannot use fails
    // the run (pairwise_sendrecv_replace needs MPI_IN_PLACE).
    let (json, stderr) = tune(&dir, &[("MPIR_CVAR_COLLECTIVE_FALLBACK", "error")]);
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
    let mut algorithms: Vec<String> = record["algorithms"]
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
    // Open MPI before 5.0: alltoall `modified_bruck` writes outside the
    // receive buffer when a rank's send and receive types differ, so it is
    // never tried, and tune says so.
    if cfg!(mpi_flavor = "openmpi") && mpit_testkit::open_mpi_major() < Some(5) {
        let before = algorithms.len();
        algorithms.retain(|a| a != "modified_bruck");
        assert_eq!(algorithms.len() + 1, before, "{algorithms:?}");
        assert!(
            stderr.contains(
                "coll_tuned_alltoall_algorithm: `modified_bruck` writes outside the receive \
                 buffer"
            ) && stderr.contains("not tried"),
            "{stderr}"
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
