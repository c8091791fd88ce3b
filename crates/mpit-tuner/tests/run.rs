//! `mpit-tuner run` as users run it: a real 2-rank job under the tuner,
//! options validated before anything is launched, the child's exit status
//! forwarded, the environment it gets, and `-x` for Open MPI's launcher
//! (with stand-in launchers that print their arguments).

mod common;

use common::{code, command, example, launcher, mpit_tuner, preload_lib, printed, read_jsonl};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

#[test]
fn a_job_under_the_tuner_leaves_logs_and_a_summary() {
    preload_lib();
    let churn = example("comm_churn");
    let tmp = common::tempdir();
    let dir = tmp.path().join("logs");
    let mut args = vec![
        "run",
        "--dir",
        dir.to_str().unwrap(),
        "--interval",
        "10ms",
        "--",
    ];
    let launch = launcher(2);
    args.extend(launch.iter().map(String::as_str));
    args.extend([churn.to_str().unwrap(), "2"]);
    let job = mpit_tuner(&args);
    assert_eq!(code(&job), Some(0), "{}", printed(&job));
    assert!(job.stdout().contains("checksum="), "{}", printed(&job));
    for rank in 0..2 {
        let log = read_jsonl(&dir.join(format!("rank-{rank:05}.jsonl")));
        let header = &log[0];
        assert_eq!(header["type"], "header");
        assert_eq!(header["rank"], rank);
        assert_eq!(header["size"], 2);
        // The options reached every rank.
        assert_eq!(header["config"]["interval"], 0.01, "{header}");
        assert_eq!(
            header["config"]["dir"].as_str().map(Path::new),
            Some(dir.as_path())
        );
    }
    assert!(dir.join("summary.json").is_file());
    let names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".jsonl"))
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");
}

