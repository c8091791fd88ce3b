//! `mpit-tuner check` as users run it: on the repository's policy files,
//! on files broken on purpose (`tests/fixtures/broken-policies`), and with
//! `--against-mpi` against the real MPI library of the build. Assertions
//! that hold for one library only are compiled only in builds against it.

mod common;

use common::{code, fixture, mpit_tuner, printed, repo_root};
use std::path::PathBuf;

/// `policies.toml` and every `examples/policies/*.toml`.
fn shipped_policy_files() -> Vec<PathBuf> {
    let default = repo_root().join("policies.toml");
    assert!(default.is_file(), "{} is missing", default.display());
    let mut files = vec![default];
    let dir = repo_root().join("examples/policies");
    if let Ok(entries) = std::fs::read_dir(&dir) {
        let mut examples: Vec<PathBuf> = entries
            .map(|e| e.unwrap().path())
            .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "toml"))
            .collect();
        examples.sort();
        files.extend(examples);
    }
    files
}

fn paths(files: &[PathBuf]) -> Vec<&str> {
    files.iter().map(|p| p.to_str().unwrap()).collect()
}

#[test]
fn the_shipped_policy_files_pass() {
    let files = shipped_policy_files();
    let mut args = vec!["check"];
    args.extend(paths(&files));
    let job = mpit_tuner(&args);
    assert_eq!(code(&job), Some(0), "{}", printed(&job));
    let out = job.stdout();
    for f in &files {
        assert!(
            out.contains(&format!("{}: ok (", f.display())),
            "no ok line for {}:\n{out}",
            f.display()
        );
    }
    assert_eq!(out.lines().count(), files.len(), "{out}");
}

/// (fixture, expected `file:line:col: error: ...` prefix, key phrases).
const BROKEN: &[(&str, &str, &[&str])] = &[
    (
        "syntax.toml",
        "syntax.toml:4:44: error: invalid basic string",
        &["  | when = \"pml_ob1_unexpected_msgq_length > 64\n  |                                            ^"],
    ),
    (
        "unknown-key.toml",
        "unknown-key.toml:6:1: error: unknown field `cooldwon`",
        &["(did you mean `cooldown`?)", "  | cooldwon = \"10s\"\n  | ^"],
    ),
    (
        "typo-function.toml",
        "typo-function.toml:5:10: error: in `when`: unknown function `anny`",
        &["expected one of any, all,"],
    ),
    (
        "setenv-periodic.toml",
        "setenv-periodic.toml:7:22: error: `setenv` is only allowed in phase \"pre-init\" (this policy is \"periodic\")",
        &["reads its environment during MPI_Init"],
    ),
];

#[test]
fn broken_files_are_reported_with_positions() {
    let files: Vec<PathBuf> = BROKEN
        .iter()
        .map(|(f, _, _)| fixture("broken-policies").join(f))
        .collect();
    // One at a time: each message and the exit status.
    for ((name, first, phrases), path) in BROKEN.iter().zip(&files) {
        let job = mpit_tuner(&["check", path.to_str().unwrap()]);
        assert_eq!(code(&job), Some(1), "{name}: {}", printed(&job));
        let out = job.stdout();
        let dir = path.parent().unwrap().display().to_string();
        assert!(
            out.starts_with(&format!("{dir}/{first}")),
            "{name}: expected `{first}` first:\n{out}"
        );
        for phrase in *phrases {
            assert!(
                out.contains(phrase),
                "{name}: expected {phrase:?} in:\n{out}"
            );
        }
        assert!(
            out.ends_with(&format!("{}: failed (1 error)\n", path.display())),
            "{name}:\n{out}"
        );
    }
    // All together, with a good file: still exit 1, every file reported.
    let good = repo_root().join("policies.toml");
    let mut args = vec!["check", good.to_str().unwrap()];
    args.extend(paths(&files));
    let job = mpit_tuner(&args);
    assert_eq!(code(&job), Some(1), "{}", printed(&job));
    assert!(
        job.stdout().contains(&format!("{}: ok (", good.display())),
        "{}",
        printed(&job)
    );
    assert_eq!(
        job.stdout().matches(": failed (1 error)").count(),
        files.len()
    );
}

