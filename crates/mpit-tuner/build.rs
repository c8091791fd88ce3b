//! Links the `mpit-tuner` binary, and this crate's tests, against the MPI
//! library mpit-sys found. The safe layer resolves MPI at run time from the
//! libraries already loaded in the process, so the binary must load one:
//! unlike the preload library, it is its own MPI program.

fn main() {
    mpit_build::flavor_cfg();
    mpit_build::link_library(
        &["bins", "tests"],
        "`mpit-tuner` will report that no MPI is loaded",
    );
}
