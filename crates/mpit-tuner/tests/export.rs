//! `mpit-tuner export` on real runs: the files it writes are accepted by
//! the real MPI library, and the algorithm they choose is the one in use
//! when the application runs with them and without the tool, shown by a
//! deterministic witness (`examples/c/coll_fingerprint.c`: the lengths a
//! user-defined reduction is handed, or a call the chosen algorithm
//! refuses), never by timing. Bad run directories get a clear message and
//! exit status 2.
//!
//! The decisions come from a real run's logs (header, start records,
//! communicator labels) with one decision record per rank added: which
//! algorithm a real search keeps depends on timing, and the test must not.

mod common;

use common::{code, example, launcher, mpit_tuner, preload_lib, printed};
use mpit_testkit::Job;
use serde_json::{json, Value as Json};
use std::path::Path;

/// A real run of `coll_fingerprint` under the tuner (`extra` options of
/// `mpit-tuner run`), its run directory `dir`.
fn tuned_run(dir: &Path, ranks: u32, extra: &[&str]) {
    preload_lib();
    let fp = example("coll_fingerprint");
    let mut args = vec!["run", "--dir", dir.to_str().unwrap()];
    args.extend(extra);
    args.push("--");
    let launch = launcher(ranks);
    args.extend(launch.iter().map(String::as_str));
    args.push(fp.to_str().unwrap());
    let job = mpit_tuner(&args);
    assert_eq!(code(&job), Some(0), "{}", printed(&job));
}

/// Adds `record` before the close record of every rank's log.
fn add_record(dir: &Path, record: &Json) {
    for rank in 0..vocab::rank_files(dir).unwrap().len() {
        let path = dir.join(format!("rank-{rank:05}.jsonl"));
        let text = std::fs::read_to_string(&path).unwrap();
        let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
        let close = lines.len() - 1;
        assert!(lines[close].contains("\"close\""), "{}", lines[close]);
        lines.insert(close, record.to_string());
        std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    }
}

/// Rewrites every rank's header with `f`.
fn edit_headers(dir: &Path, f: impl Fn(&mut Json)) {
    for rank in 0..2 {
        let path = dir.join(format!("rank-{rank:05}.jsonl"));
        let text = std::fs::read_to_string(&path).unwrap();
        let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
        let mut header: Json = serde_json::from_str(&lines[0]).unwrap();
        f(&mut header);
        lines[0] = header.to_string();
        std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    }
}

/// `coll_fingerprint` on 2 ranks without the tool, with `env`.
fn fingerprint(env: &[(&str, &str)]) -> Job {
    fingerprint_on(2, env)
}

/// `coll_fingerprint` on `ranks` ranks without the tool, with `env`.
fn fingerprint_on(ranks: u32, env: &[(&str, &str)]) -> Job {
    let fp = example("coll_fingerprint");
    let mut cmd = mpit_testkit::mpiexec(ranks, &fp);
    common::clean_env(&mut cmd);
    for (k, v) in env {
        cmd.env(k, v);
    }
    mpit_testkit::run(cmd)
}

/// The MPICH version of a run's library, from rank 0's header
/// ("MPICH Version:\t4.0.2\n...": the number after "Version:").
fn mpich_version(dir: &Path) -> String {
    let header = &common::read_jsonl(&dir.join("rank-00000.jsonl"))[0];
    header["library_version"]
        .as_str()
        .and_then(|v| v.split("Version:").nth(1))
        .and_then(|v| v.split_whitespace().next())
        .unwrap_or("")
        .to_string()
}

/// Whether `export` writes the selection JSON for MPICH `version`.
fn json_is_written_for(version: &str) -> bool {
    ["4.0", "4.1", "5.0"]
        .iter()
        .any(|s| version == *s || version.starts_with(&format!("{s}.")))
}

