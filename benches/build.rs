//! Links the MPI library mpit-sys found into the bench binaries (only
//! them), the way tuner-core's build script links its tests: the benches
//! that sample MPI_T or call MPI initialise MPI themselves (singleton init,
//! no mpiexec needed). Also tells the benches which library the build uses,
//! as `cfg(mpi_flavor = "mpich" | "openmpi")`.

fn main() {
    println!("cargo:rerun-if-env-changed=DEP_MPIT_LIBRARY");
    println!("cargo:rerun-if-env-changed=DEP_MPIT_FLAVOR");
    println!("cargo::rustc-check-cfg=cfg(mpi_flavor, values(\"mpich\", \"openmpi\"))");
    let flavor = std::env::var("DEP_MPIT_FLAVOR").unwrap_or_default();
    println!("cargo:rustc-cfg=mpi_flavor=\"{flavor}\"");
    let library = std::env::var("DEP_MPIT_LIBRARY").unwrap_or_default();
    if library.is_empty() {
        println!("cargo:warning=mpit-sys did not find the MPI shared library; the MPI benches cannot run");
        return;
    }
    // --no-as-needed: MPI_T is reached through dlsym, so a plain -l would be
    // dropped as unused.
    println!("cargo:rustc-link-arg-benches=-Wl,--no-as-needed");
    println!("cargo:rustc-link-arg-benches={library}");
    println!("cargo:rustc-link-arg-benches=-Wl,--as-needed");
}
