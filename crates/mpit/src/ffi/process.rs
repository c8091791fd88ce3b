//! The few MPI (not MPI_T) calls about the process and its communicators.

use super::*;

// ---------------------------------------------------------------------------
// The few MPI (not MPI_T) calls the safe layer makes.

pub(crate) fn initialized(api: &Api) -> Result<bool> {
    let mut flag: c_int = 0;
    // SAFETY: MPI_Initialized may be called at any time; valid out-pointer.
    let rc = unsafe { func!(api, MPI_Initialized)?(&mut flag) };
    check(api, "MPI_Initialized", rc)?;
    Ok(flag != 0)
}

pub(crate) fn finalized(api: &Api) -> Result<bool> {
    let mut flag: c_int = 0;
    // SAFETY: MPI_Finalized may be called at any time; valid out-pointer.
    let rc = unsafe { func!(api, MPI_Finalized)?(&mut flag) };
    check(api, "MPI_Finalized", rc)?;
    Ok(flag != 0)
}

/// `MPI_Get_library_version` (callable before MPI_Init).
pub(crate) fn library_version(api: &Api) -> Result<String> {
    // SAFETY: reading a shim constant.
    let max = unsafe { sys::MPIT_MAX_LIBRARY_VERSION_STRING }.clamp(1, 1 << 16);
    let mut buf = vec![0u8; max as usize];
    let mut len: c_int = 0;
    // SAFETY: a buffer of MPI_MAX_LIBRARY_VERSION_STRING bytes, as required.
    let rc = unsafe {
        func!(api, MPI_Get_library_version)?(buf.as_mut_ptr().cast::<c_char>(), &mut len)
    };
    check(api, "MPI_Get_library_version", rc)?;
    Ok(string_from(&buf).trim_end().to_string())
}

/// The file of the loaded object that defines `MPI_Get_library_version`
/// (the MPI library itself: the preload library does not export it), as
/// the dynamic loader knows it, or `None` when it cannot say.
pub(crate) fn library_file(api: &Api) -> Option<std::path::PathBuf> {
    let function = func!(api, MPI_Get_library_version).ok()?;
    let mut info = std::mem::MaybeUninit::<libc::Dl_info>::zeroed();
    // SAFETY: dladdr only reads the loader's tables for an address (here a
    // function of a loaded object) and fills the Dl_info it is given,
    // zeroed and large enough; it returns 0 when the address is in no object.
    let found = unsafe { libc::dladdr(function as *const libc::c_void, info.as_mut_ptr()) };
    if found == 0 {
        return None;
    }
    // SAFETY: dladdr returned nonzero, so it filled `info`.
    let info = unsafe { info.assume_init() };
    if info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: a non-null dli_fname is the NUL-terminated path of an object
    // that stays loaded (the MPI library is never unloaded); it is copied
    // at once.
    let name = unsafe { std::ffi::CStr::from_ptr(info.dli_fname) };
    use std::os::unix::ffi::OsStrExt;
    let path = std::path::PathBuf::from(std::ffi::OsStr::from_bytes(name.to_bytes()));
    (!path.as_os_str().is_empty()).then_some(path)
}

/// Rank and size of a communicator (PMPI, so that tools see no extra calls).
pub(crate) fn comm_rank_size(api: &Api, comm: Comm) -> Result<(i32, i32)> {
    let (mut rank, mut size) = (0, 0);
    // SAFETY: a live communicator handle and valid out-pointers; only called
    // between MPI_Init and MPI_Finalize.
    let rc = unsafe { func!(api, PMPI_Comm_rank)?(comm.0, &mut rank) };
    check(api, "MPI_Comm_rank", rc)?;
    // SAFETY: as above.
    let rc = unsafe { func!(api, PMPI_Comm_size)?(comm.0, &mut size) };
    check(api, "MPI_Comm_size", rc)?;
    Ok((rank, size))
}

/// Whether `comm` is an intercommunicator (`MPI_Comm_test_inter`).
pub fn is_inter(comm: Comm) -> Result<bool> {
    let api = api()?;
    let mut flag: c_int = 0;
    // SAFETY: a live communicator handle and a valid out-pointer; only
    // called between MPI_Init and MPI_Finalize.
    let rc = unsafe { func!(api, PMPI_Comm_test_inter)?(comm.0, &mut flag) };
    check(api, "MPI_Comm_test_inter", rc)?;
    Ok(flag != 0)
}

/// Initialises MPI for a program that is not intercepted (the CLI, tests).
pub(crate) fn init_thread(api: &Api, required: ThreadLevel) -> Result<c_int> {
    let mut provided: c_int = 0;
    // SAFETY: null argc/argv are allowed by the standard; valid out-pointer.
    let rc = unsafe {
        func!(api, MPI_Init_thread)?(
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            required.to_raw(&api.c),
            &mut provided,
        )
    };
    check(api, "MPI_Init_thread", rc)?;
    Ok(provided)
}

/// Finalises MPI for a program that initialised it through [`init_thread`].
pub(crate) fn finalize(api: &Api) -> Result<()> {
    // SAFETY: called once, after init_thread, by the owning guard.
    let rc = unsafe { func!(api, MPI_Finalize)?() };
    check(api, "MPI_Finalize", rc)
}

/// The `MPI_COMM_WORLD` handle of this process.
pub fn comm_world() -> Result<Comm> {
    Ok(api()?.c.comm_world)
}

/// Whether `comm` is `MPI_COMM_NULL`.
pub fn is_comm_null(comm: Comm) -> bool {
    api().is_ok_and(|a| a.c.comm_null == comm)
}
