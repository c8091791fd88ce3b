//! A running job of `examples/c/steady` (which runs until a stop file
//! appears) under `mpit-tuner run`, and what the steering tests read from
//! its logs while it runs: on this machine, or on the nodes of the
//! emulated cluster. Every wait is on a condition in the logs, with a
//! generous deadline.

use super::{command, example, launcher, preload_lib, tempdir};
use mpit_testkit::cluster::Cluster;
use serde_json::Value as Json;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// How long a test waits for a condition in the logs.
pub const PATIENCE: Duration = Duration::from_secs(60);

/// A LOCAL CVAR this library lets a rank write while the job runs, a value
/// it does not hold by default, and a CVAR no rank may write on its own
/// (with the word the refusal must contain).
///
/// And the allreduce's algorithm variable, with an algorithm other than
/// the default (MPICH; what a refusal of it must say while online
/// collective tuning is on, asked for with `--tune-collectives`).
pub struct Library {
    pub local: &'static str,
    pub value: i64,
    pub forbidden: &'static str,
    pub forbidden_value: &'static str,
    pub why: &'static str,
    pub algorithm: &'static str,
    pub pinned: &'static str,
}

#[cfg(mpi_library = "mpich")]
pub fn library() -> Library {
    Library {
        local: "MPIR_CVAR_REQUEST_POLL_FREQ",
        value: 16,
        // ALL_EQ, and not a variable collective tuning drives (it is on
        // by default, and would take an algorithm variable as a pin).
        forbidden: "MPIR_CVAR_BCAST_SHORT_MSG_SIZE",
        forbidden_value: "4096",
        why: "has scope ALL_EQ",
        algorithm: "MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM",
        pinned: "recursive_doubling",
    }
}

/// MVAPICH2 2.3.7 has no MPIR_CVAR_REQUEST_POLL_FREQ: its LOCAL integer
/// CVARs are the error-reporting ones, of which the width error stack
/// lines are cut at changes nothing a running job does. Its algorithm
/// variables are read at start only, so online collective tuning is off
/// there and a `set` of one is refused.
#[cfg(mpi_library = "mvapich2")]
pub fn library() -> Library {
    Library {
        local: "MPIR_CVAR_CHOP_ERROR_STACK",
        value: 16,
        forbidden: "MPIR_CVAR_BCAST_SHORT_MSG_SIZE",
        forbidden_value: "4096",
        why: "has scope ALL_EQ",
        algorithm: "MPIR_CVAR_ALLREDUCE_COLLECTIVE_ALGORITHM",
        pinned: "1",
    }
}

/// Open MPI 5.0 renamed the shared-memory BTL from `vader` to `sm`, and
/// 5.0.11 refuses a write of the old name after `MPI_Init`
/// (MPI_T_ERR_CVAR_SET_NOT_NOW), so the variable depends on the version.
#[cfg(mpi_flavor = "openmpi")]
pub fn library() -> Library {
    let five = mpit_testkit::open_mpi_major().is_some_and(|major| major >= 5);
    Library {
        local: if five {
            "btl_sm_free_list_max"
        } else {
            "btl_vader_free_list_max"
        },
        value: 1024,
        forbidden: if five {
            "btl_sm_eager_limit"
        } else {
            "btl_vader_eager_limit"
        },
        forbidden_value: "65536",
        why: "READONLY",
        algorithm: "coll_tuned_allreduce_algorithm",
        pinned: "3",
    }
}

