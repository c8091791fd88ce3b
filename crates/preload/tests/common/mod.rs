//! What the preload tests share: where `libpreload.so`, the example
//! programs and stencil3d are; how to run a program with and without the
//! preload; how to read and check a run directory.
//!
//! Every MPI job goes through mpit-testkit (`mpiexec()` + `run()`), so jobs
//! run one at a time, each under a timeout. Nothing is skipped: a missing
//! MPI, compiler, example or tool fails the test with a message saying what
//! to install or build.
#![allow(dead_code, unused_imports)] // each test binary uses a different part

use mpit_testkit::{flavor, Job};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// Ranks of the multi-rank jobs.
pub const RANKS: u32 = 4;

/// The sampling interval of test runs: short jobs still get many samples.
pub const INTERVAL: &str = "10ms";

pub use mpit_testkit::repo_root;

/// The profile directory of this build (`target/debug`,
/// `target-openmpi/debug`): the test binary is `<profile>/deps/<name>`.
pub fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary knows its path");
    let deps = exe.parent().expect("the test binary is in a directory");
    assert_eq!(
        deps.file_name().and_then(|n| n.to_str()),
        Some("deps"),
        "expected the test binary in <target>/<profile>/deps, got {}",
        exe.display()
    );
    deps.parent()
        .expect("deps is inside the profile directory")
        .to_path_buf()
}

/// The target directory of this build (`target`, `target-openmpi`).
pub fn target_dir() -> PathBuf {
    profile_dir()
        .parent()
        .expect("the profile directory is inside the target directory")
        .to_path_buf()
}

/// The `cargo` command line that builds into this target directory with
/// this build's MPI (for messages).
pub fn cargo_hint(what: &str) -> String {
    let target = target_dir();
    let name = target.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let mpicc = match mpit_testkit::mpicc() {
        "mpicc.mpich" => String::new(),
        wrapper => format!("MPICC={wrapper} "),
    };
    let dir = if name == "target" {
        String::new()
    } else {
        format!(" --target-dir {}", target.display())
    };
    format!("{mpicc}cargo build {what}{dir}")
}

/// `libpreload.so` of this build: the crate is a cdylib as well as an
/// rlib, so building these tests compiles it, into `<profile>/deps`.
/// `cargo test` leaves it there; only `cargo build` also copies it to
/// `<profile>/libpreload.so`, which is therefore stale after an edit and
/// a plain `cargo test`. Take the newest of the two.
pub fn preload_lib() -> PathBuf {
    static LIB: OnceLock<PathBuf> = OnceLock::new();
    LIB.get_or_init(|| {
        let profile = profile_dir();
        let deps = profile.join("deps");
        let mut candidates = vec![profile.join("libpreload.so")];
        if let Ok(entries) = std::fs::read_dir(&deps) {
            candidates.extend(entries.filter_map(|e| {
                let name = e.ok()?.file_name().to_string_lossy().into_owned();
                (name.starts_with("libpreload") && name.ends_with(".so")).then(|| deps.join(name))
            }));
        }
        candidates
            .into_iter()
            .filter_map(|p| Some((std::fs::metadata(&p).ok()?.modified().ok()?, p)))
            .max()
            .map(|(_, p)| p)
            .unwrap_or_else(|| {
                panic!(
                    "the preload library libpreload.so is in neither {} nor {}; build it with `{}`",
                    profile.display(),
                    deps.display(),
                    cargo_hint("-p preload")
                )
            })
    })
    .clone()
}

pub use mpit_testkit::{example, examples_dir};

/// The Fortran example `basics`, or `None` (the test then says it does not
/// apply) when the library has no Fortran wrapper.
pub fn fortran_example(test: &str) -> Option<PathBuf> {
    if mpit_testkit::mpifc().is_none() {
        mpit_testkit::not_applicable(
            test,
            "the library ships no Fortran compiler wrapper, so the Fortran example is not built",
        );
        return None;
    }
    Some(example("basics"))
}

