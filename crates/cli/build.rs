//! Links the `mpit-tuner` binary, and this crate's tests, against the MPI
//! library mpit-sys found. The safe layer resolves MPI at run time from the
//! libraries already loaded in the process, so the binary must load one:
//! unlike the preload library, it is its own MPI program.

fn main() {
    println!("cargo:rerun-if-env-changed=DEP_MPIT_LIBRARY");
    println!("cargo:rerun-if-env-changed=DEP_MPIT_FLAVOR");
    // Tests that hold only for one library exist only in builds against it
    // (CI builds and tests both), rather than being skipped at run time.
    println!("cargo::rustc-check-cfg=cfg(mpi_flavor, values(\"mpich\", \"openmpi\"))");
    let flavor = std::env::var("DEP_MPIT_FLAVOR").unwrap_or_default();
    println!("cargo:rustc-cfg=mpi_flavor=\"{flavor}\"");
    let library = std::env::var("DEP_MPIT_LIBRARY").unwrap_or_default();
    if library.is_empty() {
        println!(
            "cargo:warning=mpit-sys did not find the MPI shared library; \
             `mpit-tuner` will report that no MPI is loaded"
        );
        return;
    }
    // --no-as-needed: nothing references MPI symbols at link time (they are
    // looked up with dlsym), so a plain argument would be dropped as unused.
    for kind in ["bins", "tests"] {
        println!("cargo:rustc-link-arg-{kind}=-Wl,--no-as-needed");
        println!("cargo:rustc-link-arg-{kind}={library}");
        println!("cargo:rustc-link-arg-{kind}=-Wl,--as-needed");
    }
}