/// A file that turns collective tuning on says in which mode: its `mode`,
/// or `all` for `tune = true` alone; a bad mode is an error at its place.
#[test]
fn the_collective_tuning_mode_is_named() {
    let tmp = tempfile::tempdir().unwrap();
    for (text, expected) in [
        (
            "[collectives]\nmode = \"safe\"\n",
            "ok (0 policies, collective tuning in mode safe)",
        ),
        (
            "[collectives]\ntune = true\n",
            "ok (0 policies, collective tuning in mode all)",
        ),
        ("[collectives]\nwindow = 4\n", "ok (0 policies)"),
        (
            "[collectives]\nmode = \"fast\"\n",
            "t.toml:2:8: error: in [collectives]: `mode` is \"safe\"",
        ),
    ] {
        let file = tmp.path().join("t.toml");
        std::fs::write(&file, text).unwrap();
        let job = mpit_tuner(&["check", file.to_str().unwrap()]);
        assert!(job.stdout().contains(expected), "{text}: {}", printed(&job));
    }
}

#[test]
fn unreadable_files_exit_2() {
    let job = mpit_tuner(&["check", "/nonexistent/policies.toml"]);
    assert_eq!(code(&job), Some(2), "{}", printed(&job));
    assert!(job
        .stdout()
        .contains("/nonexistent/policies.toml: error: cannot read the file"));
    let job = mpit_tuner(&["check"]);
    assert_eq!(code(&job), Some(2), "{}", printed(&job));
}

/// Runs `check --against-mpi FILES` (a singleton MPI process). The
/// fixtures it checks are MPICH's and Open MPI's.
#[cfg_attr(mpi_library = "mvapich2", allow(dead_code))]
fn against_mpi(files: &[&str]) -> mpit_testkit::Job {
    let mut args = vec!["check", "--against-mpi"];
    let paths: Vec<String> = files
        .iter()
        .map(|f| fixture(f).display().to_string())
        .collect();
    args.extend(paths.iter().map(String::as_str));
    mpit_tuner(&args)
}

#[cfg(mpi_library = "mpich")]
#[test]
fn against_mpich_names_scopes_and_suggestions() {
    let job = against_mpi(&["mpich-poll-freq.toml"]);
    assert_eq!(code(&job), Some(0), "{}", printed(&job));
    let out = job.stdout();
    assert!(out.starts_with("checking against: MPICH"), "{out}");
    assert!(
        out.contains("mpich-poll-freq.toml: ok (1 policy, every variable exported)"),
        "{out}"
    );

    let job = against_mpi(&["mpich-misspelt.toml"]);
    assert_eq!(code(&job), Some(1), "{}", printed(&job));
    let out = job.stdout();
    assert!(
        out.contains(
            "mpich-misspelt.toml:5:20: missing: policy \"poll-more-often\": the MPI library does not \
             export a CVAR named `MPIR_CVAR_REQUEST_POL_FREQ`; closest known names: MPIR_CVAR_REQUEST_POLL_FREQ"
        ),
        "{out}"
    );
    assert!(out.contains("mpich-misspelt.toml: failed (1 missing from this MPI library)"));

    // Valid on its own; an error against a library where the CVAR is ALL_EQ.
    let job = mpit_tuner(&[
        "check",
        fixture("broken-policies/alleq-periodic.toml")
            .to_str()
            .unwrap(),
    ]);
    assert_eq!(code(&job), Some(0), "{}", printed(&job));
    let job = against_mpi(&["broken-policies/alleq-periodic.toml"]);
    assert_eq!(code(&job), Some(1), "{}", printed(&job));
    let out = job.stdout();
    assert!(
        out.contains(
            "alleq-periodic.toml:8:11: error: policy \"switch-allreduce\": \
             `MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM` has scope ALL_EQ and can not be written by a \"periodic\" policy"
        ),
        "{out}"
    );
    assert!(out.contains("collective operations would run with mismatched settings"));
    assert!(out.contains("write it in phase \"pre-init\" or \"init\""));
    assert!(out.contains("alleq-periodic.toml: failed (1 error)"));
}

