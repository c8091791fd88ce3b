//! Tells this crate's tests which MPI library the build uses, as
//! `cfg(mpi_flavor = "mpich" | "openmpi")`.
//!
//! Unlike tuner-core's build script, this one adds no link arguments at all:
//! `libmpit_tuner.so` must not name any MPI library in its `DT_NEEDED`
//! entries, and the tests only launch MPI programs, they are none.

fn main() {
    mpit_build::flavor_cfg();
}
