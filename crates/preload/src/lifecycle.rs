//! What the exported MPI functions do around the real calls: safe code,
//! called through `exports` inside `catch_unwind`.
//!
//! States: nothing happens until `MPI_Init`; then the runtime runs until
//! `MPI_Finalize`. Any failure disables the tuner on this rank with one
//! message; the application carries on untouched.
//!
//! The object wrappers, which may be called often and from any thread, only
//! read `ACTIVE` and `SHARED` (atomic loads) and then use the lock-free
//! object table. The mutexes below are taken only inside `MPI_Init` and
//! `MPI_Finalize`, once each, uncontended.

use crate::sizes::{self, Ops, Sizes};
use mpit::{Comm, MpiT, Object, Win};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering::*};
use std::sync::{Mutex, OnceLock};
use tuner_core::run::Config;
use tuner_core::run::LaunchEnv;
use tuner_core::runtime::{PreInit, Runtime, Shared};

static PRE_INIT: Mutex<Option<Result<PreInit, String>>> = Mutex::new(None);
static RUNTIME: Mutex<Option<Runtime>> = Mutex::new(None);
static AFTER_FINALIZE: Mutex<Option<MpiT>> = Mutex::new(None);
static SHARED: OnceLock<&'static Shared> = OnceLock::new();
static ACTIVE: AtomicBool = AtomicBool::new(false);
static DISABLED: AtomicBool = AtomicBool::new(false);

/// Takes the value out of one of the init/finalize slots (a poisoned lock,
/// after a caught panic, still yields its value).
fn take<T>(slot: &Mutex<Option<T>>) -> Option<T> {
    slot.lock().unwrap_or_else(|e| e.into_inner()).take()
}

fn put<T>(slot: &Mutex<Option<T>>, value: T) {
    *slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(value);
}

thread_local! {
    /// Depth of nested init/finalize wrappers on this thread (MPICH's
    /// Fortran `mpi_init_` calls the C `MPI_Init`).
    static DEPTH: Cell<u32> = const { Cell::new(0) };
}

/// Marks entry into an init or finalize wrapper; true for the outermost.
pub fn enter() -> bool {
    DEPTH.with(|d| {
        let depth = d.get();
        d.set(depth + 1);
        depth == 0
    })
}

/// Marks the exit from an init or finalize wrapper.
pub fn leave() {
    DEPTH.with(|d| d.set(d.get().saturating_sub(1)));
}

fn rank_label() -> String {
    LaunchEnv::from_env()
        .rank
        .map_or_else(|| "?".to_string(), |r| r.to_string())
}

/// Turns the tuner off on this rank after an internal failure: one message,
/// then every wrapper passes straight through.
pub fn disable(why: &str) {
    if !DISABLED.swap(true, AcqRel) {
        mpit::say_always!(
            "mpit-tuner[rank {}]: {why}; the tuner is disabled on this rank, the application continues",
            rank_label()
        );
    }
    ACTIVE.store(false, Release);
}

/// Inside `MPI_Init`, before the real call.
pub fn before_init() {
    if DISABLED.load(Acquire) {
        return;
    }
    let (config, warnings) = Config::from_env();
    mpit::set_quiet(config.quiet);
    mpit::set_verbose(config.verbose);
    if !config.enabled {
        DISABLED.store(true, Release);
        return;
    }
    let (services, problems) = tuner_core::services::all(&config);
    // Before MPI_Init the rank is known only from the launcher.
    if LaunchEnv::from_env().rank.unwrap_or(0) == 0 {
        for problem in &problems {
            mpit::say_always!("mpit-tuner: {problem}");
        }
    }
    let pre = PreInit::start(config, warnings, services)
        .map_err(|e| format!("MPI_T could not be initialised ({e})"));
    put(&PRE_INIT, pre);
}

/// Inside `MPI_Init`, after the real call succeeded.
pub fn after_init() {
    let Some(pre) = take(&PRE_INIT) else { return };
    match Runtime::start(pre) {
        Ok(runtime) => {
            if SHARED.set(runtime.shared()).is_ok() {
                ACTIVE.store(true, Release);
            }
            put(&RUNTIME, runtime);
        }
        Err(disabled) => {
            DISABLED.store(true, Release);
            if !disabled.0.is_empty() {
                mpit::say_always!(
                    "mpit-tuner[rank {}]: {}; the application continues without the tuner",
                    rank_label(),
                    disabled.0
                );
            }
        }
    }
}

