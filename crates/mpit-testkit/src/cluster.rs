//! The emulated cluster of `scripts/cluster.sh` for tests: nodes that are
//! network and UTS namespaces of this machine (host names `node1` ...
//! `nodeN`), and a head node from which the build's launcher starts ranks
//! on them through the script's ssh stand-in.
//!
//! The script is the one definition of the cluster (the demo and the
//! benchmarks use it too); this module only calls it. [`Cluster::shared`]
//! brings a cluster up once per test process (about half a second), shares
//! it between the process's tests, and has it removed when the process
//! ends, however it ends: a reaper started beside it holds the other end
//! of a pipe this process keeps open, and removes the cluster when the
//! pipe closes. A cluster left by a process that is gone is removed by the
//! next `up` on the machine.
//!
//! Making namespaces needs root, `ip` and `unshare`; where they are
//! missing the script says why, and [`cluster_for`] reports that the test
//! does not apply ([`crate::not_applicable`]).
//!
//! A library on the system's UCX (Debian's MPICH 4.0.2, on UCX 1.13) gets
//! a cluster whose nodes share the machine's boot id (`up --share-boot-id`):
//! UCX then moves data between nodes through shared memory instead of TCP,
//! whose transport hangs now and then in `MPI_Finalize` (openucx/ucx#8738;
//! here 2 of 8 runs of `coll_check` on 2 nodes of 2 ranks, without the
//! tool). The launcher, the host names and the library's own view of
//! which ranks share a node are those of separate nodes all the same.
//!
//! Ranks are placed by slot: with `per_node` ranks per node, ranks
//! `0..per_node` run on `node1`, the next `per_node` on `node2`, and so on
//! ([`Cluster::host_of`]).
//!
//! [`Cluster::shared_slurm`] is the same with Slurm on it (`up --slurm`:
//! slurmctld on the head, a slurmd on each node): [`Cluster::srun`] gives
//! srun's options for a job on every node, with the PMI plugin of this
//! build's library ([`srun_mpi_plugin`]).

use crate::netns::wrapped;
use crate::{launcher_env, mpiexec_path, repo_root, timeout};
use std::ffi::OsStr;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, OnceLock};

/// An emulated cluster this test process brought up.
#[derive(Debug)]
pub struct Cluster {
    name: String,
    nodes: u32,
    /// Whether Slurm runs on it.
    slurm: bool,
    /// Its state directory (`enter`, `agent`, `hosts`).
    dir: PathBuf,
    /// The reaper, whose standard input (a pipe from this process) closes
    /// only when this process ends; never waited for: it outlives it.
    _reaper: Mutex<Child>,
}

/// `bash scripts/cluster.sh --name NAME ARGS...`.
fn script(name: &str) -> Command {
    let mut cmd = Command::new("bash");
    cmd.arg(repo_root().join("scripts/cluster.sh"))
        .args(["--name", name]);
    cmd
}

/// What a finished command printed on standard error, trimmed.
fn stderr_of(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).trim().to_string()
}

