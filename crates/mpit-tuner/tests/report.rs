//! `mpit-tuner report` on real run directories: a 4-rank job of the
//! `traffic` example under the preload library, with a policy that writes
//! CVARs (MPICH) or has its writes refused (Open MPI); the same run damaged
//! in several ways; and a synthetic run of 2000 rank files made from it.
//!
//! The preload library is the one of this build, next to the `mpit-tuner`
//! binary; the examples are built with the build's MPI compiler. A missing
//! MPI, compiler or library fails the tests.

use mpit_testkit::{flavor, mpiexec, repo_root, run, Job};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Instant;

const BIN: &str = env!("CARGO_BIN_EXE_mpit-tuner");

fn profile_dir() -> PathBuf {
    Path::new(BIN)
        .parent()
        .expect("the binary is in the profile directory")
        .to_path_buf()
}

/// `libpreload.so` of this build: next to the binary (`cargo build`), or
/// in `deps` (`cargo test` of the preload crate); the newest.
fn preload_lib() -> PathBuf {
    let profile = profile_dir();
    let mut candidates = vec![profile.join("libpreload.so")];
    if let Ok(entries) = std::fs::read_dir(profile.join("deps")) {
        candidates.extend(entries.filter_map(|e| {
            let e = e.ok()?;
            let name = e.file_name().to_string_lossy().into_owned();
            (name.starts_with("libpreload") && name.ends_with(".so")).then(|| e.path())
        }));
    }
    candidates
        .into_iter()
        .filter(|p| p.is_file())
        .max_by_key(|p| p.metadata().and_then(|m| m.modified()).ok())
        .unwrap_or_else(|| {
            panic!(
                "libpreload.so is not built in {}: run `cargo build -p preload` \
                 with the same --target-dir (and MPICC) as these tests",
                profile.display()
            )
        })
}

/// The `traffic` example, built with this build's MPI compiler wrapper
/// (testkit's examples).
fn traffic() -> PathBuf {
    mpit_testkit::example("traffic")
}

/// The policy of the test run: MPICH (and MVAPICH2) writes a CVAR
/// periodically; Open MPI refuses a write at init and notes its
/// unexpected-message queue.
fn policy_file(dir: &Path) -> PathBuf {
    let names: &[&str] = if flavor() == "openmpi" {
        &["openmpi-refused-after-init.toml", "openmpi-queues.toml"]
    } else if cfg!(mpi_library = "mvapich2") {
        &["mvapich2-adaptive-chop.toml"]
    } else {
        &["mpich-adaptive-poll.toml"]
    };
    let text: String = names
        .iter()
        .map(|n| {
            std::fs::read_to_string(repo_root().join("examples/policies").join(n))
                .unwrap_or_else(|e| panic!("examples/policies/{n}: {e}"))
        })
        .collect::<Vec<_>>()
        .join("\n");
    let path = dir.join("policy.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// A real 4-rank run directory, made once per test binary: even ranks
/// allreduce, odd ranks broadcast, all send 50 x 64 KiB in a ring; ranks
/// 1-3 first send 40 small messages that wait on rank 0 as unexpected.
fn real_run() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = traffic_run("report-tests", &[]);
        for r in 0..4 {
            assert!(
                dir.join(format!("rank-{r:05}.jsonl")).is_file(),
                "the job wrote no log for rank {r} in {}",
                dir.display()
            );
        }
        dir
    })
    .clone()
}

/// The job of [`real_run`] with `MPIT_TUNER_LOG_LAYOUT=node`: one log for
/// the node, which the four ranks append to.
fn real_node_run() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| traffic_run("report-tests-node", &[("MPIT_TUNER_LOG_LAYOUT", "node")]))
        .clone()
}

