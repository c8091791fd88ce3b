//! Tells this crate's tests which MPI library the build uses, as
//! `cfg(mpi_flavor = "mpich" | "openmpi")`, so that tests which hold for one
//! library only are compiled only in builds against it (CI builds and tests
//! both), rather than skipped at run time.
//!
//! Unlike tuner-core's build script, this one adds no link arguments at all:
//! `libmpit_tuner.so` must not name any MPI library in its `DT_NEEDED`
//! entries, and the tests only launch MPI programs, they are none.

fn main() {
    println!("cargo:rerun-if-env-changed=DEP_MPIT_FLAVOR");
    println!("cargo::rustc-check-cfg=cfg(mpi_flavor, values(\"mpich\", \"openmpi\"))");
    let flavor = std::env::var("DEP_MPIT_FLAVOR").unwrap_or_default();
    println!("cargo:rustc-cfg=mpi_flavor=\"{flavor}\"");
}
