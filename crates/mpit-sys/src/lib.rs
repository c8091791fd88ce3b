//! Raw FFI to the MPI Tools Information Interface (MPI_T) of the MPI library
//! found at build time.
//!
//! This crate is mechanical and has no logic: `build.rs` finds MPI (the
//! `MPICC` wrapper, else pkg-config), compiles a C shim that turns the
//! header's macro constants into symbols (`MPIT_INT`, `MPIT_COMM_WORLD`,
//! `MPIT_T_ENUM_NULL`, `MPIT_SCOPE_ALL_EQ`, ...), and runs bindgen on the
//! MPI_T part of `mpi.h`. It is the only crate that knows the header; the
//! safe layer is `mpit`.
//!
//! Nothing here is linked against MPI. Functions are resolved at run time
//! from the MPI library the process already loaded ([`MpiFunctions::load`]),
//! so a library built on this crate adds no `DT_NEEDED` entry and one build
//! against MPICH also serves MVAPICH2 and Intel MPI. Constants are read from
//! the shim's `MPIT_*` statics; in Open MPI some of them are addresses inside
//! libmpi, and they read as null in a process that has no MPI.
//!
//! ```no_run
//! let mpi = mpit_sys::MpiFunctions::load().expect("an MPI process");
//! let mut provided = 0;
//! // SAFETY: MPI_T_init_thread may be called at any time, from any thread,
//! // with a valid pointer for the provided level.
//! let rc = unsafe { mpi.MPI_T_init_thread(mpit_sys::MPIT_THREAD_MULTIPLE, &mut provided) };
//! assert_eq!(rc, unsafe { mpit_sys::MPIT_SUCCESS });
//! ```
#![allow(non_upper_case_globals, non_camel_case_types, non_snake_case)]
#![allow(missing_docs, clippy::all)]

mod generated {
    #![allow(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks)]
    include!(concat!(env!("OUT_DIR"), "/functions.rs"));
    include!(concat!(env!("OUT_DIR"), "/constants.rs"));
}
pub use generated::*;

extern "C" {
    /// `MPI_T_PVAR_ALL_HANDLES`: a variable in MPICH's libmpi, a constant in
    /// Open MPI's header, so the shim hands it out through a function.
    pub fn mpit_pvar_all_handles() -> MPI_T_pvar_handle;
    /// `MPI_Comm_f2c` (a macro in MPICH, a function in Open MPI). Only for
    /// processes with MPI loaded.
    pub fn mpit_comm_f2c(comm: mpit_fint) -> MPI_Comm;
}

/// The MPI library file the build found (resolved through its symlinks), or
/// an empty string when the probe could not tell. Binaries that are not
/// loaded into an MPI application may open it; the preload library never
/// does.
pub const BUILD_LIBRARY: &str = env!("MPIT_SYS_BUILD_LIBRARY");

/// How the build found MPI (`"mpicc.mpich -show"`, `"pkg-config ompi"`).
pub const BUILD_SOURCE: &str = env!("MPIT_SYS_BUILD_SOURCE");

/// `"mpich"` (the MPICH ABI family: MPICH, MVAPICH2, Intel MPI) or
/// `"openmpi"`: whose header this build used.
pub const BUILD_FLAVOR: &str = env!("MPIT_SYS_BUILD_FLAVOR");

/// The library whose header the build used, where the header says more
/// than its ABI: `"mvapich2"` (MVAPICH2's `mpi.h` defines
/// `MVAPICH2_VERSION`), else [`BUILD_FLAVOR`]. Tests use it to say which
/// library they run on; the tool itself asks the running library.
pub const BUILD_HEADER_LIBRARY: &str = env!("MPIT_SYS_BUILD_HEADER_LIBRARY");

/// The `mpiexec` that goes with the compiler wrapper the build used
/// (`mpiexec.mpich` for `mpicc.mpich`).
pub const BUILD_MPIEXEC: &str = env!("MPIT_SYS_BUILD_MPIEXEC");

