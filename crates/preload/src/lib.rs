//! `libpreload.so`: the `LD_PRELOAD` interposer of mpit-tuner.
//!
//! Its place in the flow: the application's MPI calls -> **preload** ->
//! tuner-core runtime (sampler -> policies -> actuator -> log) on a helper
//! thread. Loaded into an unmodified MPI application, it exports
//! `MPI_Init`, `MPI_Init_thread`, `MPI_Finalize`, `MPI_Abort`, their
//! Fortran names, and the creation and destruction routines of
//! communicators and windows. Around the real calls it starts the runtime
//! (in `MPI_Init`, never in a library constructor), tracks objects so that
//! bound variables get handles while the object lives, and stops the
//! runtime in `MPI_Finalize`.
//!
//! It has no link-time dependency on any MPI library: real functions come
//! from `dlsym(RTLD_NEXT)`, MPI_T functions and constants from the library
//! the application loaded. In a process that is not an MPI rank (`mpiexec`,
//! its proxies, a shell) none of its functions is ever called, so it does
//! nothing there.
//!
//! `unsafe` code is confined to the `exports` module; the state machine is
//! in `lifecycle`, the sizes of the predefined datatypes in `sizes`.
//!
//! ```no_run
//! // Loaded by the dynamic linker, not called from Rust:
//! //   LD_PRELOAD=target/release/libpreload.so mpiexec -n 4 ./app
//! ```
#![warn(missing_docs)]

mod exports;
mod lifecycle;
mod sizes;

/// The ABI this library serves (`mpich`, `openmpi` or `standard`), as a
/// string in the file that `mpit-tuner run` looks for to check that the
/// library matches the launcher and the program. Not exported.
#[used]
static ABI_MARKER: [u8; ABI_MARKER_TEXT.len()] = const_bytes();

const ABI_MARKER_TEXT: &str = concat!("mpit-tuner-abi=", env!("MPIT_PRELOAD_ABI"), ";");

const fn const_bytes() -> [u8; ABI_MARKER_TEXT.len()] {
    let text = ABI_MARKER_TEXT.as_bytes();
    let mut out = [0u8; ABI_MARKER_TEXT.len()];
    let mut i = 0;
    while i < text.len() {
        out[i] = text[i];
        i += 1;
    }
    out
}
