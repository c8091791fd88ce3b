//! `mpit-tuner tune` on a real job: one run with the library's defaults,
//! one per algorithm of the collective asked for (set in the environment
//! before start), each measured on the application's own calls; the
//! choices in tune.json follow from the measurements, a run that fails is
//! left out, and tune.env holds the library's own settings.

mod common;

use common::{code, command, command_within, example, launcher, mpit_tuner, preload_lib, printed};
use serde_json::Value;
use tuner_core::collectives::Collective;

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
    // 4 KiB per rank, 40 calls: 4 windows of 8 after the warm-up. One job
    // per run: the default and up to five algorithms per round; each gets
    // the time of one test job.
    tune_job(dir, "alltoall", 2, "4096", 12, options, extra_env)
}

/// `mpit-tuner tune --collectives COLL` of `coll_bench COLL BYTES 40` on
/// `ranks` ranks, given the time of `jobs` test jobs: tune.json, and what
/// it printed on standard output and standard error.
fn tune_job(
    dir: &std::path::Path,
    collective: &str,
    ranks: u32,
    bytes: &str,
    jobs: u64,
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
        collective,
    ];
    args.extend(options);
    args.push("--");
    let launch = launcher(ranks);
    args.extend(launch.iter().map(String::as_str));
    args.extend([bench.to_str().unwrap(), collective, bytes, "40"]);
    let mut cmd = command_within(jobs * mpit_testkit::timeout(), &args);
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
/// The `algorithms` record of `collective` in rank 0's log of the default
/// run in `dir`.
fn default_algorithms(dir: &std::path::Path, collective: &str) -> Value {
    common::read_jsonl(&dir.join("run-000-default/rank-00000.jsonl"))
        .into_iter()
        .find(|r| r["event"] == "algorithms" && r["collective"] == collective)
        .unwrap_or_else(|| panic!("no algorithms record of {collective}"))
}

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
    // The library's own per-size format (none for MVAPICH2) and the
    // others'.
    let (own, others): (&[&str], &[&str]) = if cfg!(mpi_library = "mvapich2") {
        (&[], &["coll-tuned-rules.conf", "mpich-coll-selection.json"])
    } else if cfg!(mpi_flavor = "mpich") {
        (&["mpich-coll-selection.json"], &["coll-tuned-rules.conf"])
    } else {
        (&["coll-tuned-rules.conf"], &["mpich-coll-selection.json"])
    };
    for other in others {
        assert!(
            stdout.contains(&format!("export: not written: {other}")),
            "{stdout}"
        );
        assert!(!export.join(other).exists(), "{other}: {stdout}");
    }
    // The library's own format: written, or left out with the reason.
    for own in own {
        assert!(
            export.join(own).is_file() || stdout.contains(&format!("export: not written: {own}")),
            "{stdout}"
        );
    }
    let check = mpit_testkit::run(command(&["check", policy.to_str().unwrap()]));
    assert_eq!(code(&check), Some(0), "{}", printed(&check));
}