/// Runs the 4-rank `traffic` job of [`real_run`] under the tool in
/// `<profile>/<name>-<flavour>/run`, with `env` added; returns the run
/// directory, which has a summary.json.
fn traffic_run(name: &str, env: &[(&str, &str)]) -> PathBuf {
    let base = profile_dir().join(format!("{name}-{}", mpit_testkit::build_key()));
    let _ = std::fs::remove_dir_all(&base);
    std::fs::create_dir_all(&base).unwrap();
    let dir = base.join("run");
    let mut cmd = mpiexec(4, traffic());
    cmd.args(["evenodd", "allreduces=200", "sends=50", "unexpected=40"]);
    cmd.env_remove("LD_PRELOAD");
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("MPIT_TUNER") {
            cmd.env_remove(k);
        }
    }
    cmd.env("LD_PRELOAD", preload_lib())
        .env("MPIT_TUNER_DIR", &dir)
        .env("MPIT_TUNER_INTERVAL", "10ms")
        .env("MPIT_TUNER_QUIET", "1")
        .env("MPIT_TUNER_POLICY", policy_file(&base));
    if cfg!(mpi_library = "mvapich2") {
        // MVAPICH2 2.3.7 exports 1051 PVARs: every sample line is ~115 KB,
        // and the 2000 rank files of `two_thousand_rank_files` would be
        // 3 GB (335 s to report in a debug build). Its shared-memory
        // channel's counters, what this one-node job uses, are enough here.
        cmd.env("MPIT_TUNER_PVARS", "^mv2_smp_");
    }
    cmd.envs(env.iter().copied());
    run(cmd).assert_success();
    assert!(dir.join("summary.json").is_file());
    dir
}

/// `mpit-tuner report ARGS`.
fn report(args: &[&dyn AsRef<std::ffi::OsStr>]) -> Job {
    let mut cmd = Command::new(BIN);
    cmd.arg("report");
    for a in args {
        cmd.arg(a);
    }
    run(cmd)
}

fn assert_contains(out: &str, needles: &[&str]) {
    for n in needles {
        assert!(out.contains(n), "expected `{n}` in the report:\n{out}");
    }
}

