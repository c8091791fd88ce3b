//! Finds the MPI library, compiles the C shim of macro constants against its
//! header, and runs bindgen on the MPI_T part of `mpi.h`.
//!
//! MPI is found like rsmpi's build probe finds it: the compiler wrapper named
//! by `MPICC` (default `mpicc`), asked with `-show` for its flags; failing
//! that, `pkg-config` on `MPIT_MPI_PKG` (default `mpich`, then `ompi`).
//! Nothing is linked: function symbols are resolved at run time (see
//! `src/lib.rs`), and the shim's references to libmpi data symbols are made
//! weak so that the objects load in processes without MPI.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

/// What the probe learnt about the MPI library.
#[derive(Debug, Default)]
struct MpiFlags {
    /// How it was found, for messages.
    source: String,
    include_dirs: Vec<PathBuf>,
    lib_dirs: Vec<PathBuf>,
    libs: Vec<String>,
}

fn parse_flags(source: String, line: &str) -> MpiFlags {
    let mut flags = MpiFlags {
        source,
        ..MpiFlags::default()
    };
    for token in line.split_whitespace() {
        if let Some(dir) = token.strip_prefix("-I") {
            flags.include_dirs.push(dir.into());
        } else if let Some(dir) = token.strip_prefix("-L") {
            flags.lib_dirs.push(dir.into());
        } else if let Some(lib) = token.strip_prefix("-l") {
            flags.libs.push(lib.into());
        }
    }
    flags
}

fn probe_mpicc() -> Result<MpiFlags, String> {
    let mpicc = env::var("MPICC").unwrap_or_else(|_| "mpicc".into());
    let out = Command::new(&mpicc)
        .arg("-show")
        .output()
        .map_err(|e| format!("`{mpicc} -show` could not run: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "`{mpicc} -show` failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let line = String::from_utf8_lossy(&out.stdout).into_owned();
    let flags = parse_flags(format!("{mpicc} -show"), &line);
    if flags.libs.is_empty() {
        return Err(format!("`{mpicc} -show` names no library: {line}"));
    }
    Ok(flags)
}

fn probe_pkg_config() -> Result<MpiFlags, String> {
    let names = match env::var("MPIT_MPI_PKG") {
        Ok(name) => vec![name],
        Err(_) => vec!["mpich".to_string(), "ompi".to_string()],
    };
    let mut errors = Vec::new();
    for name in names {
        match Command::new("pkg-config")
            .args(["--cflags", "--libs", &name])
            .output()
        {
            Ok(out) if out.status.success() => {
                let line = String::from_utf8_lossy(&out.stdout).into_owned();
                return Ok(parse_flags(format!("pkg-config {name}"), &line));
            }
            Ok(out) => errors.push(format!(
                "pkg-config {name}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )),
            Err(e) => errors.push(format!("pkg-config could not run: {e}")),
        }
    }
    Err(errors.join("; "))
}

fn probe() -> MpiFlags {
    match probe_mpicc() {
        Ok(flags) => flags,
        Err(mpicc_error) => match probe_pkg_config() {
            Ok(flags) => flags,
            Err(pkg_error) => panic!(
                "\n\nmpit-sys: no MPI library found.\n  {mpicc_error}\n  {pkg_error}\n\
                 Install one (Debian: `apt-get install libmpich-dev mpich` or \
                 `libopenmpi-dev openmpi-bin`) or point MPICC at its compiler wrapper \
                 (MPICC=mpicc.openmpi).\n"
            ),
        },
    }
}

/// The shared object the wrapper links, as the dynamic linker will load it:
/// `lib<name>.so` resolved through its symlinks to the versioned file.
fn library_path(flags: &MpiFlags) -> Option<PathBuf> {
    let mut dirs = flags.lib_dirs.clone();
    dirs.extend(["/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib"].map(PathBuf::from));
    let lib = flags
        .libs
        .iter()
        .find(|l| l.starts_with("mpi") && !l.contains("fort") && !l.contains("cxx"))?;
    dirs.iter()
        .map(|d| d.join(format!("lib{lib}.so")))
        .find(|p| p.exists())
        .map(|p| std::fs::canonicalize(&p).unwrap_or(p))
}

fn main() {
    for var in ["MPICC", "MPIT_MPI_PKG"] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    println!("cargo:rerun-if-changed=csrc/shim.c");
    println!("cargo:rerun-if-changed=csrc/shim.h");

    let flags = probe();
    let out_dir = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR"));

    // The shim: one archive, whose undefined references are then weakened.
    let mut build = cc::Build::new();
    build.file("csrc/shim.c").include("csrc").warnings(true);
    for dir in &flags.include_dirs {
        build.include(dir);
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
             |Comm_rank|Comm_size|Comm_dup|Comm_free|Comm_split|Comm_group|Comm_create_group\
             |Group_free|Get_library_version|Comm_get_errhandler|Comm_set_errhandler\
             |Errhandler_free|Error_string|Error_class\
             |Get_processor_name|Allreduce|Reduce|Bcast|Barrier|Wtime)",
        )
        .allowlist_type("MPI_T_.*|MPI_(Comm|Datatype|Op|Win|Group|Errhandler|Status|Count|Info|Aint|Request)|mpit_code_name|mpit_fint")
        .dynamic_library_name("MpiFunctions")
        .dynamic_link_require_all(false);
    let mut constants = bindgen::Builder::default()
        .allowlist_var("MPIT_.*")
        .allowlist_recursively(false);
    for dir in &flags.include_dirs {
        functions = functions.clang_arg(format!("-I{}", dir.display()));
        constants = constants.clang_arg(format!("-I{}", dir.display()));
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
    if let Some(path) = library_path(&flags) {
        println!("cargo:library={}", path.display());
        println!("cargo:rustc-env=MPIT_SYS_BUILD_LIBRARY={}", path.display());
    } else {
        println!("cargo:rustc-env=MPIT_SYS_BUILD_LIBRARY=");
    }
    println!("cargo:rustc-env=MPIT_SYS_BUILD_SOURCE={}", flags.source);
    let flavor = flavor(&flags);
    println!("cargo:flavor={flavor}");
    println!("cargo:rustc-env=MPIT_SYS_BUILD_FLAVOR={flavor}");
    let mpiexec = mpiexec_beside(&flags.source);
    println!("cargo:mpiexec={mpiexec}");
    println!("cargo:rustc-env=MPIT_SYS_BUILD_MPIEXEC={mpiexec}");
}

/// "openmpi" when the header is Open MPI's, else "mpich" (the MPICH ABI
/// family: MPICH, MVAPICH2, Intel MPI).
fn flavor(flags: &MpiFlags) -> &'static str {
    let is_open_mpi = flags.include_dirs.iter().any(|dir| {
        std::fs::read_to_string(dir.join("mpi.h"))
            .map(|h| h.contains("#define OPEN_MPI 1"))
            .unwrap_or(false)
    });
    if is_open_mpi {
        "openmpi"
    } else {
        "mpich"
    }
}

/// The launcher that goes with the compiler wrapper: `mpicc.mpich` ->
/// `mpiexec.mpich`, `/opt/x/bin/mpicc` -> `/opt/x/bin/mpiexec`.
fn mpiexec_beside(source: &str) -> String {
    let wrapper = source.split_whitespace().next().unwrap_or("mpicc");
    if wrapper == "pkg-config" {
        return "mpiexec".into();
    }
    wrapper.replacen("mpicc", "mpiexec", 1)
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
