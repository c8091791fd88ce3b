//! The runtime: one helper thread per rank that samples, decides and logs,
//! started and stopped by the interposer.
//!
//! The interposer calls, in order:
//! 1. [`PreInit::start`] inside `MPI_Init`, before `PMPI_Init`: MPI_T is
//!    initialised and the catalogue loaded (the hook point for `pre-init`
//!    policies);
//! 2. [`Runtime::start`] right after `PMPI_Init`: rank, size, private
//!    communicator, run directory, log header, then the helper thread;
//! 3. [`ObjectTable::register`] / [`ObjectTable::retire`] from the object
//!    wrappers, lock-free, at any time;
//! 4. [`Runtime::finalize`] inside `MPI_Finalize`, before `PMPI_Finalize`:
//!    stop and join the helper (bounded wait), last sample, free handles,
//!    cross-rank summary, close the log.
//!
//! The application's threads never wait on the helper: it publishes its
//! latest [`Snapshot`] through an `ArcSwap`.

use crate::config::Config;
use crate::log::{self, LogWriter};
use crate::objects::ObjectTable;
use crate::recommend;
use crate::sampler::{Sampler, Snapshot};
use crate::summary;
use arc_swap::ArcSwap;
use mpit::collective::{self, Collectives, ErrorsReturn, Failure, Verdict};
use mpit::Result;
use mpit::{Catalogue, Growth};
use mpit::{Library, MpiT};
use mpit::{Object, PrivateComm};
use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::*};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use vocab::record::{self, Record};

/// Bytes of the run directory broadcast: `ok<TAB>path` or `err<TAB>why`.
const RUN_DIR_MESSAGE: usize = 4096;

/// The MPI routine an error names, else `default`.
fn error_call(e: &mpit::Error, default: &'static str) -> &'static str {
    match e {
        mpit::Error::Mpi(m) => m.call,
        _ => default,
    }
}

/// How many live communicators and windows are tracked at once.
pub const OBJECT_CAPACITY: usize = 1024;

/// Extension points for the policy engine, called on the helper thread
/// (`tick`) or the application's thread inside MPI_Init/MPI_Finalize
/// (the others). The default does nothing: monitor mode.
pub trait Hooks: Send {
    /// Before `MPI_T_init_thread` (environment variables: Open MPI reads
    /// its `OMPI_MCA_*` variables when MPI_T initialises, not later).
    fn before_mpit(&mut self, _env: &LaunchEnv) {}
    /// Before `PMPI_Init` (settings read during init). `rank`/`size` come
    /// from the launcher's environment when it sets them.
    fn pre_init(&mut self, _mpit: &MpiT, _catalogue: &Catalogue, _env: &LaunchEnv) {}
    /// What identifies these hooks' collective behaviour (a hash of the
    /// policy set; 0 for none): the runtime checks it is the same on every
    /// rank before [`Hooks::init`] runs its collectives.
    fn identity(&self) -> u64 {
        0
    }
    /// Right after `PMPI_Init`, with the log open; `seq` is the sequence of
    /// the tool's collectives on its private communicator (every rank calls
    /// this at the same point, and must make the same calls whatever fails).
    fn init(
        &mut self,
        _mpit: &MpiT,
        _catalogue: &Catalogue,
        _info: &RunInfo,
        _log: &mut LogWriter,
        _seq: &mut Collectives,
    ) {
    }
    /// After every sample, on the helper thread.
    fn tick(
        &mut self,
        _mpit: &MpiT,
        _catalogue: &Catalogue,
        _snapshot: &Snapshot,
        _log: &mut LogWriter,
    ) {
    }
    /// At finalize, after the last sample.
    fn finalize(
        &mut self,
        _mpit: &MpiT,
        _catalogue: &Catalogue,
        _snapshot: &Snapshot,
        _log: &mut LogWriter,
    ) {
    }
    /// Lines for the end-of-run report, each with its kind
    /// (`"disabled"`, `"recommendation"`): rank 0's are written to
    /// summary.json, and its recommendations printed.
    fn report(&mut self) -> Vec<(&'static str, String)> {
        Vec::new()
    }
    /// Per-rank numbers for the cross-rank summary (such as
    /// `policy.<name>.writes`).
    fn quantities(&self) -> Vec<(String, &'static str, f64)> {
        Vec::new()
    }
}

/// The monitor-only hooks.
#[derive(Debug, Default)]
pub struct NoHooks;
impl Hooks for NoHooks {}

/// Rank and size as the launcher announces them in the environment, known
/// before MPI_Init.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaunchEnv {
    /// This process's rank, if the launcher said.
    pub rank: Option<u32>,
    /// The job size, if the launcher said.
    pub size: Option<u32>,
}