/// An allreduce decision record on `comm` (`size` ranks) for `bin`:
/// `algorithm` (its `value`) at `time_us` a call against the default's 20.
fn allreduce_decision(
    comm: &str,
    size: i32,
    bin: Json,
    algorithm: &str,
    value: i64,
    time_us: f64,
) -> Json {
    json!({"type": "collective", "t": 0.5, "event": "decision", "comm": comm,
           "comm_size": size, "collective": "allreduce", "bin": bin,
           "algorithm": algorithm, "value": value, "time_us": time_us,
           "default_us": 20.0, "calls": 8, "cost_us": 3.0})
}

/// `export` with this build's library for the default table.
fn export_mpich(dir: &Path) -> Job {
    let mut args = vec![dir.to_str().unwrap()];
    if !mpit_sys::BUILD_LIBRARY.is_empty() {
        args.extend(["--mpich-lib", mpit_sys::BUILD_LIBRARY]);
    }
    export(&args)
}

fn export(args: &[&str]) -> Job {
    let mut all = vec!["export"];
    all.extend(args);
    mpit_tuner(&all)
}

/// MPICH: the selection JSON is accepted and in use, and runs an algorithm
/// only where MPICH's own choice would: reduce-scatter-allgather, which
/// takes built-in operations only, runs MPI_SUM and leaves a user-defined
/// operation on the library's default (unguarded, MPICH's own assertion in
/// that algorithm's file stopped the job); `smp` for small allreduces (a
/// commutative operation on a communicator with a node hierarchy: one host
/// is one node) changes the user-defined sum's fingerprint. The pre-init
/// settings select reduce-scatter-allgather too (with fallbacks printed,
/// MPICH says it cannot apply that algorithm to the user-defined operation,
/// which proves the setting reached the library).
#[test]
fn mpich_exports_are_accepted_and_in_use() {
    if !cfg!(mpi_flavor = "mpich") {
        eprintln!("skipped: the MPICH selection JSON is tried on the MPICH build");
        return;
    }
    if cfg!(mpi_library = "mvapich2") {
        mpit_testkit::not_applicable(
            "mpich_exports_are_accepted_and_in_use",
            "MVAPICH2 2.3.7 (MPICH 3.2.1's ch3) has no MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE \
             and no MPIR_CVAR_<COLL>_INTRA_ALGORITHM: the MPICH exports do not apply to it",
        );
        return;
    }
    let tmp = common::tempdir();
    let dir = tmp.path().join("run");
    tuned_run(&dir, 2, &["--tune-collectives=allreduce"]);
    // 1024 ints: 4 KiB, the bin [4 KiB, 64 KiB) of the default bins.
    add_record(
        &dir,
        &allreduce_decision(
            "c0.0",
            2,
            json!([4096, 65536]),
            "reduce_scatter_allgather",
            4,
            10.0,
        ),
    );
    // 32 ints: 128 B, the bin [0, 256); a smaller saving, so that the
    // pre-init setting (one per collective) stays reduce-scatter-allgather.
    add_record(
        &dir,
        &allreduce_decision("c0.0", 2, json!([0, 256]), "smp", 2, 19.0),
    );
    // The default selection table is read from the library of this build,
    // not from whichever libmpich.so.12 the machine lists first.
    let job = export_mpich(&dir);
    assert_eq!(code(&job), Some(0), "{}", printed(&job));
    let out = job.stdout();
    let version = mpich_version(&dir);
    if !json_is_written_for(&version) {
        // Another series: the JSON is refused with the reason; the
        // pre-init policy is still written.
        assert!(
            out.contains("not written: mpich-coll-selection.json:")
                && out.contains("written for MPICH 4.0, 4.1 and 5.0 only"),
            "{out}"
        );
        assert!(out.contains("collectives-pre-init.toml"), "{out}");
        eprintln!("the selection JSON is MPICH 4.0-5.0's; this run was made with {version}");
        return;
    }
    assert!(out.contains("mpich-coll-selection.json"), "{out}");
    assert!(out.contains("collectives-pre-init.toml"), "{out}");
    assert!(
        out.contains("not written: coll-tuned-rules.conf:")
            && out.contains("no defined equivalent among Open MPI"),
        "{out}"
    );
    let json_file = dir.join("export/mpich-coll-selection.json");
    assert!(json_file.is_file(), "{}", printed(&job));
    let text = std::fs::read_to_string(&json_file).unwrap();
    let table: Json = serde_json::from_str(&text).unwrap();
    let bins = &table["collective=allreduce"]["comm_type=intra"]["comm_size<=2"];
    // As MPICH's own table guards it: a built-in operation and at least
    // as many elements as ranks (rounded down to a power of two).
    assert_eq!(
        bins["avg_msg_size<65536"]["is_op_built_in=yes"]["count=any"],
        json!({"algorithm=MPIR_Allreduce_intra_reduce_scatter_allgather": {}}),
        "{text}"
    );
    assert!(
        bins["avg_msg_size<65536"]["is_op_built_in=no"].is_object(),
        "{text}"
    );
    assert_eq!(
        bins["avg_msg_size<256"]["comm_hierarchy=parent"]["is_commutative=yes"],
        json!({"algorithm=MPIR_Allreduce_intra_smp": {}}),
        "{text}"
    );

    let with_file = [(
        "MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE",
        json_file.to_str().unwrap(),
    )];
    // `coll_fingerprint ARGS` on 2 ranks without the tool, with `env`.
    let fp = example("coll_fingerprint");
    let fingerprint_of = |args: &[&str], env: &[(&str, &str)]| {
        let mut cmd = mpit_testkit::mpiexec(2, &fp);
        cmd.args(args);
        common::clean_env(&mut cmd);
        cmd.envs(env.iter().copied());
        mpit_testkit::run(cmd)
    };
    // 1024 ints, MPI_SUM: reduce-scatter-allgather, every result right.
    let tuned = fingerprint_of(&["1024", "builtin"], &with_file);
    assert!(tuned.success(), "{}\n{}", tuned.stdout(), tuned.stderr());
    let said = tuned.stdout();
    assert!(said.contains("allreduce ok;"), "{said}");
    assert!(said.contains("allgather ok"), "{said}");
    assert!(said.contains("all results correct"), "{said}");
    // 1024 ints, the user-defined sum: the library's default, as without
    // the file (recursive doubling: each rank reduces the whole vector).
    let plain = fingerprint_of(&["1024"], &[]);
    assert!(plain.success(), "{}", plain.stderr());
    assert!(
        plain
            .stdout()
            .contains("allreduce ok; op lengths: 1024 | 1024\n"),
        "{}",
        plain.stdout()
    );
    let guarded = fingerprint_of(&["1024"], &with_file);
    assert!(
        guarded.success(),
        "{}\n{}",
        guarded.stdout(),
        guarded.stderr()
    );
    assert_eq!(guarded.stdout(), plain.stdout());
    // 32 ints, the user-defined sum: `smp` runs (the file is in use).
    let plain = fingerprint_of(&["32"], &[]);
    assert!(
        plain
            .stdout()
            .contains("allreduce ok; op lengths: 32 | 32\n"),
        "{}",
        plain.stdout()
    );
    let smp = fingerprint_of(&["32"], &with_file);
    assert!(smp.success(), "{}\n{}", smp.stdout(), smp.stderr());
    assert!(
        smp.stdout().contains("allreduce ok; op lengths: "),
        "{}",
        smp.stdout()
    );
    assert_ne!(
        smp.stdout(),
        plain.stdout(),
        "smp's fingerprint is the default's"
    );

    // The pre-init policy: it checks, and its settings, set by hand, are
    // the ones the library uses.
    let policy = dir.join("export/collectives-pre-init.toml");
    let check = mpit_tuner(&["check", policy.to_str().unwrap()]);
    assert_eq!(code(&check), Some(0), "{}", printed(&check));
    let text = std::fs::read_to_string(&policy).unwrap();
    let settings: Vec<(String, String)> = text
        .lines()
        .filter_map(|l| l.strip_prefix("#   "))
        .filter_map(|l| l.split_once('='))
        .filter(|(k, _)| k.starts_with("MPIR_CVAR_"))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    assert_eq!(
        settings,
        [(
            "MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM".to_string(),
            "reduce_scatter_allgather".to_string()
        )],
        "{text}"
    );
    // With fallbacks printed, MPICH names the algorithm set whenever it
    // cannot serve a call (the user-defined operation here; MPICH 5.0 also
    // its own allreduce in MPI_Init), and falls back. With `error` instead,
    // MPICH 5.0 fails MPI_Init itself on that allreduce.
    let fallback = ("MPIR_CVAR_COLLECTIVE_FALLBACK", "print");
    let refused = "Allreduce reduce_scatter_allgather cannot be applied";
    let control = fingerprint(&[fallback]);
    control.assert_success();
    assert!(
        control.stdout().contains("allreduce ok;") && !control.stderr().contains(refused),
        "{}",
        printed(&control)
    );
    let set = fingerprint(&[fallback, (&settings[0].0, &settings[0].1)]);
    set.assert_success();
    assert!(
        set.stdout().contains("allreduce ok;") && set.stderr().contains(refused),
        "{}",
        printed(&set)
    );

    // Asking for Open MPI rules from an MPICH run: no guess, a reason.
    let job = export(&[dir.to_str().unwrap(), "--format", "openmpi-rules"]);
    assert_eq!(code(&job), Some(2), "{}", printed(&job));
    assert!(
        job.stderr()
            .contains("its algorithms are MPICH's (MPIR_CVAR_<COLL>_INTRA_ALGORITHM)"),
        "{}",
        printed(&job)
    );
}

