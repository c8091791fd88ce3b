//! What the build scripts of mpit-tuner share about MPI.
//!
//! mpit-sys's build script finds the MPI library with [`probe`], like rsmpi's
//! build probe: the compiler wrapper named by `MPICC` (default `mpicc`),
//! asked with `-show` for its flags; failing that, `pkg-config` on
//! `MPIT_MPI_PKG` (default `mpich`, then `ompi`). It passes what it found to
//! the crates that depend on it (`DEP_MPIT_*`), whose build scripts use
//! [`flavor_cfg`] and [`link_library`].

use std::env;
use std::path::PathBuf;
use std::process::Command;

/// What the probe learnt about the MPI library.
#[derive(Debug, Default)]
pub struct MpiFlags {
    /// How it was found, for messages.
    pub source: String,
    pub include_dirs: Vec<PathBuf>,
    /// `-D` definitions, as `NAME` or `NAME=VALUE`: MPICH's `mpicc_abi`
    /// selects the MPI-5 standard ABI header with `-DMPI_ABI`.
    pub defines: Vec<String>,
    pub lib_dirs: Vec<PathBuf>,
    pub libs: Vec<String>,
}

fn parse_flags(source: String, line: &str) -> MpiFlags {
    let mut flags = MpiFlags {
        source,
        ..MpiFlags::default()
    };
    for token in line.split_whitespace() {
        if let Some(dir) = token.strip_prefix("-I") {
            flags.include_dirs.push(dir.into());
        } else if let Some(define) = token.strip_prefix("-D") {
            flags.defines.push(define.into());
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

/// Finds MPI: `MPICC` (default `mpicc`) `-show`, then pkg-config on
/// `MPIT_MPI_PKG` (default `mpich`, then `ompi`); panics with what to
/// install when neither works. Tells cargo to rerun when those variables
/// change.
pub fn probe() -> MpiFlags {
    for var in ["MPICC", "MPIT_MPI_PKG"] {
        println!("cargo:rerun-if-env-changed={var}");
    }
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
pub fn library_path(flags: &MpiFlags) -> Option<PathBuf> {
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

/// "openmpi" when the header is Open MPI's, else "mpich" (the MPICH ABI
/// family: MPICH, MVAPICH2, Intel MPI).
pub fn flavor(flags: &MpiFlags) -> &'static str {
    if header_says(flags, "#define OPEN_MPI 1") {
        "openmpi"
    } else {
        "mpich"
    }
}

/// Whether the header is MVAPICH2's (MPICH's ABI; its `mpi.h` defines
/// `MVAPICH2_VERSION`).
pub fn is_mvapich2(flags: &MpiFlags) -> bool {
    header_says(flags, "#define MVAPICH2_VERSION")
}

/// Whether the `mpi.h` of one of the include directories contains `text`.
fn header_says(flags: &MpiFlags, text: &str) -> bool {
    flags.include_dirs.iter().any(|dir| {
        std::fs::read_to_string(dir.join("mpi.h"))
            .map(|h| h.contains(text))
            .unwrap_or(false)
    })
}

/// The launcher that goes with the compiler wrapper: `mpicc.mpich` ->
/// `mpiexec.mpich`, `/opt/x/bin/mpicc` -> `/opt/x/bin/mpiexec`, and
/// MPICH's standard-ABI wrapper `/opt/x/bin/mpicc_abi` -> `/opt/x/bin/mpiexec`
/// (there is no `mpiexec_abi`: one launcher runs both ABIs).
pub fn mpiexec_beside(source: &str) -> String {
    let wrapper = source.split_whitespace().next().unwrap_or("mpicc");
    if wrapper == "pkg-config" {
        return "mpiexec".into();
    }
    let (dir, file) = match wrapper.rfind('/') {
        Some(i) => wrapper.split_at(i + 1),
        None => ("", wrapper),
    };
    let file = file.strip_suffix("_abi").unwrap_or(file);
    format!("{dir}{}", file.replacen("mpicc", "mpiexec", 1))
}

/// The compiler wrapper a probe source names (`"/v/bin/mpicc -show"` ->
/// `/v/bin/mpicc`), or `None` when MPI was found by pkg-config.
pub fn wrapper_of(source: &str) -> Option<&str> {
    let mut words = source.split_whitespace();
    let wrapper = words.next()?;
    (words.next() == Some("-show")).then_some(wrapper)
}

/// The Fortran wrapper that goes with a C wrapper, when it is installed:
/// `mpicc.mpich` -> `mpif90.mpich`, `/v/bin/mpicc` -> `/v/bin/mpif90` (or
/// `mpifort`). `None` when there is none: the registry wheels of MPICH 5
/// and Open MPI 5 ship no Fortran wrapper.
pub fn fortran_beside(source: &str) -> Option<String> {
    let wrapper = wrapper_of(source)?;
    let (dir, file) = match wrapper.rfind('/') {
        Some(i) => wrapper.split_at(i + 1),
        None => ("", wrapper),
    };
    let file = file.strip_suffix("_abi").unwrap_or(file);
    ["mpif90", "mpifort"]
        .iter()
        .map(|f| format!("{dir}{}", file.replacen("mpicc", f, 1)))
        .find(|candidate| is_program(candidate))
}

/// Whether `name` (a path, or a name looked up on `PATH`) is a file.
fn is_program(name: &str) -> bool {
    if name.contains('/') {
        return std::path::Path::new(name).is_file();
    }
    env::var_os("PATH")
        .map(|path| env::split_paths(&path).any(|dir| dir.join(name).is_file()))
        .unwrap_or(false)
}

/// Whether the header is MPICH's MPI-5 standard ABI one (`mpicc_abi`
/// defines `MPI_ABI` and links `libmpi_abi`): handles and constants have
/// the standard's values, and the build serves any library with that ABI.
pub fn is_standard_abi(flags: &MpiFlags) -> bool {
    flags
        .defines
        .iter()
        .any(|d| d == "MPI_ABI" || d.starts_with("MPI_ABI="))
        || flags.libs.iter().any(|l| l == "mpi_abi")
}

/// For a crate depending on mpit-sys: declares
/// `cfg(mpi_flavor = "mpich" | "openmpi")` and sets it to the flavour of the
/// MPI mpit-sys found, and `cfg(mpi_library = "mpich" | "openmpi" |
/// "mvapich2")` to the library whose header it is, so that tests which hold for one library only are
/// compiled only in builds against it (CI builds and tests both), rather
/// than skipped at run time.
pub fn flavor_cfg() {
    println!("cargo:rerun-if-env-changed=DEP_MPIT_FLAVOR");
    println!("cargo::rustc-check-cfg=cfg(mpi_flavor, values(\"mpich\", \"openmpi\"))");
    let flavor = env::var("DEP_MPIT_FLAVOR").unwrap_or_default();
    println!("cargo:rustc-cfg=mpi_flavor=\"{flavor}\"");
    // The library whose header it is, where that says more than the ABI:
    // MVAPICH2 has MPICH's ABI but its own variables and behaviour.
    println!("cargo:rerun-if-env-changed=DEP_MPIT_HEADER_LIBRARY");
    println!(
        "cargo::rustc-check-cfg=cfg(mpi_library, values(\"mpich\", \"openmpi\", \"mvapich2\"))"
    );
    let library = env::var("DEP_MPIT_HEADER_LIBRARY").unwrap_or_else(|_| flavor.clone());
    println!("cargo:rustc-cfg=mpi_library=\"{library}\"");
}

/// The run path a program linked to the MPI library `library` needs: its
/// directory when that is outside the system directories (the registry
/// wheels of MPICH 5 and Open MPI 5 live in a virtual environment), as the
/// wrappers' own programs carry it; without one the loader takes the system
/// library of the same soname. `None` for a system library.
pub fn run_path(library: &std::path::Path) -> Option<&std::path::Path> {
    let system = ["/usr/lib", "/lib", "/usr/lib64", "/lib64"];
    library
        .parent()
        .filter(|d| !system.iter().any(|s| d.starts_with(s)))
}

/// For a crate depending on mpit-sys: links its targets of the given kinds
/// (`"bins"`, `"tests"`) against the MPI shared library mpit-sys found, or
/// warns `cargo:warning=mpit-sys did not find the MPI shared library;
/// {missing}` when it found none. `--no-as-needed`: MPI is reached only
/// through dlsym, so a plain argument would be dropped as unused.
pub fn link_library(kinds: &[&str], missing: &str) {
    println!("cargo:rerun-if-env-changed=DEP_MPIT_LIBRARY");
    let library = env::var("DEP_MPIT_LIBRARY").unwrap_or_default();
    if library.is_empty() {
        println!("cargo:warning=mpit-sys did not find the MPI shared library; {missing}");
        return;
    }
    let rpath = run_path(std::path::Path::new(&library));
    for kind in kinds {
        println!("cargo:rustc-link-arg-{kind}=-Wl,--no-as-needed");
        println!("cargo:rustc-link-arg-{kind}={library}");
        println!("cargo:rustc-link-arg-{kind}=-Wl,--as-needed");
        if let Some(dir) = rpath {
            println!("cargo:rustc-link-arg-{kind}=-Wl,-rpath,{}", dir.display());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrapper_flags_keep_definitions() {
        // `mpicc_abi -show` of the MPICH 5.0.2 registry wheel.
        let flags = parse_flags(
            "mpicc_abi -show".into(),
            "cc -DMPI_ABI -I/v/include -L/v/lib -Wl,-rpath -Wl,/v/lib -Wl,--enable-new-dtags -lmpi_abi",
        );
        assert_eq!(flags.defines, ["MPI_ABI"]);
        assert_eq!(flags.include_dirs, [PathBuf::from("/v/include")]);
        assert_eq!(flags.lib_dirs, [PathBuf::from("/v/lib")]);
        assert_eq!(flags.libs, ["mpi_abi"]);
    }

    #[test]
    fn launchers_beside_wrappers() {
        assert_eq!(mpiexec_beside("mpicc.mpich -show"), "mpiexec.mpich");
        assert_eq!(mpiexec_beside("/v/bin/mpicc -show"), "/v/bin/mpiexec");
        assert_eq!(mpiexec_beside("/v/bin/mpicc_abi -show"), "/v/bin/mpiexec");
        assert_eq!(
            mpiexec_beside("/opt/mpicc-5/bin/mpicc -show"),
            "/opt/mpicc-5/bin/mpiexec"
        );
        assert_eq!(mpiexec_beside("pkg-config mpich"), "mpiexec");
    }

    #[test]
    fn wrappers_of_sources() {
        assert_eq!(wrapper_of("mpicc.mpich -show"), Some("mpicc.mpich"));
        assert_eq!(
            wrapper_of("/v/bin/mpicc_abi -show"),
            Some("/v/bin/mpicc_abi")
        );
        assert_eq!(wrapper_of("pkg-config mpich"), None);
        assert_eq!(fortran_beside("pkg-config mpich"), None);
        // No such wrapper anywhere.
        assert_eq!(fortran_beside("/nonexistent/bin/mpicc -show"), None);
    }

    #[test]
    fn run_paths_only_outside_the_system() {
        let wheel = std::path::Path::new("/v/lib/libmpi.so.12");
        assert_eq!(run_path(wheel), Some(std::path::Path::new("/v/lib")));
        let debian = std::path::Path::new("/usr/lib/x86_64-linux-gnu/libmpich.so.12");
        assert_eq!(run_path(debian), None);
    }

    #[test]
    fn libraries_are_told_from_their_headers() {
        let dir = std::env::temp_dir().join(format!("mpit-build-test-{}", std::process::id()));
        let header = |text: &str| {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join("mpi.h"), text).unwrap();
            parse_flags("x".into(), &format!("cc -I{} -lmpi", dir.display()))
        };
        let ompi = header("#define OPEN_MPI 1\n");
        assert_eq!((flavor(&ompi), is_mvapich2(&ompi)), ("openmpi", false));
        let mv2 = header("#define MPICH_VERSION \"3.2.1\"\n#define MVAPICH2_VERSION \"2.3.7\"\n");
        assert_eq!((flavor(&mv2), is_mvapich2(&mv2)), ("mpich", true));
        let mpich = header("#define MPICH_VERSION \"4.0.2\"\n");
        assert_eq!((flavor(&mpich), is_mvapich2(&mpich)), ("mpich", false));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn standard_abi_is_told_from_the_flags() {
        let abi = parse_flags("x".into(), "cc -DMPI_ABI -I/v/include -lmpi_abi");
        assert!(is_standard_abi(&abi));
        let own = parse_flags("x".into(), "cc -I/v/include -L/v/lib -lmpi");
        assert!(!is_standard_abi(&own));
    }
}
