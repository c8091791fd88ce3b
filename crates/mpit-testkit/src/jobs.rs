//! MPI jobs for tests: the build's launcher, examples and fixtures.

use std::ffi::OsStr;
use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

const CHILD_ENV: &str = "MPIT_TESTKIT_CHILD";

/// Seconds a job may run before it is killed (override with
/// `MPIT_TEST_TIMEOUT`).
pub fn timeout() -> u64 {
    std::env::var("MPIT_TEST_TIMEOUT")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(120)
}

/// `"mpich"` or `"openmpi"`: the MPI library this build uses.
pub fn flavor() -> &'static str {
    mpit_sys::BUILD_FLAVOR
}

/// The MPI C compiler wrapper of the build (`mpicc.mpich`, a wheel's
/// `bin/mpicc`): test programs in C are built with it.
pub fn mpicc() -> &'static str {
    mpit_sys::BUILD_MPICC
}

/// A directory name part for what tests build with this build's MPI
/// compiler wrapper (example programs, the fault library): the flavour and
/// a hash of the wrapper's path, e.g. `mpich-3f9a0c12`. Builds against
/// different libraries of one flavour (MPICH 4, MPICH 5 and MVAPICH2 are
/// all `mpich`) may share one target directory (scripts/test.sh builds
/// every flavour into one), and make decides staleness by time only, so a
/// directory per flavour alone would run MPICH 4's programs under MPICH 5.
pub fn build_key() -> String {
    // FNV-1a (64 bits): stable across runs and Rust versions, unlike
    // std's hasher; collisions between a handful of paths do not matter.
    let hash = mpicc().bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    format!("{}-{:08x}", flavor(), hash as u32)
}

/// The MPI Fortran wrapper beside [`mpicc`], or `None` when the library
/// ships none (the registry wheels of MPICH 5 and Open MPI 5).
pub fn mpifc() -> Option<&'static str> {
    Some(mpit_sys::BUILD_MPIFC).filter(|f| !f.is_empty())
}

/// The variables to give `make -C examples` so that it builds the example
/// programs for this build's library: `MPI=<flavour>`, `MPICC=` the build's
/// wrapper, plus a run path to the MPI library when it lies outside the
/// system directories (Open MPI 5's registry wheel's `mpicc` adds none,
/// MPICH 5's does; without one a program names the system's library of the
/// same soname to `ldd` and to anything run outside the wheel's `mpiexec`),
/// and `MPIFC=` the Fortran wrapper or `FORTRAN=no` when there is none.
pub fn examples_make_vars() -> Vec<String> {
    let library = std::path::Path::new(mpit_sys::BUILD_LIBRARY);
    let system = ["/usr/lib", "/lib"];
    let mpicc = match library.parent() {
        Some(dir)
            if !library.as_os_str().is_empty() && !system.iter().any(|s| dir.starts_with(s)) =>
        {
            format!("{} -Wl,-rpath,{}", mpicc(), dir.display())
        }
        _ => mpicc().to_string(),
    };
    vec![
        format!("MPI={}", flavor()),
        format!("MPICC={mpicc}"),
        match mpifc() {
            Some(fc) => format!("MPIFC={fc}"),
            None => "FORTRAN=no".to_string(),
        },
    ]
}

/// The repository root (the examples, fixtures and scripts live under it).
pub fn repo_root() -> PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("the repository root exists")
}

/// The example programs of this build's MPI library, built once per test
/// binary with the examples' Makefile into `<target>/examples-<build key>`
/// ([`build_key`])
/// (the target directory of the running test binary, which cargo puts in
/// `<target>/<profile>/deps`). Without the MPI compiler wrappers (or
/// gfortran, where the library has a Fortran wrapper) make fails, and so
/// does the test.
pub fn examples_dir() -> &'static std::path::Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let exe = std::env::current_exe().expect("the test binary knows its path");
        let target = exe
            .ancestors()
            .nth(3)
            .expect("the test binary is in <target>/<profile>/deps");
        let out = target.join(format!("examples-{}", build_key()));
        let mut make = Command::new("make");
        make.arg("-C")
            .arg(repo_root().join("examples"))
            .args(examples_make_vars())
            .arg(format!("OUT={}", out.display()))
            // Not a sub-make of anything: no jobserver from the environment.
            .env_remove("MAKEFLAGS")
            .env_remove("MFLAGS");
        let output = make
            .output()
            .unwrap_or_else(|e| panic!("cannot run make (is it installed?): {e}"));
        assert!(
            output.status.success(),
            "building the examples failed ({}): {make:?}\n--- stdout\n{}\n--- stderr\n{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        out
    })
}