/// Where a job runs.
#[derive(Debug, Clone, Copy)]
pub enum Place {
    /// On this machine, that many ranks.
    Here(u32),
    /// On every node of the emulated cluster, that many ranks each;
    /// `mpit-tuner run` runs on its head node.
    Nodes(&'static Cluster, u32),
    /// As `Nodes`, launched by Slurm's srun (the cluster runs Slurm).
    Slurm(&'static Cluster, u32),
}

impl Place {
    /// The ranks of the job.
    pub fn ranks(&self) -> u32 {
        match self {
            Place::Here(ranks) => *ranks,
            Place::Nodes(cluster, per_node) | Place::Slurm(cluster, per_node) => {
                per_node * cluster.hosts().len() as u32
            }
        }
    }

    /// The launcher and its options, after `mpit-tuner run ... --`.
    pub fn launcher(&self) -> Vec<String> {
        match self {
            Place::Here(ranks) => launcher(*ranks),
            Place::Nodes(cluster, per_node) => cluster.launcher(*per_node),
            Place::Slurm(cluster, per_node) => cluster.srun(*per_node),
        }
    }

    /// `mpit-tuner ARGS` where the job's launcher runs.
    pub fn command(&self, args: &[&str]) -> Command {
        match self {
            Place::Here(_) => command(args),
            Place::Nodes(cluster, _) => cluster.on_head(&command(args)),
            Place::Slurm(cluster, _) => {
                let mut cmd = command(args);
                // Across nodes Open MPI needs its TCP transport, which the
                // test kit's list for jobs on one host leaves out.
                cmd.env_remove("OMPI_MCA_btl");
                cluster.on_head(&cmd)
            }
        }
    }
}

/// A job of `steady` under the tuner, holding the job lock; stopped (stop
/// file, then a kill if it lingers) when dropped.
pub struct Running {
    /// The run directory.
    pub dir: PathBuf,
    stop: PathBuf,
    child: Option<Child>,
    output: PathBuf,
    ranks: u32,
    /// The test's temporary directory (the run directory is in it).
    pub _tmp: tempfile::TempDir,
    _lock: std::sync::MutexGuard<'static, ()>,
}

impl Running {
    pub fn start(ranks: u32, policy: Option<&str>) -> Running {
        Running::start_with(ranks, policy, &[], &[])
    }

    /// [`Running::start`] with more options of `mpit-tuner run` and
    /// environment variables for the job.
    pub fn start_with(
        ranks: u32,
        policy: Option<&str>,
        run_args: &[&str],
        env: &[(&str, &str)],
    ) -> Running {
        Running::start_at(Place::Here(ranks), policy, run_args, env)
    }

    /// [`Running::start_with`] at `place`.
    pub fn start_at(
        place: Place,
        policy: Option<&str>,
        run_args: &[&str],
        env: &[(&str, &str)],
    ) -> Running {
        preload_lib();
        let steady = example("steady");
        let lock = mpit_testkit::job_lock();
        let tmp = tempdir();
        let dir = tmp.path().join("run");
        let stop = tmp.path().join("stop");
        let output = tmp.path().join("output");
        let policy_path = tmp.path().join("policy.toml");
        let policy_arg = match policy {
            Some(text) => {
                std::fs::write(&policy_path, text).unwrap();
                policy_path.display().to_string()
            }
            None => "none".to_string(),
        };
        let mut args = vec![
            "run".to_string(),
            "--dir".into(),
            dir.display().to_string(),
            "--interval".into(),
            "50ms".into(),
            "--quiet".into(),
            "--policy".into(),
            policy_arg,
        ];
        args.extend(run_args.iter().map(|a| a.to_string()));
        args.push("--".into());
        args.extend(place.launcher());
        args.extend([
            steady.display().to_string(),
            stop.display().to_string(),
            "seconds=100".into(),
        ]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let mut running = Running {
            dir,
            stop,
            child: None,
            output,
            ranks: place.ranks(),
            _tmp: tmp,
            _lock: lock,
        };
        // A launch whose launcher did not start (no rank ran) is made
        // again, as `mpit_testkit::run` does.
        let (child, watched) = mpit_testkit::spawn_watched(
            &running.output,
            PATIENCE,
            |out| {
                let mut cmd = place.command(&args);
                cmd.envs(env.iter().copied());
                cmd.stdout(out.try_clone().unwrap())
                    .stderr(out)
                    .stdin(Stdio::null())
                    .spawn()
                    .expect("mpit-tuner run starts")
            },
            || sampled(&running.logs()),
        );
        running.child = Some(child);
        match watched {
            mpit_testkit::Watched::Ready => {}
            mpit_testkit::Watched::Ended => panic!(
                "the job ended before every rank sampled:\n{}",
                std::fs::read_to_string(&running.output).unwrap_or_default()
            ),
            // Panics with what the logs hold.
            mpit_testkit::Watched::TimedOut => {
                running.wait_for("every rank's first sample", sampled);
            }
        }
        running
    }

    /// The records of each rank's log so far (whole lines only), in
    /// either layout: its own `rank-NNNNN.jsonl`, or its lines in the
    /// `node-<host>.jsonl` files (the `writer` field removed).
    pub fn logs(&self) -> Vec<Vec<Json>> {
        let mut shared: Vec<Vec<Json>> = vec![Vec::new(); self.ranks as usize];
        for entry in std::fs::read_dir(&self.dir).into_iter().flatten().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if !(name.starts_with("node-") && name.ends_with(".jsonl")) {
                continue;
            }
            for mut record in complete_records(&entry.path()) {
                let writer = record
                    .as_object_mut()
                    .and_then(|o| o.remove("writer"))
                    .and_then(|w| w.as_u64())
                    .unwrap_or_else(|| panic!("{name}: a line without its writer: {record}"));
                if let Some(log) = shared.get_mut(writer as usize) {
                    log.push(record);
                }
            }
        }
        (0..self.ranks)
            .zip(shared)
            .map(|(r, shared)| {
                let own = self.dir.join(format!("rank-{r:05}.jsonl"));
                if own.exists() {
                    complete_records(&own)
                } else {
                    shared
                }
            })
            .collect()
    }

    /// Waits until `done` holds for the logs; panics after [`PATIENCE`]
    /// with what the logs hold.
    pub fn wait_for(&self, what: &str, done: impl Fn(&[Vec<Json>]) -> bool) -> Vec<Vec<Json>> {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let logs = self.logs();
            if done(&logs) {
                return logs;
            }
            if Instant::now() > deadline {
                panic!(
                    "waited {PATIENCE:?} for {what}; output:\n{}\nlogs:\n{}",
                    std::fs::read_to_string(&self.output).unwrap_or_default(),
                    logs.iter()
                        .map(|l| l
                            .iter()
                            .filter(|r| r["type"] != "sample")
                            .map(Json::to_string)
                            .collect::<Vec<_>>()
                            .join("\n"))
                        .collect::<Vec<_>>()
                        .join("\n---\n")
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// `mpit-tuner ARGS...` on this job's run directory, after the
    /// subcommand.
    pub fn steer(&self, subcommand: &str, args: &[&str]) -> Output {
        let dir = self.dir.display().to_string();
        let mut all = vec![subcommand, dir.as_str()];
        all.extend(args);
        all.extend(["--timeout", "30s"]);
        command(&all).output().expect("mpit-tuner runs")
    }

    /// `set VAR=VALUE --hosts node2` on a job of 2 ranks on each of two
    /// nodes: the answer says node2's ranks applied it and node1's were not
    /// asked; returns the request's id.
    pub fn set_on_node2(&self, var: &str, value: i64) -> String {
        let out = self.steer("set", &[&format!("{var}={value}"), "--hosts", "node2"]);
        assert_eq!(out.status.code(), Some(0), "{}", printed(&out));
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            stdout.contains("ranks 2-3 (node2): applied")
                && stdout.contains("ranks 0-1 (node1): not for this rank"),
            "set --hosts node2 answered:\n{stdout}"
        );
        request_id(&out)
    }

    /// Stops the job and returns what it printed; it must exit 0.
    pub fn finish(mut self) -> String {
        let status = self.stop_child();
        let printed = std::fs::read_to_string(&self.output).unwrap_or_default();
        assert!(status.is_some_and(|s| s.success()), "{printed}");
        printed
    }

    pub fn stop_child(&mut self) -> Option<std::process::ExitStatus> {
        let mut child = self.child.take()?;
        std::fs::write(&self.stop, b"stop").unwrap();
        let deadline = Instant::now() + PATIENCE;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = child.kill();
        let _ = child.wait();
        None
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop_child();
    }
}

/// Whether the default node-local directory (`/dev/shm`) can hold the
/// node's shared listing here: where it cannot, every rank lists
/// `control/` itself (and says why), which the tests then expect.
pub fn node_dir_usable() -> bool {
    tempfile::tempfile_in("/dev/shm").is_ok()
}

/// The ranks that listed the run directory's `control/` directory (their
/// close record's `control_listings` is above 0); every log must end with
/// a close record that counts them.
pub fn listers(logs: &[Vec<Json>]) -> Vec<usize> {
    logs.iter()
        .enumerate()
        .filter(|(rank, log)| {
            let close = log
                .last()
                .filter(|r| r["type"] == "close")
                .unwrap_or_else(|| panic!("rank {rank}'s log does not end with its close record"));
            let n = close["control_listings"]
                .as_u64()
                .unwrap_or_else(|| panic!("rank {rank}: no control_listings in {close}"));
            n > 0
        })
        .map(|(rank, _)| rank)
        .collect()
}

/// Whether every rank's log holds a sample.
pub fn sampled(logs: &[Vec<Json>]) -> bool {
    logs.iter()
        .all(|log| log.iter().any(|r| r["type"] == "sample"))
}

/// The records of a log's whole lines (a running job may be writing the
/// last one).
pub fn complete_records(path: &Path) -> Vec<Json> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let whole = match text.rfind('\n') {
        Some(end) => &text[..=end],
        None => "",
    };
    whole
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect()
}

/// The `control` answer to request `id` in a log.
pub fn answer<'a>(log: &'a [Json], id: &str) -> Option<&'a Json> {
    log.iter().find(|r| r["type"] == "control" && r["id"] == id)
}

/// The id the command printed (`request ID: ...`).
pub fn request_id(output: &Output) -> String {
    let stdout = String::from_utf8_lossy(&output.stdout);
    stdout
        .lines()
        .find_map(|l| l.strip_prefix("request "))
        .and_then(|l| l.split(':').next())
        .unwrap_or_else(|| panic!("no request id in:\n{stdout}"))
        .to_string()
}

/// What a finished command printed, with its status, for messages.
pub fn printed(output: &Output) -> String {
    format!(
        "status {:?}\n--- stdout\n{}\n--- stderr\n{}",
        output.status.code(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// The fired decisions of `policy` in a log, with their `t`.
pub fn firings<'a>(log: &'a [Json], policy: &'a str) -> impl Iterator<Item = &'a Json> + 'a {
    log.iter()
        .filter(move |r| r["type"] == "decision" && r["policy"] == policy && r["fired"] == true)
}