/// After `MPI_Init` succeeded and the tuner started: keeps the sizes of
/// the predefined datatypes that `size_of` (`PMPI_Type_size`) gives, for
/// the counters and the size bins of tuned collectives, with their classes
/// (`tuner_core::collectives::exact_datatype`, from the header's names)
/// and the predefined reduction operations, for collective tuning's mode
/// `safe`. Datatypes the library will not size get one message and are
/// asked at each call (their class is kept all the same).
pub fn keep_datatype_sizes(size_of: impl Fn(mpit_sys::MPI_Datatype) -> Result<u32, i32>) {
    if !metrics_on() {
        return;
    }
    let mut sizes = Sizes::new();
    let (mut asked, mut failed) = (0, Vec::new());
    for (datatype, name) in mpit_sys::predefined_datatypes() {
        asked += 1;
        let exact = tuner_core::collectives::exact_datatype(name);
        let size = size_of(datatype).map_err(|rc| failed.push((name, rc))).ok();
        sizes.insert(mpit::datatype_bits(datatype), size, exact);
    }
    let mut ops = Ops::new();
    for (op, _) in mpit_sys::predefined_ops() {
        ops.insert(mpit::op_bits(op));
    }
    if let Some((name, rc)) = failed.first() {
        mpit::say_always!(
            "mpit-tuner[rank {}]: MPI_Type_size failed after init for {} of {asked} predefined \
             datatypes (first {name}: {}); their sizes are asked of the library at each call",
            rank_label(),
            failed.len(),
            mpit::describe_error(*rc)
        );
    }
    sizes::install(sizes, ops);
}

/// Inside `MPI_Finalize`, before the real call.
pub fn before_finalize() {
    ACTIVE.store(false, Release);
    let Some(runtime) = take(&RUNTIME) else {
        return;
    };
    put(&AFTER_FINALIZE, runtime.finalize());
}

/// Inside `MPI_Finalize`, after the real call: releases MPI_T (the guard
/// calls `MPI_T_finalize` only where this library survives it).
pub fn after_finalize() {
    drop(take(&AFTER_FINALIZE));
}

/// Before `MPI_Abort`: wakes the helper to record the abort and flush its
/// log, and waits for it, bounded (the helper answers within a sample's
/// time; the bound only matters when it is stuck or descheduled for long).
pub fn before_abort() {
    if let Some(shared) = shared() {
        if !shared.flush_for_abort(std::time::Duration::from_secs(2)) {
            mpit::say_always!("mpit-tuner: MPI_Abort: the helper thread did not flush its log within 2 s; the log may miss its last samples");
        }
    }
}

/// Whether the call counters are on: the tuner runs on this rank (one
/// relaxed load on the hot path).
#[inline]
pub fn metrics_on() -> bool {
    ACTIVE.load(Relaxed)
}

fn shared() -> Option<&'static Shared> {
    if ACTIVE.load(Acquire) {
        SHARED.get().copied()
    } else {
        None
    }
}

/// A communicator was created (hot-path safe: lock-free, no allocation).
pub fn comm_created(comm: Comm) {
    if let Some(shared) = shared() {
        if !mpit::is_comm_null(comm) {
            shared.objects.register(Object::Comm(comm));
        }
    }
}

/// A communicator is about to be freed: its handles go first.
pub fn comm_freeing(comm: Comm) {
    if let Some(shared) = shared() {
        shared.objects.retire(Object::Comm(comm));
    }
    tuner_core::collectives::comm_freeing(comm);
}

/// A window was created.
pub fn win_created(win: Win) {
    if let Some(shared) = shared() {
        shared.objects.register(Object::Win(win));
    }
}

/// A window is about to be freed.
pub fn win_freeing(win: Win) {
    if let Some(shared) = shared() {
        shared.objects.retire(Object::Win(win));
    }
}