/// MPICH on 2 emulated nodes: an exported `smp` allreduce keeps every
/// result right. The selection table applies a rule to every communicator
/// and operation it matches, where MPICH's own selection guards `smp`:
/// unguarded, `MPIR_Allreduce_intra_smp` ran on the communicator ch4 makes
/// of the node roots and gave wrong sums (1 rank a node), and with ranks
/// dealt to the nodes in turn it composed a non-commutative operation node
/// by node, out of the ranks' order. The export guards it with
/// `comm_hierarchy=parent` and `is_commutative=yes` (the library's default
/// elsewhere): `coll_check` with the file prints what it prints without,
/// in both placements.
#[test]
fn mpich_smp_exports_keep_results_right_across_nodes() {
    const TEST: &str = "mpich_smp_exports_keep_results_right_across_nodes";
    if !cfg!(mpi_flavor = "mpich") {
        eprintln!("skipped: the MPICH selection JSON is tried on the MPICH build");
        return;
    }
    let tmp = common::tempdir();
    let dir = tmp.path().join("run");
    tuned_run(&dir, 2, &["--tune-collectives=allreduce"]);
    let version = mpich_version(&dir);
    if !json_is_written_for(&version) {
        mpit_testkit::not_applicable(
            TEST,
            &format!("the selection JSON is MPICH 4.0-5.0's; this build's library is {version}"),
        );
        return;
    }
    let Some(cluster) = mpit_testkit::cluster::cluster_for(TEST, 2) else {
        return;
    };
    // smp for every size on communicators of 2 and 4 ranks (one label
    // each: a communicator's last decision for a bin is the one kept). The
    // export reads the algorithm's name; 2 is its item in MPICH 4.0-4.1's
    // enumeration (auto, nb, smp, ...), not 0 (auto: the default).
    for (comm, size) in [("c0.0", 2), ("c0.1", 4)] {
        add_record(
            &dir,
            &allreduce_decision(comm, size, json!([0, null]), "smp", 2, 10.0),
        );
    }
    // Without --mpich-lib, export reads the default table from the library
    // the run loaded, which every rank's header names.
    let header = &common::read_jsonl(&dir.join("rank-00000.jsonl"))[0];
    let loaded = header["library_file"].as_str().unwrap_or_default();
    assert!(Path::new(loaded).is_file(), "{header}");
    let json_file = tmp.path().join("selection.json");
    let job = export(&[
        dir.to_str().unwrap(),
        "--format",
        "mpich-json",
        "-o",
        json_file.to_str().unwrap(),
    ]);
    assert_eq!(code(&job), Some(0), "{}", printed(&job));
    let table: Json = serde_json::from_str(&std::fs::read_to_string(&json_file).unwrap()).unwrap();
    let intra = &table["collective=allreduce"]["comm_type=intra"];
    for size in ["comm_size<=2", "comm_size<=4"] {
        let guarded = &intra[size]["avg_msg_size=any"];
        assert_eq!(
            guarded["comm_hierarchy=parent"]["is_commutative=yes"],
            json!({"algorithm=MPIR_Allreduce_intra_smp": {}}),
            "{size}: {guarded}"
        );
        assert!(
            guarded["comm_hierarchy=any"].is_object(),
            "{size}: {guarded}"
        );
    }

    let check = example("coll_check");
    let with_file = [(
        "MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE",
        json_file.to_str().unwrap(),
    )];
    // coll_check on 1 rank a node, or on 4 ranks dealt to the 2 nodes in
    // turn, with `env`.
    let coll_check = |cyclic: bool, env: &[(&str, &str)]| {
        let mut cmd = if cyclic {
            cluster.mpiexec_cyclic(4, &check)
        } else {
            cluster.mpiexec(1, &check)
        };
        cmd.arg("4");
        common::clean_env(&mut cmd);
        cmd.envs(env.iter().copied());
        mpit_testkit::run(cmd)
    };
    for cyclic in [false, true] {
        let plain = coll_check(cyclic, &[]);
        plain.assert_success();
        let tuned = coll_check(cyclic, &with_file);
        tuned.assert_success();
        assert!(
            tuned.stdout().contains("coll_check: all results correct"),
            "cyclic {cyclic}: {}",
            tuned.stdout()
        );
        assert_eq!(plain.stdout(), tuned.stdout(), "cyclic {cyclic}");
    }
}