impl LaunchEnv {
    /// Reads the variables MPICH's Hydra (`PMI_RANK`, `PMI_SIZE`), Open MPI
    /// (`OMPI_COMM_WORLD_RANK`, `OMPI_COMM_WORLD_SIZE`), Slurm and PMIx set.
    pub fn from_env() -> LaunchEnv {
        let get = |names: &[&str]| {
            names
                .iter()
                .find_map(|n| std::env::var(n).ok().and_then(|v| v.parse().ok()))
        };
        LaunchEnv {
            rank: get(&[
                "PMI_RANK",
                "OMPI_COMM_WORLD_RANK",
                "PMIX_RANK",
                "SLURM_PROCID",
            ]),
            size: get(&["PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS"]),
        }
    }
}

/// Facts about this rank and run, in every log header.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RunInfo {
    /// Rank in `MPI_COMM_WORLD`.
    pub rank: i32,
    /// Size of `MPI_COMM_WORLD`.
    pub size: i32,
    /// Host name.
    pub host: String,
    /// Process id.
    pub pid: u32,
    /// `MPI_Get_library_version`.
    pub library_version: String,
    /// The library family.
    pub library: Library,
    /// The run directory.
    pub dir: PathBuf,
    /// Unix time the tuner started, in seconds.
    pub start_unix: f64,
}

/// The state between `PreInit::start` and `Runtime::start`.
pub struct PreInit {
    config: Config,
    warnings: Vec<String>,
    mpit: MpiT,
    catalogue: Catalogue,
    hooks: Box<dyn Hooks>,
    start: Instant,
}

impl PreInit {
    /// Runs the `before_mpit` hook, initialises MPI_T and loads the
    /// catalogue before `PMPI_Init`, then runs the `pre_init` hook.
    pub fn start(
        config: Config,
        warnings: Vec<String>,
        mut hooks: Box<dyn Hooks>,
    ) -> Result<PreInit> {
        hooks.before_mpit(&LaunchEnv::from_env());
        let mpit = MpiT::init()?;
        let catalogue = Catalogue::load(&mpit)?;
        hooks.pre_init(&mpit, &catalogue, &LaunchEnv::from_env());
        Ok(PreInit {
            config,
            warnings,
            mpit,
            catalogue,
            hooks,
            start: Instant::now(),
        })
    }
}

/// What the helper thread and the wrappers share, without locks.
#[derive(Debug)]
pub struct Shared {
    /// Live communicators and windows.
    pub objects: ObjectTable,
    stop: AtomicBool,
    flush: AtomicBool,
    ticks: AtomicU64,
    snapshot: ArcSwap<Snapshot>,
}

impl Shared {
    /// The latest snapshot (lock-free).
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.snapshot.load_full()
    }

    /// Asks the helper to flush its log at its next wake-up (used by the
    /// `MPI_Abort` wrapper).
    pub fn request_flush(&self) {
        self.flush.store(true, Release);
    }

    /// How many samples the helper took.
    pub fn ticks(&self) -> u64 {
        self.ticks.load(Relaxed)
    }
}

/// The name serde gives a unit variant (`openmpi`, `MULTIPLE`).
fn serde_name(value: impl serde::Serialize) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(s)) => s,
        Ok(other) => other.to_string(),
        Err(_) => String::new(),
    }
}

/// The configuration as the header records it.
fn config_record(config: &Config) -> record::RunConfig {
    record::RunConfig {
        enabled: config.enabled,
        dir: config.dir.as_ref().map(|d| d.display().to_string()),
        interval: config.interval.as_secs_f64(),
        pvars: config.pvars.clone(),
        policy: config.policy.as_ref().map(|p| p.display().to_string()),
        quiet: config.quiet,
        refresh: config.refresh.map(|r| r.as_secs_f64()),
        flush: config.flush.as_secs_f64(),
    }
}

/// A `warning` record.
fn warning(t: f64, message: &str) -> Record<'static> {
    Record::Warning(record::Warning {
        t,
        message: message.to_string(),
    })
}