/// The shipped policies against the release of the library they were
/// written for: the VBUF watch and the shared-memory eager watch find
/// every variable; the thesis' VBUF policy lacks the research build's
/// per-pool arrays and pool-control CVARs, and Open MPI's queue watches
/// lack ob1's queues, each named with its line.
#[cfg(mpi_library = "mvapich2")]
#[test]
fn the_shipped_policies_against_mvapich2() {
    let policies = repo_root().join("policies.toml");
    let job = mpit_tuner(&["check", "--against-mpi", policies.to_str().unwrap()]);
    assert_eq!(code(&job), Some(1), "{}", printed(&job));
    let out = job.stdout();
    assert!(out.starts_with("checking against: MVAPICH2"), "{out}");
    for missing in [
        "policy \"free-unused-vbufs\": the MPI library does not export a variable named `mv2_vbuf_allocated_array`",
        "policy \"free-unused-vbufs\": the MPI library does not export a variable named `mv2_vbuf_max_use_array`",
        "policy \"free-unused-vbufs\": the MPI library does not export a CVAR named `MPIR_CVAR_VBUF_POOL_CONTROL`",
        "policy \"free-unused-vbufs\": the MPI library does not export a CVAR named `MPIR_CVAR_VBUF_POOL_REDUCED_VALUE`",
        "policy \"unexpected-queue-watch\": the MPI library does not export a variable named `pml_ob1_unexpected_msgq_length`",
        "policy \"posted-queue-watch\": the MPI library does not export a variable named `pml_ob1_posted_recvq_length`",
    ] {
        says(&out, missing);
    }
    for found in ["\"vbuf-watch\"", "\"smp-eager-pressure\""] {
        assert!(
            !out.lines()
                .any(|l| l.contains("missing") && l.contains(found)),
            "{found} should find every variable on MVAPICH2:\n{out}"
        );
    }
    says(
        &out,
        "policies.toml: failed (6 missing from this MPI library)",
    );
}

#[cfg(mpi_flavor = "openmpi")]
#[test]
fn against_open_mpi_names_and_suggestions() {
    let job = against_mpi(&["openmpi-queue.toml", "openmpi-misspelt.toml"]);
    assert_eq!(code(&job), Some(1), "{}", printed(&job));
    let out = job.stdout();
    assert!(out.starts_with("checking against: Open MPI"), "{out}");
    assert!(
        out.contains("openmpi-queue.toml: ok (1 policy, every variable exported)"),
        "{out}"
    );
    assert!(
        out.contains(
            "openmpi-misspelt.toml:4:14: missing: policy \"unexpected-queue\": the MPI library does \
             not export a variable named `pml_ob1_unexpected_msgq_lenght`; closest known names: \
             pml_ob1_unexpected_msgq_length"
        ),
        "{out}"
    );
}

/// Asserts that `out` holds `line` (after the fixtures' directory).
#[track_caller]
fn says(out: &str, line: &str) {
    assert!(out.contains(line), "expected {line:?} in:\n{out}");
}