/// The ABI of the header the build used: `"mpich"` (MPICH's own:
/// `libmpi.so.12`, `libmpich.so.12`), `"openmpi"` (`libmpi.so.40`) or
/// `"standard"` (the MPI-5 standard ABI of `mpi_abi.h`, `libmpi_abi.so.1`,
/// from MPICH's `mpicc_abi`). A preload library serves the libraries of its
/// ABI only.
pub const BUILD_ABI: &str = env!("MPIT_SYS_BUILD_ABI");

/// The C compiler wrapper the build used (`mpicc.mpich`,
/// `/venv/bin/mpicc`), or `mpicc` when MPI was found by pkg-config.
pub const BUILD_MPICC: &str = env!("MPIT_SYS_BUILD_MPICC");

/// The Fortran wrapper beside [`BUILD_MPICC`], or an empty string when
/// there is none (the registry wheels of MPICH 5 and Open MPI 5 ship none).
pub const BUILD_MPIFC: &str = env!("MPIT_SYS_BUILD_MPIFC");

impl MpiFunctions {
    /// Resolves the MPI functions from the libraries already loaded in this
    /// process (the global symbol scope). Returns `None` when the process
    /// has no MPI library: then none of the other functions may be used.
    pub fn load() -> Option<Self> {
        // SAFETY: dlopen(NULL) returns a handle on the global scope; it runs
        // no initialisers and cannot fail in practice.
        let this = libloading::os::unix::Library::this();
        // SAFETY: `from_library` only looks symbols up; every field is a
        // `Result`, so a missing function is recorded, not called.
        let mut table = unsafe { Self::from_library(this) }.ok()?;
        // The tool's own writes go to the definition after the object this
        // crate is linked into: in the preload library, past its export of
        // `MPI_T_cvar_write`, which watches the application's writes only.
        // SAFETY: dlsym with a NUL-terminated name; RTLD_NEXT is valid from
        // any loaded object. A non-null result is the address of the
        // library's MPI_T_cvar_write, whose prototype is the field's type
        // (from the same header).
        unsafe {
            let next = libc::dlsym(libc::RTLD_NEXT, c"MPI_T_cvar_write".as_ptr());
            if !next.is_null() {
                table.MPI_T_cvar_write = Ok(std::mem::transmute::<
                    *mut libc::c_void,
                    unsafe extern "C" fn(MPI_T_cvar_handle, *const libc::c_void) -> libc::c_int,
                >(next));
            }
        }
        table.MPI_T_init_thread.is_ok().then_some(table)
    }
}

/// The name of an MPI_T (or MPI) error code as the header spells it, such as
/// `"MPI_T_ERR_INVALID_INDEX"`, or `None` for a code this header does not
/// define.
pub fn error_name(code: i32) -> Option<&'static str> {
    // SAFETY: the shim defines MPIT_ERROR_NAMES with MPIT_ERROR_NAMES_LEN
    // entries, each a static string literal, and never changes them.
    unsafe {
        let table =
            std::slice::from_raw_parts(MPIT_ERROR_NAMES.as_ptr(), MPIT_ERROR_NAMES_LEN as usize);
        table
            .iter()
            .find(|entry| entry.code == code)
            .and_then(|entry| std::ffi::CStr::from_ptr(entry.name).to_str().ok())
    }
}

/// The predefined datatypes this header defines that the build supports
/// (not `MPI_DATATYPE_NULL`, nor a null handle), with their names as the
/// header spells them, such as `(MPI_DOUBLE, "MPI_DOUBLE")`. Only for
/// processes with MPI loaded: in Open MPI the handles are addresses inside
/// libmpi.
pub fn predefined_datatypes() -> impl Iterator<Item = (MPI_Datatype, &'static str)> {
    // SAFETY: the shim defines MPIT_PREDEFINED_DATATYPES with
    // MPIT_PREDEFINED_DATATYPES_LEN entries, each a handle from the header
    // and a static string literal, and never changes them; the same holds
    // for MPIT_DATATYPE_NULL.
    let (table, null) = unsafe {
        (
            std::slice::from_raw_parts(
                MPIT_PREDEFINED_DATATYPES.as_ptr(),
                MPIT_PREDEFINED_DATATYPES_LEN as usize,
            ),
            MPIT_DATATYPE_NULL,
        )
    };
    // A handle of all zero bits is none of them: in Open MPI it is a data
    // symbol of the header that the loaded libmpi lacks (the shim's
    // references are weak), whose size must not be asked.
    // SAFETY: an integer or a pointer, for which all zero bits are valid.
    let zero: MPI_Datatype = unsafe { std::mem::zeroed() };
    table
        .iter()
        .filter(move |e| e.datatype != null && e.datatype != zero)
        .map(|e| {
            // SAFETY: each name is a NUL-terminated string literal (`#type`).
            let name = unsafe { std::ffi::CStr::from_ptr(e.name) };
            (e.datatype, name.to_str().unwrap_or("a predefined datatype"))
        })
}