/// What the helper thread hands back when it stops.
struct HelperDone {
    sampler: Sampler,
    log: LogWriter,
    hooks: Box<dyn Hooks>,
    last: Arc<Snapshot>,
}

/// The running tuner of one rank.
pub struct Runtime {
    shared: &'static Shared,
    info: RunInfo,
    config: Config,
    mpit: MpiT,
    private: PrivateComm,
    /// A failure of the tool's collectives that the other ranks have not
    /// heard of yet (an agreement that failed on this rank): told at the
    /// next agreement, at finalize.
    failure: Option<Failure>,
    helper: Option<std::thread::Thread>,
    done: crossbeam_channel::Receiver<HelperDone>,
}

/// Why the tuner is not running on this rank (the message was printed).
#[derive(Debug)]
pub struct Disabled(pub String);

impl Runtime {
    /// Starts the tuner right after `PMPI_Init`: a collective over
    /// `MPI_COMM_WORLD` (every rank calls it inside MPI_Init).
    ///
    /// Returns `Err(Disabled)` with a message (for rank 0; empty on the
    /// others) when the tuner cannot run, on every rank alike: the ranks go
    /// through the same sequence of the tool's collectives whatever fails
    /// locally, and two agreements decide (see [`mpit::collective`]). The
    /// first, on `MPI_COMM_WORLD` with `MPI_ERRORS_RETURN` swapped in, says
    /// whether MPI_T and the private communicator exist everywhere; the
    /// second, on the private communicator, whether every rank has its run
    /// directory, log and sampler. Each rank's log header is on disk before
    /// the second one, so that a run directory always says who started.
    ///
    /// `pre` is what [`PreInit::start`] returned on this rank.
    pub fn start(
        pre: std::result::Result<PreInit, String>,
    ) -> std::result::Result<Runtime, Disabled> {
        let world = mpit::comm_world().map_err(|e| Disabled(format!("no MPI_COMM_WORLD: {e}")))?;
        // The application cannot use MPI_COMM_WORLD before MPI_Init
        // returns: the tool's calls on it return their errors meanwhile.
        let (guard, swap_error) = ErrorsReturn::swap_in(world);
        let launch = LaunchEnv::from_env();
        let (rank, size, place) = match mpit::rank_size(world) {
            Ok((rank, size)) => (rank, size, None),
            Err(e) => (
                launch.rank.map_or(0, |r| r as i32),
                launch.size.map_or(1, |s| s as i32),
                Some(e),
            ),
        };
        let mut seq = Collectives::new(world, rank);
        if let Some(e) = swap_error {
            seq.fail(error_call(&e, "MPI_Comm_set_errhandler"), &e);
        }
        if let Some(e) = place {
            seq.fail(error_call(&e, "MPI_Comm_rank"), &e);
        }
        if let Err(why) = &pre {
            seq.fail_local(format!("{why} (rank {rank})"));
        }
        // Policies decide collectively (their init aggregation): every rank
        // must hold the same set, or none runs them.
        let identity = pre.as_ref().map_or(0, |p| p.hooks.identity());
        let same_hooks = seq.all_equal(identity as i64);
        let private = collective::create_private(&mut seq, world);
        let verdict = seq.agree();
        if let Err(e) = guard.restore() {
            mpit::say!(
                "mpit-tuner[rank {rank}]: while putting the application's error handler back on MPI_COMM_WORLD: {e}"
            );
        }
        // Rank 0 says it for the job; another rank only what failed there.
        let stop = |private: Option<PrivateComm>, why: &collective::FailedOn| {
            if let Some(mut comm) = private {
                if let Err(e) = comm.free() {
                    mpit::say!("mpit-tuner[rank {rank}]: freeing the tool's communicator: {e}");
                }
            }
            Err(Disabled(match (&why.mine, rank) {
                (_, 0) => format!("the tuner could not start: {why}; it is off on all ranks"),
                (Some(mine), _) => format!("{} (this rank)", mine.message),
                (None, _) => String::new(),
            }))
        };
        if let Verdict::Failed(why) = verdict {
            return stop(private, &why);
        }
        // This rank voted yes (else the verdict was Failed everywhere), so
        // it has MPI_T and the communicator.
        let (Ok(pre), Some(private)) = (pre, private) else {
            return Err(Disabled("the tuner could not start on this rank".into()));
        };
        let PreInit {
            config,
            mut warnings,
            mpit,
            mut catalogue,
            mut hooks,
            start,
        } = pre;
        let mut seq = seq.moved_to(private.comm());

        // The run directory: rank 0 names and creates it, everyone learns
        // the name (or why not) from one fixed-size broadcast.
        let mut message = [0u8; RUN_DIR_MESSAGE];
        if rank == 0 {
            let dir = config.dir.clone().unwrap_or_else(default_run_dir);
            let text = match std::fs::create_dir_all(&dir) {
                Ok(()) => format!("ok\t{}", dir.display()),
                Err(e) => format!(
                    "err\tcannot create run directory {} (MPIT_TUNER_DIR): {e}",
                    dir.display()
                ),
            };
            if text.len() > RUN_DIR_MESSAGE {
                let why = format!(
                    "err\tthe run directory's path is longer than {} bytes (MPIT_TUNER_DIR)",
                    RUN_DIR_MESSAGE - 40
                );
                message[..why.len()].copy_from_slice(why.as_bytes());
            } else {
                message[..text.len()].copy_from_slice(text.as_bytes());
            }
        }
        let received = seq.bcast_bytes(&mut message, 0);
        let end = message
            .iter()
            .position(|&b| b == 0)
            .unwrap_or(message.len());
        let message = String::from_utf8_lossy(&message[..end]).into_owned();
        let dir = match message.split_once('\t') {
            Some(("ok", dir)) if received => Some(PathBuf::from(dir)),
            Some(("err", why)) if rank == 0 => {
                seq.fail_local(why.to_string());
                None
            }
            _ => None,
        };

        let growth = catalogue.refresh(&mpit).unwrap_or_else(|e| {
            warnings.push(format!(
                "the variables added by MPI_Init could not be listed ({e}); the catalogue is the one from before MPI_Init"
            ));
            Growth::default()
        });
        let library_version = mpit.library_version().unwrap_or_else(|e| {
            warnings.push(format!("the MPI library did not say its version: {e}"));
            String::new()
        });
        let info = RunInfo {
            rank,
            size,
            host: mpit::host_name(),
            pid: std::process::id(),
            library: Library::from_version(&library_version),
            library_version,
            dir: dir.clone().unwrap_or_default(),
            start_unix: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64()),
        };
        let mut log = match &dir {
            Some(dir) => {
                let path = dir.join(log::rank_file_name(rank));
                LogWriter::create(&path, config.flush).unwrap_or_else(|e| {
                    seq.fail_local(format!(
                        "cannot write {} (MPIT_TUNER_DIR): {e}",
                        path.display()
                    ));
                    LogWriter::discard()
                })
            }
            None => LogWriter::discard(),
        };
        let sampler = match Sampler::new(&mpit, catalogue.clone(), &config) {
            Ok(s) => Some(s),
            Err(e) => {
                seq.fail_local(format!("cannot create a PVAR session: {e}"));
                None
            }
        };
        let local_ranks = ["MPI_LOCALNRANKS", "OMPI_COMM_WORLD_LOCAL_SIZE"]
            .iter()
            .find_map(|v| std::env::var(v).ok()?.trim().parse().ok());
        let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
        if let Some(w) = no_spare_core_warning(config.interval, cpus, local_ranks) {
            warnings.push(w);
        }
        // Configuration problems go to rank 0's terminal; variables that
        // cannot be sampled (components the library unloaded) only to the log.
        for w in &warnings {
            if rank == 0 {
                mpit::say!("mpit-tuner: warning: {w}");
            }
        }
        warnings.extend(catalogue.skipped_summary());
        let mut sampler = sampler;
        if let Some(s) = &mut sampler {
            warnings.extend(s.take_warnings());
        }
        log.record(&Record::Header(record::Header {
            version: record::FORMAT_VERSION,
            rank: info.rank,
            size: info.size,
            host: info.host.clone(),
            pid: info.pid,
            library: serde_name(info.library),
            library_version: info.library_version.clone(),
            mpi_t_thread_level: serde_name(mpit.provided()),
            concurrent_callers: crate::toolmetrics::concurrent_callers(),
            start_unix: info.start_unix,
            config: config_record(&config),
            catalogue: record::CatalogueCounts {
                cvars: catalogue.cvars().len(),
                pvars: catalogue.pvars().len(),
                categories: catalogue.categories().len(),
                skipped: catalogue.skipped().len(),
                grew_during_init: growth,
            },
            variables: sampler
                .as_ref()
                .map(Sampler::sampled_variables)
                .unwrap_or_default(),
        }));
        for w in &warnings {
            log.record(&warning(0.0, w));
        }
        // Who started is on disk before anything else can go wrong.
        log.flush();
        let verdict = seq.agree();
        let sampler = match (verdict, sampler) {
            (Verdict::AllOk, Some(sampler)) => sampler,
            (verdict, _) => {
                let why = match verdict {
                    Verdict::Failed(why) => why,
                    // Voted yes without a sampler: impossible (its failure
                    // was recorded), but never a reason to crash.
                    Verdict::AllOk => collective::FailedOn::local(rank, "no PVAR session"),
                };
                let message = format!("the tuner could not start: {why}; it is off on all ranks");
                log.record(&warning(0.0, &message));
                log.record(&Record::Close(record::Close {
                    t: start.elapsed().as_secs_f64(),
                    reason: "disabled".into(),
                    samples: 0,
                    objects_untracked: 0,
                    objects_short_lived: 0,
                }));
                log.flush();
                return stop(Some(private), &why);
            }
        };
        // The policies' init stage has its own collectives and agreement:
        // a failure there turns off only what it was for.
        if !same_hooks {
            let message = "the policy files differ across ranks (MPIT_TUNER_POLICY, or a file that did not parse everywhere): policies are off on all ranks, monitoring goes on";
            if rank == 0 {
                mpit::say!("mpit-tuner: {message}");
            }
            log.record(&warning(0.0, message));
            hooks = Box::new(NoHooks);
        }
        hooks.init(&mpit, &catalogue, &info, &mut log, &mut seq);
        log.flush();
        let failure = seq.into_pending();