/// An example program of [`examples_dir`] (`comm_churn`, `coll_check`,
/// `basics`, ...); fails the test when make did not produce it.
pub fn example(name: &str) -> PathBuf {
    let path = examples_dir().join(name);
    assert!(path.is_file(), "make did not produce {}", path.display());
    path
}

/// Says that the calling test does not apply to this build, and why: on
/// standard error, and as one line appended to the file named by
/// `MPIT_TEST_NOT_APPLICABLE` when set (scripts/test.sh prints that file per
/// flavour, since cargo hides the output of passing tests). The test then
/// returns without asserting anything.
pub fn not_applicable(test: &str, why: &str) {
    let line = format!(
        "{test}: does not apply to the {} build ({}): {why}\n",
        mpit_sys::BUILD_HEADER_LIBRARY,
        mpicc()
    );
    eprint!("{line}");
    if let Some(file) = std::env::var_os("MPIT_TEST_NOT_APPLICABLE") {
        use std::io::Write;
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&file)
            .and_then(|mut f| f.write_all(line.as_bytes()));
        if let Err(e) = written {
            eprintln!("cannot append to {}: {e}", file.to_string_lossy());
        }
    }
}

/// Whether this process is a rank launched by [`run_self`].
pub fn in_rank() -> bool {
    std::env::var_os(CHILD_ENV).is_some()
}

/// One MPI job at a time in this test binary: jobs that share 2 cores crawl.
pub fn job_lock() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// The `mpiexec` of the build (`MPIEXEC` overrides it). Panics, failing the
/// test, when it is not installed.
pub fn mpiexec_path() -> PathBuf {
    let name = std::env::var("MPIEXEC").unwrap_or_else(|_| mpit_sys::BUILD_MPIEXEC.to_string());
    mpiexec_path_named(&name)
}

/// The path of the launcher `name`; panics, failing the test, when it is not
/// installed.
pub fn mpiexec_path_named(name: &str) -> PathBuf {
    which(name).unwrap_or_else(|| {
        panic!(
            "this test needs MPI, but `{name}` (the mpiexec of the {} build) was not found; \
             install MPI (see docs/guide.md#setting-up-a-machine) or set MPIEXEC",
            flavor()
        )
    })
}

/// The major version of the MPI library that [`mpiexec_path`] launches,
/// from `mpiexec --version`: Open MPI's last word of the first line
/// (`mpiexec (Open MPI) 5.0.11`, `mpiexec.openmpi (OpenRTE) 4.1.4`),
/// Hydra's `Version:` line (`Version: 4.0.2`); `None` where the launcher
/// does not say.
fn library_major() -> Option<u32> {
    static MAJOR: OnceLock<Option<u32>> = OnceLock::new();
    *MAJOR.get_or_init(|| {
        let out = Command::new(mpiexec_path())
            .arg("--version")
            .output()
            .ok()?;
        let text = String::from_utf8_lossy(&out.stdout);
        let version = if flavor() == "openmpi" {
            text.lines().next()?.split_whitespace().last()?
        } else {
            text.lines()
                .find_map(|l| l.trim().strip_prefix("Version:"))?
                .trim()
        };
        version.split('.').next()?.parse().ok()
    })
}

/// The major version of the Open MPI that [`mpiexec_path`] launches, or
/// `None` for an MPICH build or a launcher that does not say. Tests whose
/// variables differ between Open MPI 4.1 and 5.0 (`btl_vader_*` became
/// `btl_sm_*`) choose by it, since both builds have the flavour `openmpi`.
pub fn open_mpi_major() -> Option<u32> {
    library_major().filter(|_| flavor() == "openmpi")
}

/// The major version on the `Version:` line of the Hydra that
/// [`mpiexec_path`] is (MPICH's own version; an MVAPICH2 build's Hydra
/// says its Hydra's), or `None` for an Open MPI build or a launcher that
/// does not say.
pub fn mpich_major() -> Option<u32> {
    library_major().filter(|_| flavor() == "mpich")
}

/// Finds a program on PATH (or returns it if it is a path).
pub fn which(name: &str) -> Option<PathBuf> {
    which::which(name).ok()
}