/// Open MPI: the rules file choosing allgather `two_proc` for
/// communicators of 3 ranks is read (dynamic rules on), and the algorithm
/// is in use: it refuses more than two processes, so the call fails on 3
/// ranks and not on 2 (whose communicators keep the library's choice).
/// The decision is added to a real Open MPI run, so that the test does not
/// rest on what a short run's search keeps; its value is Open MPI's own
/// enumeration item, as `ompi_info` lists it.
#[test]
fn openmpi_rules_are_accepted_and_in_use() {
    if !cfg!(mpi_flavor = "openmpi") {
        eprintln!("skipped: the Open MPI rules file is tried on the Open MPI build");
        return;
    }
    // The ompi_info of this build's Open MPI (beside its mpiexec), not the
    // first one on PATH: Open MPI 5's wheel and Debian's 4.1 differ.
    let launcher = mpit_testkit::mpiexec_path();
    let ompi_info = launcher
        .parent()
        .map(|dir| dir.join("ompi_info"))
        .filter(|p| p.is_file())
        .unwrap_or_else(|| "ompi_info".into());
    let info = std::process::Command::new(&ompi_info)
        .args(["--param", "coll", "tuned", "--level", "9"])
        .env("OMPI_MCA_coll_tuned_use_dynamic_rules", "1")
        .output()
        .expect("ompi_info runs");
    let info = String::from_utf8_lossy(&info.stdout);
    let line = info
        .lines()
        .skip_while(|l| !l.contains("\"coll_tuned_allgather_algorithm\""))
        .find(|l| l.contains("Valid values:"))
        .expect("ompi_info lists allgather's algorithms");
    // `6:"two_proc"` (Open MPI 4.1) or `6|two_proc` (5.0).
    let two_proc: i64 = line
        .split(',')
        .find(|item| item.contains("two_proc"))
        .and_then(|item| item.split([':', '|']).rev().nth(1))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no two_proc in {line}"));
    let tmp = common::tempdir();
    let dir = tmp.path().join("run");
    tuned_run(&dir, 3, &["--tune-collectives"]);
    add_record(
        &dir,
        &json!({"type": "collective", "t": 0.5, "event": "decision", "comm": "c0.0",
                "comm_size": 3, "collective": "allgather", "bin": [0, 256],
                "algorithm": "two_proc", "value": two_proc, "time_us": 1.0, "default_us": 2.0}),
    );
    let job = export(&[dir.to_str().unwrap()]);
    assert_eq!(code(&job), Some(0), "{}", printed(&job));
    assert!(
        job.stdout()
            .contains("not written: mpich-coll-selection.json:"),
        "{}",
        printed(&job)
    );
    let rules = dir.join("export/coll-tuned-rules.conf");
    let env = [
        ("OMPI_MCA_coll_tuned_use_dynamic_rules", "1"),
        (
            "OMPI_MCA_coll_tuned_dynamic_rules_filename",
            rules.to_str().unwrap(),
        ),
    ];
    let plain = fingerprint_on(3, &[]);
    assert!(
        plain.stdout().contains("allgather ok"),
        "{}",
        plain.stdout()
    );
    let three = fingerprint_on(3, &env);
    assert!(
        three.stdout().contains("allgather fails"),
        "{}\n{}",
        three.stdout(),
        three.stderr()
    );
    let two = fingerprint_on(2, &env);
    assert!(two.stdout().contains("allgather ok"), "{}", two.stdout());
}

