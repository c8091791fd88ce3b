//! The runtime: the moments of a rank's life, and one helper thread per
//! rank that drives the [services](crate::services) (sampling, policies,
//! steering, collective tuning) through them, started and stopped by the
//! interposer. It names no service: it calls each in the order of
//! [`crate::services::all`].
//!
//! The interposer calls, in order:
//! 1. [`PreInit::start`] inside `MPI_Init`, before `PMPI_Init`: MPI_T is
//!    initialised and the catalogue loaded (the hook point for `pre-init`
//!    policies);
//! 2. [`Runtime::start`] right after `PMPI_Init`: rank, size, run
//!    directory, log header, then the helper thread;
//! 3. [`ObjectTable::register`] / [`ObjectTable::retire`] from the object
//!    wrappers, lock-free, at any time;
//! 4. [`Runtime::finalize`] inside `MPI_Finalize`, before `PMPI_Finalize`:
//!    stop and join the helper (bounded wait), last sample, free handles,
//!    cross-rank summary, close the log.
//!
//! The application's threads never wait on the helper: it publishes its
//! latest [`Snapshot`] through an `ArcSwap`.

mod helper;
mod rundir;
mod start;

pub use start::PreInit;

use crate::run::log::{self, LogWriter};
use crate::run::{serde_name, warning, Config, LaunchEnv, RunInfo};
use crate::sample::objects::ObjectTable;
use crate::sample::Snapshot;
use crate::services::Service;
use arc_swap::ArcSwap;
use mpit::collective::{self, Collectives, ErrorsReturn, Failure, Verdict};
use mpit::quirks::LibraryVersion;
use mpit::MpiT;
use mpit::Result;
use mpit::{Catalogue, Growth};
use mpit::{Comm, Object};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::*};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use vocab::record::{self, Record};

/// How many live communicators and windows are tracked at once.
pub const OBJECT_CAPACITY: usize = 1024;

/// What the helper thread and the wrappers share, without locks.
#[derive(Debug)]
pub struct Shared {
    /// Live communicators and windows.
    pub objects: ObjectTable,
    pub(crate) stop: AtomicBool,
    pub(crate) flush: AtomicBool,
    /// How many flush requests the helper answered (log written out).
    pub(crate) flushed: AtomicU64,
    pub(crate) ticks: AtomicU64,
    pub(crate) snapshot: ArcSwap<Snapshot>,
    /// The helper thread, to wake it for a flush.
    pub(crate) helper: std::sync::OnceLock<std::thread::Thread>,
}

impl Shared {
    /// The latest snapshot (lock-free).
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.snapshot.load_full()
    }

    /// Asks the helper to record the abort and flush its log now, and
    /// waits until it has, at most `timeout` (used by the `MPI_Abort`
    /// wrapper, which must never wait long). Returns whether the helper
    /// answered in time.
    pub fn flush_for_abort(&self, timeout: std::time::Duration) -> bool {
        let answered = self.flushed.load(Acquire);
        self.flush.store(true, Release);
        if let Some(helper) = self.helper.get() {
            helper.unpark();
        }
        let deadline = Instant::now() + timeout;
        while self.flushed.load(Acquire) == answered {
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        true
    }
}

/// The configuration as the header records it.
pub(crate) fn config_record(config: &Config) -> record::RunConfig {
    record::RunConfig {
        enabled: config.enabled,
        dir: config.dir.as_ref().map(|d| d.display().to_string()),
        interval: config.interval.as_secs_f64(),
        pvars: config.pvars.clone(),
        policy: config.policy.as_ref().map(|p| p.display().to_string()),
        quiet: config.quiet,
        refresh: config.refresh.map(|r| r.as_secs_f64()),
        flush: config.flush.as_secs_f64(),
        collectives: config.collectives.as_ref().map(|c| c.describe()),
    }
}

/// What the helper thread hands back when it stops.
pub(crate) struct HelperDone {
    pub(crate) services: Vec<Box<dyn Service>>,
    pub(crate) catalogue: Catalogue,
    pub(crate) log: LogWriter,
    pub(crate) last: Arc<Snapshot>,
}

/// The running tuner of one rank.
pub struct Runtime {
    pub(crate) shared: &'static Shared,
    pub(crate) info: RunInfo,
    pub(crate) config: Config,
    pub(crate) mpit: MpiT,
    /// `MPI_COMM_WORLD`, where the tool's collectives run (inside
    /// `MPI_Init` and `MPI_Finalize` only, with `MPI_ERRORS_RETURN`).
    pub(crate) world: Comm,
    /// A failure of the tool's collectives that the other ranks have not
    /// heard of yet (an agreement that failed on this rank): told at the
    /// next agreement, at finalize.
    pub(crate) failure: Option<Failure>,
    /// The type and operation of the tool's mixed reductions, for finalize.
    pub(crate) mixed: Option<mpit::collective::MixedOp>,
    pub(crate) helper: Option<std::thread::Thread>,
    pub(crate) done: crossbeam_channel::Receiver<HelperDone>,
    /// What the services must run first inside `MPI_Finalize`.
    pub(crate) stoppers: Vec<fn() -> Vec<String>>,
}

/// Why the tuner is not running on this rank (the message was printed).
#[derive(Debug)]
pub struct Disabled(pub String);

impl Runtime {
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
}