/// A copy of a run directory (its files, not the report subdirectory).
fn copy_run(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_file() {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

fn tempdir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("mpit-report-test-")
        .tempdir()
        .unwrap()
}

fn check_png(path: &Path) {
    let file = std::fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut reader = png::Decoder::new(std::io::BufReader::new(file))
        .read_info()
        .unwrap_or_else(|e| panic!("{} does not decode as PNG: {e}", path.display()));
    let mut buf = vec![0; reader.output_buffer_size().expect("a buffer size")];
    let info = reader
        .next_frame(&mut buf)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(
        info.width >= 400 && info.height >= 300,
        "{}: {}x{}",
        path.display(),
        info.width,
        info.height
    );
    let pixels = &buf[..info.buffer_size()];
    let dark = pixels
        .chunks(info.color_type.samples())
        .filter(|p| p[0] < 128)
        .count();
    assert!(
        dark > 500,
        "{} is nearly blank ({dark} dark pixels)",
        path.display()
    );
}

fn check_svg(path: &Path, element: &str) {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(
        text.starts_with("<svg"),
        "{} does not start with <svg",
        path.display()
    );
    assert!(
        text.trim_end().ends_with("</svg>"),
        "{} is not closed",
        path.display()
    );
    assert!(
        text.contains(element),
        "{} has no {element}",
        path.display()
    );
}

/// The tables, the Markdown, the CSV files and the plots of a real run.
#[test]
fn report_of_a_real_run() {
    let dir = real_run();
    let tmp = tempdir();
    let (md, csv, plots) = (
        tmp.path().join("r.md"),
        tmp.path().join("csv"),
        tmp.path().join("plots"),
    );
    let job = report(&[&dir, &"--markdown", &md, &"--csv", &csv, &"--plots", &plots]);
    job.assert_success();
    let out = job.stdout();
    assert!(!out.contains("Problems with this run directory"), "{out}");
    assert_contains(
        &out,
        &[
            "mpit-tuner report: ",
            "\nRun\n",
            "ranks     4 (4 logs read)",
            "sampling  every 10 ms",
            "Top variables",
            "Largest spread across ranks",
            "Cross-rank statistics",
            "From summary.json",
            "tool.allreduce.calls",
            "Message sizes",
            // 50 sends of 64 KiB on each of 4 ranks; 200 allreduces of 8 B
            // on each even rank.
            "[64 KiB, 128 KiB): 200",
            "allreduce       400  [8 B, 16 B): 400",
            "Classes of ranks",
            "CVAR changes",
            "Policies",
            "Recommendations",
            "[eager-threshold]",
            "evidence: ",
            "set: ",
            "Warnings",
            "Plots and files",
        ],
    );
    // Classes: odd ranks broadcast; even ranks allreduce, and rank 0 also
    // receives the unexpected messages.
    assert_contains(
        &out,
        &[
            "3 classes",
            "\n  1-3:2      2  ",
            "\n  0          1  ",
            "\n  2          1  ",
        ],
    );
    if flavor() == "openmpi" {
        assert_contains(
            &out,
            &[
                "hugepage-priority",
                "mpool_hugepage_priority",
                "refused_now",
            ],
        );
    } else if cfg!(mpi_library = "mvapich2") {
        assert_contains(
            &out,
            &[
                "adaptive-poll",
                "MPIR_CVAR_CHOP_ERROR_STACK",
                "0 -> ",
                "written",
            ],
        );
    } else {
        assert_contains(
            &out,
            &[
                "adaptive-poll",
                "MPIR_CVAR_REQUEST_POLL_FREQ",
                "8 -> ",
                "written",
            ],
        );
    }
    // Plotted over time: what moves (the busiest call family's rate and
    // the time in MPI per second).
    assert_contains(
        &out,
        &[
            "tool.allreduce.calls per s across ranks over time",
            "time in MPI per s (tool.mpi.time",
        ],
    );
    // Every write of the logs is in the report, with its time and rank.
    let writes: usize = (0..4)
        .map(|r| {
            std::fs::read_to_string(dir.join(format!("rank-{r:05}.jsonl")))
                .unwrap()
                .lines()
                .filter(|l| l.contains("\"type\":\"write\""))
                .count()
        })
        .sum();
    assert!(writes > 0, "the policy wrote nothing");
    let markdown = std::fs::read_to_string(&md).unwrap();
    assert_contains(
        &markdown,
        &[
            "# mpit-tuner report",
            "## Cross-rank statistics",
            "## CVAR changes",
            "| t (s) | rank |",
            "![",
            ".png)",
        ],
    );
    let write_rows = markdown
        .lines()
        .skip_while(|l| !l.starts_with("| t (s) | rank | policy |"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .count();
    assert_eq!(
        write_rows, writes,
        "every write in the Markdown:\n{markdown}"
    );

    // CSV: every sample value, every write.
    let samples = std::fs::read_to_string(csv.join("samples.csv")).unwrap();
    let mut lines = samples.lines();
    assert_eq!(lines.next(), Some("rank,t,variable,object,element,value"));
    assert!(
        samples
            .lines()
            .any(|l| l.starts_with("0,") && l.contains(",tool.allreduce.calls,,0,200")),
        "rank 0's 200 allreduces are in samples.csv"
    );
    let csv_writes = std::fs::read_to_string(csv.join("writes.csv")).unwrap();
    assert_eq!(csv_writes.lines().count(), writes + 1, "{csv_writes}");

    // Plots: SVG and PNG of each.
    let over_time: Vec<PathBuf> = std::fs::read_dir(&plots)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("over-time-")
        })
        .collect();
    // What moves: the busiest call family's rate (200 allreduces per rank),
    // the time in MPI per second, and on Open MPI a queue length that
    // changed, if one did (each as SVG and PNG).
    assert!(
        over_time.len() == 4 || over_time.len() == 6,
        "{over_time:?}"
    );
    for stem in [
        "over-time-tool.allreduce.calls-rate",
        "over-time-tool.mpi.time-rate",
    ] {
        check_png(&plots.join(format!("{stem}.png")));
        check_svg(&plots.join(format!("{stem}.svg")), "per s");
    }
    for stem in ["rank-histograms", "message-sizes", "cvar-changes"] {
        check_png(&plots.join(format!("{stem}.png")));
    }
    for p in &over_time {
        if p.extension().is_some_and(|e| e == "png") {
            check_png(p);
        } else {
            check_svg(p, "<polyline");
        }
    }
    check_svg(&plots.join("rank-histograms.svg"), "<rect");
    check_svg(&plots.join("message-sizes.svg"), "<rect");
    // Written: circles (MPICH); refused: crosses (Open MPI).
    if flavor() == "openmpi" {
        check_svg(&plots.join("cvar-changes.svg"), "refused");
    } else {
        check_svg(&plots.join("cvar-changes.svg"), "<circle");
    }

    // A variable of one's choice; the default directory is RUN_DIR/report.
    let copy = tmp.path().join("copy");
    copy_run(&dir, &copy);
    let job = report(&[&copy, &"--var", &"tool.send.calls", &"--limit", &"3"]);
    job.assert_success();
    assert!(job.stdout().contains("more rows"), "{}", job.stdout());
    check_png(&copy.join("report/over-time-tool.send.calls.png"));
    check_svg(
        &copy.join("report/over-time-tool.send.calls.svg"),
        "<polyline",
    );
}

/// A run with a deleted rank file, a log cut in the middle of a line
/// without its close record, and no summary.json: each is said, and the
/// rest is still reported (statistics and classes recomputed).
#[test]
fn damaged_run_reports_what_is_missing() {
    let tmp = tempdir();
    let dir = tmp.path().join("run");
    copy_run(&real_run(), &dir);
    std::fs::remove_file(dir.join("rank-00002.jsonl")).unwrap();
    std::fs::remove_file(dir.join("summary.json")).unwrap();
    let log3 = dir.join("rank-00003.jsonl");
    let text = std::fs::read_to_string(&log3).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    assert!(lines.pop().unwrap().contains("\"type\":\"close\""));
    let keep = lines.len() * 2 / 3;
    let cut_line = lines[keep];
    let mut damaged = lines[..keep].join("\n");
    damaged.push('\n');
    damaged.push_str(&cut_line[..cut_line.len() / 2]);
    std::fs::write(&log3, damaged).unwrap();

    // Every row (0): the tool's metrics must show whatever the library's
    // variables are.
    let job = report(&[&dir, &"--no-plots", &"--limit", &"0"]);
    job.assert_success();
    let out = job.stdout();
    assert_contains(
        &out,
        &[
            "Problems with this run directory",
            "rank 2 has no log",
            &format!("rank-00003.jsonl: line {} is cut short", keep + 1),
            "rank-00003.jsonl: ends at line",
            "without a close record (job killed?)",
            "without a close record (job killed?): started and never finished",
            "summary.json: missing",
            "ranks     4 (3 of 4 logs read; 3 rank files)",
            "Recomputed from the last sample of each log",
            "tool.allreduce.calls",
            "Classes of ranks",
            "Recomputed from the logs' tool metrics",
            "CVAR changes",
        ],
    );
    // The complete logs still give exact numbers: rank 0 made 200
    // allreduces.
    assert!(
        out.lines()
            .any(|l| l.trim_start().starts_with("tool.allreduce.calls ") && l.contains(" 200 ")),
        "{out}"
    );

    // With plots: the series are read again for the recomputed choice.
    let job = report(&[&dir, &"--plots", &tmp.path().join("plots")]);
    job.assert_success();
    assert!(tmp.path().join("plots/cvar-changes.png").is_file());
    assert!(std::fs::read_dir(tmp.path().join("plots"))
        .unwrap()
        .any(|e| e
            .unwrap()
            .file_name()
            .to_string_lossy()
            .starts_with("over-time-")));
}

/// Files that are not logs, a newer format, and directories with nothing
/// to report.
#[test]
fn broken_files_and_empty_directories() {
    let tmp = tempdir();
    let dir = tmp.path().join("run");
    copy_run(&real_run(), &dir);
    std::fs::write(dir.join("rank-00001.jsonl"), "this is not JSON\nat all\n").unwrap();
    let log0 = dir.join("rank-00000.jsonl");
    let text = std::fs::read_to_string(&log0).unwrap();
    let (first, rest) = text.split_once('\n').unwrap();
    let mut header: Value = serde_json::from_str(first).unwrap();
    header["version"] = 99.into();
    std::fs::write(&log0, format!("{header}\n{rest}")).unwrap();
    std::fs::write(dir.join("rank-00002.jsonl"), "").unwrap();
    let job = report(&[&dir, &"--no-plots"]);
    job.assert_success();
    assert_contains(
        &job.stdout(),
        &[
            "rank-00001.jsonl: line 1 is not JSON",
            "rank-00000.jsonl: format version 99; this mpit-tuner reads version 1",
            "rank-00002.jsonl: empty",
            "From summary.json",
            "Classes of ranks",
        ],
    );

    // Nothing to report: exit status 2 and a clear message.
    let empty = tmp.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    std::fs::write(empty.join("notes.txt"), "x").unwrap();
    let job = report(&[&empty]);
    assert_eq!(job.output.status.code(), Some(2), "{}", job.stderr());
    assert!(
        job.stderr().contains("is not a run directory"),
        "{}",
        job.stderr()
    );
    let job = report(&[&tmp.path().join("nowhere")]);
    assert_eq!(job.output.status.code(), Some(2));
    assert!(
        job.stderr().contains("is not a directory"),
        "{}",
        job.stderr()
    );
    std::fs::write(empty.join("rank-00000.jsonl"), "garbage\n").unwrap();
    let job = report(&[&empty]);
    assert_eq!(job.output.status.code(), Some(2), "{}", job.stdout());
    assert_contains(
        &job.stderr(),
        &["nothing to report", "rank-00000.jsonl: line 1 is not JSON"],
    );

    let help = run({
        let mut c = Command::new(BIN);
        c.args(["report", "--help"]);
        c
    });
    help.assert_success();
    assert_contains(
        &help.stdout(),
        &[
            "RUN_DIR",
            "--markdown",
            "--csv",
            "--plots",
            "--var",
            "Exit status",
        ],
    );
}

/// 2000 small rank files made from the real run's logs (even ranks from
/// rank 0's, odd ones from rank 1's) are read and reported; the time it
/// took is printed, not asserted.
#[test]
fn two_thousand_rank_files() {
    const RANKS: u32 = 2000;
    let tmp = tempdir();
    let dir = tmp.path().join("run");
    std::fs::create_dir_all(&dir).unwrap();
    let templates: Vec<Vec<String>> = (0..2)
        .map(|r| {
            let text =
                std::fs::read_to_string(real_run().join(format!("rank-{r:05}.jsonl"))).unwrap();
            let mut samples = 0;
            // The header, the records, the first 12 samples.
            text.lines()
                .filter(|l| {
                    let sample = l.contains("\"type\":\"sample\"");
                    samples += usize::from(sample);
                    !sample || samples <= 12
                })
                .map(str::to_string)
                .collect()
        })
        .collect();
    let last_samples: Vec<String> = (0..2)
        .map(|r| {
            std::fs::read_to_string(real_run().join(format!("rank-{r:05}.jsonl")))
                .unwrap()
                .lines()
                .rfind(|l| l.contains("\"type\":\"sample\""))
                .unwrap()
                .to_string()
        })
        .collect();
    for rank in 0..RANKS {
        let t = &templates[(rank % 2) as usize];
        let mut header: Value = serde_json::from_str(&t[0]).unwrap();
        header["rank"] = rank.into();
        header["size"] = RANKS.into();
        let mut text = header.to_string();
        text.push('\n');
        for l in &t[1..] {
            if l.contains("\"type\":\"close\"") {
                text.push_str(&last_samples[(rank % 2) as usize]);
                text.push('\n');
            }
            text.push_str(l);
            text.push('\n');
        }
        std::fs::write(dir.join(format!("rank-{rank:05}.jsonl")), text).unwrap();
    }
    let start = Instant::now();
    let job = report(&[&dir, &"--plots", &tmp.path().join("plots")]);
    let took = start.elapsed();
    job.assert_success();
    eprintln!("report of {RANKS} rank files: {took:.2?}");
    let out = job.stdout();
    assert_contains(
        &out,
        &[
            "ranks     2000 (2000 logs read)",
            "summary.json: missing",
            "Recomputed from the last sample of each log",
            "Classes of ranks",
        ],
    );
    assert!(
        !out.contains("has no log") && !out.contains("cut short"),
        "{out}"
    );
    assert_contains(&out, &["0-1998:2", "1-1999:2"]);
    check_png(&tmp.path().join("plots/cvar-changes.png"));
}

/// A run on several hosts is also told by host: the real run's
/// summary.json groups its ranks under this machine's host name, and the
/// same logs with the even ranks' headers naming one host and the odd
/// ranks' another (the even ranks allreduce, the odd ones broadcast) get a
/// "Hosts" section that lists each host's ranks and shows the allreduces
/// as what differs most between them.
#[test]
fn a_run_is_grouped_by_host() {
    let real = real_run();
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(real.join("summary.json")).unwrap()).unwrap();
    let header: Value = serde_json::from_str(
        std::fs::read_to_string(real.join("rank-00000.jsonl"))
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        summary["hosts"],
        serde_json::json!([{"host": header["host"], "count": 4, "ranks": "0-3", "members": [0, 1, 2, 3]}]),
        "{summary}"
    );
    let out = report(&[&real]).stdout();
    assert!(
        !out.contains("\nHosts\n"),
        "one host, no Hosts section:\n{out}"
    );

    let tmp = tempdir();
    let dir = tmp.path().join("run");
    copy_run(&real, &dir);
    for rank in 0..4 {
        let path = dir.join(format!("rank-{rank:05}.jsonl"));
        let text = std::fs::read_to_string(&path).unwrap();
        let (first, rest) = text.split_once('\n').unwrap();
        let mut header: Value = serde_json::from_str(first).unwrap();
        header["host"] = if rank % 2 == 0 { "alpha" } else { "beta" }.into();
        std::fs::write(&path, format!("{header}\n{rest}")).unwrap();
    }
    let job = report(&[&dir, &"--plots", &tmp.path().join("plots")]);
    job.assert_success();
    let out = job.stdout();
    let section = out
        .split("\nHosts\n")
        .nth(1)
        .unwrap_or_else(|| panic!("no Hosts section:\n{out}"));
    let rows: Vec<&str> = section.lines().skip(1).take(5).collect();
    assert!(
        rows[0].starts_with("2 hosts, with the mean per rank of the quantities that differ most"),
        "{section}"
    );
    let header = rows
        .iter()
        .find(|l| l.trim_start().starts_with("host"))
        .unwrap_or_else(|| panic!("no table:\n{section}"));
    assert!(header.contains("tool.allreduce."), "{section}");
    for (host, ranks) in [("alpha", "0,2"), ("beta", "1,3")] {
        assert!(
            rows.iter().any(|l| {
                let words: Vec<&str> = l.split_whitespace().collect();
                words.len() > 3 && words[..3] == [host, ranks, "2"]
            }),
            "no row of {host} with ranks {ranks}:\n{section}"
        );
    }
}

