//! Jobs launched by Slurm on the emulated cluster (`scripts/cluster.sh up
//! 2 --slurm`: slurmctld on the head, a slurmd on each node, munge), the
//! way docs/guide.md#slurm says: `mpit-tuner run -- srun ...` on the head
//! (the login node), inside `sbatch`, and `mpiexec` inside an allocation,
//! which then starts its daemons through Slurm. The ranks start through
//! srun's PMI plugin for the library (pmi2 for MPICH, pmix for Open MPI:
//! `mpit_testkit::cluster::srun_mpi_plugin`).
//!
//! Checked: the job's output is the same as without the tool; the logs are
//! one a node, named by the Slurm node; every rank of a communicator logs
//! the same collective decisions (one agreement, as under mpiexec); the
//! library is mapped into the ranks and into none of srun, slurmstepd, the
//! site's Prolog and TaskProlog; `set --hosts` acts on one Slurm node.
//!
//! Needs root, `ip`, `unshare` and Debian's Slurm and munge (installed by
//! scripts/setup.sh); elsewhere each test says why it does not apply.

mod common;

use common::steering::*;
use common::{command, example, preload_lib};
use mpit_testkit::cluster::{slurm_cluster_for, srun_cannot_start_ranks, Cluster};
use serde_json::Value as Json;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

/// Ranks on each node.
const PER_NODE: u32 = 2;

/// The Slurm cluster for a test whose ranks srun starts, or `None` after
/// saying why the test does not apply.
fn srun_cluster(test: &str) -> Option<&'static Cluster> {
    if let Some(why) = srun_cannot_start_ranks() {
        mpit_testkit::not_applicable(test, why);
        return None;
    }
    slurm_cluster_for(test, 2)
}

/// `cmd` on the cluster's head under the test timeout, with what jobs need
/// (Open MPI as root; its TCP transport across nodes).
fn on_head(cluster: &Cluster, mut cmd: Command) -> mpit_testkit::Job {
    mpit_testkit::launcher_env(&mut cmd);
    cmd.env_remove("OMPI_MCA_btl");
    let mut head = cluster.on_head(&cmd);
    head.env_remove("OMPI_MCA_btl");
    mpit_testkit::run(head)
}

/// A plain command (`timeout` around `args`) with a clean environment.
fn plain(args: &[String]) -> Command {
    let mut cmd = Command::new("timeout");
    cmd.args(["-k", "10", &mpit_testkit::timeout().to_string()])
        .args(args);
    common::clean_env(&mut cmd);
    cmd
}

/// Every record of a run directory's node logs, by the rank that wrote it.
fn records_by_rank(dir: &Path) -> BTreeMap<u64, Vec<Json>> {
    let mut out: BTreeMap<u64, Vec<Json>> = BTreeMap::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if !(name.starts_with("node-") && name.ends_with(".jsonl")) {
            continue;
        }
        for r in complete_records(&path) {
            let writer = r["writer"]
                .as_u64()
                .unwrap_or_else(|| panic!("{name}: a line without its writer: {r}"));
            out.entry(writer).or_default().push(r);
        }
    }
    out
}

/// The `.jsonl` files of a run directory, sorted.
fn log_files(dir: &Path) -> Vec<String> {
    let mut files: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".jsonl"))
        .collect();
    files.sort();
    files
}

/// Asserts the run's logs are one a node, named by the Slurm nodes, with
/// `ranks` ranks in block order, and returns the records by rank.
fn assert_logs_per_node(dir: &Path, cluster: &Cluster, ranks: u32) -> BTreeMap<u64, Vec<Json>> {
    assert_eq!(
        log_files(dir),
        ["node-node1.jsonl", "node-node2.jsonl"],
        "the logs of {}",
        dir.display()
    );
    let by_rank = records_by_rank(dir);
    assert_eq!(by_rank.len() as u32, ranks, "ranks that logged");
    for (rank, records) in &by_rank {
        let header = &records[0];
        assert_eq!(header["type"], "header", "rank {rank}: {header}");
        assert_eq!(
            header["host"],
            cluster.host_of(*rank as u32, PER_NODE),
            "rank {rank}'s header: {header}"
        );
        assert_eq!(header["size"], ranks, "rank {rank}'s header: {header}");
    }
    by_rank
}

