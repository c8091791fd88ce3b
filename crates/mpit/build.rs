//! Links this crate's own tests against the MPI library mpit-sys found, so
//! that they run as real MPI programs. The library itself links no MPI (the
//! preload library must not), which is why only test targets get the flags.

fn main() {
    mpit_build::flavor_cfg();
    mpit_build::link_library(&["tests"], "tests cannot run MPI");
}