/// A command that runs `program` with `args` on `ranks` ranks, with the
/// environment both libraries need here (Open MPI as root, oversubscribed
/// cores), under `timeout`.
pub fn mpiexec(ranks: u32, program: impl AsRef<OsStr>) -> Command {
    let mut cmd = Command::new("timeout");
    cmd.arg("-k")
        .arg("10")
        .arg(timeout().to_string())
        .arg(mpiexec_path())
        .arg("-n")
        .arg(ranks.to_string());
    if flavor() == "openmpi" {
        cmd.arg("--oversubscribe");
    }
    cmd.arg(program);
    launcher_env(&mut cmd);
    cmd
}

/// Sets the environment MPI jobs need on the test machines.
pub fn launcher_env(cmd: &mut Command) {
    cmd.env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env("OMPI_MCA_rmaps_base_oversubscribe", "1")
        // Open MPI 5's launcher (PRRTE) ignores the variable above.
        .env("PRTE_MCA_rmaps_default_mapping_policy", ":oversubscribe")
        // Keep Open MPI quiet about missing high-speed networks.
        .env("OMPI_MCA_btl_base_warn_component_unused", "0")
        // The tests read the ob1 messaging layer's PVARs (pml_ob1_*, bound
        // to communicators) and its shared-memory transport's variables.
        // Open MPI picks its UCX layer instead wherever an InfiniBand or
        // RoCE device is present (and a site's mca-params.conf may choose
        // otherwise), so the layer the tests are about is named, not left
        // to the machine. MPICH ignores the variable.
        .env("OMPI_MCA_pml", "ob1")
        // MPICH 5's progress engine spins without yielding, so 3-4 ranks on
        // 2 cores crawl (a 16-round coll_check: 140-176 s against 12 s on
        // MPICH 4). The throttle sleeps (usleep(1)) once the engine has
        // polled a number of times in a row without progress: 4096 by
        // default, with which a 4-round coll_check on 4 ranks still took
        // 38 s here; after 10 polls, 2 s (8 rounds on 3 and 4 ranks: 3 s,
        // against 11-13 s on MPICH 4.0.2). MPICH 4.0.2 and Open MPI ignore
        // both variables.
        .env("MPIR_CVAR_CH4_PROGRESS_THROTTLE", "1")
        .env("MPIR_CVAR_CH4_PROGRESS_THROTTLE_NO_PROGRESS_COUNT", "10")
        // MVAPICH2 pins each rank to a core by default and then refuses
        // more ranks than cores; and it warns on stderr when a program asks
        // for MPI_THREAD_MULTIPLE with pinning on. Other libraries ignore
        // both.
        .env("MV2_ENABLE_AFFINITY", "0")
        .env("MV2_USE_THREAD_WARNING", "0")
        // No tuning store unless a test names one (after this call): what
        // one test's job learned must not start another's searches.
        .env("MPIT_TUNER_STORE", "off");
    // Jobs on one host need only Open MPI's shared-memory transport. Its
    // TCP transport, opened by default, took 1.2 s of every job's start
    // here (a 2-rank job that only initializes: Open MPI 4.1.4 1400 ms with
    // it, 125 ms without; 5.0.11 1190 ms and 139 ms), and what it does at
    // start depends on the machine's network interfaces. The emulated
    // cluster names its own list (with `tcp`) on the launcher's command
    // line, which wins over the environment.
    if let Some(major) = open_mpi_major() {
        let shared_memory = if major >= 5 { "sm" } else { "vader" };
        cmd.env("OMPI_MCA_btl", format!("self,{shared_memory}"));
    }
}

/// What a finished job printed, with helpers to assert on it.
#[derive(Debug)]
pub struct Job {
    /// The command line, for messages.
    pub command: String,
    /// The process output.
    pub output: Output,
    /// How long it took.
    pub elapsed: Duration,
}

impl Job {
    /// Standard output as text.
    pub fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.output.stdout).into_owned()
    }

    /// Standard error as text.
    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.output.stderr).into_owned()
    }

    /// Whether the job exited 0.
    pub fn success(&self) -> bool {
        self.output.status.success()
    }

    /// Panics with the job's output unless it exited 0.
    pub fn assert_success(&self) -> &Self {
        assert!(
            self.success(),
            "job failed ({}): {}\n--- stdout\n{}\n--- stderr\n{}",
            self.output.status,
            self.command,
            self.stdout(),
            self.stderr()
        );
        self
    }
}

/// What Open MPI 5's launcher (PRRTE) prints when its PMIx server cannot
/// start, at random and before any rank runs (seen once in CI, in a test
/// that passes every other time; other projects' CI hits it too, e.g.
/// lfortran/lfortran#8610).
const LAUNCHER_DID_NOT_START: &str = "The PMIx server's listener thread failed to start";

