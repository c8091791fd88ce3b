//! Links the MPI library mpit-sys found into the bench and test binaries
//! (only them), the way mpit's build script links its tests: the benches
//! that sample MPI_T or call MPI, and the test of a whole helper tick,
//! initialise MPI or MPI_T themselves (singleton, no mpiexec needed). Also
//! tells them which library the build uses, as
//! `cfg(mpi_flavor = "mpich" | "openmpi")`.

fn main() {
    println!("cargo:rerun-if-env-changed=DEP_MPIT_LIBRARY");
    println!("cargo:rerun-if-env-changed=DEP_MPIT_FLAVOR");
    println!("cargo::rustc-check-cfg=cfg(mpi_flavor, values(\"mpich\", \"openmpi\"))");
    let flavor = std::env::var("DEP_MPIT_FLAVOR").unwrap_or_default();
    println!("cargo:rustc-cfg=mpi_flavor=\"{flavor}\"");
    let library = std::env::var("DEP_MPIT_LIBRARY").unwrap_or_default();
    if library.is_empty() {
        println!("cargo:warning=mpit-sys did not find the MPI shared library; the MPI benches and tests cannot run");
        return;
    }
    // --no-as-needed: MPI_T is reached through dlsym, so a plain -l would be
    // dropped as unused.
    for kind in ["benches", "tests"] {
        println!("cargo:rustc-link-arg-{kind}=-Wl,--no-as-needed");
        println!("cargo:rustc-link-arg-{kind}={library}");
        println!("cargo:rustc-link-arg-{kind}=-Wl,--as-needed");
    }
}
