//! The exported MPI functions: the one module of the interposer with
//! `unsafe` code.
//!
//! Each export is one line of glue: it finds the real function (the next
//! definition after this library, `dlsym(RTLD_NEXT)`, so that other PMPI
//! tools chain correctly; resolved once and kept in an atomic), runs the
//! tuner's part inside `catch_unwind` (a panic disables the tuner on this
//! rank and never reaches the application), and calls the real function
//! with the application's arguments, returning its result unchanged.

#![allow(non_snake_case, clippy::missing_safety_doc)]

use crate::{lifecycle, sizes};
use mpit::{Comm, Win};
use mpit_sys::{
    mpit_fint as MPI_Fint, MPI_Aint, MPI_Comm, MPI_Datatype, MPI_Group, MPI_Info, MPI_Op,
    MPI_Status, MPI_Win,
};
use std::ffi::{c_char, c_int, c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use tuner_core::collectives::{self, Collective};
use tuner_core::sample::toolmetrics::{self, Family, Timing};

/// Runs the tuner's part of a wrapper; a panic disables the tuner.
fn guarded(what: &str, f: impl FnOnce()) {
    if catch_unwind(AssertUnwindSafe(f)).is_err() {
        // Even the message must not unwind into the application.
        let _ = catch_unwind(|| lifecycle::disable(&format!("internal error in {what}")));
    }
}

/// Finds the real definition of `name`: the next one after this library,
/// else any (for applications that call PMPI directly through us).
#[inline(always)]
fn resolve(name: &CStr, cache: &AtomicUsize) -> usize {
    let cached = cache.load(Ordering::Relaxed);
    if cached != 0 {
        return cached;
    }
    resolve_slow(name, cache)
}

#[cold]
#[inline(never)]
fn resolve_slow(name: &CStr, cache: &AtomicUsize) -> usize {
    // SAFETY: dlsym with a NUL-terminated name; RTLD_NEXT is valid from a
    // shared object. The result is a function address or null.
    let mut f = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) } as usize;
    if f == 0 {
        // SAFETY: as above, in the global scope.
        f = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) } as usize;
    }
    if f == 0 {
        let _ = catch_unwind(|| {
            mpit::say_always!(
                "mpit-tuner: the MPI library in this process has no {}; cannot continue",
                name.to_string_lossy()
            )
        });
        std::process::abort();
    }
    cache.store(f, Ordering::Relaxed);
    f
}

/// Declares the real function `$name` with the type `$ty` and returns it.
macro_rules! real {
    ($name:expr, $ty:ty) => {{
        static CACHE: AtomicUsize = AtomicUsize::new(0);
        let address = resolve($name, &CACHE);
        // SAFETY: `address` is the non-null address of the symbol `$name`
        // in the MPI library, whose C prototype is `$ty` (from mpi.h via
        // mpit-sys, or the Fortran binding's convention).
        unsafe { std::mem::transmute::<usize, $ty>(address) }
    }};
}

// ---------------------------------------------------------------------------
// Initialisation and finalisation (C).