/// Launches of a job whose launcher did not start, in all.
pub const LAUNCHES: u32 = 3;

/// Whether a job's output says that its launcher itself did not start (no
/// rank ran): such a launch may be made again, up to [`LAUNCHES`] in all.
pub fn launcher_did_not_start(output: &str) -> bool {
    output.contains(LAUNCHER_DID_NOT_START)
}

/// Runs a command to completion, holding the job lock. A launch whose
/// launcher itself did not start (no rank ran) is made again, up to
/// [`LAUNCHES`] times in all, and says so on standard error: that failure
/// is the launcher's, not the job's.
pub fn run(mut cmd: Command) -> Job {
    let _guard = job_lock();
    let command = format!("{cmd:?}");
    let mut launch = 1;
    loop {
        let start = Instant::now();
        let output = cmd
            .output()
            .unwrap_or_else(|e| panic!("could not start {command}: {e}"));
        let job = Job {
            command: command.clone(),
            output,
            elapsed: start.elapsed(),
        };
        if job.success() || !launcher_did_not_start(&job.stderr()) || launch == LAUNCHES {
            return job;
        }
        eprintln!(
            "testkit: the launcher did not start (\"{LAUNCHER_DID_NOT_START}\"): launching again \
             ({launch} of {LAUNCHES}): {command}"
        );
        launch += 1;
    }
}

/// How the wait of [`spawn_watched`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Watched {
    /// What the caller waits for happened (the job may still run).
    Ready,
    /// The job ended first.
    Ended,
    /// Neither within the patience given.
    TimedOut,
}

