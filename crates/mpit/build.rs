//! Links this crate's own tests against the MPI library mpit-sys found, so
//! that they run as real MPI programs. The library itself links no MPI (the
//! preload library must not), which is why only test targets get the flags.

fn main() {
    println!("cargo:rerun-if-env-changed=DEP_MPIT_LIBRARY");
    // Tests that hold only for one library exist only in builds against it
    // (CI builds and tests both), rather than being skipped at run time.
    println!("cargo::rustc-check-cfg=cfg(mpi_flavor, values(\"mpich\", \"openmpi\"))");
    let flavor = std::env::var("DEP_MPIT_FLAVOR").unwrap_or_default();
    println!("cargo:rustc-cfg=mpi_flavor=\"{flavor}\"");
    let library = std::env::var("DEP_MPIT_LIBRARY").unwrap_or_default();
    if library.is_empty() {
        println!(
            "cargo:warning=mpit-sys did not find the MPI shared library; tests cannot run MPI"
        );
        return;
    }
    // --no-as-needed: the tests reach MPI only through dlsym, so a plain -l
    // would be dropped as unused.
    println!("cargo:rustc-link-arg-tests=-Wl,--no-as-needed");
    println!("cargo:rustc-link-arg-tests={library}");
    println!("cargo:rustc-link-arg-tests=-Wl,--as-needed");
}