/// stencil3d as cargo built it for this target directory (debug, else
/// release). The tests do not build it (cargo holds the target directory
/// while tests run): CI runs `cargo build --workspace --bins` first.
pub fn stencil3d() -> PathBuf {
    let target = target_dir();
    let candidates = [
        profile_dir().join("stencil3d"),
        target.join("debug").join("stencil3d"),
        target.join("release").join("stencil3d"),
    ];
    let found = candidates
        .iter()
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!(
                "stencil3d is not built in {}: run `{}` (or `cargo build --workspace --bins`) before the tests",
                target.display(),
                cargo_hint("-p stencil3d")
            )
        })
        .clone();
    // A stencil3d built against the other MPI library would not run under
    // this build's mpiexec: say so plainly.
    let expected = mpi_library_of(&example("comm_churn"));
    let actual = mpi_library_of(&found);
    assert_eq!(
        actual.file_name(),
        expected.file_name(),
        "{} links {}, but this is the {} build (which uses {}); rebuild it with `{}`",
        found.display(),
        actual.display(),
        flavor(),
        expected.display(),
        cargo_hint("-p stencil3d")
    );
    found
}

/// The MPI library a program loads (`ldd`): the entry named `libmpich.so*`,
/// `libmpi.so*` or `libmpi_abi.so*` (the MPI-5 standard ABI).
pub fn mpi_library_of(program: &Path) -> PathBuf {
    let out = Command::new("ldd")
        .arg(program)
        .output()
        .unwrap_or_else(|e| panic!("cannot run ldd: {e}"));
    assert!(
        out.status.success(),
        "ldd {} failed: {}",
        program.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.lines()
        .filter_map(|line| {
            let (name, rest) = line.trim().split_once(" => ")?;
            let is_mpi = name.starts_with("libmpich.so")
                || name.starts_with("libmpi.so")
                || name.starts_with("libmpi_abi.so");
            let path = rest.split(" (").next()?.trim();
            (is_mpi && path.starts_with('/')).then(|| PathBuf::from(path))
        })
        .next()
        .unwrap_or_else(|| {
            panic!(
                "{} loads no libmpi/libmpich according to ldd:\n{text}",
                program.display()
            )
        })
}

/// Removes what the caller's environment could add to a run: a preload and
/// every `MPIT_TUNER*` setting.
pub fn clean_env(cmd: &mut Command) {
    cmd.env_remove("LD_PRELOAD");
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("MPIT_TUNER") {
            cmd.env_remove(key);
        }
    }
}

/// An MPI job of `ranks` ranks running `program args` without the tool.
pub fn mpi_job(ranks: u32, program: &Path, args: &[&str]) -> Command {
    let mut cmd = mpit_testkit::mpiexec(ranks, program);
    cmd.args(args);
    clean_env(&mut cmd);
    cmd
}

/// An MPI job running `program args` without the tool on `per_node` ranks
/// of each node of the emulated cluster, launched from its head node.
pub fn cluster_job(
    cluster: &mpit_testkit::cluster::Cluster,
    per_node: u32,
    program: &Path,
    args: &[&str],
) -> Command {
    let mut cmd = cluster.mpiexec(per_node, program);
    cmd.args(args);
    clean_env(&mut cmd);
    cmd
}

/// Puts the tool on a command: `LD_PRELOAD` on the launcher (so `mpiexec`
/// and its proxies run with it too), logs in `dir`, a short interval. Not
/// quiet: the tests see what a user sees on the job's streams.
pub fn preload(cmd: &mut Command, dir: &Path) {
    cmd.env("LD_PRELOAD", preload_lib())
        .env("MPIT_TUNER_DIR", dir)
        .env("MPIT_TUNER_INTERVAL", INTERVAL);
}

/// A fresh temporary directory.
pub fn tempdir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("mpit-preload-test-")
        .tempdir()
        .expect("a temporary directory")
}

/// Runs `program args` on `ranks` ranks without the tool, then with it
/// (logs in `<tmp>/run`); both must succeed. Returns both jobs and the run
/// directory.
pub fn run_both(ranks: u32, program: &Path, args: &[&str], tmp: &Path) -> (Job, Job, PathBuf) {
    run_both_with(ranks, program, args, tmp, &[])
}