/// `mpit-tuner export DIR` exits with status 2 and says every phrase.
fn refused(dir: &str, phrases: &[&str]) {
    let job = export(&[dir]);
    assert_eq!(code(&job), Some(2), "{}", printed(&job));
    for phrase in phrases {
        assert!(
            job.stderr().contains(phrase),
            "no {phrase:?} in:\n{}",
            printed(&job)
        );
    }
}

/// A run whose tuner left its collectives at the library's default (an
/// agreed point dearer than 82 of its calls): said as that, with the keys,
/// and not as a run too short, which a longer run would not cure.
#[test]
fn a_run_whose_collectives_were_left_alone_is_told() {
    let tmp = common::tempdir();
    let dir = tmp.path().join("run");
    tuned_run(&dir, 2, &["--tune-collectives=off"]);
    add_record(
        &dir,
        &json!({"type": "collective", "t": 0.1, "event": "left", "comm": "c0.0",
                "comm_size": 2, "collective": "allreduce", "bin": [0, 64],
                "time_us": 0.4, "default_us": 0.4, "cost_us": 30.0,
                "message": "not searched: an agreed point between the ranks costs 30.0 us"}),
    );
    let d = dir.to_str().unwrap();
    refused(
        d,
        &[
            "holds no collective tuning decision: the tuner left every collective at the \
             library's default (allreduce [0 B, 64 B) on c0.0): an agreed point between the \
             ranks cost more than 82 calls of each",
            "nothing to export",
        ],
    );
    let job = export(&[d]);
    assert!(!job.stderr().contains("run longer"), "{}", printed(&job));
}