impl Cluster {
    /// This test process's cluster of `nodes` nodes, brought up at the
    /// first call and shared by the later ones (which must ask for as
    /// many nodes); `Err` says why this machine cannot make one. Any other
    /// failure of the script fails the test.
    pub fn shared(nodes: u32) -> Result<&'static Cluster, String> {
        static SHARED: OnceLock<Result<Cluster, String>> = OnceLock::new();
        Cluster::shared_in(&SHARED, nodes, false)
    }

    /// [`Cluster::shared`] with Slurm on it (`cluster.sh up --slurm`),
    /// another cluster than that one; `Err` also where Slurm or munge is
    /// not installed.
    pub fn shared_slurm(nodes: u32) -> Result<&'static Cluster, String> {
        static SHARED: OnceLock<Result<Cluster, String>> = OnceLock::new();
        Cluster::shared_in(&SHARED, nodes, true)
    }

    /// The cluster `cell` holds, brought up at the first call.
    fn shared_in(
        cell: &'static OnceLock<Result<Cluster, String>>,
        nodes: u32,
        slurm: bool,
    ) -> Result<&'static Cluster, String> {
        let cluster = cell
            .get_or_init(|| Cluster::up(nodes, slurm))
            .as_ref()
            .map_err(Clone::clone)?;
        assert_eq!(
            cluster.nodes,
            nodes,
            "this test process's {}cluster has {} nodes; one size per test binary",
            if slurm { "Slurm " } else { "" },
            cluster.nodes
        );
        Ok(cluster)
    }

    fn up(nodes: u32, slurm: bool) -> Result<Cluster, String> {
        let pid = std::process::id().to_string();
        let name = format!("{}-{pid}", if slurm { "mpits" } else { "mpitc" });
        let mut up = script(&name);
        up.args(["up", &nodes.to_string(), "--owner", &pid]);
        if slurm {
            up.arg("--slurm");
        }
        if system_ucx() {
            up.arg("--share-boot-id");
        }
        let out = up
            .output()
            .unwrap_or_else(|e| panic!("cannot run {up:?} (is bash installed?): {e}"));
        match out.status.code() {
            Some(0) => {}
            Some(3) => return Err(stderr_of(&out)),
            _ => panic!(
                "bringing up the emulated cluster failed ({}): {up:?}\n{}",
                out.status,
                stderr_of(&out)
            ),
        }
        let settings = String::from_utf8_lossy(&out.stdout);
        let dir = settings
            .lines()
            .find_map(|l| l.strip_prefix("MPIT_CLUSTER_DIR="))
            .unwrap_or_else(|| panic!("{up:?} printed no MPIT_CLUSTER_DIR:\n{settings}"))
            .into();
        // In a process group of its own: an interrupt of the tests (Ctrl-C
        // reaches the terminal's foreground group) must not stop it before
        // it removes the cluster.
        let mut reap = script(&name);
        reap.arg("reap")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0);
        let reaper = reap
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {reap:?}: {e}"));
        Ok(Cluster {
            name,
            nodes,
            slurm,
            dir,
            _reaper: Mutex::new(reaper),
        })
    }

    /// The cluster's name (its namespaces are `NAME-node1`, ...).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its state directory (with Slurm: `slurm/NODE/` holds each node's
    /// slurmd log and what the stand-in prologs recorded).
    pub fn dir(&self) -> &std::path::Path {
        &self.dir
    }

    /// `srun` and its options for `per_node` ranks on each node, with the
    /// PMI plugin this build's library starts with: what follows
    /// `mpit-tuner run ... --` on the head. Panics on a cluster without
    /// Slurm.
    pub fn srun(&self, per_node: u32) -> Vec<String> {
        assert!(self.slurm, "cluster {} runs no Slurm", self.name);
        [
            "srun".to_string(),
            "-N".into(),
            self.nodes.to_string(),
            "--ntasks-per-node".into(),
            per_node.to_string(),
            format!("--mpi={}", srun_mpi_plugin()),
        ]
        .into()
    }

    /// The processes running now inside the cluster's namespaces (its
    /// daemons, launchers and ranks), as process ids.
    pub fn processes(&self) -> Vec<u32> {
        let mut namespaces = vec![format!("{}-head", self.name)];
        namespaces.extend(self.hosts().iter().map(|h| format!("{}-{h}", self.name)));
        let mut pids = Vec::new();
        for ns in namespaces {
            let out = Command::new("ip")
                .args(["netns", "pids", &ns])
                .output()
                .unwrap_or_else(|e| panic!("cannot run `ip netns pids {ns}`: {e}"));
            pids.extend(
                String::from_utf8_lossy(&out.stdout)
                    .split_whitespace()
                    .filter_map(|p| p.parse::<u32>().ok()),
            );
        }
        pids
    }

    /// The host names of its nodes: `node1` ... `nodeN`.
    pub fn hosts(&self) -> Vec<String> {
        (1..=self.nodes).map(|i| format!("node{i}")).collect()
    }

    /// The host name of the node that runs world rank `rank` of a job with
    /// `per_node` ranks on each node.
    pub fn host_of(&self, rank: u32, per_node: u32) -> String {
        format!("node{}", rank / per_node + 1)
    }

    /// The build's launcher and its options for `per_node` ranks on each
    /// node, up to `-n N`: the arguments after `mpit-tuner run ... --`
    /// when that runs on the head ([`Cluster::on_head`]).
    pub fn launcher(&self, per_node: u32) -> Vec<String> {
        let mpiexec = mpiexec_path();
        let mut args = script(&self.name);
        args.arg("args")
            .arg(&mpiexec)
            .args(["--per-node", &per_node.to_string()]);
        let out = args
            .output()
            .unwrap_or_else(|e| panic!("cannot run {args:?}: {e}"));
        assert!(
            out.status.success(),
            "{args:?} failed ({}): {}",
            out.status,
            stderr_of(&out)
        );
        let mut launcher = vec![mpiexec.display().to_string()];
        launcher.extend(
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .map(String::from),
        );
        launcher.extend(["-n".to_string(), (per_node * self.nodes).to_string()]);
        launcher
    }

    /// `cmd` run on the head node, with its arguments, environment and
    /// working directory: what a user runs on a cluster's login node.
    pub fn on_head(&self, cmd: &Command) -> Command {
        let mut head = Command::new(self.dir.join("enter"));
        head.arg("head");
        wrapped(head, cmd)
    }

    /// A command that runs `program` on `per_node` ranks of each node,
    /// started from the head by the build's launcher under the test
    /// timeout, with [`launcher_env`]. The variables set on the command
    /// reach the ranks as a user's would: Hydra forwards the environment,
    /// and for Open MPI `LD_PRELOAD` and every `MPIT_*` variable are named
    /// with `-x` (`cluster.sh launch`).
    pub fn mpiexec(&self, per_node: u32, program: impl AsRef<OsStr>) -> Command {
        self.launch(per_node, per_node * self.nodes, program)
    }

    /// As [`Cluster::mpiexec`], `ranks` ranks dealt to the nodes in turn
    /// (rank 0 on node1, rank 1 on node2, ...): each node holds ranks that
    /// are not consecutive, the placement where an operation applied node
    /// by node first is applied in another order than the ranks'. Tried
    /// with Hydra, which wraps the host list around.
    pub fn mpiexec_cyclic(&self, ranks: u32, program: impl AsRef<OsStr>) -> Command {
        self.launch(1, ranks, program)
    }

    /// `program` on `ranks` ranks from a host list of `per_node` slots a
    /// node (the launcher wraps around it when `ranks` is larger).
    fn launch(&self, per_node: u32, ranks: u32, program: impl AsRef<OsStr>) -> Command {
        let mut cmd = Command::new("timeout");
        cmd.args(["-k", "10", &timeout().to_string(), "bash"])
            .arg(repo_root().join("scripts/cluster.sh"))
            .args(["--name", &self.name, "launch", "--per-node"])
            .arg(per_node.to_string())
            .arg("--")
            .arg(mpiexec_path())
            .arg("-n")
            .arg(ranks.to_string())
            .arg(program);
        launcher_env(&mut cmd);
        // Across nodes Open MPI needs its TCP transport: cluster.sh names
        // the transports on the command line; the environment's
        // shared-memory-only list is for jobs on one host.
        cmd.env_remove("OMPI_MCA_btl");
        cmd
    }
}