#[no_mangle]
pub unsafe extern "C" fn MPI_Init(argc: *mut c_int, argv: *mut *mut *mut c_char) -> c_int {
    let real = real!(
        c"MPI_Init",
        unsafe extern "C" fn(*mut c_int, *mut *mut *mut c_char) -> c_int
    );
    init_around(|| {
        // SAFETY: the application's own arguments, passed through.
        unsafe { real(argc, argv) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Init_thread(
    argc: *mut c_int,
    argv: *mut *mut *mut c_char,
    required: c_int,
    provided: *mut c_int,
) -> c_int {
    let real = real!(
        c"MPI_Init_thread",
        unsafe extern "C" fn(*mut c_int, *mut *mut *mut c_char, c_int, *mut c_int) -> c_int
    );
    init_around(|| {
        // SAFETY: the application's own arguments, passed through.
        unsafe { real(argc, argv, required, provided) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Finalize() -> c_int {
    let real = real!(c"MPI_Finalize", unsafe extern "C" fn() -> c_int);
    finalize_around(|| {
        // SAFETY: no arguments.
        unsafe { real() }
    })
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Abort(comm: MPI_Comm, errorcode: c_int) -> c_int {
    let real = real!(c"MPI_Abort", unsafe extern "C" fn(MPI_Comm, c_int) -> c_int);
    guarded("MPI_Abort", lifecycle::before_abort);
    // SAFETY: the application's own arguments, passed through.
    unsafe { real(comm, errorcode) }
}

fn init_around(real: impl FnOnce() -> c_int) -> c_int {
    let outermost = lifecycle::enter();
    if outermost {
        guarded("MPI_Init", lifecycle::before_init);
    }
    let rc = real();
    if outermost && rc == success() {
        note_thread_level();
        guarded("MPI_Init", lifecycle::after_init);
        guarded("MPI_Init", || lifecycle::keep_datatype_sizes(type_size));
    }
    lifecycle::leave();
    rc
}

/// Tells the call counters whether the application may call MPI from
/// several threads at once: the thread level the library provided, as
/// `MPI_Query_thread` reports it (an application that called `MPI_Init`
/// may still have been given `MPI_THREAD_MULTIPLE`). If the query fails,
/// the counters stay in their safe, concurrent mode.
fn note_thread_level() {
    let query = real!(
        c"PMPI_Query_thread",
        unsafe extern "C" fn(*mut c_int) -> c_int
    );
    let mut provided: c_int = 0;
    // SAFETY: MPI is initialised (the real init just succeeded) and
    // `provided` is a valid out-pointer.
    if unsafe { query(&mut provided) } == success() {
        // SAFETY: reading a constant of the C shim.
        let multiple = unsafe { mpit_sys::MPIT_THREAD_MULTIPLE };
        toolmetrics::set_concurrent_callers(provided >= multiple);
    }
}

fn finalize_around(real: impl FnOnce() -> c_int) -> c_int {
    let outermost = lifecycle::enter();
    if outermost {
        guarded("MPI_Finalize", lifecycle::before_finalize);
    }
    let rc = real();
    if outermost {
        guarded("MPI_Finalize", lifecycle::after_finalize);
    }
    lifecycle::leave();
    rc
}

fn success() -> c_int {
    // SAFETY: reading a constant of the C shim.
    unsafe { mpit_sys::MPIT_SUCCESS }
}

// ---------------------------------------------------------------------------
// Initialisation and finalisation (Fortran: every name mangling in use).

/// The Fortran wrappers of one MPI function, under every name mangling in
/// use (`mpi_x_`, `mpi_x`, `MPI_X`, `mpi_x__`, listed by the caller), each
/// calling the real function of its own name: `$real` is bound to it in
/// `$body`. Every argument is a pointer, as in Fortran's calling convention.
macro_rules! fortran {
    ($($($sym:ident),+ ($($arg:ident: $ty:ty),*) |$real:ident| $body:block)+) => {$(
        fortran!(@each [$($arg: $ty),*] $real $body; $($sym),+);
    )+};
    (@each $sig:tt $real:ident $body:block; $sym:ident $(, $rest:ident)*) => {
        fortran!(@one $sym $sig $real $body);
        fortran!(@each $sig $real $body; $($rest),*);
    };
    (@each $sig:tt $real:ident $body:block;) => {};
    (@one $sym:ident [$($arg:ident: $ty:ty),*] $real:ident $body:block) => {
        #[no_mangle]
        pub unsafe extern "C" fn $sym($($arg: $ty),*) {
            const NAME: &CStr =
                match CStr::from_bytes_with_nul(concat!(stringify!($sym), "\0").as_bytes()) {
                    Ok(name) => name,
                    Err(_) => panic!("a symbol name has no NUL inside"),
                };
            let $real = real!(NAME, unsafe extern "C" fn($($ty),*));
            $body
        }
    };
}

/// Fortran init: IERROR is MPI_SUCCESS on success, as in C.
fn init_fortran(real: impl FnOnce() -> MPI_Fint) {
    init_around(|| real() as c_int);
}

fortran! {
    mpi_init_, mpi_init, MPI_INIT, mpi_init__ (ierr: *mut MPI_Fint) |real| {
        init_fortran(|| {
            // SAFETY: the application's own argument, passed through.
            unsafe { real(ierr) };
            // SAFETY: Fortran passes a valid IERROR by reference.
            unsafe { ierr.as_ref() }.map_or(0, |e| *e)
        });
    }
    mpi_init_thread_, mpi_init_thread, MPI_INIT_THREAD, mpi_init_thread__
    (required: *const MPI_Fint, provided: *mut MPI_Fint, ierr: *mut MPI_Fint) |real| {
        init_fortran(|| {
            // SAFETY: the application's own arguments, passed through.
            unsafe { real(required, provided, ierr) };
            // SAFETY: Fortran passes a valid IERROR by reference.
            unsafe { ierr.as_ref() }.map_or(0, |e| *e)
        });
    }
    mpi_finalize_, mpi_finalize, MPI_FINALIZE, mpi_finalize__ (ierr: *mut MPI_Fint) |real| {
        finalize_around(|| {
            // SAFETY: the application's own argument, passed through.
            unsafe { real(ierr) };
            // SAFETY: Fortran passes a valid IERROR by reference.
            unsafe { ierr.as_ref() }.map_or(0, |e| *e)
        });
    }
}

// ---------------------------------------------------------------------------
// Communicators and windows: bound variables get handles while the object
// lives and lose them before it dies.

/// After a creation call: tracks the new communicator (lock-free).
fn created_comm(rc: c_int, newcomm: *mut MPI_Comm) {
    if rc == success() {
        // SAFETY: on success the library wrote a handle through `newcomm`,
        // a pointer the application gave it.
        if let Some(comm) = unsafe { newcomm.as_ref() } {
            let comm = *comm;
            guarded("communicator creation", || {
                lifecycle::comm_created(Comm::from_raw(comm))
            });
        }
    }
}

fn created_win(rc: c_int, win: *mut MPI_Win) {
    if rc == success() {
        // SAFETY: on success the library wrote a handle through `win`.
        if let Some(w) = unsafe { win.as_ref() } {
            let w = *w;
            guarded("window creation", || {
                lifecycle::win_created(Win::from_raw(w))
            });
        }
    }
}

/// Exports of MPI functions that create an object: each passes the
/// application's arguments through and reports the handle written to its
/// last argument, `$out` (a communicator or a window), to `$created` when
/// the call succeeded.
macro_rules! creator {
    ($handle:ty, $created:ident: $($sym:ident => $name:literal ( $($arg:ident : $ty:ty),* ) -> $out:ident;)+) => {$(
        #[no_mangle]
        pub unsafe extern "C" fn $sym($($arg: $ty,)* $out: *mut $handle) -> c_int {
            let real = real!($name, unsafe extern "C" fn($($ty,)* *mut $handle) -> c_int);
            // SAFETY: the application's own arguments, passed through.
            let rc = unsafe { real($($arg,)* $out) };
            $created(rc, $out);
            rc
        }
    )+};
}

creator! { MPI_Comm, created_comm:
    MPI_Comm_dup => c"MPI_Comm_dup"(comm: MPI_Comm) -> newcomm;
    MPI_Comm_dup_with_info => c"MPI_Comm_dup_with_info"(comm: MPI_Comm, info: MPI_Info) -> newcomm;
    MPI_Comm_split => c"MPI_Comm_split"(comm: MPI_Comm, color: c_int, key: c_int) -> newcomm;
    MPI_Comm_split_type => c"MPI_Comm_split_type"(comm: MPI_Comm, split_type: c_int, key: c_int, info: MPI_Info) -> newcomm;
    MPI_Comm_create => c"MPI_Comm_create"(comm: MPI_Comm, group: MPI_Group) -> newcomm;
    MPI_Comm_create_group => c"MPI_Comm_create_group"(comm: MPI_Comm, group: MPI_Group, tag: c_int) -> newcomm;
    MPI_Cart_create => c"MPI_Cart_create"(comm: MPI_Comm, ndims: c_int, dims: *const c_int, periods: *const c_int, reorder: c_int) -> newcomm;
    MPI_Cart_sub => c"MPI_Cart_sub"(comm: MPI_Comm, remain_dims: *const c_int) -> newcomm;
    MPI_Intercomm_create => c"MPI_Intercomm_create"(local: MPI_Comm, local_leader: c_int, peer: MPI_Comm, remote_leader: c_int, tag: c_int) -> newcomm;
    MPI_Intercomm_merge => c"MPI_Intercomm_merge"(intercomm: MPI_Comm, high: c_int) -> newcomm;
}

creator! { MPI_Win, created_win:
    MPI_Win_create => c"MPI_Win_create"(base: *mut c_void, size: MPI_Aint, disp_unit: c_int, info: MPI_Info, comm: MPI_Comm) -> win;
    MPI_Win_allocate => c"MPI_Win_allocate"(size: MPI_Aint, disp_unit: c_int, info: MPI_Info, comm: MPI_Comm, baseptr: *mut c_void) -> win;
    MPI_Win_allocate_shared => c"MPI_Win_allocate_shared"(size: MPI_Aint, disp_unit: c_int, info: MPI_Info, comm: MPI_Comm, baseptr: *mut c_void) -> win;
    MPI_Win_create_dynamic => c"MPI_Win_create_dynamic"(info: MPI_Info, comm: MPI_Comm) -> win;
}

/// Exports of MPI functions that free an object: each reports the handle
/// its argument points to to `$freeing` before the call frees
/// it, then passes the argument through.
macro_rules! freer {
    ($handle:ty, $wrap:path, $freeing:path: $($sym:ident => $name:literal;)+) => {$(
        #[no_mangle]
        pub unsafe extern "C" fn $sym(object: *mut $handle) -> c_int {
            let real = real!($name, unsafe extern "C" fn(*mut $handle) -> c_int);
            // SAFETY: the application's pointer to the handle it is freeing.
            if let Some(o) = unsafe { object.as_ref() } {
                let o = *o;
                guarded(stringify!($sym), || $freeing($wrap(o)));
            }
            // SAFETY: the application's own argument, passed through.
            unsafe { real(object) }
        }
    )+};
}

freer! { MPI_Comm, Comm::from_raw, lifecycle::comm_freeing:
    MPI_Comm_free => c"MPI_Comm_free";
    MPI_Comm_disconnect => c"MPI_Comm_disconnect";
}

freer! { MPI_Win, Win::from_raw, lifecycle::win_freeing:
    MPI_Win_free => c"MPI_Win_free";
}

// Fortran: Open MPI's Fortran bindings call PMPI_* directly, so the C
// wrappers above do not see communicators a Fortran program creates; these
// do (MPICH's Fortran bindings call the C functions: the object table
// ignores the second report of the same communicator).

/// The C handle of a Fortran communicator handle.
fn comm_from_fortran(comm: MPI_Fint) -> MPI_Comm {
    // SAFETY: a conversion the MPI library defines for any handle value;
    // only called from Fortran wrappers, that is in MPI processes.
    unsafe { mpit_sys::mpit_comm_f2c(comm) }
}

fn created_fortran_comm(ierr: *mut MPI_Fint, newcomm: *const MPI_Fint) {
    // SAFETY: Fortran passes IERROR and the new handle by reference.
    let (ierr, newcomm) = unsafe { (ierr.as_ref().copied(), newcomm.as_ref().copied()) };
    if let (Some(0), Some(newcomm)) = (ierr, newcomm) {
        guarded("communicator creation", || {
            lifecycle::comm_created(Comm::from_raw(comm_from_fortran(newcomm)))
        });
    }
}

fortran! {
    mpi_comm_dup_, mpi_comm_dup, MPI_COMM_DUP, mpi_comm_dup__
    (comm: *const MPI_Fint, newcomm: *mut MPI_Fint, ierr: *mut MPI_Fint) |real| {
        // SAFETY: the application's own arguments, passed through.
        unsafe { real(comm, newcomm, ierr) };
        created_fortran_comm(ierr, newcomm);
    }
    mpi_comm_split_, mpi_comm_split, MPI_COMM_SPLIT, mpi_comm_split__
    (comm: *const MPI_Fint, color: *const MPI_Fint, key: *const MPI_Fint, newcomm: *mut MPI_Fint, ierr: *mut MPI_Fint) |real| {
        // SAFETY: the application's own arguments, passed through.
        unsafe { real(comm, color, key, newcomm, ierr) };
        created_fortran_comm(ierr, newcomm);
    }
    mpi_comm_create_, mpi_comm_create, MPI_COMM_CREATE, mpi_comm_create__
    (comm: *const MPI_Fint, group: *const MPI_Fint, newcomm: *mut MPI_Fint, ierr: *mut MPI_Fint) |real| {
        // SAFETY: the application's own arguments, passed through.
        unsafe { real(comm, group, newcomm, ierr) };
        created_fortran_comm(ierr, newcomm);
    }
    mpi_comm_free_, mpi_comm_free, MPI_COMM_FREE, mpi_comm_free__
    (comm: *mut MPI_Fint, ierr: *mut MPI_Fint) |real| {
        // SAFETY: the application's pointer to the handle it frees.
        if let Some(c) = unsafe { comm.as_ref() }.copied() {
            guarded("MPI_COMM_FREE", || lifecycle::comm_freeing(Comm::from_raw(comm_from_fortran(c))));
        }
        // SAFETY: the application's own arguments, passed through.
        unsafe { real(comm, ierr) };
    }
}

// ---------------------------------------------------------------------------
// The application's own MPI_T initialisation.

/// The application's `MPI_T_init_thread` asks the library for
/// `MPI_THREAD_MULTIPLE` whatever level it wanted, and is told the level it
/// would have got (the least of what it asked and what the library gives;
/// levels are ordered), while the tool holds MPI_T
/// ([`mpit::MpiT::in_use`]); otherwise the call goes through unchanged.
/// MPICH keeps one flag for the whole process, set by the latest
/// `MPI_T_init_thread` (`MPIR_T_is_threaded = (required ==
/// MPI_THREAD_MULTIPLE)`), and takes its MPI_T lock only while it is set:
/// an application asking for `MPI_THREAD_SINGLE` while the tool's helper
/// thread uses MPI_T turned the lock off under the helper's feet (MPICH
/// 5.0.2 aborted in the application's next `MPI_T_cvar_get_index`: an
/// unlock of a lock it never took; a helper inside the lock when the flag
/// flips would leave it held). A `required` that is not a thread level
/// goes through unchanged, so that the library rejects it as before. The
/// tool's own `MPI_T_init_thread` (which asks for `MPI_THREAD_MULTIPLE`)
/// goes through here too. Not while the tool is off (or did not start):
/// Open MPI 4.1's first `MPI_T_init_thread` sets the thread level of the
/// whole process (`ompi_mpi_thread_level`), so after `MPI_Init` the
/// application's `MPI_Query_thread` said `MPI_THREAD_MULTIPLE` and ob1 left
/// its single-thread fast path, with the preload loaded and
/// `MPIT_TUNER=off`. With the tool on, its own initialisation (before
/// `MPI_Init`) holds MPI_T, and the application's never reaches that.
#[no_mangle]
pub unsafe extern "C" fn MPI_T_init_thread(required: c_int, provided: *mut c_int) -> c_int {
    let real = real!(
        c"MPI_T_init_thread",
        unsafe extern "C" fn(c_int, *mut c_int) -> c_int
    );
    // SAFETY: reading constants of the C shim (the header's levels).
    let levels = unsafe {
        [
            mpit_sys::MPIT_THREAD_SINGLE,
            mpit_sys::MPIT_THREAD_FUNNELED,
            mpit_sys::MPIT_THREAD_SERIALIZED,
            mpit_sys::MPIT_THREAD_MULTIPLE,
        ]
    };
    let multiple = levels[3];
    if !levels.contains(&required)
        || required == multiple
        || provided.is_null()
        || !mpit::MpiT::in_use()
    {
        // SAFETY: the application's own arguments, passed through.
        return unsafe { real(required, provided) };
    }
    let mut got: c_int = 0;
    // SAFETY: a thread level of the header and a valid out-pointer.
    let rc = unsafe { real(multiple, &mut got) };
    if rc == success() {
        // SAFETY: the application's out-pointer, not null (checked above),
        // which MPI_T_init_thread writes on success.
        unsafe { *provided = required.min(got) };
    }
    rc
}

// ---------------------------------------------------------------------------
// The application's own MPI_T writes (the tool's go past this export: see
// `mpit_sys::MpiFunctions::load`).

#[no_mangle]
pub unsafe extern "C" fn MPI_T_cvar_write(
    handle: mpit_sys::MPI_T_cvar_handle,
    buf: *const c_void,
) -> c_int {
    let real = real!(
        c"MPI_T_cvar_write",
        unsafe extern "C" fn(mpit_sys::MPI_T_cvar_handle, *const c_void) -> c_int
    );
    // SAFETY: the application's own arguments, passed through.
    let rc = unsafe { real(handle, buf) };
    guarded("MPI_T_cvar_write", collectives::application_wrote);
    rc
}

// ---------------------------------------------------------------------------
// Point-to-point and collective calls: counted on the hot path with relaxed
// atomics only (no lock, no allocation, no I/O); the first calls of each
// family and then one in toolmetrics::TIMING_PERIOD are timed.

/// The size of `datatype` as the library gives it (`PMPI_Type_size`), or
/// its error code.
#[inline]
fn type_size(datatype: MPI_Datatype) -> Result<u32, c_int> {
    let type_size = real!(
        c"PMPI_Type_size",
        unsafe extern "C" fn(MPI_Datatype, *mut c_int) -> c_int
    );
    let mut size: c_int = 0;
    // SAFETY: a datatype the application passed with a non-empty message
    // (valid by the MPI standard), or a predefined one of the header that
    // is not MPI_DATATYPE_NULL, after init; a valid out-pointer.
    match unsafe { type_size(datatype, &mut size) } {
        rc if rc == success() => Ok(size.max(0) as u32),
        rc => Err(rc),
    }
}

/// Bytes of `count` elements of `datatype`; 0 for an empty message,
/// without asking the library.
#[inline]
fn bytes(count: c_int, datatype: MPI_Datatype) -> u64 {
    try_bytes(count, datatype).unwrap_or(0)
}

/// [`bytes`], `None` when `MPI_Type_size` fails (counted for the summary):
/// a tuned collective must know it cannot tell its size bin.
#[inline]
fn try_bytes(count: c_int, datatype: MPI_Datatype) -> Option<u64> {
    if count <= 0 {
        return Some(0);
    }
    sized(count, datatype, sizes::of(mpit::datatype_bits(datatype)))
}

/// [`try_bytes`] of a non-empty message whose datatype's size, if it is a
/// predefined one, is `known`: a predefined datatype's size was asked once
/// after init; a derived one's is asked now.
#[inline]
fn sized(count: c_int, datatype: MPI_Datatype, known: Option<u32>) -> Option<u64> {
    let size = match known {
        Some(size) => size,
        None => match type_size(datatype) {
            Ok(size) => size,
            Err(_) => {
                toolmetrics::type_size_failed();
                return None;
            }
        },
    };
    Some(count as u64 * u64::from(size))
}

fn in_place() -> *const c_void {
    // SAFETY: reading a constant of the C shim.
    unsafe { mpit_sys::MPIT_IN_PLACE }.cast_const()
}

/// Counts a call (panics cannot escape) and runs it, timing it when its
/// turn comes.
#[inline]
fn counted(family: Family, bytes: impl FnOnce() -> u64, call: impl FnOnce() -> c_int) -> c_int {
    if !lifecycle::metrics_on() {
        return call();
    }
    let timing = catch_unwind(AssertUnwindSafe(|| toolmetrics::record(family, bytes())))
        .unwrap_or(Timing::No);
    if timing == Timing::No {
        return call();
    }
    let start = std::time::Instant::now();
    let rc = call();
    toolmetrics::record_time(family, timing, start.elapsed().as_nanos() as u64);
    rc
}

macro_rules! counted_call {
    ($($sym:ident => $name:literal ( $($arg:ident : $ty:ty),* ) as $family:ident bytes $bytes:expr;)+) => {$(
        #[no_mangle]
        pub unsafe extern "C" fn $sym($($arg: $ty),*) -> c_int {
            let real = real!($name, unsafe extern "C" fn($($ty),*) -> c_int);
            counted(Family::$family, || $bytes, || {
                // SAFETY: the application's own arguments, passed through.
                unsafe { real($($arg),*) }
            })
        }
    )+};
}

counted_call! {
    MPI_Send => c"MPI_Send"(buf: *const c_void, count: c_int, datatype: MPI_Datatype, dest: c_int, tag: c_int, comm: MPI_Comm)
        as Send bytes bytes(count, datatype);
    MPI_Ssend => c"MPI_Ssend"(buf: *const c_void, count: c_int, datatype: MPI_Datatype, dest: c_int, tag: c_int, comm: MPI_Comm)
        as Send bytes bytes(count, datatype);
    MPI_Rsend => c"MPI_Rsend"(buf: *const c_void, count: c_int, datatype: MPI_Datatype, dest: c_int, tag: c_int, comm: MPI_Comm)
        as Send bytes bytes(count, datatype);
    MPI_Bsend => c"MPI_Bsend"(buf: *const c_void, count: c_int, datatype: MPI_Datatype, dest: c_int, tag: c_int, comm: MPI_Comm)
        as Send bytes bytes(count, datatype);
    MPI_Isend => c"MPI_Isend"(buf: *const c_void, count: c_int, datatype: MPI_Datatype, dest: c_int, tag: c_int, comm: MPI_Comm, request: *mut mpit_sys::MPI_Request)
        as Isend bytes bytes(count, datatype);
    MPI_Issend => c"MPI_Issend"(buf: *const c_void, count: c_int, datatype: MPI_Datatype, dest: c_int, tag: c_int, comm: MPI_Comm, request: *mut mpit_sys::MPI_Request)
        as Isend bytes bytes(count, datatype);
    MPI_Irsend => c"MPI_Irsend"(buf: *const c_void, count: c_int, datatype: MPI_Datatype, dest: c_int, tag: c_int, comm: MPI_Comm, request: *mut mpit_sys::MPI_Request)
        as Isend bytes bytes(count, datatype);
    MPI_Ibsend => c"MPI_Ibsend"(buf: *const c_void, count: c_int, datatype: MPI_Datatype, dest: c_int, tag: c_int, comm: MPI_Comm, request: *mut mpit_sys::MPI_Request)
        as Isend bytes bytes(count, datatype);
    MPI_Recv => c"MPI_Recv"(buf: *mut c_void, count: c_int, datatype: MPI_Datatype, source: c_int, tag: c_int, comm: MPI_Comm, status: *mut MPI_Status)
        as Recv bytes bytes(count, datatype);
    MPI_Irecv => c"MPI_Irecv"(buf: *mut c_void, count: c_int, datatype: MPI_Datatype, source: c_int, tag: c_int, comm: MPI_Comm, request: *mut mpit_sys::MPI_Request)
        as Irecv bytes bytes(count, datatype);
    MPI_Sendrecv => c"MPI_Sendrecv"(sendbuf: *const c_void, sendcount: c_int, sendtype: MPI_Datatype, dest: c_int, sendtag: c_int,
        recvbuf: *mut c_void, recvcount: c_int, recvtype: MPI_Datatype, source: c_int, recvtag: c_int, comm: MPI_Comm, status: *mut MPI_Status)
        as Sendrecv bytes bytes(sendcount, sendtype);
    MPI_Wait => c"MPI_Wait"(request: *mut mpit_sys::MPI_Request, status: *mut MPI_Status)
        as Wait bytes 0;
    MPI_Waitall => c"MPI_Waitall"(count: c_int, requests: *mut mpit_sys::MPI_Request, statuses: *mut MPI_Status)
        as Wait bytes 0;
    MPI_Waitany => c"MPI_Waitany"(count: c_int, requests: *mut mpit_sys::MPI_Request, index: *mut c_int, status: *mut MPI_Status)
        as Wait bytes 0;
    MPI_Waitsome => c"MPI_Waitsome"(incount: c_int, requests: *mut mpit_sys::MPI_Request, outcount: *mut c_int, indices: *mut c_int, statuses: *mut MPI_Status)
        as Wait bytes 0;
    MPI_Gather => c"MPI_Gather"(sendbuf: *const c_void, sendcount: c_int, sendtype: MPI_Datatype,
        recvbuf: *mut c_void, recvcount: c_int, recvtype: MPI_Datatype, root: c_int, comm: MPI_Comm)
        as Gather bytes if sendbuf == in_place() { bytes(recvcount, recvtype) } else { bytes(sendcount, sendtype) };
    MPI_Scatter => c"MPI_Scatter"(sendbuf: *const c_void, sendcount: c_int, sendtype: MPI_Datatype,
        recvbuf: *mut c_void, recvcount: c_int, recvtype: MPI_Datatype, root: c_int, comm: MPI_Comm)
        as Scatter bytes if recvbuf.cast_const() == in_place() { bytes(sendcount, sendtype) } else { bytes(recvcount, recvtype) };
}

/// Counts a blocking collective like [`counted`] and, when online
/// collective tuning runs, sets the algorithm this call must use before it
/// and counts it for the search after it (timing it when either asks).
///
/// `call` runs the real collective on the communicator it is given: the
/// application's, or (Open MPI) the candidate communicator the tuner made
/// over the same group. A failure there goes to the application's error
/// handler on its own communicator, as if the call had failed on it.
///
/// `message` is the call's count and datatype (one rank's contribution;
/// `None`: no message, a barrier), `op` a reduction's operation, whose
/// datatype is the message's. With tuning on, one lookup of the datatype
/// gives both its size (the size bin and the counters) and its class
/// (mode `safe`), and the call is remembered: the collective's next call
/// with the same communicator, datatype, count and operation goes the
/// quick way ([`collectives::quick`]) while its search is settled.
#[inline]
fn tuned(
    family: Option<Family>,
    collective: Collective,
    comm: MPI_Comm,
    op: Option<MPI_Op>,
    message: Option<(c_int, MPI_Datatype)>,
    call: impl FnOnce(MPI_Comm) -> c_int,
) -> c_int {
    if !collectives::on() {
        return untuned(family, message, None, || call(comm));
    }
    // Steady state: the collective's last call again (same communicator,
    // datatype, count and operation), whose lookups below were made then.
    let key = call_key(message, op);
    let quick = catch_unwind(AssertUnwindSafe(|| {
        collectives::quick(collective, Comm::from_raw(comm), key)
    }))
    .ok()
    .flatten();
    if let Some(quick) = quick {
        return quickly(family, collective, comm, op, quick, call);
    }
    let tables = sizes::tables();
    let found = match message {
        Some((_, datatype)) => tables.and_then(|t| t.find(mpit::datatype_bits(datatype))),
        None => None,
    };
    if let (Some(op), Some((_, datatype))) = (op, message) {
        if collectives::exact_only() && !exact(collective, op, datatype, tables, found) {
            return untuned(family, message, Some(found), || call(comm));
        }
    }
    let sized = message_bytes(message, found);
    let bytes = sized.unwrap_or(0);
    // A predefined datatype's handle always names the same type, so the
    // key fixes the size (and, in mode `safe`, the class); a derived
    // one's handle may be freed and made again as another type.
    let keyed = (message.is_none() || found.is_some()).then_some(key);
    let ticket = catch_unwind(AssertUnwindSafe(|| {
        collectives::before(collective, Comm::from_raw(comm), sized, keyed)
    }))
    .ok()
    .flatten();
    let Some(ticket) = ticket else {
        return match family {
            Some(family) => counted(family, || bytes, || call(comm)),
            None => call(comm),
        };
    };
    with_ticket(family, collective, comm, op, bytes, ticket, call)
}

/// The [`collectives::CallKey`] of a tuned call: its datatype, count and
/// operation (all ones for none).
#[inline(always)]
fn call_key(message: Option<(c_int, MPI_Datatype)>, op: Option<MPI_Op>) -> collectives::CallKey {
    let (count, datatype) = match message {
        Some((count, datatype)) => (count as u64, mpit::datatype_bits(datatype)),
        None => (u64::MAX, u64::MAX),
    };
    [datatype, count, op.map_or(u64::MAX, mpit::op_bits)]
}

/// Runs a call of [`tuned`] that the quick path took: counted (timed
/// when the tool's metrics ask), where it runs.
#[inline(always)]
fn quickly(
    family: Option<Family>,
    collective: Collective,
    comm: MPI_Comm,
    op: Option<MPI_Op>,
    quick: collectives::Quick,
    call: impl FnOnce(MPI_Comm) -> c_int,
) -> c_int {
    let run = || run_at(quick.place, collective, comm, op, call);
    let rc = match family {
        Some(family) => counted(family, || quick.bytes, run),
        None => run(),
    };
    let _ = catch_unwind(AssertUnwindSafe(|| collectives::after_quick(collective)));
    rc
}

/// Runs a tuned call at `place`: on the candidate communicator it names
/// (if the call's operation allows it), else on the application's; a
/// failure on a candidate goes to the application's error handler
/// ([`failed_on_candidate`]).
#[inline(always)]
fn run_at(
    place: collectives::Place,
    collective: Collective,
    comm: MPI_Comm,
    op: Option<MPI_Op>,
    call: impl FnOnce(MPI_Comm) -> c_int,
) -> c_int {
    let on = place
        .on()
        .filter(|_| !place.commutative_only() || op.is_some_and(commutative));
    let rc = call(on.map_or(comm, Comm::into_raw));
    if on.is_some() && rc != success() {
        failed_on_candidate(collective, comm, rc);
    }
    rc
}

/// Runs a call of [`tuned`] that the tuner took (`ticket`), moving
/// `bytes`: counted, timed when either the tool's metrics or the search
/// asks, on the communicator the ticket names.
#[inline(always)]
fn with_ticket(
    family: Option<Family>,
    collective: Collective,
    comm: MPI_Comm,
    op: Option<MPI_Op>,
    bytes: u64,
    ticket: collectives::Ticket,
    call: impl FnOnce(MPI_Comm) -> c_int,
) -> c_int {
    let timing = match family {
        Some(family) if lifecycle::metrics_on() => {
            catch_unwind(AssertUnwindSafe(|| toolmetrics::record(family, bytes)))
                .unwrap_or(Timing::No)
        }
        _ => Timing::No,
    };
    let wants = ticket.timed();
    let start = (wants || timing != Timing::No).then(std::time::Instant::now);
    let rc = run_at(ticket.place(), collective, comm, op, call);
    let ns = start.map(|s| s.elapsed().as_nanos() as u64);
    if let (Some(family), Some(ns)) = (family, ns) {
        if timing != Timing::No {
            toolmetrics::record_time(family, timing, ns);
        }
    }
    let _ = catch_unwind(AssertUnwindSafe(|| {
        collectives::after(ticket, ns.filter(|_| wants))
    }));
    rc
}

/// A call of [`tuned`] that the tuner does not take: counted only.
/// `found`: the datatype's lookup, if done already (`Some(None)`: not a
/// predefined one).
#[inline(always)]
fn untuned(
    family: Option<Family>,
    message: Option<(c_int, MPI_Datatype)>,
    found: Option<Option<sizes::Found>>,
    call: impl FnOnce() -> c_int,
) -> c_int {
    let bytes = || match found {
        Some(found) => message_bytes(message, found).unwrap_or(0),
        None => message.map_or(0, |(count, datatype)| bytes(count, datatype)),
    };
    match family {
        Some(family) => counted(family, bytes, call),
        None => call(),
    }
}

/// [`try_bytes`] of a tuned call's message (`None`: none, 0 bytes), its
/// datatype looked up already (`found`).
#[inline(always)]
fn message_bytes(
    message: Option<(c_int, MPI_Datatype)>,
    found: Option<sizes::Found>,
) -> Option<u64> {
    match message {
        Some((count, _)) if count <= 0 => Some(0),
        Some((count, datatype)) => sized(count, datatype, found.and_then(sizes::Found::size)),
        None => Some(0),
    }
}

/// Mode `safe`: whether a reduction of `datatype` with `op` gives the same
/// bits whatever the algorithm (`tuner_core::collectives::exact_datatype`:
/// integer, logical and byte basic types only, with a predefined
/// operation). The operation first (a user-defined one is never exact;
/// MPICH 4 and Open MPI refuse predefined operations on derived
/// datatypes, so a derived datatype gets further only in a library that
/// takes them); then a predefined datatype's class (`found`, looked up
/// with its size), or a derived one taken apart at the call
/// ([`exact_derived`]). The answer
/// follows from the type signature and the operation, which the standard
/// requires to match on every rank of the call, so every rank hands the
/// tuner the same calls. Inlined (a scan of at most 16 handles and a flag
/// of the lookup the call made anyway); a derived datatype's decoding is
/// out of line.
#[inline(always)]
fn exact(
    collective: Collective,
    op: MPI_Op,
    datatype: MPI_Datatype,
    tables: Option<&sizes::Tables>,
    found: Option<sizes::Found>,
) -> bool {
    tables.is_some_and(|t| t.exact_op(mpit::op_bits(op)))
        && match found {
            Some(found) => found.exact(),
            None => exact_derived(collective, datatype),
        }
}

/// [`exact`] for a derived datatype: every basic datatype it is built from
/// (`MPI_Type_get_envelope`/`get_contents`, recursively) must be an exact
/// predefined one. Not cached: a handle freed and made again could name
/// another type, and reductions of derived datatypes are rare. A datatype
/// the library will not take apart runs on the default, and tuning stops.
#[cold]
#[inline(never)]
fn exact_derived(collective: Collective, datatype: MPI_Datatype) -> bool {
    let decoded = catch_unwind(AssertUnwindSafe(|| {
        mpit::every_basic_datatype(datatype, &mut |basic| {
            sizes::exact(mpit::datatype_bits(basic)) == Some(true)
        })
    }));
    match decoded {
        Ok(Ok(exact)) => exact,
        Ok(Err(e)) => {
            guarded("a reduction's datatype", || {
                collectives::unclassified_call(collective, &e.to_string())
            });
            false
        }
        Err(_) => {
            let _ = catch_unwind(|| lifecycle::disable("internal error in a reduction's datatype"));
            false
        }
    }
}

/// Whether `op` is commutative (`PMPI_Op_commutative`; no if it cannot
/// tell). Asked only for a call whose candidate needs it.
#[cold]
#[inline(never)]
fn commutative(op: MPI_Op) -> bool {
    let op_commutative = real!(
        c"PMPI_Op_commutative",
        unsafe extern "C" fn(MPI_Op, *mut c_int) -> c_int
    );
    let mut flag: c_int = 0;
    // SAFETY: the operation the application passed to its reduction (valid
    // by the MPI standard) and a valid out-pointer.
    let rc = unsafe { op_commutative(op, &mut flag) };
    rc == success() && flag != 0
}

/// A call the tuner ran on a candidate communicator failed: tuning stops,
/// and the application's error handler on its own communicator has the
/// error (`MPI_ERRORS_ARE_FATAL` ends the job as the failed call would
/// have; `MPI_ERRORS_RETURN` returns it).
#[cold]
#[inline(never)]
fn failed_on_candidate(collective: Collective, comm: MPI_Comm, rc: c_int) {
    guarded("a failed collective", || {
        collectives::call_failed(collective, &mpit::describe_error(rc));
    });
    let call_errhandler = real!(
        c"PMPI_Comm_call_errhandler",
        unsafe extern "C" fn(MPI_Comm, c_int) -> c_int
    );
    // SAFETY: the application's communicator (valid: its call just ran on
    // a communicator made from it) and the error code the library returned.
    let handled = unsafe { call_errhandler(comm, rc) };
    if handled != success() {
        guarded("a failed collective", || {
            mpit::say_always!(
                "mpit-tuner: MPI_Comm_call_errhandler failed ({}) for a collective that failed \
                 on a candidate communicator",
                mpit::describe_error(handled)
            );
        });
    }
}

/// The wrapper of a tuned collective: `$comm`, one of its arguments, is
/// bound again in the call's closure to the communicator `tuned` gives it.
macro_rules! tuned_call {
    ($($sym:ident => $name:literal ( $($arg:ident : $ty:ty),* ) as $family:ident tune $coll:ident on $comm:ident op $op:expr, message $message:expr;)+) => {$(
        #[no_mangle]
        pub unsafe extern "C" fn $sym($($arg: $ty),*) -> c_int {
            let real = real!($name, unsafe extern "C" fn($($ty),*) -> c_int);
            tuned(Some(Family::$family), Collective::$coll, $comm, $op, $message, |$comm: MPI_Comm| {
                // SAFETY: the application's own arguments, passed through
                // (the communicator, or one the tuner made over its group).
                unsafe { real($($arg),*) }
            })
        }
    )+};
}

tuned_call! {
    MPI_Allreduce => c"MPI_Allreduce"(sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: MPI_Datatype, op: MPI_Op, comm: MPI_Comm)
        as Allreduce tune Allreduce on comm op Some(op), message Some((count, datatype));
    MPI_Reduce => c"MPI_Reduce"(sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: MPI_Datatype, op: MPI_Op, root: c_int, comm: MPI_Comm)
        as Reduce tune Reduce on comm op Some(op), message Some((count, datatype));
    MPI_Bcast => c"MPI_Bcast"(buffer: *mut c_void, count: c_int, datatype: MPI_Datatype, root: c_int, comm: MPI_Comm)
        as Bcast tune Bcast on comm op None, message Some((count, datatype));
    MPI_Barrier => c"MPI_Barrier"(comm: MPI_Comm)
        as Barrier tune Barrier on comm op None, message None;
    MPI_Allgather => c"MPI_Allgather"(sendbuf: *const c_void, sendcount: c_int, sendtype: MPI_Datatype,
        recvbuf: *mut c_void, recvcount: c_int, recvtype: MPI_Datatype, comm: MPI_Comm)
        as Allgather tune Allgather on comm op None, message Some((recvcount, recvtype));
    MPI_Alltoall => c"MPI_Alltoall"(sendbuf: *const c_void, sendcount: c_int, sendtype: MPI_Datatype,
        recvbuf: *mut c_void, recvcount: c_int, recvtype: MPI_Datatype, comm: MPI_Comm)
        as Alltoall tune Alltoall on comm op None, message Some((recvcount, recvtype));
}

/// Not counted (no family of its own in the tool's metrics), tuned.
#[no_mangle]
pub unsafe extern "C" fn MPI_Reduce_scatter_block(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    recvcount: c_int,
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
) -> c_int {
    let real = real!(
        c"MPI_Reduce_scatter_block",
        unsafe extern "C" fn(
            *const c_void,
            *mut c_void,
            c_int,
            MPI_Datatype,
            MPI_Op,
            MPI_Comm,
        ) -> c_int
    );
    tuned(
        None,
        Collective::ReduceScatterBlock,
        comm,
        Some(op),
        Some((recvcount, datatype)),
        |comm| {
            // SAFETY: the application's own arguments, passed through (the
            // communicator, or one the tuner made over its group).
            unsafe { real(sendbuf, recvbuf, recvcount, datatype, op, comm) }
        },
    )
}
