//! Error handlers that return, and error classes and strings.

use super::*;

// ---------------------------------------------------------------------------
// Error handlers: the tool's own calls must return their errors, never end
// the job (the default handler, MPI_ERRORS_ARE_FATAL, aborts).

/// Sets `MPI_ERRORS_RETURN` on a communicator of the tool's own.
pub(crate) fn set_errors_return(comm: Comm) -> Result<()> {
    let api = api()?;
    // SAFETY: a live communicator; MPIT_ERRORS_RETURN is the header's
    // predefined handler (shim constant).
    let rc = unsafe { func!(api, PMPI_Comm_set_errhandler)?(comm.0, sys::MPIT_ERRORS_RETURN) };
    check(api, "MPI_Comm_set_errhandler", rc)
}

/// Swaps in `MPI_ERRORS_RETURN` on `comm` and returns the handler it had,
/// to be put back with [`restore_errhandler`].
pub(crate) fn swap_in_errors_return(comm: Comm) -> Result<Errhandler> {
    let api = api()?;
    // SAFETY: reading a shim constant.
    let mut old = unsafe { sys::MPIT_ERRHANDLER_NULL };
    // SAFETY: a live communicator and a valid out-pointer.
    let rc = unsafe { func!(api, PMPI_Comm_get_errhandler)?(comm.0, &mut old) };
    check(api, "MPI_Comm_get_errhandler", rc)?;
    let old = Errhandler(old);
    if let Err(mut e) = set_errors_return(comm) {
        // The first error is the one reported; a failed release of the
        // reference is told with it, not dropped.
        if let (Err(free), Error::Mpi(m)) = (free_errhandler(old), &mut e) {
            m.name = format!("{} (then freeing the error handler: {free})", m.name);
        }
        return Err(e);
    }
    Ok(old)
}

/// Puts back the handler [`swap_in_errors_return`] returned and releases
/// the reference `MPI_Comm_get_errhandler` gave.
pub(crate) fn restore_errhandler(comm: Comm, old: Errhandler) -> Result<()> {
    let api = api()?;
    let set = func!(api, PMPI_Comm_set_errhandler).and_then(|set| {
        // SAFETY: a live communicator and the handler it had before.
        let rc = unsafe { set(comm.0, old.0) };
        check(api, "MPI_Comm_set_errhandler", rc)
    });
    let freed = free_errhandler(old);
    set.and(freed)
}

fn free_errhandler(handler: Errhandler) -> Result<()> {
    let api = api()?;
    let mut h = handler.0;
    // SAFETY: a reference obtained from MPI_Comm_get_errhandler, released
    // once (the communicator keeps its own).
    let rc = unsafe { func!(api, PMPI_Errhandler_free)?(&mut h) };
    check(api, "MPI_Errhandler_free", rc)
}

/// The error class of an MPI error code (`MPI_Error_class`), comparable
/// across ranks (codes are not, in MPICH). `None` for `MPI_SUCCESS`: a
/// failure reported with it (a call that returned success and a null
/// handle) has no error class.
pub(crate) fn error_class(code: c_int) -> Option<c_int> {
    let api = api().ok()?;
    if code == api.c.success {
        return None;
    }
    let mut class: c_int = 0;
    let error_class = func!(api, PMPI_Error_class).ok()?;
    // SAFETY: a valid out-pointer; any int is accepted as a code.
    let rc = unsafe { error_class(code, &mut class) };
    (rc == api.c.success).then_some(class)
}

/// The library's words for an MPI return code: the first line of its
/// `MPI_Error_string`, or the number (for a failed call's log line).
pub fn describe_error(code: c_int) -> String {
    error_string(code)
        .and_then(|t| {
            t.lines()
                .next()
                .map(|l| l.trim_end_matches(',').to_string())
        })
        .filter(|l| !l.is_empty())
        .map_or_else(
            || format!("error code {code}"),
            |l| format!("{l} (code {code})"),
        )
}

/// The library's text for an error code or class (`MPI_Error_string`).
pub(crate) fn error_string(code: c_int) -> Option<String> {
    let api = api().ok()?;
    // SAFETY: reading a shim constant.
    let max = unsafe { sys::MPIT_MAX_ERROR_STRING }.clamp(1, 1 << 16);
    let mut buf = vec![0u8; max as usize];
    let mut len: c_int = 0;
    let error_string = func!(api, PMPI_Error_string).ok()?;
    // SAFETY: a buffer of MPI_MAX_ERROR_STRING bytes, as required.
    let rc = unsafe { error_string(code, buf.as_mut_ptr().cast::<c_char>(), &mut len) };
    (rc == api.c.success).then(|| string_from(&buf).trim().to_string())
}
