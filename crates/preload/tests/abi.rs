//! One `libpreload.so` for the MPI-5 standard ABI: built with MPICH's
//! `mpicc_abi` (`MPICC=$MPIT_MPICH5_MPICC_ABI`), it runs
//! in a program compiled with `mpicc_abi` (linked to `libmpi_abi.so.1`,
//! standard handle and constant values), under MPICH 5's `mpiexec`, and the
//! logs are those of any other run. In builds against a library's own ABI
//! the test says it does not apply (scripts/test.sh builds and runs it in
//! the standard-ABI flavour).

mod common;

use common::*;
use std::process::Command;

#[test]
fn the_standard_abi_build_runs_a_job_of_a_standard_abi_program() {
    const NAME: &str = "the_standard_abi_build_runs_a_job_of_a_standard_abi_program";
    if mpit_sys::BUILD_ABI != "standard" {
        mpit_testkit::not_applicable(
            NAME,
            "this build is for the library's own ABI; the standard-ABI build (MPICC=mpicc_abi) runs it",
        );
        return;
    }
    // The program is the standard ABI's: it loads libmpi_abi, and its
    // MPI_THREAD_MULTIPLE is the standard's value, not MPICH's own (3).
    let program = example("comm_churn");
    let lib = mpi_library_of(&program);
    let name = lib.file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        name.starts_with("libmpi_abi.so"),
        "{} loads {}, not the standard ABI's libmpi_abi",
        program.display(),
        lib.display()
    );
    // The preload links no MPI library, of either ABI.
    let out = Command::new("readelf")
        .arg("-d")
        .arg(preload_lib())
        .output()
        .expect("readelf (binutils) runs");
    let dynamic = String::from_utf8_lossy(&out.stdout);
    assert!(
        !dynamic.contains("libmpi"),
        "libpreload.so names an MPI library:\n{dynamic}"
    );

    let tmp = tempdir();
    let (plain, tooled, dir) = run_both(2, &program, &["3"], tmp.path());
    assert_same_stdout(&plain, &tooled, |_| false);
    assert!(plain.stdout().contains("checksum="), "{}", plain.stdout());
    for log in read_run_dir(&dir, 2) {
        check_complete_log(&log, 2);
        let header = check_header(&log, 2);
        let library = header["library_version"].as_str().unwrap_or_default();
        assert!(library.contains("MPICH"), "{library}");
        // The level MPI_T provided, decoded with the build's constants: the
        // standard numbers MPI_THREAD_MULTIPLE 4096, MPICH's own ABI 3, so
        // only constants from mpi_abi.h decode the library's answer.
        assert_eq!(header["mpi_t_thread_level"], "MULTIPLE", "{header}");
    }
    check_summary(&dir, 2);
}