#[test]
fn tune_collectives_reaches_every_rank() {
    preload_lib();
    let check = example("coll_check");
    let tmp = common::tempdir();
    let dir = tmp.path().join("logs");
    let mut args = vec![
        "run",
        "--dir",
        dir.to_str().unwrap(),
        "--tune-collectives=allreduce,bcast",
        "--",
    ];
    let launch = launcher(2);
    args.extend(launch.iter().map(String::as_str));
    args.extend([check.to_str().unwrap(), "16"]);
    // Windows of one call: searches end within the job's 16 rounds.
    let mut cmd = command(&args);
    cmd.env("MPIT_TUNER_COLLECTIVES_WINDOW", "1");
    let job = mpit_testkit::run(cmd);
    assert_eq!(code(&job), Some(0), "{}", printed(&job));
    assert!(job.stdout().contains("coll_check: all results correct"));
    if mpit_sys::BUILD_HEADER_LIBRARY == "mvapich2" {
        // MVAPICH2 reads its algorithm variables only at start: asked
        // for, online tuning says why it is off, and tunes nothing.
        assert!(
            job.stderr().contains(
                "collective tuning is off: MVAPICH2 2.3.7 accepts a write of \
                 MPIR_CVAR_<COLL>_COLLECTIVE_ALGORITHM after MPI_Init and keeps the algorithm \
                 chosen at start"
            ),
            "{}",
            printed(&job)
        );
        let summary: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("summary.json")).unwrap()).unwrap();
        assert_eq!(summary["collectives"], serde_json::json!([]), "{summary}");
        return;
    }
    // It tunes what was asked, from the library's own choice: MPICH's
    // `auto`, Open MPI's `ignore` (on candidate communicators; `run` set
    // Open MPI's dynamic rules on).
    let default = if cfg!(mpi_flavor = "mpich") {
        "auto"
    } else {
        "ignore"
    };
    assert!(
        job.stderr()
            .contains(&format!("collective tuning on: allreduce ({default}")),
        "{}",
        printed(&job)
    );
    for rank in 0..2 {
        let log = read_jsonl(&dir.join(format!("rank-{rank:05}.jsonl")));
        assert_eq!(
            log[0]["config"]["collectives"], "all: allreduce,bcast (window 1)",
            "{}",
            log[0]
        );
    }
    // summary.json: per (communicator, collective, bin), the outcome of
    // the searches, as rank 0's log tells them.
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("summary.json")).unwrap()).unwrap();
    let outcomes = summary["collectives"]
        .as_array()
        .expect("a collectives list");
    let log = read_jsonl(&dir.join("rank-00000.jsonl"));
    let decisions: Vec<&serde_json::Value> = log
        .iter()
        .filter(|r| r["type"] == "collective" && r["event"] == "decision")
        .collect();
    {
        assert!(!outcomes.is_empty(), "{summary}");
        let mut searches = 0;
        for o in outcomes {
            let last = decisions.iter().rev().find(|d| {
                d["comm"] == o["comm"] && d["collective"] == o["collective"] && d["bin"] == o["bin"]
            });
            // A search still running at the end: its trials so far.
            let Some(last) = last else {
                assert!(o["chosen"].is_null(), "{o}");
                assert_eq!(o["searches"], 0, "{o}");
                assert!(!o["candidates"].as_array().unwrap().is_empty(), "{o}");
                continue;
            };
            assert_eq!(o["chosen"], last["algorithm"], "{o}");
            assert_eq!(o["chosen_us"], last["time_us"], "{o}");
            assert_eq!(o["default_us"], last["default_us"], "{o}");
            assert_eq!(o["default"], default, "{o}");
            assert_eq!(o["comm_size"], 2, "{o}");
            let names: Vec<&str> = o["candidates"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c["algorithm"].as_str().unwrap())
                .collect();
            assert_eq!(names[0], default, "{o}");
            assert!(names.contains(&o["chosen"].as_str().unwrap()), "{o}");
            searches += o["searches"].as_u64().unwrap();
        }
        assert!(searches > 0, "{summary}");
        assert_eq!(searches, decisions.len() as u64, "{summary}");
    }
    // The report's section says what was kept, or why nothing was tuned,
    // and its plot shows each candidate's time per call.
    let plots = tmp.path().join("plots");
    let report = mpit_tuner(&[
        "report",
        dir.to_str().unwrap(),
        "--plots",
        plots.to_str().unwrap(),
    ]);
    assert_eq!(code(&report), Some(0), "{}", printed(&report));
    let text = report.stdout();
    assert!(text.contains("Collective tuning"), "{text}");
    let svg = std::fs::read_to_string(plots.join("collective-tuning.svg")).unwrap();
    assert!(plots.join("collective-tuning.png").is_file());
    // A panel per (communicator, collective, bin), largest gain first.
    assert!(svg.contains(" c0."), "{svg}");
    assert!(svg.contains(" ranks, gain "), "{svg}");
    assert!(svg.contains("<rect"), "{svg}");
    // MPICH 4.0-4.1's names end the list with reduce_scatter_allgather,
    // 5.0's with k_reduce_scatter_allgather.
    let started = if cfg!(mpi_flavor = "mpich") {
        "start: tuning allreduce (auto, nb, smp, recursive_doubling, "
    } else {
        "start: tuning allreduce (ignore, basic_linear, nonoverlapping, recursive_doubling, ring"
    };
    assert!(text.contains(started), "{text}");
    if cfg!(mpi_flavor = "mpich") {
        assert!(
            text.contains("reduce_scatter_allgather); bcast (auto"),
            "{text}"
        );
    }
    assert!(text.contains("c0.0 (2)      allreduce"), "{text}");
    // The report starts with what the tool changed, and rank 0's line at
    // finalize says the same, both from what summary.json holds: the
    // algorithms that ran instead of the default, or nothing.
    let first = text
        .lines()
        .position(|l| l == "What the tool changed")
        .expect("the section");
    let facts = text
        .lines()
        .position(|l| l == "Run")
        .expect("the run's facts");
    assert!(first < facts, "{text}");
    let switched: Vec<&str> = outcomes
        .iter()
        .filter(|o| !o["chosen"].is_null() && o["chosen"] != o["default"])
        .map(|o| o["chosen"].as_str().unwrap())
        .collect();
    // The line names 3 (collective, bin, algorithm) at most, then how many
    // more.
    let distinct: std::collections::BTreeSet<String> = outcomes
        .iter()
        .filter(|o| !o["chosen"].is_null() && o["chosen"] != o["default"])
        .map(|o| format!("{} {} {}", o["collective"], o["bin"], o["chosen"]))
        .collect();
    let section: String = text
        .lines()
        .skip(first)
        .take_while(|l| *l != "Run")
        .collect::<Vec<_>>()
        .join("\n");
    if switched.is_empty() {
        assert!(
            section.contains("every collective ran the library's own algorithm"),
            "{section}"
        );
        assert!(
            !job.stderr().contains("mpit-tuner: tuned "),
            "{}",
            printed(&job)
        );
    } else {
        assert!(section.contains("ran instead"), "{section}");
        let line = job
            .stderr()
            .lines()
            .find(|l| l.starts_with("mpit-tuner: tuned "))
            .map(str::to_string)
            .unwrap_or_else(|| panic!("no line at finalize: {}", printed(&job)));
        for a in &switched {
            assert!(section.contains(a), "{a}: {section}");
        }
        assert_eq!(
            line.matches(" -> ").count(),
            distinct.len().min(3),
            "{line}"
        );
        if distinct.len() > 3 {
            assert!(
                line.contains(&format!("; {} more", distinct.len() - 3)),
                "{line}"
            );
        }
        assert!(
            line.ends_with(&format!("(mpit-tuner report {})", dir.display())),
            "{line}"
        );
    }
    // The default policies for MVAPICH2's variables do not apply to this
    // library: one line names them, with the variable each lacks.
    assert!(
        text.contains("Not for this MPI library (")
            && text.contains("free-unused-vbufs (mv2_vbuf_allocated_array)"),
        "{text}"
    );
    // ... and only there: no row of the policies' table, no quantity of
    // summary.json, so no row of the cross-rank statistics either.
    assert!(
        !text
            .lines()
            .any(|l| l.trim_start().starts_with("free-unused-vbufs ")),
        "{text}"
    );
    // Where none applies (MPICH), the section says so instead of a table.
    let table = text.lines().any(|l| {
        let w: Vec<&str> = l.split_whitespace().collect();
        w.starts_with(&["policy", "ranks", "firings"])
    });
    assert_eq!(
        text.contains("No policy applies to this MPI library."),
        !table,
        "{text}"
    );
    let summary = std::fs::read_to_string(dir.join("summary.json")).unwrap();
    assert!(!summary.contains("policy.free-unused-vbufs."), "{summary}");
    // No CVAR written (the default policies write nothing here): no empty
    // plot of CVAR changes, and a note says why.
    assert!(!plots.join("cvar-changes.svg").exists(), "{text}");
    assert!(text.contains("no CVAR was written in this run"), "{text}");
}

