//! `mpit-tuner store` and `export --store` (docs/tuning-store.md): a real
//! job's store is listed, shown (as a table and as a store file equal to
//! the job's) and exported; on stores written here, `merge` keeps the
//! newest entry of each key and every other entry, `forget` removes what
//! is selected and nothing else, a damaged store is an error naming the
//! file that changes nothing, and export refuses entries of two libraries.

mod common;

use common::{code, command, example, launcher, mpit_tuner, preload_lib, printed};
use serde_json::{json, Value as Json};
use std::path::Path;

/// A store entry, as the format writes it.
fn entry(library: &str, ranks: i32, collective: &str, lo: u64, algorithm: &str, t: i64) -> Json {
    json!({
        "library": library, "library_version": "4.0.2", "ranks": ranks,
        "ranks_per_node": ranks, "mode": "safe", "comm_size": ranks,
        "collective": collective, "bin": [lo, lo * 2 + 8], "algorithm": algorithm,
        "value": if algorithm == "auto" { 0 } else { 2 }, "default": "auto", "left": false,
        "default_us": 20.0, "chosen_us": 10.0, "runs": 1, "updated_unix": t,
    })
}

fn write_store(path: &Path, entries: Vec<Json>) {
    let doc = json!({"format": "mpit-tuner-store", "version": 1, "entries": entries});
    std::fs::write(path, serde_json::to_string_pretty(&doc).unwrap()).unwrap();
}