/// [`run_both`] with `settings` in the tool's environment.
pub fn run_both_with(
    ranks: u32,
    program: &Path,
    args: &[&str],
    tmp: &Path,
    settings: &[(&str, &str)],
) -> (Job, Job, PathBuf) {
    let plain = mpit_testkit::run(mpi_job(ranks, program, args));
    plain.assert_success();
    let dir = tmp.join("run");
    let mut cmd = mpi_job(ranks, program, args);
    preload(&mut cmd, &dir);
    cmd.envs(settings.iter().copied());
    let tooled = mpit_testkit::run(cmd);
    tooled.assert_success();
    (plain, tooled, dir)
}

/// Asserts that two jobs printed the same standard output, ignoring lines
/// for which `ignore` is true (stencil3d's `time:` line).
pub fn assert_same_stdout(plain: &Job, tooled: &Job, ignore: impl Fn(&str) -> bool) {
    let keep = |job: &Job| -> Vec<String> {
        job.stdout()
            .lines()
            .filter(|l| !ignore(l))
            .map(str::to_string)
            .collect()
    };
    let (a, b) = (keep(plain), keep(tooled));
    assert!(!a.is_empty(), "the job printed nothing: {}", plain.command);
    assert_eq!(
        a,
        b,
        "stdout differs with the preload\n--- without: {}\n{}\n--- with: {}\n{}\n--- stderr with\n{}",
        plain.command,
        plain.stdout(),
        tooled.command,
        tooled.stdout(),
        tooled.stderr()
    );
}

/// How often `needle` occurs in `text`.
pub fn count(text: &str, needle: &str) -> usize {
    text.matches(needle).count()
}

// ---------------------------------------------------------------------------
// Run directories and logs.

/// One rank's log, every line parsed.
#[derive(Debug)]
pub struct RankLog {
    /// The rank (from the file name).
    pub rank: u32,
    /// The file.
    pub path: PathBuf,
    /// Its records, in order.
    pub records: Vec<Value>,
}

impl RankLog {
    /// The records of one type.
    pub fn of_type<'a>(&'a self, kind: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
        self.records.iter().filter(move |r| r["type"] == kind)
    }

    /// The header record (the first).
    pub fn header(&self) -> &Value {
        let first = self.records.first().expect("a header record");
        assert_eq!(first["type"], "header", "{}", self.at(0));
        first
    }

    /// The sample records.
    pub fn samples(&self) -> Vec<&Value> {
        self.of_type("sample").collect()
    }

    /// A message with the file, for assertions.
    pub fn at(&self, i: usize) -> String {
        format!("{} record {}", self.path.display(), i + 1)
    }
}

/// Reads a JSON Lines file: every line must be one complete JSON object with
/// a string `"type"`.
pub fn read_jsonl(path: &Path) -> Vec<Value> {
    read_jsonl_ending(path, false)
}

/// Reads a JSON Lines file as [`read_jsonl`] does; with `killed`, the file
/// of a process that may have been killed in the middle of a `write`
/// (Linux stops such a write at a page boundary), whose last line may be
/// cut: a last line without its newline is left out (and printed), every
/// other line must be whole.
pub fn read_jsonl_ending(path: &Path, killed: bool) -> Vec<Value> {
    let mut text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    if killed && !text.is_empty() && !text.ends_with('\n') {
        let end = text.rfind('\n').map_or(0, |i| i + 1);
        eprintln!(
            "{}: a cut last line left out ({} bytes): {:?}",
            path.display(),
            text.len() - end,
            &text[end..]
        );
        text.truncate(end);
    }
    assert!(
        text.is_empty() || text.ends_with('\n'),
        "{}: the last line is not complete: {:?}",
        path.display(),
        text.lines().last()
    );
    text.lines()
        .enumerate()
        .map(|(i, line)| {
            let value: Value = serde_json::from_str(line).unwrap_or_else(|e| {
                panic!(
                    "{} line {} is not JSON ({e}): {line:?}",
                    path.display(),
                    i + 1
                )
            });
            assert!(
                value.is_object() && value["type"].is_string(),
                "{} line {} is not a record with a \"type\": {line}",
                path.display(),
                i + 1
            );
            value
        })
        .collect()
}

/// Reads the logs of a run directory, in either layout: one
/// `rank-NNNNN.jsonl` per rank, or one `node-<host>.jsonl` per node whose
/// lines start with `{"writer":N,`. Every rank `0..ranks` must have its
/// records in exactly one file, and no other rank any.
pub fn read_run_dir(dir: &Path, ranks: u32) -> Vec<RankLog> {
    read_run_dir_killed(dir, ranks, |_| false)
}