        let shared: &'static Shared = Box::leak(Box::new(Shared {
            objects: ObjectTable::new(OBJECT_CAPACITY),
            stop: AtomicBool::new(false),
            flush: AtomicBool::new(false),
            ticks: AtomicU64::new(0),
            snapshot: ArcSwap::from_pointee(Snapshot::default()),
        }));
        shared.objects.register(Object::Comm(world));

        let (tx, done) = crossbeam_channel::bounded(1);
        let helper_config = config.clone();
        let helper_info = info.clone();
        let spawned = std::thread::Builder::new()
            .name("mpit-tuner".into())
            .spawn(move || {
                let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    helper_loop(shared, sampler, log, hooks, &helper_config, start)
                }));
                match result {
                    Ok(done) => {
                        let _ = tx.send(done);
                    }
                    Err(_) => mpit::say!(
                        "mpit-tuner[rank {}]: internal error on the helper thread; the tuner stopped on this rank",
                        helper_info.rank
                    ),
                }
            });
        // Without a helper the rank still takes part in the collective
        // finalize, with nothing to report.
        let helper = match spawned {
            Ok(handle) => Some(handle.thread().clone()),
            Err(e) => {
                mpit::say!("mpit-tuner[rank {rank}]: cannot start the helper thread: {e}");
                None
            }
        };
        Ok(Runtime {
            shared,
            info,
            config,
            mpit,
            private,
            failure,
            helper,
            done,
        })
    }

    /// The lock-free state the wrappers use.
    pub fn shared(&self) -> &'static Shared {
        self.shared
    }

    /// Facts about this rank.
    pub fn info(&self) -> &RunInfo {
        &self.info
    }

    /// Messages collected before the rank was known, for rank 0 to print.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Stops the tuner inside `MPI_Finalize`, before `PMPI_Finalize`:
    /// collective over the private communicator. Returns the `MpiT` guard,
    /// which the caller drops after `PMPI_Finalize` (it calls
    /// `MPI_T_finalize` only where that is safe for this library).
    pub fn finalize(mut self) -> MpiT {
        self.shared.stop.store(true, SeqCst);
        if let Some(helper) = &self.helper {
            helper.unpark();
        }
        let wait = Duration::from_secs(10).max(self.config.interval * 2);
        let done = match self.helper {
            Some(_) => self.done.recv_timeout(wait).ok(),
            None => None,
        };
        let snapshot = match &done {
            Some(d) => (*d.last).clone(),
            None => (*self.shared.snapshot()).clone(),
        };
        let mut done = done;
        let mut report = Vec::new();
        if let Some(d) = &mut done {
            d.hooks
                .finalize(&self.mpit, d.sampler.catalogue(), &snapshot, &mut d.log);
            report = d.hooks.report();
        }
        // Handles die before their objects and before MPI does.
        if done.is_some() {
            self.shared.objects.retire_all();
        }
        let mut quantities = summary::local_quantities(&snapshot);
        if let Some(d) = &done {
            quantities.extend(d.hooks.quantities());
        }
        let (signature, description) = summary::signature(&snapshot);
        // The summary's collectives, then one agreement: every rank uses
        // the result, or none does.
        let rank = self.info.rank;
        let mut seq = Collectives::resume(self.private.comm(), rank, self.failure.take());
        let stats = summary::reduce(&mut seq, 0, &quantities, signature, &description);
        let verdict = seq.agree();
        let catalogue = done.as_ref().map(|d| d.sampler.catalogue().clone());
        let mut notes = Vec::new();
        if let Verdict::Failed(why) = &verdict {
            let message = format!(
                "cross-rank summary turned off on all ranks: {why}; the logs of every rank are complete"
            );
            if rank == 0 {
                mpit::say!("mpit-tuner: {message}");
            }
            notes.push(message);
        }
        if let Err(e) = self.private.free() {
            notes.push(format!("freeing the tool's communicator: {e}"));
        }
        let refused = crate::objects::free_failures();
        if refused > 0 {
            notes.push(format!(
                "the library refused to stop or free {refused} PVAR handles of communicators and windows (MPI_T_pvar_stop/MPI_T_pvar_handle_free)"
            ));
        }
        let unsized_calls = crate::toolmetrics::type_size_failures();
        if unsized_calls > 0 {
            notes.push(format!(
                "MPI_Type_size failed for {unsized_calls} of the application's calls; their bytes are counted as 0"
            ));
        }
        if let Some(mut d) = done {
            notes.extend(d.sampler.close());
            for message in &notes {
                d.log.record(&warning(snapshot.t, message));
            }
            d.log.record(&Record::Close(record::Close {
                t: snapshot.t,
                reason: "finalize".into(),
                samples: snapshot.seq,
                objects_untracked: self.shared.objects.dropped(),
                objects_short_lived: self.shared.objects.short_lived(),
            }));
            d.log.flush();
        } else {
            mpit::say!(
                "mpit-tuner[rank {}]: the helper thread did not stop within {:?}; its log may end early",
                self.info.rank, wait
            );
            for message in &notes {
                mpit::say!("mpit-tuner[rank {rank}]: {message}");
            }
        }
        if let (Verdict::AllOk, Some(summary)) = (verdict, stats) {
            let ctx = recommend::Context {
                library: Some(self.info.library),
                eager_limit: eager_limit(&self.mpit, catalogue.as_ref()),
                has_hcoll: catalogue.as_ref().is_some_and(|c| {
                    c.cvars().iter().any(|v| {
                        v.name.starts_with("coll_hcoll") || v.name == "MPIR_CVAR_ENABLE_HCOLL"
                    })
                }),
            };
            let advice = recommend::recommend(&summary, &ctx);
            self.write_summary(&summary, &snapshot, &report, &advice)
        }
        self.mpit
    }

    fn write_summary(
        &self,
        summary: &summary::Summary,
        snapshot: &Snapshot,
        report: &[(&'static str, String)],
        advice: &[recommend::Recommendation],
    ) {
        let path = self.info.dir.join("summary.json");
        let doc = vocab::summary::SummaryFile {
            version: record::FORMAT_VERSION,
            size: self.info.size,
            library: serde_name(self.info.library),
            library_version: self.info.library_version.clone(),
            samples_rank0: snapshot.seq,
            duration_s: snapshot.t,
            variables: summary.variables.clone(),
            classes: summary.classes.clone(),
            size_histograms: summary.size_histograms.clone(),
            recommendations: advice.to_vec(),
            messages: report
                .iter()
                .map(|(kind, text)| vocab::summary::Message {
                    kind: kind.to_string(),
                    text: text.clone(),
                })
                .collect(),
        };
        let written = serde_json::to_vec_pretty(&doc)
            .map_err(std::io::Error::other)
            .and_then(|bytes| std::fs::write(&path, bytes));
        if let Err(e) = written {
            mpit::say!("mpit-tuner: cannot write {}: {e}", path.display());
        }
        if !self.config.quiet {
            let mut text = format!(
                "mpit-tuner: {} ranks, {} samples over {:.1}s, {} variables; logs in {}\n",
                self.info.size,
                snapshot.seq,
                snapshot.t,
                summary.variables.len(),
                self.info.dir.display()
            );
            if !summary.variables.is_empty() {
                text.push_str(&summary::table(&summary.variables, 12));
            }
            if summary.classes.len() > 1 {
                text.push_str(&format!(
                    "mpit-tuner: {} classes of ranks:\n",
                    summary.classes.len()
                ));
                for c in &summary.classes {
                    text.push_str(&format!("  ranks {}: {}\n", c.ranks, c.signature));
                }
            }
            for (kind, line) in report {
                if *kind == "recommendation" {
                    text.push_str(&format!("mpit-tuner: {line}\n"));
                }
            }
            for r in advice {
                text.push_str(&format!(
                    "mpit-tuner: recommendation [{}]: {}\n    evidence: {}\n    set: {}\n",
                    r.id, r.advice, r.evidence, r.setting
                ));
            }
            let _ = std::io::Write::write_all(&mut std::io::stderr().lock(), text.as_bytes());
        }
    }
}

fn helper_loop(
    shared: &'static Shared,
    mut sampler: Sampler,
    mut log: LogWriter,
    mut hooks: Box<dyn Hooks>,
    config: &Config,
    start: Instant,
) -> HelperDone {
    // The helper's own reference on MPI_T; the application's thread owns
    // the one that finalizes.
    let mpit = MpiT::init();
    let mut mpit = match mpit {
        Ok(m) => m,
        Err(e) => {
            log.record(&warning(
                0.0,
                &format!("MPI_T unavailable on the helper thread: {e}"),
            ));
            return HelperDone {
                sampler,
                log,
                hooks,
                last: Arc::default(),
            };
        }
    };
    mpit.set_finalize_on_drop(false);
    let mut seq = 0u64;
    let mut next = Instant::now();
    let mut next_refresh = config.refresh.map(|r| Instant::now() + r);
    loop {
        let stopping = shared.stop.load(Acquire);
        let t = start.elapsed().as_secs_f64();
        for event in sampler.track_objects(&shared.objects) {
            log.record(&Record::Object(record::ObjectEvent {
                t,
                event: event.event.to_string(),
                object: event.object,
                handles: event.handles,
            }));
        }
        sampler.sample(&shared.objects, t);
        sampler.sample_tool_metrics(t);
        seq += 1;
        let snapshot = Arc::new(sampler.snapshot(t, seq));
        log.record(&Record::Sample(record::Sample {
            t,
            seq,
            vars: Cow::Owned(
                snapshot
                    .vars
                    .iter()
                    .map(crate::sampler::SampledVar::record)
                    .collect(),
            ),
        }));
        hooks.tick(&mpit, sampler.catalogue(), &snapshot, &mut log);
        for w in sampler.take_warnings() {
            log.record(&warning(t, &w));
        }
        // Published as it is (no copy): readers share it with the helper.
        shared.snapshot.store(Arc::clone(&snapshot));
        shared.ticks.fetch_add(1, Relaxed);
        if shared.flush.swap(false, AcqRel) {
            log.flush();
        }
        if stopping {
            return HelperDone {
                sampler,
                log,
                hooks,
                last: snapshot,
            };
        }
        if let Some(due) = next_refresh {
            if Instant::now() >= due {
                let added = sampler.refresh(&mpit, config);
                if added > 0 {
                    log.record(&Record::Catalogue(record::CatalogueGrowth {
                        t,
                        new_pvars: added,
                        variables: sampler.sampled_variables(),
                    }));
                }
                next_refresh = config.refresh.map(|r| Instant::now() + r);
            }
        }
        next += config.interval;
        let now = Instant::now();
        if next < now {
            // Overran (a slow sample or a descheduled thread): skip ahead
            // rather than sample in a burst.
            next = now + config.interval;
        }
        while !shared.stop.load(Acquire) && !shared.flush.load(Acquire) {
            let now = Instant::now();
            if now >= next {
                break;
            }
            std::thread::park_timeout(next - now);
        }
        if shared.flush.swap(false, AcqRel) {
            log.record(&warning(
                start.elapsed().as_secs_f64(),
                "MPI_Abort called; flushing",
            ));
            log.flush();
        }
    }
}

/// A warning when the sampling interval is short and the helper thread has
/// no core of its own: the rank may use only one CPU (Open MPI binds each
/// rank to a core by default), or there are at least as many ranks on the
/// node as CPUs this rank may use. Waking up every millisecond then
/// preempts a rank (measured in BENCHMARKS.md: a helper that wakes every
/// 1 ms and does nothing slowed stencil3d by 7% on 2 busy ranks on 2
/// cores; with a free core, sampling every 1 ms cost 0.6%).
fn no_spare_core_warning(
    interval: Duration,
    cpus: usize,
    local_ranks: Option<usize>,
) -> Option<String> {
    if interval >= Duration::from_millis(10) || cpus == 0 {
        return None;
    }
    let why = if cpus == 1 {
        "this rank may run on one CPU only (bound to a core), which its helper thread shares"
            .to_string()
    } else {
        match local_ranks {
            Some(local) if local >= cpus => format!(
                "{local} ranks on this node may use {cpus} CPUs, so the helper threads share the ranks' cores"
            ),
            _ => return None,
        }
    };
    Some(format!(
        "MPIT_TUNER_INTERVAL={:?}: {why}; waking up this often takes CPU time from the application (see BENCHMARKS.md: +7% on stencil3d at 1ms without any sampling work); use 10ms or more, or leave a core free for the helper",
        interval
    ))
}

/// The shared-memory eager limit of the library, where it can be known: an
/// environment setting the library reads at init, or Open MPI's CVAR.
fn eager_limit(mpit: &MpiT, catalogue: Option<&Catalogue>) -> Option<(u64, String)> {
    for var in [
        "OMPI_MCA_btl_vader_eager_limit",
        "UCX_RNDV_THRESH",
        "MV2_SMP_EAGERSIZE",
    ] {
        if let Some(v) = std::env::var(var)
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
        {
            return Some((v, format!("{var}={v}")));
        }
    }
    let info = catalogue?.cvar("btl_vader_eager_limit")?;
    let value = mpit::Cvar::open(mpit, info, Object::None)
        .ok()?
        .read()
        .ok()?;
    let v = value.as_i64()?;
    Some((v.max(0) as u64, "btl_vader_eager_limit".into()))
}

/// `mpit-tuner-<UTC date>-<time>-<job id>` in the working directory; the job
/// id comes from the batch system or the launcher, else rank 0's pid.
fn default_run_dir() -> PathBuf {
    let job = [
        "SLURM_JOB_ID",
        "PBS_JOBID",
        "LSB_JOBID",
        "OMPI_MCA_ess_base_jobid",
        "PMI_JOBID",
    ]
    .iter()
    .find_map(|v| std::env::var(v).ok().filter(|s| !s.is_empty()))
    .map(|s| {
        s.replace(
            |c: char| !c.is_ascii_alphanumeric() && c != '.' && c != '-',
            "_",
        )
    })
    .unwrap_or_else(|| std::process::id().to_string());
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    Path::new(".").join(format!("mpit-tuner-{}-{job}", utc_stamp(secs)))
}

/// Unix seconds as `YYYYMMDD-HHMMSS` in UTC.
fn utc_stamp(secs: u64) -> String {
    let t = i64::try_from(secs)
        .ok()
        .and_then(|s| jiff::Timestamp::from_second(s).ok())
        .unwrap_or(jiff::Timestamp::MAX);
    t.strftime("%Y%m%d-%H%M%S").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_intervals_without_a_spare_core_are_warned_about() {
        let ms = Duration::from_millis;
        // Bound to one core (Open MPI's default for small jobs).
        assert!(no_spare_core_warning(ms(1), 1, None)
            .unwrap()
            .contains("one CPU"));
        // As many ranks on the node as CPUs.
        let w = no_spare_core_warning(ms(5), 2, Some(2)).unwrap();
        assert!(w.contains("2 ranks on this node may use 2 CPUs"), "{w}");
        // A core to spare, a long interval, or nothing known: silent.
        assert!(no_spare_core_warning(ms(1), 2, Some(1)).is_none());
        assert!(no_spare_core_warning(ms(10), 1, Some(8)).is_none());
        assert!(no_spare_core_warning(ms(1), 4, None).is_none());
    }

    #[test]
    fn dates() {
        assert_eq!(utc_stamp(0), "19700101-000000");
        assert_eq!(utc_stamp(20_779 * 86_400 + 3_723), "20261122-010203");
        assert_eq!(utc_stamp(11_016 * 86_400 + 86_399), "20000229-235959");
    }
}