/// The predefined reduction operations of the header whose result cannot
/// depend on the order in which a reduction combines integer, logical or
/// bit values (`MPI_SUM`, `MPI_PROD`, `MPI_MIN`, `MPI_MAX`, the logical
/// and bitwise ones, `MPI_MINLOC` and `MPI_MAXLOC`), with their names. Only
/// for processes with MPI loaded (Open MPI's handles are addresses inside
/// libmpi); a null handle (a symbol the loaded library lacks) is left out.
pub fn predefined_ops() -> impl Iterator<Item = (MPI_Op, &'static str)> {
    // SAFETY: the shim defines MPIT_PREDEFINED_OPS with
    // MPIT_PREDEFINED_OPS_LEN entries, each a handle from the header and a
    // static string literal, and never changes them.
    let table = unsafe {
        std::slice::from_raw_parts(
            MPIT_PREDEFINED_OPS.as_ptr(),
            MPIT_PREDEFINED_OPS_LEN as usize,
        )
    };
    // SAFETY: an integer or a pointer, for which all zero bits are valid.
    let zero: MPI_Op = unsafe { std::mem::zeroed() };
    table.iter().filter(move |e| e.op != zero).map(|e| {
        // SAFETY: each name is a NUL-terminated string literal (`#op`).
        let name = unsafe { std::ffi::CStr::from_ptr(e.name) };
        (e.op, name.to_str().unwrap_or("a predefined operation"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shim_constants_link_and_differ() {
        // SAFETY: reading constants the shim defines.
        unsafe {
            assert_ne!(MPIT_SCOPE_LOCAL, MPIT_SCOPE_ALL_EQ);
            assert_ne!(MPIT_PVAR_CLASS_COUNTER, MPIT_PVAR_CLASS_TIMER);
            assert!(MPIT_THREAD_MULTIPLE > MPIT_THREAD_SINGLE);
            assert!(MPIT_MAX_LIBRARY_VERSION_STRING > 0);
        }
    }

    #[test]
    fn error_names_come_from_the_header() {
        // SAFETY: reading a constant the shim defines.
        let success = unsafe { MPIT_SUCCESS };
        assert_eq!(error_name(success), Some("MPI_SUCCESS"));
        assert!(error_name(-12345).is_none());
    }

    #[test]
    fn predefined_ops_come_from_the_header() {
        let names: Vec<&str> = predefined_ops().map(|(_, name)| name).collect();
        if BUILD_ABI != "openmpi" {
            assert_eq!(names.len(), 12, "{names:?}");
            assert!(names.contains(&"MPI_MAXLOC"), "{names:?}");
        }
        assert!(names.iter().all(|n| n.starts_with("MPI_")), "{names:?}");
    }

    #[test]
    fn predefined_datatypes_come_from_the_header() {
        let names: Vec<&str> = predefined_datatypes().map(|(_, name)| name).collect();
        // Open MPI's handles are addresses in libmpi, which this test
        // process does not load: they read as null like MPI_DATATYPE_NULL.
        if BUILD_ABI != "openmpi" {
            for name in [
                "MPI_INT",
                "MPI_DOUBLE",
                "MPI_BYTE",
                "MPI_2INT",
                "MPI_UINT64_T",
            ] {
                assert!(names.contains(&name), "{name} missing from {names:?}");
            }
        }
        assert!(names.iter().all(|n| n.starts_with("MPI_")), "{names:?}");
    }

    #[test]
    fn no_mpi_in_a_plain_test_process() {
        // This test binary links no MPI library, so nothing resolves.
        assert!(MpiFunctions::load().is_none());
    }
}
