//! Tells this crate's tests which MPI library the build uses, as
//! `cfg(mpi_flavor = "mpich" | "openmpi")`, and the library its ABI.
//!
//! Unlike tuner-core's build script, this one adds no link arguments at all:
//! `libpreload.so` must not name any MPI library in its `DT_NEEDED`
//! entries, and the tests only launch MPI programs, they are none.

fn main() {
    mpit_build::flavor_cfg();
    // The ABI of the header (mpich, openmpi, standard), written into the
    // library so that `mpit-tuner run` can tell which build it was given.
    println!("cargo:rerun-if-env-changed=DEP_MPIT_ABI");
    let abi = std::env::var("DEP_MPIT_ABI").unwrap_or_default();
    println!("cargo:rustc-env=MPIT_PRELOAD_ABI={abi}");
}