/// The JSON Schema `mpit-tuner schema` prints is the contract users' scripts
/// rely on: every line of a real run's logs, and its summary.json, validate
/// against it, and the run covers the main record types.
#[test]
fn real_logs_conform_to_the_printed_schema() {
    let dir = real_run();
    let schema_of = |which: &str| -> serde_json::Value {
        let job = run({
            let mut cmd = Command::new(BIN);
            cmd.args(["schema", which]);
            cmd
        });
        job.assert_success();
        serde_json::from_str(&job.stdout()).expect("the schema is JSON")
    };
    let log_schema = jsonschema::validator_for(&schema_of("log")).expect("a valid log schema");
    let summary_schema =
        jsonschema::validator_for(&schema_of("summary")).expect("a valid summary schema");
    let mut types = std::collections::BTreeSet::new();
    for r in 0..4 {
        let path = dir.join(format!("rank-{r:05}.jsonl"));
        let text = std::fs::read_to_string(&path).unwrap();
        for (n, line) in text.lines().enumerate() {
            let record: serde_json::Value = serde_json::from_str(line).unwrap();
            let errors: Vec<String> = log_schema
                .iter_errors(&record)
                .map(|e| e.to_string())
                .collect();
            assert!(
                errors.is_empty(),
                "{}:{}: {errors:?}\n{line}",
                path.display(),
                n + 1
            );
            types.insert(record["type"].as_str().unwrap().to_string());
        }
    }
    for t in [
        "header",
        "sample",
        "decision",
        "write",
        "policy_summary",
        "close",
    ] {
        assert!(types.contains(t), "no `{t}` record in the run: {types:?}");
    }
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    let errors: Vec<String> = summary_schema
        .iter_errors(&summary)
        .map(|e| e.to_string())
        .collect();
    assert!(errors.is_empty(), "summary.json: {errors:?}");
    // And the typed reader agrees.
    let mut cmd = Command::new(BIN);
    cmd.arg("schema").arg("--check").arg(&dir);
    let job = run(cmd);
    job.assert_success();
    assert!(
        job.stdout().contains(", 0 not conforming"),
        "{}",
        job.stdout()
    );
}