#[test]
fn bad_options_fail_before_launching() {
    preload_lib();
    let tmp = common::tempdir();
    let marker = tmp.path().join("launched");
    let touch = ["--", "touch", marker.to_str().unwrap()];
    let cases: &[(&[&str], &str)] = &[
        (
            &["--interval", "soon"],
            "--interval soon: expected a duration",
        ),
        (
            &["--interval", "10us"],
            "the shortest sampling interval is 1ms",
        ),
        (
            &["--pvars", "pml_(ob1"],
            "--pvars: `pml_(ob1` is not a valid name or regex",
        ),
        (
            &["--lib", "/nonexistent/libpreload.so"],
            "--lib /nonexistent/libpreload.so: no such file",
        ),
        (
            &["--policy", "/nonexistent.toml"],
            "cannot read policy file /nonexistent.toml",
        ),
        (
            &["--tune-collectives=allreduce,scan"],
            "--tune-collectives: `scan` is not a collective the tuner knows",
        ),
    ];
    for (options, message) in cases {
        let mut args = vec!["run"];
        args.extend(*options);
        args.extend(touch);
        let job = mpit_tuner(&args);
        assert_eq!(code(&job), Some(2), "{}", printed(&job));
        assert!(
            job.stderr().starts_with("mpit-tuner: error: ") && job.stderr().contains(message),
            "expected {message:?}: {}",
            printed(&job)
        );
        assert!(!marker.exists(), "launched despite {options:?}");
    }
    let broken = common::fixture("broken-policies/typo-function.toml");
    let job = mpit_tuner(&[
        "run",
        "--policy",
        broken.to_str().unwrap(),
        touch[0],
        touch[1],
        touch[2],
    ]);
    assert_eq!(code(&job), Some(2), "{}", printed(&job));
    assert!(job.stderr().contains("nothing was launched"));
    assert!(job
        .stderr()
        .contains("typo-function.toml:5:10: error: in `when`: unknown function `anny`"));
    assert!(!marker.exists());

    // A missing library is reported with where it was looked for.
    let mut cmd = command(&["run", "--", "true"]);
    cmd.env("MPIT_TUNER_LIB", tmp.path().join("none.so"));
    let job = mpit_testkit::run(cmd);
    assert_eq!(code(&job), Some(2), "{}", printed(&job));
    assert!(job.stderr().contains("MPIT_TUNER_LIB"), "{}", printed(&job));

    // The command is required.
    let job = mpit_tuner(&["run", "--quiet"]);
    assert_eq!(code(&job), Some(2), "{}", printed(&job));
}

