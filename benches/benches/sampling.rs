//! Sampling cost: reading N performance variables through the safe API
//! (`Pvar::read_into`, what the sampler does: one `MPI_T_pvar_read` plus a
//! decode into doubles) against a plain loop of raw `MPI_T_pvar_read` calls
//! on a second set of handles allocated with mpit-sys on the same variables
//! (same objects, same buffer sizes: equal work for the library).
//!
//! The binary initialises MPI itself (singleton init; no mpiexec needed).
//! On Open MPI it reads the real variables (`pml_ob1_*` bound to
//! `MPI_COMM_WORLD`, `mpool_hugepage_bytes_allocated`, ...). MPICH exports
//! no PVAR at all; there the bench says so and compares CVAR reads instead
//! (safe `Cvar::read` against raw `MPI_T_cvar_read`).
//!
//! Target: safe / raw at most 1.05x (the latest figure:
//! BENCHMARKS.md#safe-sampling-against-a-raw-mpi_t-loop-at-most-105x).
//! The ratio is measured by an interleaved A/B loop (both under the same
//! machine load) and printed as `sampling: safe/raw ratio ...`, next to
//! criterion's absolute timings.

use criterion::{Criterion, Throughput};
use mpit::{
    Binding, Catalogue, Cvar, Datatype, MpiProcess, MpiT, Object, Pvar, PvarInfo, PvarSession,
};
use mpit_sys::{MPI_Comm, MPI_T_cvar_handle, MPI_T_pvar_handle, MPI_T_pvar_session, MpiFunctions};
use mpit_tuner_benches::paired;
use std::ffi::{c_int, c_void};
use std::hint::black_box;

/// CVARs compared on a library without PVARs (as many as a sampler would
/// typically read PVARs on Open MPI).
const CVARS: usize = 40;

/// A raw handle with its buffer.
struct RawPvar {
    handle: MPI_T_pvar_handle,
    buf: Vec<u64>,
    datatype: Datatype,
}

fn words(count: c_int, datatype: Datatype) -> usize {
    (usize::try_from(count).unwrap_or(0).max(1) * datatype.size()).div_ceil(8) + 1
}

fn check(rc: c_int, what: &str) {
    // SAFETY: reading a constant of the C shim.
    let success = unsafe { mpit_sys::MPIT_SUCCESS };
    assert_eq!(rc, success, "{what} failed with {rc}");
}

/// The object a bound variable's handle is allocated for, or `None` for a
/// binding the bench does not handle (windows).
fn object_of(info: &PvarInfo, world: Object) -> Option<Object> {
    match info.binding {
        Binding::NoObject => Some(Object::None),
        Binding::Comm => Some(world),
        _ => None,
    }
}

