//! The tuning store in real MPI jobs (docs/tuning-store.md): a job writes
//! what its searches kept (rank 0, at `MPI_Finalize`), the next job of the
//! same shape starts its searches from it and says so, with results
//! identical to a run without the tool; a damaged store is one line on the
//! job's terminal and the job runs as without it; two jobs that finish at
//! once into one store both keep their entries.
//!
//! The jobs run `examples/c/coll_check.c` (every result checked bit for
//! bit) with windows of one call, so that every collective's searches end
//! within a short job.

mod common;

use common::*;
use serde_json::Value;
use std::path::Path;

/// Whether online collective tuning runs with this build's library (not
/// on MVAPICH2 2.3.7: tests/collectives.rs).
fn online_tuning_here(test: &str) -> bool {
    if cfg!(mpi_library = "mvapich2") {
        mpit_testkit::not_applicable(
            test,
            "online collective tuning is off on MVAPICH2 2.3.7, which reads its algorithm \
             variables at start only: nothing is learned, nothing stored",
        );
        return false;
    }
    true
}

/// coll_check `rounds` on `ranks` ranks under the tool, tuning every
/// collective with windows of one call, the store at `store`, logs in
/// `dir`.
fn with_store(ranks: u32, rounds: &str, dir: &Path, store: &Path) -> std::process::Command {
    let mut cmd = mpi_job(ranks, &mpit_testkit::example("coll_check"), &[rounds]);
    preload(&mut cmd, dir);
    cmd.env("MPIT_TUNER_COLLECTIVES", "tune")
        .env("MPIT_TUNER_COLLECTIVES_WINDOW", "1")
        .env("MPIT_TUNER_STORE", store);
    cmd
}

/// The store file's entries (asserted: a whole store of the format).
fn entries(store: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(store)
        .unwrap_or_else(|e| panic!("no store at {}: {e}", store.display()));
    let doc: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    assert_eq!(doc["format"], "mpit-tuner-store", "{text}");
    assert_eq!(doc["version"], 1, "{text}");
    doc["entries"].as_array().cloned().unwrap_or_default()
}

/// Every `collective` record of every rank of a run.
fn tuning(dir: &Path, ranks: u32) -> Vec<(u32, Value)> {
    read_run_dir(dir, ranks)
        .iter()
        .flat_map(|log| log.of_type("collective").map(|r| (log.rank, r.clone())))
        .collect()
}

#[test]
fn a_second_run_starts_from_what_the_first_stored_with_the_same_results() {
    if !online_tuning_here("a_second_run_starts_from_what_the_first_stored_with_the_same_results") {
        return;
    }
    let ranks = 4;
    let tmp = tempdir();
    let store = tmp.path().join("store.json");
    let plain = mpit_testkit::run(mpi_job(ranks, &mpit_testkit::example("coll_check"), &["4"]));
    plain.assert_success();

    let first_dir = tmp.path().join("first");
    let first = mpit_testkit::run(with_store(ranks, "4", &first_dir, &store));
    first.assert_success();
    assert_same_stdout(&plain, &first, |_| false);
    let stored = entries(&store);
    assert!(!stored.is_empty(), "nothing stored: {}", first.stderr());
    for e in &stored {
        assert_eq!(e["ranks"], ranks, "{e}");
        assert_eq!(e["mode"], "all", "{e}");
        assert_eq!(e["runs"], 1, "{e}");
        assert!(
            e["algorithm"].is_string() && e["default"].is_string(),
            "{e}"
        );
        assert_eq!(
            e["run_dir"].as_str(),
            Some(first_dir.to_str().unwrap()),
            "{e}"
        );
    }
    // The first run started from nothing.
    let records = tuning(&first_dir, ranks);
    assert!(
        !records.iter().any(|(_, r)| r["event"] == "stored"),
        "{records:?}"
    );

    let second_dir = tmp.path().join("second");
    let second = mpit_testkit::run(with_store(ranks, "4", &second_dir, &store));
    second.assert_success();
    assert_same_stdout(&plain, &second, |_| false);
    let records = tuning(&second_dir, ranks);
    let starts: Vec<&Value> = records
        .iter()
        .filter(|(rank, r)| *rank == 0 && r["event"] == "stored" && r["comm"].is_string())
        .map(|(_, r)| r)
        .collect();
    assert!(!starts.is_empty(), "no search started from the store");
    for r in &starts {
        let message = r["message"].as_str().unwrap_or_default();
        assert!(message.contains("starts from the store"), "{r}");
        assert!(message.contains(first_dir.to_str().unwrap()), "{r}");
    }
    // Decisions that kept the store's choice say so, identically on every
    // rank of their communicator.
    let confirmed: Vec<&Value> = records
        .iter()
        .filter(|(_, r)| r["event"] == "decision" && r["stored"] == true)
        .map(|(_, r)| r)
        .collect();
    assert!(!confirmed.is_empty(), "no stored choice confirmed");
    let mut by_comm = std::collections::BTreeMap::<String, Vec<Vec<Value>>>::new();
    for log in read_run_dir(&second_dir, ranks) {
        let mut mine = std::collections::BTreeMap::<String, Vec<Value>>::new();
        for r in log.of_type("collective") {
            if let Some(comm) = r["comm"].as_str() {
                let mut r = r.clone();
                r.as_object_mut().unwrap().remove("t");
                mine.entry(comm.to_string()).or_default().push(r);
            }
        }
        for (comm, rs) in mine {
            by_comm.entry(comm).or_default().push(rs);
        }
    }
    for (comm, ranks_records) in &by_comm {
        assert!(
            ranks_records.windows(2).all(|w| w[0] == w[1]),
            "communicator {comm}: the ranks logged different tuning"
        );
    }
    // summary.json tells which choices came from the store.
    let summary = check_summary(&second_dir, ranks);
    let outcomes = summary["collectives"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        outcomes.iter().any(|o| o["from_store"] == true),
        "{outcomes:?}"
    );
    // The store now counts a second run for what was confirmed.
    assert!(
        entries(&store).iter().any(|e| e["runs"] == 2),
        "{:?}",
        entries(&store)
    );
}