#[test]
fn the_exit_status_is_forwarded() {
    preload_lib();
    let job = mpit_tuner(&["run", "--", "bash", "-c", "exit 3"]);
    assert_eq!(code(&job), Some(3), "{}", printed(&job));
    let job = mpit_tuner(&["run", "--", "bash", "-c", "kill -TERM $$"]);
    assert_eq!(code(&job), Some(128 + 15), "{}", printed(&job));
    let job = mpit_tuner(&["run", "--", "true"]);
    assert_eq!(code(&job), Some(0), "{}", printed(&job));
    let job = mpit_tuner(&["run", "--", "/nonexistent/mpiexec"]);
    assert_eq!(code(&job), Some(2), "{}", printed(&job));
    assert!(job.stderr().contains("cannot run `/nonexistent/mpiexec`"));
}

#[test]
fn the_child_gets_the_preload_and_the_settings() {
    let lib = preload_lib();
    let tmp = common::tempdir();
    let policy = tmp.path().join("p.toml");
    std::fs::write(
        &policy,
        "[[policy]]\nname = \"n\"\nthen = [ { note = \"x\" } ]\n",
    )
    .unwrap();
    let script = "echo \"LD_PRELOAD=$LD_PRELOAD\"; env | grep '^MPIT_TUNER' | sort";
    let mut cmd = command(&[
        "run",
        "--dir",
        "rel-dir",
        "--interval",
        "250ms",
        "--pvars",
        "pml_ob1_.*",
        "--policy",
        policy.to_str().unwrap(),
        "--quiet",
        "--",
        "sh",
        "-c",
        script,
    ]);
    // Only what this test sets (the test kit turns the tuning store off
    // for every job it launches; this child is no MPI job).
    cmd.current_dir(tmp.path())
        .env_remove("MPIT_TUNER_STORE")
        .env("LD_PRELOAD", "libm.so.6")
        .env("MPIT_TUNER_REFRESH", "10s");
    let job = mpit_testkit::run(cmd);
    assert_eq!(code(&job), Some(0), "{}", printed(&job));
    let dir = tmp.path().join("rel-dir").canonicalize().unwrap();
    let expected = format!(
        "LD_PRELOAD={}:libm.so.6\n\
         MPIT_TUNER_DIR={}\n\
         MPIT_TUNER_INTERVAL=250ms\n\
         MPIT_TUNER_POLICY={}\n\
         MPIT_TUNER_PVARS=pml_ob1_.*\n\
         MPIT_TUNER_QUIET=1\n\
         MPIT_TUNER_REFRESH=10s\n",
        lib.display(),
        dir.display(),
        policy.display()
    );
    assert_eq!(job.stdout(), expected);
    assert!(
        dir.is_dir(),
        "the run directory is created before launching"
    );
}

