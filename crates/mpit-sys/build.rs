//! Finds the MPI library, compiles the C shim of macro constants against its
//! header, and runs bindgen on the MPI_T part of `mpi.h`.
//!
//! MPI is found by `mpit_build::probe` (the compiler wrapper `MPICC`, then
//! pkg-config), shared with the other build scripts of the workspace. Nothing is linked: function symbols are resolved at run time (see
//! `src/lib.rs`), and the shim's references to libmpi data symbols are made
//! weak so that the objects load in processes without MPI.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=csrc/shim.c");
    println!("cargo:rerun-if-changed=csrc/shim.h");

    let flags = mpit_build::probe();
    let out_dir = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR"));

    // The shim: one archive, whose undefined references are then weakened.
    let mut build = cc::Build::new();
    build.file("csrc/shim.c").include("csrc").warnings(true);
    for dir in &flags.include_dirs {
        build.include(dir);
    }
    for define in &flags.defines {
        let (name, value) = define
            .split_once('=')
            .map_or((define.as_str(), None), |(n, v)| (n, Some(v)));
        build.define(name, value);
    }
    build.compile("mpit_shim");
    weaken_undefined(&out_dir.join("libmpit_shim.a"));

    // The bindings, in two passes over the shim header. Functions (the MPI_T
    // interface and the few MPI calls the tool makes) become a table of
    // pointers resolved at run time, with the types they need; the shim's
    // constants become plain statics, linked from the archive above.
    let mut functions = bindgen::Builder::default()
        .allowlist_function("P?MPI_T_.*")
        .allowlist_function(
            "P?MPI_(Init|Init_thread|Initialized|Finalize|Finalized|Query_thread|Abort\
             |Comm_rank|Comm_size|Comm_test_inter|Comm_dup|Comm_free|Comm_split|Comm_group|Comm_create_group\
             |Group_free|Get_library_version|Comm_get_errhandler|Comm_set_errhandler\
             |Errhandler_free|Error_string|Error_class\
             |Get_processor_name|Allreduce|Iallreduce|Wait|Reduce|Bcast|Barrier|Gather|Wtime\
             |Op_create|Op_free|Type_contiguous|Type_commit|Type_free\
             |Type_get_envelope|Type_get_contents|Type_create_struct|Type_vector)",
        )
        .allowlist_type("MPI_T_.*|MPI_(Comm|Datatype|Op|Win|Group|Errhandler|Status|Count|Info|Aint|Request|User_function)|mpit_code_name|mpit_named_datatype|mpit_named_op|mpit_fint")
        .dynamic_library_name("MpiFunctions")
        .dynamic_link_require_all(false);
    let mut constants = bindgen::Builder::default()
        .allowlist_var("MPIT_.*")
        .allowlist_recursively(false);
    for dir in &flags.include_dirs {
        functions = functions.clang_arg(format!("-I{}", dir.display()));
        constants = constants.clang_arg(format!("-I{}", dir.display()));
    }
    for define in &flags.defines {
        functions = functions.clang_arg(format!("-D{define}"));
        constants = constants.clang_arg(format!("-D{define}"));
    }
    for (builder, file) in [(functions, "functions.rs"), (constants, "constants.rs")] {
        builder
            .header("csrc/shim.h")
            .clang_arg("-Icsrc")
            .layout_tests(false)
            .generate_comments(false)
            .parse_callbacks(Box::new(bindgen::CargoCallbacks::new()))
            .generate()
            .unwrap_or_else(|e| {
                panic!(
                    "mpit-sys: bindgen failed on the mpi.h of {} (is libclang installed? \
                     Debian: libclang-dev): {e}",
                    flags.source
                )
            })
            .write_to_file(out_dir.join(file))
            .expect("mpit-sys: cannot write bindings");
    }

    // Facts for dependents (DEP_MPIT_*), used by binaries and tests that
    // link MPI themselves.
    let join = |v: &[PathBuf]| {
        v.iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(":")
    };
    println!("cargo:include={}", join(&flags.include_dirs));
    println!("cargo:lib_dirs={}", join(&flags.lib_dirs));
    println!("cargo:libs={}", flags.libs.join(":"));
    if let Some(path) = mpit_build::library_path(&flags) {
        println!("cargo:library={}", path.display());
        println!("cargo:rustc-env=MPIT_SYS_BUILD_LIBRARY={}", path.display());
    } else {
        println!("cargo:rustc-env=MPIT_SYS_BUILD_LIBRARY=");
    }
    println!("cargo:rustc-env=MPIT_SYS_BUILD_SOURCE={}", flags.source);
    let flavor = mpit_build::flavor(&flags);
    println!("cargo:flavor={flavor}");
    println!("cargo:rustc-env=MPIT_SYS_BUILD_FLAVOR={flavor}");
    let header_library = if mpit_build::is_mvapich2(&flags) {
        "mvapich2"
    } else {
        flavor
    };
    println!("cargo:header_library={header_library}");
    println!("cargo:rustc-env=MPIT_SYS_BUILD_HEADER_LIBRARY={header_library}");
    let abi = if mpit_build::is_standard_abi(&flags) {
        "standard"
    } else {
        flavor
    };
    println!("cargo:abi={abi}");
    println!("cargo:rustc-env=MPIT_SYS_BUILD_ABI={abi}");
    let mpicc = mpit_build::wrapper_of(&flags.source).unwrap_or("mpicc");
    println!("cargo:rustc-env=MPIT_SYS_BUILD_MPICC={mpicc}");
    let mpifc = mpit_build::fortran_beside(&flags.source).unwrap_or_default();
    println!("cargo:rustc-env=MPIT_SYS_BUILD_MPIFC={mpifc}");
    let mpiexec = mpit_build::mpiexec_beside(&flags.source);
    println!("cargo:mpiexec={mpiexec}");
    println!("cargo:rustc-env=MPIT_SYS_BUILD_MPIEXEC={mpiexec}");
}

/// Makes every undefined symbol of the shim archive weak: in Open MPI,
/// `MPI_COMM_WORLD` and the datatype handles are addresses of data symbols in
/// libmpi, and a data relocation cannot be lazy. Weak, they resolve to the
/// application's libmpi when there is one, and to null in `mpiexec` or a shell
/// instead of failing to load there.
fn weaken_undefined(archive: &Path) {
    let objcopy = env::var("OBJCOPY").unwrap_or_else(|_| "objcopy".into());
    let status = Command::new(&objcopy)
        .arg("--weaken")
        .arg(archive)
        .status()
        .unwrap_or_else(|e| panic!("mpit-sys: `{objcopy}` could not run (binutils): {e}"));
    assert!(
        status.success(),
        "mpit-sys: `{objcopy} --weaken` failed on {}",
        archive.display()
    );
}