/// A run written per node reads as the same run written per rank: its
/// node log split by hand into `rank-NNNNN.jsonl` files gives the same
/// report, replay, watch frame and schema check, and every line of it
/// (with its `writer`) conforms to the printed schema.
#[test]
fn a_node_log_reads_as_rank_logs() {
    let node_run = real_node_run();
    let logs: Vec<String> = std::fs::read_dir(&node_run)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".jsonl"))
        .collect();
    assert_eq!(logs.len(), 1, "one log for the one node: {logs:?}");
    assert!(logs[0].starts_with("node-"), "{logs:?}");
    let text = std::fs::read_to_string(node_run.join(&logs[0])).unwrap();

    // Split by hand: each line to its writer's file, the writer removed.
    let tmp = tempdir();
    let split = tmp.path().join("split");
    std::fs::create_dir_all(&split).unwrap();
    std::fs::copy(node_run.join("summary.json"), split.join("summary.json")).unwrap();
    let mut per_rank: std::collections::BTreeMap<u64, String> = Default::default();
    let schema: Value = serde_json::from_str(
        &run({
            let mut cmd = Command::new(BIN);
            cmd.args(["schema", "log"]);
            cmd
        })
        .stdout(),
    )
    .unwrap();
    let schema = jsonschema::validator_for(&schema).unwrap();
    for (n, line) in text.lines().enumerate().filter(|(_, l)| !l.is_empty()) {
        let mut record: Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("line {} is not JSON ({e}): {line}", n + 1));
        let errors: Vec<String> = schema.iter_errors(&record).map(|e| e.to_string()).collect();
        assert!(errors.is_empty(), "line {}: {errors:?}\n{line}", n + 1);
        let writer = record
            .as_object_mut()
            .unwrap()
            .remove("writer")
            .and_then(|w| w.as_u64())
            .unwrap_or_else(|| panic!("line {}: no writer: {line}", n + 1));
        let out = per_rank.entry(writer).or_default();
        out.push_str(&record.to_string());
        out.push('\n');
    }
    assert_eq!(per_rank.keys().copied().collect::<Vec<_>>(), [0, 1, 2, 3]);
    for (rank, text) in &per_rank {
        assert!(text.contains("\"layout\":\"node\""), "rank {rank}'s header");
        std::fs::write(split.join(format!("rank-{rank:05}.jsonl")), text).unwrap();
    }

    // The same output from both directories, but for their names.
    let same = |args: &[&str], wanted: &str| {
        let out = |dir: &Path| {
            let mut cmd = Command::new(BIN);
            cmd.args(args).arg(dir);
            let job = run(cmd);
            job.assert_success();
            // Both name the job's directory (from the headers) and their
            // own, whose title is underlined to its length.
            job.stdout()
                .replace(&dir.display().to_string(), "RUN")
                .replace(&node_run.display().to_string(), "RUN")
                .lines()
                .filter(|l| !l.starts_with("==="))
                // A replayed rank's title names its file.
                .map(|l| match l.split_once(": RUN/") {
                    Some((rank, rest)) if l.starts_with("== rank") => {
                        format!("{rank}: {}", rest.rsplit_once(" (").map_or("", |r| r.1))
                    }
                    _ => l.to_string(),
                })
                .collect::<Vec<_>>()
                .join("\n")
        };
        let (node, ranks) = (out(&node_run), out(&split));
        assert_eq!(node, ranks, "mpit-tuner {args:?}");
        assert!(
            node.contains(wanted),
            "mpit-tuner {args:?}: no `{wanted}` in\n{node}"
        );
    };
    same(&["report", "--no-plots"], "4 (4 logs read)");
    let policy = policy_file(tmp.path());
    same(&["replay", "--policy", policy.to_str().unwrap()], "rank 3");
    same(&["watch", "--once", "--plain"], "4 finished");
    // The CSV export: the same rows, rank after rank.
    let csv = |dir: &Path, out: &Path| {
        let mut cmd = Command::new(BIN);
        cmd.arg("report")
            .arg(dir)
            .args(["--no-plots", "--csv"])
            .arg(out);
        run(cmd).assert_success();
        std::fs::read_to_string(out.join("samples.csv")).unwrap()
    };
    let (node_csv, split_csv) = (
        csv(&node_run, &tmp.path().join("csv-node")),
        csv(&split, &tmp.path().join("csv-split")),
    );
    assert!(node_csv.lines().count() > 4, "{node_csv}");
    assert!(
        node_csv == split_csv,
        "samples.csv differs between the layouts"
    );
    let mut cmd = Command::new(BIN);
    cmd.args(["schema", "--check"]).arg(&node_run);
    let job = run(cmd);
    job.assert_success();
    assert!(
        job.stdout()
            .contains("records in 1 log and summary.json, 0 not conforming"),
        "{}",
        job.stdout()
    );
}