/// Reads a run directory as [`read_run_dir`] does, where the ranks for
/// which `killed` holds may have been killed in the middle of a write (the
/// other ranks of a job that called `MPI_Abort`): their file's last line
/// may be cut ([`read_jsonl_ending`]). One file a rank only.
pub fn read_run_dir_killed(dir: &Path, ranks: u32, killed: impl Fn(u32) -> bool) -> Vec<RankLog> {
    let names: BTreeSet<String> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("no run directory {}: {e}", dir.display()))
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let mut found: std::collections::BTreeMap<u32, Vec<RankLog>> = Default::default();
    for name in names.iter().filter(|n| n.ends_with(".jsonl")) {
        let path = dir.join(name);
        if let Some(rank) = name
            .strip_prefix("rank-")
            .and_then(|n| n.strip_suffix(".jsonl"))
            .and_then(|n| n.parse::<u32>().ok())
        {
            found.entry(rank).or_default().push(RankLog {
                rank,
                records: read_jsonl_ending(&path, killed(rank)),
                path,
            });
        } else if name.starts_with("node-") {
            assert!(
                (0..ranks).all(|r| !killed(r)),
                "{}: killed ranks are read from rank files only",
                path.display()
            );
            for (rank, records) in read_node_log(&path) {
                found.entry(rank).or_default().push(RankLog {
                    rank,
                    records,
                    path: path.clone(),
                });
            }
        } else {
            panic!("{}: a .jsonl file that is no log", path.display());
        }
    }
    let got: Vec<(u32, usize)> = found.iter().map(|(r, l)| (*r, l.len())).collect();
    let expected: Vec<(u32, usize)> = (0..ranks).map(|r| (r, 1)).collect();
    assert_eq!(
        got,
        expected,
        "expected one log per rank in {} (all files: {names:?})",
        dir.display()
    );
    found.into_values().flatten().collect()
}

/// Whether the run directory's logs are one file a node.
pub fn node_layout(dir: &Path) -> bool {
    std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("no run directory {}: {e}", dir.display()))
        .any(|e| {
            let name = e.unwrap().file_name().to_string_lossy().into_owned();
            name.starts_with("node-") && name.ends_with(".jsonl")
        })
}

/// Reads a node's log: per rank (its lines' `writer`), its records in
/// order, the `writer` field removed; blank lines are skipped, every other
/// line must be a whole record with its writer.
pub fn read_node_log(path: &Path) -> std::collections::BTreeMap<u32, Vec<Value>> {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    assert!(
        text.is_empty() || text.ends_with('\n'),
        "{}: the last line is not complete",
        path.display()
    );
    let mut out: std::collections::BTreeMap<u32, Vec<Value>> = Default::default();
    for (i, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        assert!(
            line.starts_with("{\"writer\":"),
            "{} line {}: no writer first: {line}",
            path.display(),
            i + 1
        );
        let mut value: Value = serde_json::from_str(line).unwrap_or_else(|e| {
            panic!(
                "{} line {} is not JSON ({e}): {line:?}",
                path.display(),
                i + 1
            )
        });
        let writer = value
            .as_object_mut()
            .and_then(|o| o.remove("writer"))
            .and_then(|w| w.as_u64())
            .unwrap_or_else(|| panic!("{} line {}: no writer rank", path.display(), i + 1));
        assert!(
            value["type"].is_string(),
            "{} line {} is not a record with a \"type\": {line}",
            path.display(),
            i + 1
        );
        out.entry(writer as u32).or_default().push(value);
    }
    out
}