#[cfg(mpi_library = "mpich")]
#[test]
fn collectives_against_mpich() {
    // Good: MPICH's table passes; Open MPI's cannot be checked here.
    let job = against_mpi(&["collectives-good.toml"]);
    assert_eq!(code(&job), Some(0), "{}", printed(&job));
    let out = job.stdout();
    says(
        &out,
        "collectives-good.toml:9:25: warning: in [collectives]: the algorithm names for `openmpi` \
         are not checked: this MPI library is mpich (check this file with an mpit-tuner built \
         against openmpi)",
    );
    says(
        &out,
        "collectives-good.toml: ok (0 policies, every variable exported, 1 warning)",
    );

    // A misspelt name: the variable, the nearest name, every name in value order.
    let job = against_mpi(&["collectives-misspelt.toml"]);
    assert_eq!(code(&job), Some(1), "{}", printed(&job));
    let out = job.stdout();
    // The list is this MPICH's, in value order: 4.0's five names, or 5.0's
    // (recursive_multiplying after recursive_doubling, then more).
    says(
        &out,
        "collectives-misspelt.toml:6:36: error: in [collectives]: `recursive_doubing` is not an \
         algorithm of MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM (did you mean `recursive_doubling`?); \
         its algorithms are: auto, nb, smp, recursive_doubling, ",
    );
    let names = if out.contains("MPICH Version: 5.") {
        "recursive_multiplying, reduce_scatter_allgather, tree, recexch, ring, \
         k_reduce_scatter_allgather, ccl"
    } else {
        "reduce_scatter_allgather"
    };
    says(
        &out,
        &format!(
            "recursive_doubling, {names}\n  \
             | allreduce = [\"recursive_doubling\", \"recursive_doubing\"]\n  \
             |                                    ^"
        ),
    );
    says(
        &out,
        "collectives-misspelt.toml: failed (1 error, 1 warning)",
    );

    // Names for the other library only: not checkable here, not an error.
    let job = against_mpi(&["collectives-other-library.toml"]);
    assert_eq!(code(&job), Some(0), "{}", printed(&job));
    says(
        &job.stdout(),
        "collectives-other-library.toml:5:25: warning: in [collectives]: the algorithm names for \
         `openmpi` are not checked: this MPI library is mpich",
    );
}

#[cfg(mpi_flavor = "openmpi")]
#[test]
fn collectives_against_open_mpi() {
    // Good: Open MPI's names from its MPI_T enumerations, MPICH's from the
    // list the runtime uses.
    let job = against_mpi(&["collectives-good.toml"]);
    assert_eq!(code(&job), Some(0), "{}", printed(&job));
    says(
        &job.stdout(),
        "collectives-good.toml: ok (0 policies, every variable exported)\n",
    );

    let job = against_mpi(&["collectives-misspelt.toml"]);
    assert_eq!(code(&job), Some(1), "{}", printed(&job));
    let out = job.stdout();
    says(
        &out,
        "collectives-misspelt.toml:6:36: error: in [collectives]: `recursive_doubing` is not one \
         of mpich's algorithms for allreduce (did you mean `recursive_doubling`?); they are: auto, \
         nb, smp, recursive_doubling, reduce_scatter_allgather",
    );
    says(
        &out,
        "collectives-misspelt.toml:9:14: error: in [collectives]: `rign` is not an algorithm of \
         coll_tuned_allreduce_algorithm (did you mean `ring`?); its algorithms are: ignore, \
         basic_linear, nonoverlapping, recursive_doubling, ring, segmented_ring",
    );
    says(&out, "collectives-misspelt.toml: failed (2 errors)");

    // MPICH's name in Open MPI's table.
    let job = against_mpi(&["collectives-other-library.toml"]);
    assert_eq!(code(&job), Some(1), "{}", printed(&job));
    let out = job.stdout();
    says(
        &out,
        "collectives-other-library.toml:6:14: error: in [collectives]: `reduce_scatter_allgather` \
         is not an algorithm of coll_tuned_allreduce_algorithm (`reduce_scatter_allgather` is \
         mpich's name: mpich's algorithms go under [collectives.algorithms.mpich]); its \
         algorithms are: ignore,",
    );
    says(&out, "collectives-other-library.toml: failed (1 error)");
}