/// Starts a job that the caller watches while it runs (one that runs
/// until it is stopped or killed), where [`run`] runs one to completion;
/// a launch whose launcher did not start is made again, as [`run`] does.
///
/// `spawn` starts one launch with (at least) its standard error going to
/// the file it is given, `output` made anew for each launch. Then `ready`
/// is asked every 20 ms, for up to `patience`, while the job runs; it is
/// asked once more after the job has ended (an ended job's files are
/// complete). The caller holds the job lock. Returns the child, running
/// or ended, and how the wait ended.
pub fn spawn_watched(
    output: &std::path::Path,
    patience: Duration,
    mut spawn: impl FnMut(std::fs::File) -> std::process::Child,
    mut ready: impl FnMut() -> bool,
) -> (std::process::Child, Watched) {
    let mut launch = 1;
    loop {
        let file = std::fs::File::create(output)
            .unwrap_or_else(|e| panic!("cannot create {}: {e}", output.display()));
        let mut child = spawn(file);
        let deadline = Instant::now() + patience;
        let watched = loop {
            let ended = child.try_wait().is_ok_and(|s| s.is_some());
            if ready() {
                break Watched::Ready;
            }
            if ended {
                break Watched::Ended;
            }
            if Instant::now() > deadline {
                break Watched::TimedOut;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let said = std::fs::read_to_string(output).unwrap_or_default();
        if watched != Watched::Ended || launch == LAUNCHES || !launcher_did_not_start(&said) {
            return (child, watched);
        }
        eprintln!(
            "testkit: the launcher did not start (\"{LAUNCHER_DID_NOT_START}\"): launching again \
             ({launch} of {LAUNCHES})"
        );
        launch += 1;
    }
}

/// Kills a job started with [`mpiexec`] (or a [`crate::cluster`] launch)
/// and everything it started: `pids` first (processes the caller knows,
/// such as the ranks' pids read from their log headers, which a launcher
/// may have put in a process group of their own), then the process group
/// that `timeout` (the job's first process) leads, then the child itself,
/// which is reaped. Only this job's processes are signalled: the group is
/// killed only when the child leads one (never the group of the tests),
/// and no process is looked up by name, so jobs of other test binaries
/// running at the same time live on.
pub fn kill_job(child: &mut std::process::Child, pids: &[u64]) {
    for pid in pids {
        let _ = Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status();
    }
    let leader = child.id();
    if process_group_of(leader) == Some(leader) {
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{leader}")])
            .status();
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// Field `n` after the command's name of a `stat` file of `/proc`
/// (`/proc/PID/stat`, `/proc/PID/task/TID/stat`): 0 is the state (`R`,
/// `S`, `T`, `Z`, ...), 2 the process group. The name, in parentheses,
/// may hold spaces and parentheses, so the fields start after the last
/// `)`. `None` when the file is gone (the process ended).
pub fn proc_stat_field(stat: impl AsRef<std::path::Path>, n: usize) -> Option<String> {
    let text = std::fs::read_to_string(stat).ok()?;
    let (_, rest) = text.rsplit_once(')')?;
    rest.split_whitespace().nth(n).map(str::to_string)
}

/// The process group of process `pid`.
fn process_group_of(pid: u32) -> Option<u32> {
    proc_stat_field(format!("/proc/{pid}/stat"), 2)?
        .parse()
        .ok()
}

/// Re-launches the current test binary on `ranks` ranks, running only the
/// test `name` (its full path within the binary) in each.
pub fn run_self(name: &str, ranks: u32) -> Job {
    run_self_with(name, ranks, &[])
}

/// As [`run_self`], with extra environment variables for the ranks.
///
/// Each rank writes its output to a file of its own (never to the merged
/// standard output of the job, where lines of different ranks interleave
/// under load), and every rank's file must say that it ran exactly this one
/// test. The job's `stdout` is then the ranks' outputs one after another.
pub fn run_self_with(name: &str, ranks: u32, env: &[(&str, &str)]) -> Job {
    run_self_env(name, ranks, env, &[])
}

/// [`run_self_with`], with the variables `remove` taken out of the job's
/// environment (those [`launcher_env`] sets among them), for a test of
/// the library's behaviour in its default configuration.
pub fn run_self_env(name: &str, ranks: u32, env: &[(&str, &str)], remove: &[&str]) -> Job {
    use std::sync::atomic::{AtomicU32, Ordering};
    static JOBS: AtomicU32 = AtomicU32::new(0);
    let exe = std::env::current_exe().expect("the test binary knows its path");
    let out = std::env::temp_dir().join(format!(
        "mpit-testkit-{}-{}",
        std::process::id(),
        JOBS.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir_all(&out)
        .unwrap_or_else(|e| panic!("cannot create {}: {e}", out.display()));
    // The launchers name the rank differently; the shell picks the one set.
    let script = r#"r="${PMI_RANK:-${OMPI_COMM_WORLD_RANK:-${PMIX_RANK:-unknown}}}"; exec "$0" "$@" >"$MPIT_TESTKIT_OUT/rank-$r.out" 2>&1"#;
    let mut cmd = mpiexec(ranks, "sh");
    cmd.arg("-c")
        .arg(script)
        .arg(&exe)
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, "1")
        .env("MPIT_TESTKIT_OUT", &out);
    for (k, v) in env {
        cmd.env(k, v);
    }
    for k in remove {
        cmd.env_remove(k);
    }
    let mut job = run(cmd);
    let mut outputs = String::new();
    let mut ran = 0;
    for rank in 0..ranks {
        let path = out.join(format!("rank-{rank}.out"));
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        // Guard against a filter that matched nothing: every rank must have
        // run exactly this one test.
        if text.contains("test result: ok. 1 passed") {
            ran += 1;
        }
        outputs.push_str(&format!("--- rank {rank} ({})\n{text}", path.display()));
    }
    let _ = std::fs::remove_dir_all(&out);
    outputs.push_str(&String::from_utf8_lossy(&job.output.stdout));
    job.output.stdout = outputs.into_bytes();
    if job.success() {
        assert_eq!(
            ran,
            ranks,
            "expected {ranks} rank(s) to run `{name}`:\n{}",
            job.stdout()
        );
    }
    job
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A shell command that appends a line to `count` each time it runs
    /// and fails as a launcher that did not start while `count` has fewer
    /// than `failures` lines.
    fn flaky(count: &std::path::Path, failures: u32) -> Command {
        let mut cmd = Command::new("sh");
        cmd.arg("-c")
            .arg(format!(
                "echo x >> '{}'; if [ $(wc -l < '{}') -le {failures} ]; then echo \"{LAUNCHER_DID_NOT_START}.\" >&2; exit 1; fi",
                count.display(),
                count.display()
            ));
        cmd
    }

    fn launches(count: &std::path::Path) -> usize {
        std::fs::read_to_string(count).unwrap().lines().count()
    }

    #[test]
    fn a_launcher_that_did_not_start_is_launched_again() {
        let dir = std::env::temp_dir().join(format!("mpit-testkit-unit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // Once: the second launch runs the job.
        let once = dir.join("once");
        let job = run(flaky(&once, 1));
        assert!(job.success(), "{}", job.stderr());
        assert_eq!(launches(&once), 2);
        // Every time: given up after LAUNCHES, with the launcher's words.
        let always = dir.join("always");
        let job = run(flaky(&always, 99));
        assert!(!job.success());
        assert!(job.stderr().contains(LAUNCHER_DID_NOT_START));
        assert_eq!(launches(&always), LAUNCHES as usize);
        // Any other failure is the job's: launched once.
        let other = dir.join("other");
        let mut cmd = Command::new("sh");
        cmd.arg("-c")
            .arg(format!("echo x >> '{}'; exit 3", other.display()));
        let job = run(cmd);
        assert_eq!(job.output.status.code(), Some(3));
        assert_eq!(launches(&other), 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Watches `cmd` (its stderr to a file) until `ready` exists.
    fn watch(
        dir: &std::path::Path,
        mut cmd: Command,
        ready: &std::path::Path,
    ) -> (std::process::Child, Watched) {
        spawn_watched(
            &dir.join("output"),
            Duration::from_secs(60),
            |out| cmd.stderr(out).spawn().unwrap(),
            || ready.exists(),
        )
    }

    #[test]
    fn a_watched_launcher_that_did_not_start_is_launched_again() {
        let dir = std::env::temp_dir().join(format!("mpit-testkit-watched-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ready = dir.join("ready");
        // Once: the second launch runs the job, which gets ready.
        let once = dir.join("once");
        let flaky_once = flaky(&once, 1);
        let script = flaky_once.get_args().nth(1).unwrap().to_str().unwrap();
        let mut cmd = Command::new("sh");
        cmd.args(["-c", &format!("{script}; touch '{}'", ready.display())]);
        let (mut child, watched) = watch(&dir, cmd, &ready);
        assert_eq!(watched, Watched::Ready);
        assert_eq!(launches(&once), 2);
        child.wait().unwrap();
        std::fs::remove_file(&ready).unwrap();
        // Every time: given up after LAUNCHES, ended.
        let always = dir.join("always");
        let (_, watched) = watch(&dir, flaky(&always, 99), &ready);
        assert_eq!(watched, Watched::Ended);
        assert_eq!(launches(&always), LAUNCHES as usize);
        // Any other end is the job's: launched once.
        let other = dir.join("other");
        let mut cmd = Command::new("sh");
        cmd.arg("-c")
            .arg(format!("echo x >> '{}'; exit 3", other.display()));
        let (_, watched) = watch(&dir, cmd, &ready);
        assert_eq!(watched, Watched::Ended);
        assert_eq!(launches(&other), 1);
        // Neither ready nor ended within the patience.
        let (mut child, watched) = spawn_watched(
            &dir.join("output"),
            Duration::from_millis(100),
            |out| Command::new("sleep").arg("60").stderr(out).spawn().unwrap(),
            || false,
        );
        assert_eq!(watched, Watched::TimedOut);
        assert!(child.try_wait().unwrap().is_none());
        child.kill().unwrap();
        child.wait().unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn kill_job_kills_the_jobs_group_and_nothing_else() {
        // Two jobs as `mpiexec` starts them (`timeout` leading a group of
        // its own), each with a grandchild; killing one leaves the other.
        let job = || {
            Command::new("timeout")
                .args(["60", "sh", "-c", "sleep 60 & echo $!; wait"])
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        };
        let grandchild = |child: &mut std::process::Child| -> u32 {
            use std::io::BufRead;
            let mut line = String::new();
            std::io::BufReader::new(child.stdout.take().unwrap())
                .read_line(&mut line)
                .unwrap();
            line.trim().parse().unwrap()
        };
        // A killed process not yet reaped by its parent is a zombie.
        let alive =
            |pid: u32| proc_stat_field(format!("/proc/{pid}/stat"), 0).is_some_and(|s| s != "Z");
        let (mut first, mut second) = (job(), job());
        let (sleeper, other) = (grandchild(&mut first), grandchild(&mut second));
        assert_eq!(process_group_of(first.id()), Some(first.id()));
        assert_ne!(process_group_of(std::process::id()), Some(first.id()));
        kill_job(&mut first, &[]);
        let deadline = Instant::now() + Duration::from_secs(30);
        while alive(sleeper) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(
            !alive(sleeper),
            "the killed job's grandchild {sleeper} lives on"
        );
        assert!(
            alive(other),
            "the other job's grandchild {other} was killed"
        );
        assert!(second.try_wait().unwrap().is_none(), "the other job ended");
        kill_job(&mut second, &[]);
    }
}