/// Checks the header record: first in the file, with the format version
/// and the facts the log format promises.
pub fn check_header(log: &RankLog, size: u32) -> &Value {
    let header = log
        .records
        .first()
        .unwrap_or_else(|| panic!("{} is empty", log.path.display()));
    let at = log.at(0);
    assert_eq!(header["type"], "header", "{at}: the first record");
    assert_eq!(header["version"], 1, "{at}: format version");
    assert_eq!(header["rank"], log.rank, "{at}: rank");
    assert_eq!(header["size"], size, "{at}: size");
    assert!(
        header["host"].as_str().is_some_and(|h| !h.is_empty()),
        "{at}: host"
    );
    assert!(header["pid"].as_u64().is_some_and(|p| p > 0), "{at}: pid");
    assert_eq!(
        header["library"],
        mpit_sys::BUILD_HEADER_LIBRARY,
        "{at}: library"
    );
    assert!(
        header["library_version"]
            .as_str()
            .is_some_and(|v| !v.is_empty()),
        "{at}: library_version"
    );
    assert!(header["config"].is_object(), "{at}: config");
    assert!(header["variables"].is_array(), "{at}: variables");
    assert_eq!(
        log.records.iter().filter(|r| r["type"] == "header").count(),
        1,
        "{}: one header",
        log.path.display()
    );
    header
}

/// Checks a log of a rank that finished normally: header first, close last
/// (reason `finalize`), at least one sample, sample numbers increasing and
/// times never going back, and the object lifecycle.
pub fn check_complete_log(log: &RankLog, size: u32) {
    check_header(log, size);
    let last = log.records.last().unwrap();
    let at = log.at(log.records.len() - 1);
    assert_eq!(last["type"], "close", "{at}: the last record");
    assert_eq!(last["reason"], "finalize", "{at}");
    assert_eq!(
        log.of_type("close").count(),
        1,
        "{}: one close record",
        log.path.display()
    );
    let samples = log.samples();
    assert!(
        !samples.is_empty(),
        "{}: no sample records",
        log.path.display()
    );
    let mut seq = 0;
    let mut t = 0.0;
    for s in &samples {
        let n = s["seq"].as_u64().expect("sample seq");
        let time = s["t"].as_f64().expect("sample t");
        assert!(n > seq, "{}: seq {n} after {seq}", log.path.display());
        assert!(time >= t, "{}: t {time} after {t}", log.path.display());
        assert!(s["vars"].is_array(), "{}: sample vars", log.path.display());
        for var in s["vars"].as_array().unwrap() {
            assert!(var["name"].is_string() && var["class"].is_string(), "{var}");
            assert!(var["value"].is_array() || var["value"].is_number(), "{var}");
        }
        seq = n;
        t = time;
    }
    assert_eq!(
        last["samples"], seq,
        "{at}: the close record counts the samples"
    );
    check_objects(log);
}

/// The lifecycle of the communicators and windows in one log.
#[derive(Debug, Default)]
pub struct Lifecycle {
    /// Label -> (record index of `created`, record index of `freed`).
    pub objects: BTreeMap<String, (usize, Option<usize>)>,
}

impl Lifecycle {
    /// Labels of the communicators the application created (`commN`).
    pub fn comms(&self) -> Vec<&str> {
        self.objects
            .keys()
            .filter(|k| k.starts_with("comm"))
            .map(String::as_str)
            .collect()
    }
}