#[test]
fn an_srun_job_keeps_its_output_and_tunes_with_one_agreement_per_communicator() {
    const TEST: &str = "an_srun_job_keeps_its_output_and_tunes_with_one_agreement_per_communicator";
    let Some(cluster) = srun_cluster(TEST) else {
        return;
    };
    preload_lib();
    let check = example("coll_check").display().to_string();
    let tmp = common::tempdir();
    let dir = tmp.path().join("run");
    let mut args = cluster.srun(PER_NODE);
    args.extend([check.clone(), "4".into()]);

    let without = on_head(cluster, plain(&args));
    without.assert_success();
    assert!(
        without.stdout().contains("all results correct"),
        "{}",
        without.stderr()
    );

    let mut run = vec![
        "run".to_string(),
        "--quiet".into(),
        "--dir".into(),
        dir.display().to_string(),
        "--tune-collectives".into(),
        "--".into(),
    ];
    run.extend(args);
    let run: Vec<&str> = run.iter().map(String::as_str).collect();
    let mut cmd = command(&run);
    cmd.env("MPIT_TUNER_COLLECTIVES_WINDOW", "1");
    let with = on_head(cluster, cmd);
    with.assert_success();
    assert_eq!(with.stdout(), without.stdout(), "the job's output");

    let ranks = PER_NODE * 2;
    let by_rank = assert_logs_per_node(&dir, cluster, ranks);
    // Per communicator: the ranks that logged decisions on it, and what
    // each decided, in order.
    let mut decided: BTreeMap<String, BTreeMap<u64, Vec<String>>> = BTreeMap::new();
    for (rank, records) in &by_rank {
        for r in records
            .iter()
            .filter(|r| r["type"] == "collective" && r["event"] == "decision")
        {
            decided
                .entry(r["comm"].as_str().unwrap().to_string())
                .or_default()
                .entry(*rank)
                .or_default()
                .push(format!(
                    "{} {} {}",
                    r["collective"], r["bin"], r["algorithm"]
                ));
        }
    }
    assert!(
        !decided.is_empty(),
        "no collective decision in any rank's log"
    );
    for (comm, ranks_of) in &decided {
        let mut lists = ranks_of.values();
        let first = lists.next().unwrap();
        assert!(
            lists.all(|l| l == first),
            "the ranks of {comm} decided differently: {ranks_of:?}"
        );
    }
    // (Open MPI 5 leaves a communicator over several nodes untuned, so
    // not every job has decisions on the world: docs/collective-tuning.md.)
}

/// The shared objects of process `pid` (from /proc/PID/maps), `None` when
/// it is gone.
fn mapped(pid: u32) -> Option<Vec<String>> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).ok()?;
    Some(
        maps.lines()
            .filter_map(|l| l.split_whitespace().nth(5))
            .filter(|p| p.starts_with('/'))
            .map(str::to_string)
            .collect(),
    )
}

/// The value of `var` in the environment process `pid` started with.
fn environ(pid: u32, var: &str) -> Option<String> {
    let bytes = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    bytes.split(|&b| b == 0).find_map(|kv| {
        let kv = String::from_utf8_lossy(kv);
        kv.strip_prefix(var)?.strip_prefix('=').map(str::to_string)
    })
}

fn comm(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .unwrap_or_default()
        .trim()
        .to_string()
}

