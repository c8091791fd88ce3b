//! Links the MPI library mpit-sys found into the bench and test binaries
//! (only them), the way mpit's build script links its tests: the benches
//! that sample MPI_T or call MPI, and the test of a whole helper tick,
//! initialise MPI or MPI_T themselves (singleton, no mpiexec needed). With
//! a run path where the library lives outside the system directories (the
//! registry wheels), as every other crate's tests get it. Also tells them
//! which library the build uses, as `cfg(mpi_flavor = "mpich" | "openmpi")`.

fn main() {
    mpit_build::flavor_cfg();
    mpit_build::link_library(
        &["benches", "tests"],
        "the MPI benches and tests cannot run",
    );
}
