//! `libpreload.so` has no link-time dependency on any MPI library, so
//! one build serves every library of the same ABI whatever its file name:
//! an application re-pointed with `patchelf --replace-needed` at a renamed
//! copy of the MPI library (as MVAPICH2 installs the MPICH ABI:
//! `libmpi.so.12`) works under the preload, and only that copy is loaded.

mod common;

use common::*;
use mpit_testkit::flavor;
use std::path::Path;
use std::process::{Command, Output};

/// Runs a tool that must be installed; fails the test with a hint if not.
fn tool(name: &str, package: &str, args: &[&std::ffi::OsStr]) -> Output {
    let out = Command::new(name).args(args).output().unwrap_or_else(|e| {
        panic!("cannot run `{name}` ({e}); install it (Debian package `{package}`)")
    });
    assert!(
        out.status.success(),
        "{name} {args:?} failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The `DT_NEEDED` entries of an ELF file (`readelf -d`).
fn needed(file: &Path) -> Vec<String> {
    let out = tool("readelf", "binutils", &["-d".as_ref(), file.as_os_str()]);
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains("(NEEDED)"))
        .filter_map(|l| {
            let start = l.find('[')? + 1;
            let end = l.rfind(']')?;
            Some(l[start..end].to_string())
        })
        .collect()
}

/// Whether a library file name belongs to an MPI implementation.
fn is_mpi_library(name: &str) -> bool {
    [
        "libmpi", // libmpi.so.12 (MVAPICH2, Intel MPI), libmpi.so.40, libmpi_abi, libmpifort
        "libpmpi",
        "libmpich",
        "libopen-rte",
        "libopen-pal",
        "libpmix",
    ]
    .iter()
    .any(|p| name.starts_with(p))
}

/// `readelf -d` shows no MPI library among the needed ones (and `ldd`
/// finds none among their dependencies); no MPI symbol is a strong
/// undefined reference (only weak ones, which resolve to null where MPI is
/// absent: in mpiexec, shells and other non-MPI processes).
#[test]
fn library_needs_no_mpi() {
    let so = preload_lib();
    let direct = needed(&so);
    assert!(
        direct.iter().any(|n| n.starts_with("libc.so")),
        "readelf found no NEEDED entries in {} (parsing failed?): {direct:?}",
        so.display()
    );
    let mpi: Vec<_> = direct.iter().filter(|n| is_mpi_library(n)).collect();
    assert!(
        mpi.is_empty(),
        "{} needs MPI libraries: {mpi:?}",
        so.display()
    );

    let out = tool("ldd", "libc-bin", &[so.as_os_str()]);
    let ldd = String::from_utf8_lossy(&out.stdout).into_owned();
    let mpi: Vec<_> = ldd.lines().filter(|l| is_mpi_library(l.trim())).collect();
    assert!(mpi.is_empty(), "ldd {} lists MPI: {mpi:?}", so.display());

    let out = tool(
        "nm",
        "binutils",
        &["-D".as_ref(), "--undefined-only".as_ref(), so.as_os_str()],
    );
    let strong: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let mut parts = l.split_whitespace();
            let kind = parts.next()?;
            let name = parts.next()?;
            let mpi = ["MPI_", "PMPI_", "MPIX_", "MPIR_", "ompi_", "mpi_", "pmpi_"]
                .iter()
                .any(|p| name.starts_with(p));
            (kind == "U" && mpi).then(|| name.to_string())
        })
        .collect();
    assert!(
        strong.is_empty(),
        "{} has strong undefined MPI symbols, which fail to bind in processes without MPI: {strong:?}",
        so.display()
    );
}

