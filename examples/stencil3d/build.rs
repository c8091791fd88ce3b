//! rsmpi links stencil3d against the MPI library of `MPICC` by its soname
//! only; for a library outside the system directories (the registry wheels
//! of MPICH 5 and Open MPI 5) this adds a run path to its directory, as the
//! wrapper's own programs carry, so that stencil3d does not load the system
//! library of the same soname (or none).

fn main() {
    let flags = mpit_build::probe();
    if let Some(library) = mpit_build::library_path(&flags) {
        if let Some(dir) = mpit_build::run_path(&library) {
            println!("cargo:rustc-link-arg-bins=-Wl,-rpath,{}", dir.display());
        }
    }
}