/// The entries of the store file at `path`, as (ranks, collective, bin lo,
/// algorithm), sorted.
fn keys(path: &Path) -> Vec<(i64, String, u64, String)> {
    let doc: Json = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    assert_eq!(doc["format"], "mpit-tuner-store", "{doc}");
    let mut out: Vec<_> = doc["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["ranks"].as_i64().unwrap(),
                e["collective"].as_str().unwrap().to_string(),
                e["bin"][0].as_u64().unwrap(),
                e["algorithm"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    out.sort();
    out
}

fn store(args: &[&str]) -> mpit_testkit::Job {
    let mut all = vec!["store"];
    all.extend(args);
    mpit_tuner(&all)
}

#[test]
fn a_real_jobs_store_is_listed_shown_and_exported() {
    if cfg!(mpi_library = "mvapich2") {
        mpit_testkit::not_applicable(
            "a_real_jobs_store_is_listed_shown_and_exported",
            "online collective tuning is off on MVAPICH2 2.3.7: a job stores nothing",
        );
        return;
    }
    preload_lib();
    let tmp = common::tempdir();
    let path = tmp.path().join("store.json");
    let dir = tmp.path().join("run");
    let check = example("coll_check");
    let mut args = vec!["run", "--dir", dir.to_str().unwrap(), "--"];
    let launch = launcher(2);
    args.extend(launch.iter().map(String::as_str));
    args.extend([check.to_str().unwrap(), "4"]);
    let mut cmd = command(&args);
    cmd.env("MPIT_TUNER_STORE", &path)
        .env("MPIT_TUNER_COLLECTIVES", "tune")
        .env("MPIT_TUNER_COLLECTIVES_WINDOW", "1");
    let job = mpit_testkit::run(cmd);
    assert_eq!(code(&job), Some(0), "{}", printed(&job));
    let file: Json = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let entries = file["entries"].as_array().unwrap();
    assert!(
        !entries.is_empty(),
        "the job stored nothing: {}",
        printed(&job)
    );
    let library = entries[0]["library"].as_str().unwrap().to_string();
    let p = path.to_str().unwrap();

    let list = store(&["list", "--store", p]);
    assert_eq!(code(&list), Some(0), "{}", printed(&list));
    let out = list.stdout();
    assert!(
        out.contains(&format!("{} entr", entries.len())) && out.contains("of 1 job shape"),
        "{out}"
    );
    assert!(out.contains(&library) && out.contains("2 ranks"), "{out}");

    // The table: one row per entry, each naming its collective.
    let show = store(&["show", "--store", p]);
    assert_eq!(code(&show), Some(0), "{}", printed(&show));
    let text = show.stdout();
    for e in entries {
        let collective = e["collective"].as_str().unwrap();
        let algorithm = e["algorithm"].as_str().unwrap();
        assert!(
            text.lines()
                .any(|l| l.contains(collective) && l.contains(algorithm)),
            "no row for {e} in\n{text}"
        );
    }
    // As a store file: the job's own entries, value for value.
    let json = store(&["show", "--store", p, "--json"]);
    assert_eq!(code(&json), Some(0), "{}", printed(&json));
    let shown: Json = serde_json::from_str(&json.stdout()).unwrap();
    assert_eq!(shown, file);
    // A selection that matches nothing says so.
    let none = store(&["show", "--store", p, "--ranks", "17"]);
    assert_eq!(code(&none), Some(0), "{}", printed(&none));
    assert!(
        none.stdout().contains("no entry matches"),
        "{}",
        printed(&none)
    );

    // Exported from the store: the pre-init policy applies to every library.
    let out = tmp.path().join("policy.toml");
    let export = mpit_tuner(&[
        "export",
        "--store",
        p,
        "--format",
        "policy",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code(&export), Some(0), "{}", printed(&export));
    let policy = std::fs::read_to_string(&out).unwrap();
    assert!(policy.contains("the tuning store"), "{policy}");
    let check = mpit_tuner(&["check", out.to_str().unwrap()]);
    assert_eq!(code(&check), Some(0), "{}", printed(&check));
}

#[test]
fn merge_keeps_the_newest_of_each_key_and_every_other_entry() {
    let tmp = common::tempdir();
    let into = tmp.path().join("site.json");
    let from = tmp.path().join("user.json");
    write_store(
        &into,
        vec![
            entry("mpich", 4, "bcast", 0, "binomial", 100),
            entry("mpich", 4, "reduce", 0, "auto", 100),
        ],
    );
    write_store(
        &from,
        vec![
            // Newer: replaces the site's.
            entry(
                "mpich",
                4,
                "bcast",
                0,
                "scatter_recursive_doubling_allgather",
                200,
            ),
            // Older: the site's stays.
            entry("mpich", 4, "reduce", 0, "binomial", 50),
            entry("mpich", 2, "allreduce", 64, "recursive_doubling", 10),
        ],
    );
    let merged = store(&[
        "merge",
        from.to_str().unwrap(),
        "--store",
        into.to_str().unwrap(),
    ]);
    assert_eq!(code(&merged), Some(0), "{}", printed(&merged));
    assert!(
        merged.stdout().contains("3 entries, 2 added or newer"),
        "{}",
        printed(&merged)
    );
    assert_eq!(
        keys(&into),
        vec![
            (2, "allreduce".into(), 64, "recursive_doubling".into()),
            (
                4,
                "bcast".into(),
                0,
                "scatter_recursive_doubling_allgather".into()
            ),
            (4, "reduce".into(), 0, "auto".into()),
        ]
    );
    // Into a store that is not there yet: created.
    let fresh = tmp.path().join("new/store.json");
    let made = store(&[
        "merge",
        from.to_str().unwrap(),
        into.to_str().unwrap(),
        "--store",
        fresh.to_str().unwrap(),
    ]);
    assert_eq!(code(&made), Some(0), "{}", printed(&made));
    assert_eq!(keys(&fresh), keys(&into));
}

#[test]
fn forget_removes_what_is_selected_and_nothing_else() {
    let tmp = common::tempdir();
    let path = tmp.path().join("store.json");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    write_store(
        &path,
        vec![
            entry("mpich", 4, "bcast", 0, "binomial", now),
            entry("mpich", 4, "reduce", 0, "binomial", now - 40 * 86_400),
            entry("openmpi", 4, "bcast", 0, "6", now),
        ],
    );
    let p = path.to_str().unwrap();
    // Without a selection: refused, nothing changed.
    let bare = store(&["forget", "--store", p]);
    assert_eq!(code(&bare), Some(2), "{}", printed(&bare));
    assert!(bare.stderr().contains("or --all"), "{}", printed(&bare));
    assert_eq!(keys(&path).len(), 3);

    let old = store(&["forget", "--store", p, "--older-than", "30"]);
    assert_eq!(code(&old), Some(0), "{}", printed(&old));
    assert!(
        old.stdout().contains("forgot 1 entry, 2 left"),
        "{}",
        printed(&old)
    );
    let lib = store(&[
        "forget",
        "--store",
        p,
        "--library",
        "openmpi",
        "--collective",
        "bcast",
    ]);
    assert_eq!(code(&lib), Some(0), "{}", printed(&lib));
    assert_eq!(keys(&path), vec![(4, "bcast".into(), 0, "binomial".into())]);
    let all = store(&["forget", "--store", p, "--all"]);
    assert_eq!(code(&all), Some(0), "{}", printed(&all));
    assert!(keys(&path).is_empty());
    let empty = store(&["list", "--store", p]);
    assert!(empty.stdout().contains("no entries"), "{}", printed(&empty));
}

#[test]
fn a_damaged_store_is_an_error_naming_it_that_changes_nothing() {
    let tmp = common::tempdir();
    let good = tmp.path().join("good.json");
    write_store(&good, vec![entry("mpich", 4, "bcast", 0, "binomial", 100)]);
    let damaged = tmp.path().join("damaged.json");
    let text = std::fs::read_to_string(&good).unwrap();
    std::fs::write(&damaged, &text[..text.len() / 2]).unwrap();
    let d = damaged.to_str().unwrap();
    for args in [
        vec!["list", "--store", d],
        vec!["show", "--store", d],
        vec!["forget", "--store", d, "--all"],
    ] {
        let job = store(&args);
        assert_eq!(code(&job), Some(2), "{args:?}: {}", printed(&job));
        let err = job.stderr();
        assert!(
            err.contains(d) && err.contains("damaged") && err.contains("truncated"),
            "{args:?}: {err}"
        );
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
    }
    // Merging from it or into it: nothing merged, both files as they were.
    let from = store(&["merge", d, "--store", good.to_str().unwrap()]);
    assert_eq!(code(&from), Some(2), "{}", printed(&from));
    assert!(
        from.stderr().contains("nothing merged"),
        "{}",
        printed(&from)
    );
    let into = store(&["merge", good.to_str().unwrap(), "--store", d]);
    assert_eq!(code(&into), Some(2), "{}", printed(&into));
    assert_eq!(std::fs::read_to_string(&good).unwrap(), text);
    assert_eq!(
        std::fs::read_to_string(&damaged).unwrap(),
        &text[..text.len() / 2]
    );
}

#[test]
fn export_from_a_store_takes_one_library() {
    let tmp = common::tempdir();
    let path = tmp.path().join("store.json");
    write_store(
        &path,
        vec![
            entry("mpich", 4, "bcast", 0, "binomial", 100),
            entry("openmpi", 4, "bcast", 0, "binomial", 100),
        ],
    );
    let p = path.to_str().unwrap();
    let out = tmp.path().join("out.toml");
    let o = out.to_str().unwrap();
    let both = mpit_tuner(&["export", "--store", p, "--format", "policy", "-o", o]);
    assert_eq!(code(&both), Some(2), "{}", printed(&both));
    assert!(
        both.stderr().contains("mpich 4.0.2, openmpi 4.0.2") && both.stderr().contains("--library"),
        "{}",
        printed(&both)
    );
    assert!(!out.exists());
    let one = mpit_tuner(&[
        "export",
        "--store",
        p,
        "--library",
        "mpich",
        "--format",
        "policy",
        "-o",
        o,
    ]);
    assert_eq!(code(&one), Some(0), "{}", printed(&one));
    let policy = std::fs::read_to_string(&out).unwrap();
    assert!(policy.contains("binomial"), "{policy}");
    // The selections are for the store: a run directory is one job.
    let dir = mpit_tuner(&["export", tmp.path().to_str().unwrap(), "--ranks", "4"]);
    assert_eq!(code(&dir), Some(2), "{}", printed(&dir));
    assert!(dir.stderr().contains("for --store"), "{}", printed(&dir));
}