fn pvars(c: &mut Criterion, mpi: &MpiProcess, mpit: &MpiT, catalogue: &Catalogue) {
    let raw = MpiFunctions::load().expect("MPI functions in this process");
    let session = PvarSession::new(mpit).expect("MPI_T_pvar_session_create");
    let world = Object::Comm(mpi.world());
    // The safe handles: every PVAR that can be opened, started and read.
    let mut safe: Vec<(Pvar<'_>, &PvarInfo)> = Vec::new();
    let mut out = vec![0.0f64; 4096];
    for info in catalogue.pvars() {
        // Open MPI 4.1.4 registers the PVARs of its PSM2 MTL even where the
        // job runs over ob1 (a singleton, shared memory): allocating a
        // handle on one then crashes inside libpsm2 (psm2_mq_get_stats on a
        // queue that was never opened). The MTLs' variables are not among
        // those a job on ob1 samples anyway.
        if info.datatype == Datatype::Char || info.name.starts_with("mtl_") {
            continue;
        }
        let Some(object) = object_of(info, world) else {
            continue;
        };
        let Ok(mut pvar) = session.open(info, object) else {
            continue;
        };
        if pvar.start().is_err() || pvar.count() > out.len() {
            continue;
        }
        if pvar.read_into(&mut out).is_ok() {
            safe.push((pvar, info));
        }
    }
    let n = safe.len();
    assert!(
        n > 0,
        "no PVAR of the {} could be read",
        catalogue.pvars().len()
    );

    // The raw handles on the same variables and objects.
    let create = *raw
        .MPI_T_pvar_session_create
        .as_ref()
        .expect("MPI_T_pvar_session_create");
    let alloc = *raw
        .MPI_T_pvar_handle_alloc
        .as_ref()
        .expect("MPI_T_pvar_handle_alloc");
    let start = *raw.MPI_T_pvar_start.as_ref().expect("MPI_T_pvar_start");
    let read = *raw.MPI_T_pvar_read.as_ref().expect("MPI_T_pvar_read");
    // SAFETY: zero is a valid bit pattern for the session handle type (a
    // pointer or an integer), overwritten by the call below.
    let mut raw_session: MPI_T_pvar_session = unsafe { std::mem::zeroed() };
    // SAFETY: a valid out-pointer; MPI_T is initialised.
    check(
        unsafe { create(&mut raw_session) },
        "MPI_T_pvar_session_create",
    );
    // SAFETY: reading a constant of the C shim (MPI is initialised, so the
    // Open MPI data symbol it points at is resolved).
    let mut comm_world: MPI_Comm = unsafe { mpit_sys::MPIT_COMM_WORLD };
    let mut handles: Vec<RawPvar> = Vec::with_capacity(n);
    for (_, info) in &safe {
        let object: *mut c_void = match info.binding {
            Binding::Comm => (&mut comm_world as *mut MPI_Comm).cast(),
            _ => std::ptr::null_mut(),
        };
        // SAFETY: zero is a valid bit pattern for the handle type.
        let mut handle: MPI_T_pvar_handle = unsafe { std::mem::zeroed() };
        let mut count: c_int = 0;
        // SAFETY: a live session, an index from the catalogue, a pointer to
        // a live communicator handle for bound variables (null otherwise)
        // and valid out-pointers.
        let rc = unsafe { alloc(raw_session, info.index, object, &mut handle, &mut count) };
        check(rc, "MPI_T_pvar_handle_alloc");
        if !info.continuous {
            // SAFETY: a handle just allocated in this session.
            check(unsafe { start(raw_session, handle) }, "MPI_T_pvar_start");
        }
        handles.push(RawPvar {
            handle,
            buf: vec![0; words(count, info.datatype)],
            datatype: info.datatype,
        });
    }
    let names: Vec<&str> = safe.iter().map(|(p, _)| p.name()).collect();
    println!("sampling: {n} PVARs: {}", names.join(", "));

    let mut safe_loop = || {
        for (pvar, _) in safe.iter_mut() {
            black_box(pvar.read_into(&mut out).ok());
        }
    };
    let mut raw_loop = || {
        for h in handles.iter_mut() {
            // SAFETY: a live handle of the live raw session, and a buffer
            // of at least count * datatype size bytes.
            black_box(unsafe { read(raw_session, h.handle, h.buf.as_mut_ptr().cast()) });
        }
    };
    let mut group = c.benchmark_group("sampling");
    group.throughput(Throughput::Elements(n as u64));
    group.bench_function(format!("pvar/safe_read_into/{n}"), |b| {
        b.iter(&mut safe_loop)
    });
    group.bench_function(format!("pvar/raw_MPI_T_pvar_read/{n}"), |b| {
        b.iter(&mut raw_loop)
    });
    group.finish();
    let ratio = paired::compare(200, 2_000, &mut safe_loop, &mut raw_loop);
    println!(
        "sampling: safe/raw ratio, {n} PVARs per loop (Pvar::read_into vs raw MPI_T_pvar_read): {ratio}"
    );
    // The allocating read (a `Value` per variable), for comparison.
    let mut value_loop = || {
        for (pvar, _) in safe.iter_mut() {
            black_box(pvar.read().ok());
        }
    };
    let ratio = paired::compare(100, 1_000, &mut value_loop, &mut raw_loop);
    println!("sampling: Pvar::read (allocating Value) vs raw: {ratio}");
    // A raw loop that also uses what it read, as any sampler must: the
    // return code checked and the (first) element turned into a double by
    // its datatype. The safe read does this for every element.
    // SAFETY: reading a constant of the C shim.
    let success = unsafe { mpit_sys::MPIT_SUCCESS };
    let mut safe_loop = || {
        for (pvar, _) in safe.iter_mut() {
            black_box(pvar.read_into(&mut out).ok());
        }
    };
    let mut raw_convert_loop = || {
        for h in handles.iter_mut() {
            // SAFETY: as in the raw loop.
            let rc = unsafe { read(raw_session, h.handle, h.buf.as_mut_ptr().cast()) };
            if rc == success {
                let w = h.buf[0];
                black_box(match h.datatype {
                    Datatype::Double => f64::from_bits(w),
                    Datatype::Int => w as u32 as i32 as f64,
                    Datatype::Unsigned => w as u32 as f64,
                    Datatype::Long | Datatype::LongLong | Datatype::Count => w as i64 as f64,
                    _ => w as f64,
                });
            }
        }
    };
    let ratio = paired::compare(200, 2_000, &mut safe_loop, &mut raw_convert_loop);
    println!(
        "sampling: safe/raw+convert ratio, {n} PVARs per loop (Pvar::read_into vs raw MPI_T_pvar_read, return code checked, value as f64): {ratio}"
    );

    let free = *raw
        .MPI_T_pvar_handle_free
        .as_ref()
        .expect("MPI_T_pvar_handle_free");
    let session_free = *raw
        .MPI_T_pvar_session_free
        .as_ref()
        .expect("MPI_T_pvar_session_free");
    let stop = *raw.MPI_T_pvar_stop.as_ref().expect("MPI_T_pvar_stop");
    for (mut h, (_, info)) in handles.into_iter().zip(&safe) {
        if !info.continuous {
            // SAFETY: a started handle of the live raw session.
            unsafe { stop(raw_session, h.handle) };
        }
        // SAFETY: a handle of the raw session, freed once.
        unsafe { free(raw_session, &mut h.handle) };
    }
    // SAFETY: the raw session, whose handles are all freed, freed once.
    unsafe { session_free(&mut raw_session) };
}

fn cvars(c: &mut Criterion, mpit: &MpiT, catalogue: &Catalogue) {
    let raw = MpiFunctions::load().expect("MPI functions in this process");
    let alloc = *raw
        .MPI_T_cvar_handle_alloc
        .as_ref()
        .expect("MPI_T_cvar_handle_alloc");
    let read = *raw.MPI_T_cvar_read.as_ref().expect("MPI_T_cvar_read");
    let free = *raw
        .MPI_T_cvar_handle_free
        .as_ref()
        .expect("MPI_T_cvar_handle_free");
    let mut safe: Vec<Cvar<'_>> = Vec::new();
    let mut handles: Vec<(MPI_T_cvar_handle, Vec<u64>)> = Vec::new();
    for info in catalogue.cvars() {
        if safe.len() == CVARS {
            break;
        }
        if info.binding != Binding::NoObject || info.datatype == Datatype::Char {
            continue;
        }
        let Ok(cvar) = Cvar::open(mpit, info, Object::None) else {
            continue;
        };
        if cvar.read().is_err() {
            continue;
        }
        // SAFETY: zero is a valid bit pattern for the handle type.
        let mut handle: MPI_T_cvar_handle = unsafe { std::mem::zeroed() };
        let mut count: c_int = 0;
        // SAFETY: an unbound variable's index from the catalogue (no
        // object) and valid out-pointers.
        let rc = unsafe { alloc(info.index, std::ptr::null_mut(), &mut handle, &mut count) };
        check(rc, "MPI_T_cvar_handle_alloc");
        handles.push((handle, vec![0; words(count, info.datatype)]));
        safe.push(cvar);
    }
    let n = safe.len();
    assert!(n > 0, "no CVAR could be read");
    let mut safe_loop = || {
        for cvar in &safe {
            black_box(cvar.read().ok());
        }
    };
    let mut raw_loop = || {
        for (handle, buf) in handles.iter_mut() {
            // SAFETY: a live handle and a buffer of at least count *
            // datatype size bytes.
            black_box(unsafe { read(*handle, buf.as_mut_ptr().cast()) });
        }
    };
    let mut group = c.benchmark_group("sampling");
    group.throughput(Throughput::Elements(n as u64));
    group.bench_function(format!("cvar/safe_read/{n}"), |b| b.iter(&mut safe_loop));
    group.bench_function(format!("cvar/raw_MPI_T_cvar_read/{n}"), |b| {
        b.iter(&mut raw_loop)
    });
    group.finish();
    let ratio = paired::compare(200, 2_000, &mut safe_loop, &mut raw_loop);
    println!(
        "sampling: safe/raw ratio, {n} CVARs per loop (Cvar::read vs raw MPI_T_cvar_read): {ratio}"
    );
    for (mut handle, _) in handles {
        // SAFETY: a live handle, freed once.
        unsafe { free(&mut handle) };
    }
}

fn main() {
    let mpi = MpiProcess::init().expect("MPI_Init (singleton)");
    let mpit = MpiT::init().expect("MPI_T_init_thread");
    let catalogue = Catalogue::load(&mpit).expect("the MPI_T catalogue");
    let library = mpit.library_version().unwrap_or_default();
    let library = library.lines().next().unwrap_or("this MPI library").trim();
    let mut c = Criterion::default().configure_from_args();
    if catalogue.pvars().is_empty() {
        println!(
            "sampling: {library} exports 0 PVARs: there is nothing to sample, so this bench \
             compares CVAR reads instead (safe Cvar::read vs raw MPI_T_cvar_read); run it on an \
             Open MPI build for PVARs (MPICC=mpicc.openmpi cargo bench --target-dir \
             target/openmpi -p mpit-tuner-benches --bench sampling)"
        );
        cvars(&mut c, &mpit, &catalogue);
    } else {
        println!(
            "sampling: {library}: {} PVARs in the catalogue",
            catalogue.pvars().len()
        );
        pvars(&mut c, &mpi, &mpit, &catalogue);
    }
    // What a rank's start spends enumerating the whole catalogue (issue
    // 38's lazy catalogue: worth doing only if this is a real share of a
    // start).
    println!(
        "sampling: catalogue_load enumerates {} CVARs, {} PVARs and {} categories",
        catalogue.cvars().len(),
        catalogue.pvars().len(),
        catalogue.categories().len()
    );
    c.bench_function("catalogue_load", |b| {
        b.iter(|| Catalogue::load(&mpit).expect("the MPI_T catalogue"))
    });
    c.final_summary();
}