/// srun's PMI plugin for this build's library. Measured with Debian 12's
/// Slurm 22.05 (plugins pmi2 and pmix v4) on the emulated cluster: MPICH
/// 4.0.2 and 5.0 start their ranks with `pmi2` (with `pmix`, 4.0.2's ranks
/// start as singletons and 5.0's refuse: "unsupported PMI version PMIx");
/// Open MPI 4.1 and 5.0 with `pmix` (with `pmi2`, 4.1's abort in
/// MPI_Init and 5.0's start as singletons).
pub fn srun_mpi_plugin() -> &'static str {
    if crate::flavor() == "openmpi" {
        "pmix"
    } else {
        "pmi2"
    }
}

/// Why srun cannot start this build's ranks with Debian 12's Slurm 22.05
/// (`None`: it can). MPICH 5.0's ranks, more than one a node, put their
/// business cards in segments that the pmi2 plugin rejects ("value not
/// properly terminated in client request", the job fails in MPI_Init; one
/// rank a node starts; also seen elsewhere:
/// ufs-community/ufs-weather-model#1732); its PMI-2 wire protocol fails in
/// PMI init, and it refuses pmix.
pub fn srun_cannot_start_ranks() -> Option<&'static str> {
    (crate::mpich_major()? >= 5).then_some(
        "MPICH 5.0's ranks, more than one a node, fail in MPI_Init under Debian 12's Slurm \
         22.05 (its pmi2 plugin rejects their segmented business cards: \"value not properly \
         terminated in client request\"); mpiexec inside an allocation is the tested form",
    )
}

/// Whether the build's MPI library links the UCX of the system's packages
/// (`ldd`: `libucp.so` from /lib or /usr/lib).
fn system_ucx() -> bool {
    let library = mpit_sys::BUILD_LIBRARY;
    if library.is_empty() {
        return false;
    }
    let out = match Command::new("ldd").arg(library).output() {
        Ok(out) => out,
        Err(_) => return false,
    };
    String::from_utf8_lossy(&out.stdout).lines().any(|l| {
        l.trim_start().starts_with("libucp.so")
            && l.split("=> ")
                .nth(1)
                .is_some_and(|p| p.starts_with("/lib") || p.starts_with("/usr/lib"))
    })
}

/// This test process's cluster of `nodes` nodes ([`Cluster::shared`]), or
/// `None` after saying that `test` does not apply here and why (no root,
/// no `ip`, no `unshare`, ...).
pub fn cluster_for(test: &str, nodes: u32) -> Option<&'static Cluster> {
    cluster_of(test, nodes, false)
}

/// [`cluster_for`] with Slurm on it ([`Cluster::shared_slurm`]).
pub fn slurm_cluster_for(test: &str, nodes: u32) -> Option<&'static Cluster> {
    cluster_of(test, nodes, true)
}

fn cluster_of(test: &str, nodes: u32, slurm: bool) -> Option<&'static Cluster> {
    if mpit_sys::BUILD_HEADER_LIBRARY == "mvapich2" {
        // Measured: MPI_Init fails on every rank with "rdma_open_hca: No IB
        // device found" as soon as the ranks are on more than one node.
        crate::not_applicable(
            test,
            "MVAPICH2 (ch3:mrail, gen2) reaches other nodes through InfiniBand only, \
             and the emulated nodes have none",
        );
        return None;
    }
    let shared = if slurm {
        Cluster::shared_slurm(nodes)
    } else {
        Cluster::shared(nodes)
    };
    match shared {
        Ok(cluster) => Some(cluster),
        Err(why) => {
            crate::not_applicable(
                test,
                &format!(
                    "no emulated cluster of {nodes} nodes{} can be made here: {why}",
                    if slurm { " with Slurm" } else { "" }
                ),
            );
            None
        }
    }
}