#[test]
fn the_tool_loads_into_the_ranks_only_and_set_hosts_acts_on_one_slurm_node() {
    const TEST: &str = "the_tool_loads_into_the_ranks_only_and_set_hosts_acts_on_one_slurm_node";
    let Some(cluster) = srun_cluster(TEST) else {
        return;
    };
    let Library { local, value, .. } = library();
    let policy = format!(
        "[[policy]]\nname = \"watch\"\nevery = \"50ms\"\nwhen = \"cvar:{local} == {value}\"\n\
         then = [ {{ note = \"changed\" }} ]\notherwise = [ {{ note = \"default\" }} ]\n"
    );
    let place = Place::Slurm(cluster, PER_NODE);
    let before = prolog_records(cluster);
    let mut job = Running::start_at(place, Some(&policy), &[], &[]);
    let ranks = place.ranks() as usize;

    // While it runs: which of the cluster's processes mapped the library.
    let library = preload_lib().canonicalize().unwrap();
    let library = library.display().to_string();
    let mut seen: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    // This job's Slurm id, from its ranks' environment: the other tests of
    // this binary run Slurm jobs too (in `mpiexec` inside an allocation,
    // Hydra's proxies are srun's tasks, with LD_PRELOAD in their
    // environment, so the site's TaskProlog maps the inert library there).
    let mut job_ids = BTreeSet::new();
    for pid in cluster.processes() {
        let name = comm(pid);
        if name == "steady" {
            job_ids.extend(environ(pid, "SLURM_JOB_ID"));
        }
        let Some(objects) = mapped(pid) else { continue };
        let has = objects.iter().any(|o| o == &library);
        let counts = seen.entry(name).or_default();
        if has {
            counts.0 += 1;
        } else {
            counts.1 += 1;
        }
    }
    for daemon in ["srun", "slurmstepd"] {
        let (with, without) = seen.get(daemon).copied().unwrap_or_default();
        assert!(without > 0, "no {daemon} running beside the job: {seen:?}");
        assert_eq!(with, 0, "{daemon} loaded {library}: {seen:?}");
    }
    for other in ["slurmd", "slurmctld", "munged"] {
        assert_eq!(
            seen.get(other).map_or(0, |c| c.0),
            0,
            "{other} loaded {library}: {seen:?}"
        );
    }
    assert_eq!(
        seen.get("steady").map_or(0, |c| c.0),
        ranks,
        "every rank maps {library}: {seen:?}"
    );

    // A change for node2's ranks only.
    let id = job.set_on_node2(local, value);
    let on_node2 = |rank: usize| cluster.host_of(rank as u32, PER_NODE) == "node2";
    let logs = job.wait_for("every rank's answer", |logs| {
        logs.iter().all(|l| answer(l, &id).is_some())
    });
    for (rank, log) in logs.iter().enumerate() {
        assert_eq!(
            log[0]["host"],
            cluster.host_of(rank as u32, PER_NODE),
            "rank {rank}'s header: {}",
            log[0]
        );
        let a = answer(log, &id).unwrap();
        let expected = if on_node2(rank) {
            "applied"
        } else {
            "not_for_this_rank"
        };
        assert_eq!(a["outcome"], expected, "rank {rank}: {a}");
    }
    assert!(
        job.stop_child().is_some_and(|s| s.success()),
        "the job did not end well"
    );

    // The site's prologs (the cluster's stand-ins) ran for this job on
    // every node, without it.
    assert_eq!(job_ids.len(), 1, "the ranks' SLURM_JOB_ID: {job_ids:?}");
    let job_id = job_ids.pop_first().unwrap();
    let theirs: Vec<_> = prolog_records(cluster)
        .into_iter()
        .filter(|p| !before.contains(p) && p.1.ends_with(&format!("-{job_id}.maps")))
        .collect();
    for host in cluster.hosts() {
        for kind in ["prolog-", "task-prolog-"] {
            assert!(
                theirs
                    .iter()
                    .any(|(h, name)| h == &host && name.starts_with(kind)),
                "no {kind}JOB.maps of this job on {host}: {theirs:?}"
            );
        }
    }
    for (host, name) in &theirs {
        let path = cluster.dir().join("slurm").join(host).join(name);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            !text.contains(LIBRARY_NAME),
            "{host}'s {name} loaded the tool:\n{text}"
        );
    }
}