/// A stand-in launcher: a script called `name` in `dir` that prints its
/// arguments, one per line, and answers `--version` with `version`.
fn fake_launcher(dir: &Path, name: &str, version: &str) -> PathBuf {
    let path = dir.join(name);
    // While no other test of this binary starts a process (they all hold
    // the job lock to do so): a child forked while the script is open for
    // writing would make running it fail with "Text file busy".
    let _no_spawns = mpit_testkit::job_lock();
    std::fs::write(
        &path,
        format!(
            "#!/bin/sh\nif [ \"$1\" = --version ]; then echo '{version}'; exit 0; fi\nprintf '%s\\n' \"$@\"\n"
        ),
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// The arguments a stand-in launcher received.
fn launched_with(launcher: &Path) -> Vec<String> {
    // A stand-in library without an ABI marker, which `run` cannot judge,
    // so it launches whatever the launcher (the check of the marker is
    // `a_library_of_another_abi_is_refused`).
    let lib = launcher.with_file_name("libstandin.so");
    std::fs::write(&lib, b"\x7fELF").unwrap();
    let mut cmd = command(&[
        "run",
        "--interval",
        "1s",
        "--lib",
        lib.to_str().unwrap(),
        "--",
        launcher.to_str().unwrap(),
        "-n",
        "2",
        "./app",
    ]);
    // Only the variables this test sets are forwarded (the test kit turns
    // the tuning store off for every job; the stand-in launcher runs none).
    cmd.env_remove("MPIT_TUNER_STORE");
    let job = mpit_testkit::run(cmd);
    assert_eq!(code(&job), Some(0), "{}", printed(&job));
    job.stdout().lines().map(str::to_string).collect()
}

/// The library of this build, given a launcher of another ABI or a program
/// of another ABI, is refused before anything is launched, naming the build
/// to use.
#[test]
fn a_library_of_another_abi_is_refused() {
    preload_lib();
    let tmp = common::tempdir();
    let (other_launcher, other_program, hint) = match mpit_sys::BUILD_ABI {
        "openmpi" => ("mpiexec.mpich", b"libmpi.so.12".as_slice(), "target/mpich"),
        _ => (
            "mpirun.openmpi",
            b"libmpi.so.40".as_slice(),
            "target/openmpi",
        ),
    };
    let program = tmp.path().join("app");
    std::fs::write(&program, [b"\x7fELF\0".as_slice(), other_program].concat()).unwrap();
    let launcher = fake_launcher(tmp.path(), "mpiexec.hydra", "HYDRA build details:");
    let job = mpit_tuner(&[
        "run",
        "--",
        launcher.to_str().unwrap(),
        "-n",
        "2",
        program.to_str().unwrap(),
    ]);
    assert_eq!(code(&job), Some(2), "{}", printed(&job));
    assert!(job.stderr().contains(hint), "{}", printed(&job));
    assert!(job.stdout().is_empty(), "launched: {}", printed(&job));
    if mpit_sys::BUILD_ABI == "mpich" {
        let ompi = fake_launcher(tmp.path(), other_launcher, "unused");
        let job = mpit_tuner(&["run", "--", ompi.to_str().unwrap(), "-n", "2", "./app"]);
        assert_eq!(code(&job), Some(2), "{}", printed(&job));
        assert!(
            job.stderr().contains("Open MPI's launcher"),
            "{}",
            printed(&job)
        );
    }
}

#[test]
fn open_mpi_launchers_get_x_options() {
    preload_lib();
    let tmp = common::tempdir();
    let forwarded = [
        "-x",
        "LD_PRELOAD",
        "-x",
        "MPIT_TUNER_INTERVAL",
        "-x",
        "MPIT_TUNER_VERBOSE",
        "-n",
        "2",
        "./app",
    ];
    // By name.
    let by_name = fake_launcher(tmp.path(), "mpirun.openmpi", "unused");
    assert_eq!(launched_with(&by_name), forwarded);
    // By what `--version` says: Open MPI 4 and 5.
    let sub = tmp.path().join("ompi4");
    std::fs::create_dir(&sub).unwrap();
    let v4 = fake_launcher(&sub, "mpiexec", "mpiexec (OpenRTE) 4.1.4");
    assert_eq!(launched_with(&v4), forwarded);
    let sub = tmp.path().join("ompi5");
    std::fs::create_dir(&sub).unwrap();
    let v5 = fake_launcher(&sub, "mpirun", "mpirun (Open MPI) 5.0.3");
    assert_eq!(launched_with(&v5), forwarded);
    // Hydra forwards the environment: the command is left alone.
    let sub = tmp.path().join("hydra");
    std::fs::create_dir(&sub).unwrap();
    let hydra = fake_launcher(&sub, "mpiexec", "HYDRA build details:");
    assert_eq!(launched_with(&hydra), ["-n", "2", "./app"]);
    let hydra = fake_launcher(tmp.path(), "mpiexec.mpich", "HYDRA build details:");
    assert_eq!(launched_with(&hydra), ["-n", "2", "./app"]);
}

/// srun gets no LD_PRELOAD of its own but `--task-prolog=` mpit-tuner,
/// which, run as slurmstepd runs it (no arguments, the task's
/// environment), prints the line that preloads the library into the task,
/// then runs the user's SLURM_TASK_PROLOG; a --task-prolog of the user's is
/// refused before anything is launched. (The real thing, under Slurm:
/// tests/slurm.rs.)
#[test]
fn srun_gets_the_preload_for_its_tasks_only() {
    preload_lib();
    let tmp = common::tempdir();
    let srun = tmp.path().join("srun");
    let theirs = tmp.path().join("their-prolog");
    {
        let _no_spawns = mpit_testkit::job_lock();
        // A stand-in srun: its own LD_PRELOAD, its arguments, then its
        // --task-prolog run as slurmstepd would, with no arguments.
        std::fs::write(
            &srun,
            "#!/bin/sh\necho \"srun LD_PRELOAD=${LD_PRELOAD:-}\"\nprintf 'arg %s\\n' \"$@\"\n\
             prolog=\"${1#--task-prolog=}\"\n\"$prolog\"\n",
        )
        .unwrap();
        std::fs::write(&theirs, "#!/bin/sh\necho 'export THEIRS=1'\n").unwrap();
        for p in [&srun, &theirs] {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
    }
    let lib = srun.with_file_name("libstandin.so");
    std::fs::write(&lib, b"\x7fELF").unwrap();
    let args = [
        "run",
        "--lib",
        lib.to_str().unwrap(),
        "--",
        srun.to_str().unwrap(),
        "-N",
        "2",
        "./app",
    ];
    let mut cmd = command(&args);
    cmd.env("LD_PRELOAD", "libm.so.6")
        .env("SLURM_TASK_PROLOG", &theirs);
    let job = mpit_testkit::run(cmd);
    assert_eq!(code(&job), Some(0), "{}", printed(&job));
    let lines: Vec<String> = job.stdout().lines().map(str::to_string).collect();
    let exe = Path::new(common::BIN).canonicalize().unwrap();
    assert_eq!(
        lines,
        [
            "srun LD_PRELOAD=".to_string(),
            format!("arg --task-prolog={}", exe.display()),
            "arg -N".into(),
            "arg 2".into(),
            "arg ./app".into(),
            format!("export LD_PRELOAD={}:libm.so.6", lib.display()),
            "export THEIRS=1".into(),
        ],
        "{}",
        printed(&job)
    );

    let mut refused = args.to_vec();
    refused.insert(6, "--task-prolog=/site/prolog");
    let job = mpit_tuner(&refused);
    assert_eq!(code(&job), Some(2), "{}", printed(&job));
    assert!(
        job.stderr().contains("--task-prolog") && job.stderr().contains("SLURM_TASK_PROLOG"),
        "{}",
        printed(&job)
    );
    assert!(job.stdout().is_empty(), "launched: {}", printed(&job));
}