/// "No handle outlives its object": `world` is created first; every
/// `commN`/`winN` is created once, freed once, after it was created and
/// before the close record; no sample reads a variable of an object before
/// it was created or after it was freed.
pub fn check_objects(log: &RankLog) -> Lifecycle {
    let name = log.path.display();
    let mut life = Lifecycle::default();
    let close = log
        .records
        .iter()
        .position(|r| r["type"] == "close")
        .unwrap_or(log.records.len());
    for (i, r) in log.records.iter().enumerate() {
        if r["type"] != "object" {
            continue;
        }
        let label = r["object"].as_str().expect("object label").to_string();
        assert!(
            label == "world"
                || label
                    .strip_prefix("comm")
                    .or_else(|| label.strip_prefix("win"))
                    .is_some_and(|n| n.parse::<u64>().is_ok()),
            "{name}: object label {label:?}"
        );
        assert!(r["handles"].is_u64(), "{name}: object record {r}");
        match r["event"].as_str() {
            Some("created") => {
                let old = life.objects.insert(label.clone(), (i, None));
                assert!(old.is_none(), "{name}: {label} created twice");
            }
            Some("freed") => {
                let entry = life
                    .objects
                    .get_mut(&label)
                    .unwrap_or_else(|| panic!("{name}: {label} freed but never created"));
                assert!(entry.1.is_none(), "{name}: {label} freed twice");
                entry.1 = Some(i);
            }
            other => panic!("{name}: object event {other:?}"),
        }
    }
    if let Some(first) = log.records.iter().find(|r| r["type"] == "object") {
        assert_eq!(
            first["object"], "world",
            "{name}: MPI_COMM_WORLD is the first object"
        );
    }
    for (label, (created, freed)) in &life.objects {
        if label == "world" {
            // MPI_COMM_WORLD's handles go at finalize, with no record.
            assert!(freed.is_none(), "{name}: world freed by the application?");
            continue;
        }
        let freed = freed.unwrap_or_else(|| {
            panic!("{name}: {label} (record {created}) is never freed before close")
        });
        assert!(freed > *created && freed < close, "{name}: {label}");
    }
    // Handles only while the object lives.
    for (i, r) in log.records.iter().enumerate() {
        if r["type"] != "sample" {
            continue;
        }
        for var in r["vars"].as_array().into_iter().flatten() {
            let Some(label) = var["object"].as_str() else {
                continue;
            };
            let (created, freed) = life.objects.get(label).unwrap_or_else(|| {
                panic!(
                    "{}: sample of {} on {label}, which was never created",
                    log.at(i),
                    var["name"]
                )
            });
            assert!(
                i > *created,
                "{}: {} read on {label} before it was created",
                log.at(i),
                var["name"]
            );
            if let Some(freed) = freed {
                assert!(
                    i < *freed,
                    "{}: {} read on {label} after it was freed (record {})",
                    log.at(i),
                    var["name"],
                    freed + 1
                );
            }
        }
    }
    life
}

/// Reads and checks `summary.json`: format version, job size, and for every
/// variable the statistics the format promises, consistent with each other.
pub fn check_summary(dir: &Path, size: u32) -> Value {
    let path = dir.join("summary.json");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("no summary {}: {e}", path.display()));
    let doc: Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{} is not JSON: {e}\n{text}", path.display()));
    assert_eq!(doc["version"], 1, "{}", path.display());
    assert_eq!(doc["size"], size, "{}", path.display());
    assert_eq!(
        doc["library"],
        mpit_sys::BUILD_HEADER_LIBRARY,
        "{}",
        path.display()
    );
    let vars = doc["variables"]
        .as_array()
        .unwrap_or_else(|| panic!("{}: no variables array", path.display()));
    for v in vars {
        assert!(v["name"].is_string() && v["kind"].is_string(), "{v}");
        let ranks = v["ranks"].as_u64().expect("ranks");
        assert!(ranks >= 1 && ranks <= u64::from(size), "{v}");
        let (min, max, mean, sd) = (
            v["min"].as_f64().expect("min"),
            v["max"].as_f64().expect("max"),
            v["mean"].as_f64().expect("mean"),
            v["stddev"].as_f64().expect("stddev"),
        );
        let eps = 1e-9 * (1.0 + max.abs());
        assert!(
            min <= mean + eps && mean <= max + eps && sd >= 0.0,
            "inconsistent statistics: {v}"
        );
        for key in ["min_rank", "max_rank"] {
            let r = v[key].as_i64().expect(key);
            assert!((0..i64::from(size)).contains(&r), "{key}: {v}");
        }
    }
    doc
}

// ---------------------------------------------------------------------------
// Fault injection (see tests/faults/faultinject.c).

/// The fault library, built once per test binary with this build's MPI
/// compiler wrapper.
pub fn fault_lib() -> &'static Path {
    static LIB: OnceLock<PathBuf> = OnceLock::new();
    LIB.get_or_init(|| {
        let out = target_dir().join(format!("faultinject-{}", mpit_testkit::build_key()));
        std::fs::create_dir_all(&out).expect("a directory for the fault library");
        let lib = out.join("libfaultinject.so");
        let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/faults/faultinject.c");
        let mpicc = mpit_testkit::mpicc();
        let output = Command::new(mpicc)
            .args([
                "-O1", "-g", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC", "-o",
            ])
            .arg(&lib)
            .arg(&source)
            .arg("-ldl")
            .output()
            .unwrap_or_else(|e| panic!("cannot run {mpicc}: {e}"));
        assert!(
            output.status.success(),
            "building {} failed:\n{}",
            source.display(),
            String::from_utf8_lossy(&output.stderr)
        );
        lib
    })
}