/// The preload library's file name.
const LIBRARY_NAME: &str = "libpreload.so";

/// What the cluster's stand-in prologs recorded so far: (node, file).
fn prolog_records(cluster: &Cluster) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for host in cluster.hosts() {
        let node = cluster.dir().join("slurm").join(&host);
        for entry in std::fs::read_dir(&node).unwrap() {
            let name = entry.unwrap().file_name().to_string_lossy().into_owned();
            if name.ends_with(".maps") {
                out.push((host.clone(), name));
            }
        }
    }
    out
}

#[test]
fn a_batch_job_runs_under_the_tool() {
    const TEST: &str = "a_batch_job_runs_under_the_tool";
    let Some(cluster) = srun_cluster(TEST) else {
        return;
    };
    preload_lib();
    let check = example("coll_check").display().to_string();
    let tmp = common::tempdir();
    let bin = common::BIN;
    let ranks = PER_NODE * 2;

    // sbatch, with `mpit-tuner run -- srun` in the script.
    let dir = tmp.path().join("batch");
    let out = tmp.path().join("batch.out");
    let script = format!(
        "{bin} run --quiet --dir {} -- {} {check} 2",
        dir.display(),
        cluster.srun(PER_NODE).join(" ")
    );
    let sbatch = plain(&[
        "sbatch".into(),
        "--wait".into(),
        "-N".into(),
        "2".into(),
        "--ntasks-per-node".into(),
        PER_NODE.to_string(),
        "-o".into(),
        out.display().to_string(),
        "--wrap".into(),
        script,
    ]);
    let job = on_head(cluster, sbatch);
    let printed_out = std::fs::read_to_string(&out).unwrap_or_default();
    assert_eq!(
        job.output.status.code(),
        Some(0),
        "{}\n{printed_out}",
        job.stderr()
    );
    assert!(
        printed_out.contains("all results correct"),
        "the batch job printed:\n{printed_out}"
    );
    assert_logs_per_node(&dir, cluster, ranks);
}

#[test]
fn mpiexec_in_an_allocation_runs_under_the_tool() {
    const TEST: &str = "mpiexec_in_an_allocation_runs_under_the_tool";
    let Some(cluster) = slurm_cluster_for(TEST, 2) else {
        return;
    };
    preload_lib();
    let check = example("coll_check").display().to_string();
    let tmp = common::tempdir();
    let bin = common::BIN;
    let ranks = PER_NODE * 2;
    // The library's own launcher inside an allocation: it starts its
    // daemons through Slurm (Hydra's slurm bootstrap, Open MPI's slurm
    // launcher), one a node.
    let dir = tmp.path().join("salloc");
    let mpiexec = mpit_testkit::mpiexec_path().display().to_string();
    let mut args: Vec<String> = vec![
        "salloc".into(),
        "-N".into(),
        "2".into(),
        "--ntasks-per-node".into(),
        PER_NODE.to_string(),
        bin.into(),
        "run".into(),
        "--quiet".into(),
        "--dir".into(),
        dir.display().to_string(),
        "--".into(),
        mpiexec,
        "-n".into(),
        ranks.to_string(),
    ];
    if mpit_testkit::flavor() == "openmpi" {
        // As on the emulated cluster without Slurm (scripts/cluster.sh):
        // the nodes share this machine's cores.
        args.extend(["--bind-to".into(), "none".into()]);
    }
    args.extend([check, "2".into()]);
    let job = on_head(cluster, plain(&args));
    job.assert_success();
    assert!(
        job.stdout().contains("all results correct"),
        "{}",
        job.stderr()
    );
    assert_logs_per_node(&dir, cluster, ranks);
}