/// Bad run directories: no collective records, another library than the
/// format's, missing ranks, no decisions. A message naming the directory
/// and what is wrong, exit status 2, no panic.
#[test]
fn bad_run_directories_are_told() {
    let tmp = common::tempdir();
    let dir = tmp.path().join("run");
    tuned_run(&dir, 2, &["--tune-collectives=off"]);
    let d = dir.to_str().unwrap();
    let job = export(&[d]);
    assert_eq!(code(&job), Some(2), "{}", printed(&job));
    assert!(
        job.stderr().contains("has no collective records")
            && job.stderr().contains("MPIT_TUNER_COLLECTIVES=off"),
        "{}",
        printed(&job)
    );
    assert!(!job.stderr().contains("panicked"), "{}", printed(&job));

    // Collective records, no decision, nothing but an algorithm left out:
    // the run was too short, and what was left out.
    add_record(
        &dir,
        &json!({"type": "collective", "t": 0.0, "event": "skipped",
                "message": "coll_tuned_alltoall_algorithm: `modified_bruck` left out"}),
    );
    refused(
        d,
        &[
            "holds no collective tuning decision: the run ended before any search began \
           (a search first settles, 20 ms of calls by default, then runs each candidate: \
           run longer); skipped: coll_tuned_alltoall_algorithm: `modified_bruck` left out",
        ],
    );

    // A record that says why: that, not "too short".
    add_record(
        &dir,
        &json!({"type": "collective", "t": 0.1, "event": "off",
                "message": "a write reaches only communicators created after it"}),
    );
    refused(
        d,
        &[
            "holds no collective tuning decision: skipped: ",
            "; off: a write reaches only communicators created after it",
        ],
    );

    // A search that began and did not end before the run did: said first,
    // with its key, and what to do about it.
    add_record(
        &dir,
        &json!({"type": "collective", "t": 0.2, "event": "trial", "comm": "c0.0",
                "comm_size": 2, "collective": "bcast", "bin": [1048576, null],
                "algorithm": "ignore", "value": 0, "time_us": 95.0, "calls": 128}),
    );
    refused(
        d,
        &[
            "holds no collective tuning decision: the run ended before any search did \
             (1 began: bcast >= 1 MiB on c0.0;",
            "run longer); skipped: ",
            "; off: a write reaches only",
        ],
    );

    // A decision of an Open MPI run, asked for as MPICH JSON.
    add_record(
        &dir,
        &json!({"type": "collective", "t": 0.5, "event": "decision", "comm": "c0.0",
                "comm_size": 2, "collective": "allgather", "bin": [0, null],
                "algorithm": "ring", "value": 4, "time_us": 1.0, "default_us": 2.0}),
    );
    edit_headers(&dir, |h| {
        h["library"] = json!("openmpi");
        h["library_version"] = json!("Open MPI v4.1.4");
    });
    let job = export(&[d, "--format", "mpich-json"]);
    assert_eq!(code(&job), Some(2), "{}", printed(&job));
    assert!(
        job.stderr().contains("was made with Open MPI v4.1.4")
            && job
                .stderr()
                .contains("nothing to export as an MPICH selection table"),
        "{}",
        printed(&job)
    );
    // ... whose rules file is written.
    let rules = tmp.path().join("rules.conf");
    let job = export(&[
        d,
        "--format",
        "openmpi-rules",
        "-o",
        rules.to_str().unwrap(),
    ]);
    assert_eq!(code(&job), Some(0), "{}", printed(&job));
    let text = std::fs::read_to_string(&rules).unwrap();
    assert!(text.contains("\n0 4 0 0 "), "{text}");

    // Different libraries on different ranks.
    let path = dir.join("rank-00001.jsonl");
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, text.replacen("\"openmpi\"", "\"mpich\"", 1)).unwrap();
    let job = export(&[d]);
    assert_eq!(code(&job), Some(2), "{}", printed(&job));
    assert!(
        job.stderr()
            .contains("the logs name different MPI libraries"),
        "{}",
        printed(&job)
    );

    // A missing rank.
    std::fs::remove_file(&path).unwrap();
    let job = export(&[d]);
    assert_eq!(code(&job), Some(2), "{}", printed(&job));
    assert!(
        job.stderr().contains("rank 1 has no log"),
        "{}",
        printed(&job)
    );

    // Not a run directory at all.
    let job = export(&[tmp.path().join("nowhere").to_str().unwrap()]);
    assert_eq!(code(&job), Some(2), "{}", printed(&job));
    assert!(
        job.stderr().contains("is not a directory"),
        "{}",
        printed(&job)
    );
}