#[test]
fn the_choices_go_into_the_store_and_the_next_run_starts_from_them() {
    let tmp = common::tempdir();
    let dir = tmp.path().join("tune");
    let store = tmp.path().join("store.json");
    let (json, stdout, _) = tune_job(
        &dir,
        "alltoall",
        2,
        "4096",
        12,
        &["--store", store.to_str().unwrap()],
        &[],
    );
    assert!(stdout.contains("tuning store: "), "{stdout}");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&store).unwrap()).unwrap();
    let entries = doc["entries"].as_array().expect("entries");
    let choices = json["choices"].as_array().expect("choices");
    assert!(!choices.is_empty(), "{json:#}");
    // Every choice, once for each mode, under the job's key: 2 ranks on
    // one host.
    assert_eq!(entries.len(), 2 * choices.len(), "{doc:#}");
    for c in choices {
        for mode in ["safe", "all"] {
            let found = entries.iter().any(|e| {
                e["mode"] == mode
                    && e["collective"] == c["collective"]
                    && e["bin"] == c["bin"]
                    && e["comm_size"] == c["comm_size"]
                    && e["algorithm"] == c["chosen"]
                    && e["default"] == c["default"]
                    && e["ranks"] == 2
                    && e["ranks_per_node"] == 2
                    && !e["left"].as_bool().unwrap_or(true)
            });
            assert!(found, "no {mode} entry for {c}: {doc:#}");
        }
    }
    if cfg!(mpi_library = "mvapich2") {
        // Online collective tuning is off on MVAPICH2 2.3.7: no run starts
        // from a store there.
        return;
    }
    // The same job under the tuner, with that store: its search of
    // alltoall 4 KiB starts from the stored choice.
    let c = choices
        .iter()
        .find(|c| c["bin"][0] == 4096 && c["comm_size"] == 2)
        .unwrap_or_else(|| panic!("no choice for alltoall 4 KiB: {json:#}"));
    preload_lib();
    let run = tmp.path().join("run");
    let bench = example("coll_bench");
    let mut args = vec!["run", "--dir", run.to_str().unwrap(), "--"];
    let launch = launcher(2);
    args.extend(launch.iter().map(String::as_str));
    args.extend([bench.to_str().unwrap(), "alltoall", "4096", "40"]);
    let mut cmd = command(&args);
    cmd.env("MPIT_TUNER_STORE", &store)
        .env("MPIT_TUNER_COLLECTIVES", "safe");
    let job = mpit_testkit::run(cmd);
    assert_eq!(code(&job), Some(0), "{}", printed(&job));
    let log = common::read_jsonl(&run.join("rank-00000.jsonl"));
    let stored = log
        .iter()
        .find(|r| r["event"] == "stored" && r["collective"] == "alltoall" && r["bin"][0] == 4096);
    let stored = stored.unwrap_or_else(|| panic!("no stored record: {log:#?}"));
    assert_eq!(stored["algorithm"], c["chosen"], "{stored}");
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
    // One run per algorithm of the variable but the one set at start
    // (`auto` in MPICH, `ignore` in Open MPI), as the default run's
    // `algorithms` record lists them.
    let record = default_algorithms(&dir, "alltoall");
    let start = record["value"].as_i64().unwrap();
    let mut algorithms: Vec<String> = record["algorithms"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["value"].as_i64() != Some(start))
        .map(|a| a["name"].as_str().unwrap().to_string())
        .collect();
    if cfg!(mpi_library = "mpich") {
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
    // MVAPICH2: its enum's names, in value order, after its default (-1);
    // `inplace_alltoall` gives wrong data when a rank's send and receive
    // types are laid out differently, so it is never tried, and tune says
    // so.
    if cfg!(mpi_library = "mvapich2") {
        assert_eq!(record["algorithm"], "default", "{record}");
        assert_eq!(start, -1, "{record}");
        let table = tuner_core::collectives::mvapich2_algorithms(Collective::Alltoall);
        assert_eq!(algorithms, table, "{record}");
        algorithms.retain(|a| a != "inplace_alltoall");
        assert_eq!(algorithms.len() + 1, table.len(), "{algorithms:?}");
        assert!(
            stderr.contains(
                "MPIR_CVAR_ALLTOALL_COLLECTIVE_ALGORITHM: `inplace_alltoall` copies the send buffer"
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
        let (var, value) = (
            r["setting"][0].as_str().unwrap(),
            r["setting"][1].as_str().unwrap(),
        );
        if cfg!(mpi_library = "mvapich2") {
            // The algorithm's number, its position in MVAPICH2's enum.
            assert_eq!(var, "MPIR_CVAR_ALLTOALL_COLLECTIVE_ALGORITHM");
            let table = tuner_core::collectives::mvapich2_algorithms(Collective::Alltoall);
            let at = table.iter().position(|n| r["algorithm"] == *n);
            assert_eq!(at.map(|v| v.to_string()).as_deref(), Some(value), "{r}");
        } else if cfg!(mpi_flavor = "mpich") {
            assert_eq!(var, "MPIR_CVAR_ALLTOALL_INTRA_ALGORITHM");
        } else {
            assert_eq!(var, "OMPI_MCA_coll_tuned_alltoall_algorithm");
        }
    }
    if cfg!(mpi_library = "mpich") {
        let failed: Vec<&str> = runs
            .iter()
            .filter(|r| r["ok"] == false)
            .map(|r| r["algorithm"].as_str().unwrap())
            .collect();
        assert_eq!(failed, ["pairwise_sendrecv_replace"], "{json:#}");
    }
    // Every run that failed is reported, and left out.
    assert_failures_reported(runs, "alltoall", &stderr);
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

/// Asserts that tune reported each of `runs` (tune.json's, one round)
/// that failed on standard error, as left out.
#[track_caller]
fn assert_failures_reported(runs: &[Value], collective: &str, stderr: &str) {
    for (n, r) in runs.iter().enumerate().skip(1) {
        if r["ok"] == false {
            let algorithm = r["algorithm"].as_str().unwrap();
            let said = format!("run {n} ({collective} = {algorithm}) failed");
            assert!(
                stderr
                    .lines()
                    .any(|l| l.contains(&said) && l.contains("left out")),
                "{said} is not reported:\n{stderr}"
            );
        }
    }
}

/// MVAPICH2 2.3.7: its algorithm variable has no names, so tune tries the
/// values of MVAPICH2's own enum (every one but the default, -1), each set
/// as a number in the environment before start, and writes the one that
/// won as that number.
#[cfg(mpi_library = "mvapich2")]
#[test]
fn mvapich2_algorithms_are_tried_by_number() {
    let tmp = common::tempdir();
    let dir = tmp.path().join("tune");
    let table = tuner_core::collectives::mvapich2_algorithms(Collective::Allreduce);
    // The default and one run per value.
    let jobs = table.len() as u64 + 2;
    let (json, stdout, stderr) = tune_job(&dir, "allreduce", 4, "4096", jobs, &[], &[]);
    assert_eq!(json["library"], "mvapich2", "{json:#}");
    let runs = json["runs"].as_array().expect("runs");
    assert!(
        runs[0]["collective"].is_null() && runs[0]["ok"] == true,
        "{json:#}"
    );
    // The default run: MVAPICH2's own choice (-1) at start, and its
    // algorithms as the tuner knows them.
    let record = default_algorithms(&dir, "allreduce");
    assert_eq!(
        record["message"], "MPIR_CVAR_ALLREDUCE_COLLECTIVE_ALGORITHM",
        "{record}"
    );
    assert_eq!(record["algorithm"], "default", "{record}");
    assert_eq!(record["value"], -1, "{record}");
    let listed: Vec<(String, i64)> = record["algorithms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["name"].as_str().unwrap().to_string(),
                a["value"].as_i64().unwrap(),
            )
        })
        .collect();
    let expected: Vec<(String, i64)> = std::iter::once(("default".to_string(), -1))
        .chain(
            table
                .iter()
                .enumerate()
                .map(|(v, n)| (n.to_string(), v as i64)),
        )
        .collect();
    assert_eq!(listed, expected);
    // One run per value, in value order, each with the number set.
    assert_eq!(runs.len(), 1 + table.len(), "{json:#}");
    for (v, (r, name)) in runs[1..].iter().zip(table).enumerate() {
        assert_eq!(r["collective"], "allreduce", "{r}");
        assert_eq!(r["algorithm"], *name, "{r}");
        assert_eq!(r["round"], 1, "{r}");
        assert_eq!(
            r["setting"][0], "MPIR_CVAR_ALLREDUCE_COLLECTIVE_ALGORITHM",
            "{r}"
        );
        assert_eq!(r["setting"][1], v.to_string(), "{r}");
        let run_dir = std::path::Path::new(r["dir"].as_str().unwrap());
        assert!(run_dir.join("rank-00000.jsonl").is_file(), "{r}");
        assert!(
            stderr.contains(&format!(
                "allreduce = {name} (MPIR_CVAR_ALLREDUCE_COLLECTIVE_ALGORITHM={v})"
            )),
            "{stderr}"
        );
    }
    assert_failures_reported(runs, "allreduce", &stderr);
    // Several values ran and were measured: the default's 4 KiB bin on 4
    // ranks lists the default and every run that worked.
    let ok: Vec<&str> = runs[1..]
        .iter()
        .filter(|r| r["ok"] == true)
        .map(|r| r["algorithm"].as_str().unwrap())
        .collect();
    assert!(ok.len() >= 2, "{json:#}");
    let c = json["choices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["collective"] == "allreduce" && c["bin"][0] == 4096 && c["comm_size"] == 4)
        .unwrap_or_else(|| panic!("no choice for allreduce 4 KiB on 4 ranks: {json:#}"));
    assert_eq!(c["default"], "default", "{c}");
    let measured: Vec<&str> = c["measured"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m[0].as_str().unwrap())
        .collect();
    let mut want = vec!["default"];
    want.extend(&ok);
    assert_eq!(measured, want, "{c}");
    // tune.env: the number of the algorithm that won, if one did.
    let env = std::fs::read_to_string(dir.join("tune.env")).unwrap();
    let settings = json["settings"].as_array().unwrap();
    assert!(settings.len() <= 1, "{json:#}");
    for s in settings {
        assert_eq!(s[0], "MPIR_CVAR_ALLREDUCE_COLLECTIVE_ALGORITHM", "{s}");
        let value: usize = s[1].as_str().unwrap().parse().expect("a number");
        assert!(value < table.len(), "{s}");
        assert!(ok.contains(&table[value]), "{s}: not a run that worked");
        let line = format!("export MPIR_CVAR_ALLREDUCE_COLLECTIVE_ALGORITHM={value}");
        assert!(env.lines().any(|l| l == line), "{line} not in\n{env}");
        // The export's pre-init policy sets the same (one bin measured).
        let policy = std::fs::read_to_string(dir.join("export/collectives-pre-init.toml"))
            .expect("the pre-init policy");
        if json["choices"].as_array().unwrap().len() == 1 {
            assert!(
                policy.contains(&format!(
                    "#   MPIR_CVAR_ALLREDUCE_COLLECTIVE_ALGORITHM={value}\n"
                )),
                "{policy}"
            );
        }
    }
    if settings.is_empty() {
        assert!(env.contains("nothing to set"), "{env}");
        assert!(!env.contains("export "), "{env}");
    }
    // Export: the pre-init policy, which `mpit-tuner check` accepts; the
    // other libraries' formats are not written, with the reason.
    let policy = dir.join("export/collectives-pre-init.toml");
    assert!(
        stdout.contains(&format!("export: {}", policy.display())),
        "{stdout}"
    );
    for other in ["coll-tuned-rules.conf", "mpich-coll-selection.json"] {
        assert!(
            stdout.contains(&format!("export: not written: {other}"))
                && stdout.contains("its algorithms are MVAPICH2's"),
            "{stdout}"
        );
    }
    let check = mpit_testkit::run(command(&["check", policy.to_str().unwrap()]));
    assert_eq!(code(&check), Some(0), "{}", printed(&check));
}

/// MVAPICH2 2.3.7 refuses its algorithm variable set together with its
/// own `MV2_INTER_ALLREDUCE_TUNING` ("a conflict": `MPI_Init` fails), which
/// leaves its default (-1) alone: every value's run fails, is reported and
/// left out; the default run is measured, nothing is chosen, and tune
/// succeeds.
#[cfg(mpi_library = "mvapich2")]
#[test]
fn mvapich2_values_it_refuses_are_reported_and_left_out() {
    let tmp = common::tempdir();
    let dir = tmp.path().join("tune");
    let table = tuner_core::collectives::mvapich2_algorithms(Collective::Allreduce);
    let jobs = table.len() as u64 + 2;
    let (json, _, stderr) = tune_job(
        &dir,
        "allreduce",
        4,
        "4096",
        jobs,
        &[],
        // MVAPICH2's own choice of its recursive-doubling allreduce.
        &[("MV2_INTER_ALLREDUCE_TUNING", "1")],
    );
    let runs = json["runs"].as_array().expect("runs");
    assert_eq!(runs[0]["ok"], true, "{json:#}");
    assert_eq!(runs.len(), 1 + table.len(), "{json:#}");
    for r in &runs[1..] {
        assert_eq!(r["ok"], false, "{r}");
        assert_ne!(r["exit_status"], 0, "{r}");
    }
    assert_failures_reported(runs, "allreduce", &stderr);
    // Refused in MPI_Init: no failed run measured a call. (MVAPICH2's own
    // "This is a conflict" comes from rank 0 only, and not in every run:
    // the job may be torn down before it is printed.)
    for r in &runs[1..] {
        let run_dir = std::path::Path::new(r["dir"].as_str().unwrap());
        for entry in std::fs::read_dir(run_dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "jsonl") {
                let log = common::read_jsonl(&path);
                assert!(
                    !log.iter().any(|l| l["event"] == "measured"),
                    "{}: a measurement in a refused run",
                    path.display()
                );
            }
        }
    }
    for c in json["choices"].as_array().unwrap() {
        assert_eq!(c["chosen"], "default", "{c}");
        assert_eq!(c["measured"].as_array().unwrap().len(), 1, "{c}");
    }
    assert!(!json["choices"].as_array().unwrap().is_empty(), "{json:#}");
    assert_eq!(json["settings"], serde_json::json!([]), "{json:#}");
    let env = std::fs::read_to_string(dir.join("tune.env")).unwrap();
    assert!(env.contains("nothing to set"), "{env}");
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