/// An application linked against the MPI library under another file name
/// than the build saw still works under the preload, and logs.
///
/// MPICH builds: the library is copied as `libmpi.so.12` with that soname,
/// as MVAPICH2 installs it. Open MPI builds: as `libmpi_renamed.so.40`,
/// keeping its soname `libmpi.so.40`, which Open MPI's own components name
/// in their `DT_NEEDED` and the loader matches to the copy.
#[test]
fn app_linked_to_renamed_mpi_library_works() {
    let tmp = tempdir();
    let original_app = example("comm_churn");
    let original_lib = mpi_library_of(&original_app);
    let old_name = original_lib
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    assert!(
        needed(&original_app).contains(&old_name),
        "{} does not name {old_name} in DT_NEEDED",
        original_app.display()
    );
    let new_name = match flavor() {
        // Debian names MPICH's library libmpich.so.12, MPICH 5's own
        // install (and MVAPICH2) libmpi.so.12: each is renamed the other's
        // way.
        "mpich" if old_name.starts_with("libmpich.so") => {
            old_name.replacen("libmpich.so", "libmpi.so", 1)
        }
        "mpich" => old_name.replacen("libmpi.so", "libmpich.so", 1),
        _ => old_name.replacen("libmpi.so", "libmpi_renamed.so", 1),
    };
    assert_ne!(new_name, old_name);

    // The renamed library.
    let libdir = tmp.path().join("lib");
    std::fs::create_dir(&libdir).unwrap();
    let lib = libdir.join(&new_name);
    std::fs::copy(&original_lib, &lib).unwrap_or_else(|e| {
        panic!(
            "cannot copy {} to {}: {e}",
            original_lib.display(),
            lib.display()
        )
    });
    if flavor() == "mpich" {
        tool(
            "patchelf",
            "patchelf",
            &["--set-soname".as_ref(), new_name.as_ref(), lib.as_os_str()],
        );
    }
    // A library that finds its own dependencies relative to itself (the
    // registry wheels: RUNPATH `$ORIGIN:$ORIGIN/mpich`) keeps finding them
    // from the copy.
    let rpath = tool(
        "patchelf",
        "patchelf",
        &["--print-rpath".as_ref(), original_lib.as_os_str()],
    );
    let rpath = String::from_utf8_lossy(&rpath.stdout).trim().to_string();
    if rpath.contains("$ORIGIN") {
        let origin = original_lib.parent().unwrap().display().to_string();
        let rpath = rpath.replace("$ORIGIN", &origin);
        tool(
            "patchelf",
            "patchelf",
            &["--set-rpath".as_ref(), rpath.as_ref(), lib.as_os_str()],
        );
    }

    // The application, re-pointed at it.
    let app = tmp.path().join("comm_churn_relinked");
    std::fs::copy(&original_app, &app).unwrap();
    tool(
        "patchelf",
        "patchelf",
        &[
            "--replace-needed".as_ref(),
            old_name.as_ref(),
            new_name.as_ref(),
            app.as_os_str(),
        ],
    );
    let relinked = needed(&app);
    assert!(
        relinked.contains(&new_name) && !relinked.contains(&old_name),
        "patchelf did not re-point {}: {relinked:?}",
        app.display()
    );

    // Under the preload, the process loads the copy and not the original.
    let mut ldd = Command::new("ldd");
    ldd.arg(&app)
        .env("LD_LIBRARY_PATH", &libdir)
        .env("LD_PRELOAD", preload_lib());
    let out = ldd.output().expect("ldd runs");
    let ldd = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{ldd}");
    assert!(
        ldd.contains(&lib.display().to_string()),
        "the renamed copy is not loaded:\n{ldd}"
    );
    assert!(
        !ldd.contains(&original_lib.display().to_string()) && !ldd.contains(&old_name),
        "the original MPI library is loaded as well (a second MPI in the process):\n{ldd}"
    );

    // It runs, as the original does without the tool, and logs.
    let args = ["2", "hold=50"];
    let plain = mpit_testkit::run(mpi_job(RANKS, &original_app, &args));
    plain.assert_success();
    let dir = tmp.path().join("run");
    let mut cmd = mpi_job(RANKS, &app, &args);
    preload(&mut cmd, &dir);
    cmd.env("LD_LIBRARY_PATH", &libdir);
    let tooled = mpit_testkit::run(cmd);
    tooled.assert_success();
    assert_same_stdout(&plain, &tooled, |_| false);
    for log in read_run_dir(&dir, RANKS) {
        check_complete_log(&log, RANKS);
    }
    check_summary(&dir, RANKS);
}