#[test]
fn a_truncated_store_is_one_line_and_the_job_runs_as_without_it() {
    if !online_tuning_here("a_truncated_store_is_one_line_and_the_job_runs_as_without_it") {
        return;
    }
    let ranks = 3;
    let tmp = tempdir();
    let store = tmp.path().join("store.json");
    let plain = mpit_testkit::run(mpi_job(ranks, &mpit_testkit::example("coll_check"), &["2"]));
    plain.assert_success();
    let learn = mpit_testkit::run(with_store(ranks, "2", &tmp.path().join("learn"), &store));
    learn.assert_success();
    let whole = std::fs::read(&store).unwrap();
    assert!(!entries(&store).is_empty());
    let truncated = &whole[..whole.len() / 2];
    std::fs::write(&store, truncated).unwrap();

    let dir = tmp.path().join("run");
    let job = mpit_testkit::run(with_store(ranks, "2", &dir, &store));
    job.assert_success();
    assert_same_stdout(&plain, &job, |_| false);
    let err = job.stderr();
    // One line (rank 0's, at start): which file, what is wrong, what the
    // run does about it.
    let damaged: Vec<&str> = err.lines().filter(|l| l.contains("damaged")).collect();
    assert_eq!(damaged.len(), 1, "{err}");
    assert!(
        damaged[0].contains(store.to_str().unwrap()) && damaged[0].contains("truncated"),
        "{err}"
    );
    assert!(damaged[0].contains("searches as without it"), "{err}");
    assert!(damaged[0].contains("store.json.damaged"), "{err}");
    // Every rank's log has the warning; no search started from the store.
    let logs = read_run_dir(&dir, ranks);
    for log in &logs {
        assert!(
            log.of_type("warning").any(|w| w["message"]
                .as_str()
                .is_some_and(|m| m.contains("is damaged"))),
            "rank {}",
            log.rank
        );
        assert!(!log.of_type("collective").any(|r| r["event"] == "stored"));
    }
    // The damaged file is kept aside, and the store is whole again.
    let aside = tmp.path().join("store.json.damaged");
    assert_eq!(std::fs::read(&aside).unwrap(), truncated);
    assert!(!entries(&store).is_empty());
}

#[test]
fn two_jobs_finishing_at_once_into_one_store_both_keep_their_entries() {
    if !online_tuning_here("two_jobs_finishing_at_once_into_one_store_both_keep_their_entries") {
        return;
    }
    let tmp = tempdir();
    let store = tmp.path().join("shared").join("store.json");
    let jobs: Vec<_> = [2u32, 3]
        .into_iter()
        .map(|ranks| {
            let cmd = with_store(ranks, "2", &tmp.path().join(format!("job{ranks}")), &store);
            std::thread::spawn(move || mpit_testkit::run(cmd))
        })
        .collect();
    for job in jobs {
        job.join().expect("the job's thread").assert_success();
    }
    let stored = entries(&store);
    for ranks in [2, 3] {
        assert!(
            stored.iter().any(|e| e["ranks"] == ranks),
            "no entry of the job of {ranks} ranks: {stored:?}"
        );
    }
    // No temporary file is left beside the store.
    let left: Vec<_> = std::fs::read_dir(store.parent().unwrap())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".store-"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}
