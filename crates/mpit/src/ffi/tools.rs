//! MPI_T: initialisation, control and performance variables, enumerations
//! and categories.

use super::*;

// ---------------------------------------------------------------------------
// MPI_T initialisation.

pub(crate) fn t_init_thread(api: &Api, required: ThreadLevel) -> Result<c_int> {
    let mut provided: c_int = 0;
    // SAFETY: MPI_T_init_thread may be called at any time, before and after
    // MPI_Init; `provided` is a valid out-pointer.
    let rc = unsafe { func!(api, MPI_T_init_thread)?(required.to_raw(&api.c), &mut provided) };
    check(api, "MPI_T_init_thread", rc)?;
    Ok(provided)
}

pub(crate) fn t_finalize(api: &Api) -> Result<()> {
    // SAFETY: called once for each successful MPI_T_init_thread (the guard
    // in `session.rs` enforces this).
    let rc = unsafe { func!(api, MPI_T_finalize)?() };
    check(api, "MPI_T_finalize", rc)
}

// ---------------------------------------------------------------------------
// Control variables.

pub(crate) fn cvar_get_num(api: &Api) -> Result<c_int> {
    let mut num: c_int = 0;
    // SAFETY: valid out-pointer; MPI_T is initialised by the caller's guard.
    let rc = unsafe { func!(api, MPI_T_cvar_get_num)?(&mut num) };
    check(api, "MPI_T_cvar_get_num", rc)?;
    Ok(num)
}

/// What `MPI_T_cvar_get_info` says of one index.
#[derive(Debug)]
pub(crate) struct RawCvarInfo {
    pub name: String,
    pub desc: String,
    pub verbosity: Verbosity,
    pub datatype: Datatype,
    pub enumtype: Option<EnumHandle>,
    pub binding: Binding,
    pub scope: Scope,
}

pub(crate) fn cvar_get_info(api: &Api, index: c_int) -> Result<RawCvarInfo> {
    let (mut verbosity, mut bind, mut scope): (c_int, c_int, c_int) = (0, 0, 0);
    // SAFETY: zero-initialising a C handle type (an int or a pointer) is valid.
    let mut datatype: sys::MPI_Datatype = unsafe { std::mem::zeroed() };
    let mut enumtype = api.c.enum_null.0;
    let (mut name_len, mut desc_len): (c_int, c_int) = (0, 0);
    // First pass: lengths only (null buffers with zero lengths are allowed
    // by the standard).
    // SAFETY: every pointer is a valid out-pointer or null with length 0.
    let rc = unsafe {
        func!(api, MPI_T_cvar_get_info)?(
            index,
            std::ptr::null_mut(),
            &mut name_len,
            &mut verbosity,
            &mut datatype,
            &mut enumtype,
            std::ptr::null_mut(),
            &mut desc_len,
            &mut bind,
            &mut scope,
        )
    };
    check(api, "MPI_T_cvar_get_info", rc)?;
    let mut name = vec![0u8; clamp_len(name_len)];
    let mut desc = vec![0u8; clamp_len(desc_len)];
    let (mut name_len, mut desc_len) = (name.len() as c_int, desc.len() as c_int);
    // SAFETY: buffers are as long as the lengths passed with them.
    let rc = unsafe {
        func!(api, MPI_T_cvar_get_info)?(
            index,
            name.as_mut_ptr().cast::<c_char>(),
            &mut name_len,
            &mut verbosity,
            &mut datatype,
            &mut enumtype,
            desc.as_mut_ptr().cast::<c_char>(),
            &mut desc_len,
            &mut bind,
            &mut scope,
        )
    };
    check(api, "MPI_T_cvar_get_info", rc)?;
    Ok(RawCvarInfo {
        name: string_from(&name),
        desc: string_from(&desc),
        verbosity: api.c.verbosity(verbosity),
        datatype: api.c.datatype(datatype),
        enumtype: (enumtype != api.c.enum_null.0).then_some(EnumHandle(enumtype)),
        binding: api.c.binding(bind),
        scope: api.c.scope(scope),
    })
}

pub(crate) fn cvar_get_index(api: &Api, name: &str) -> Result<Option<c_int>> {
    let Ok(cname) = std::ffi::CString::new(name) else {
        return Ok(None);
    };
    let mut index: c_int = -1;
    // SAFETY: a NUL-terminated name and a valid out-pointer.
    let rc = unsafe { func!(api, MPI_T_cvar_get_index)?(cname.as_ptr(), &mut index) };
    match check(api, "MPI_T_cvar_get_index", rc) {
        Ok(()) => Ok(Some(index)),
        Err(Error::Mpi(e)) if e.name == "MPI_T_ERR_INVALID_NAME" => Ok(None),
        Err(e) => Err(e.about(name)),
    }
}

/// Allocates a CVAR handle; returns it with the element count.
pub(crate) fn cvar_handle_alloc(
    api: &Api,
    index: c_int,
    object: Object,
) -> Result<(CvarHandle, c_int)> {
    let mut handle = api_cvar_handle_null();
    let mut count: c_int = 0;
    let alloc = func!(api, MPI_T_cvar_handle_alloc)?;
    let rc = with_object_ptr(object, |obj| {
        // SAFETY: `obj` points at a live handle for the duration of the
        // call (or is null for unbound variables); out-pointers are valid.
        unsafe { alloc(index, obj, &mut handle, &mut count) }
    });
    check(api, "MPI_T_cvar_handle_alloc", rc)?;
    if handle == api_cvar_handle_null() {
        return Err(null_returned(
            api,
            "MPI_T_cvar_handle_alloc",
            "MPI_T_CVAR_HANDLE_NULL",
        ));
    }
    Ok((CvarHandle(handle), count))
}

fn api_cvar_handle_null() -> sys::MPI_T_cvar_handle {
    // SAFETY: reading a shim constant.
    unsafe { sys::MPIT_T_CVAR_HANDLE_NULL }
}

pub(crate) fn cvar_handle_free(api: &Api, handle: CvarHandle) -> Result<()> {
    let mut h = handle.0;
    // SAFETY: `h` was returned by MPI_T_cvar_handle_alloc and is freed once
    // (owners call this from Drop only).
    let rc = unsafe { func!(api, MPI_T_cvar_handle_free)?(&mut h) };
    check(api, "MPI_T_cvar_handle_free", rc)
}

/// Reads a CVAR into `buf`, which must hold `count` elements of the
/// variable's datatype (checked by the caller, re-checked here in debug).
pub(crate) fn cvar_read(api: &Api, handle: &CvarHandle, buf: &mut [u64]) -> Result<()> {
    debug_assert!(!buf.is_empty());
    // SAFETY: `buf` is at least as large as count * datatype size, which
    // the owner computed from the handle's count (see cvar.rs).
    let rc = unsafe { func!(api, MPI_T_cvar_read)?(handle.0, buf.as_mut_ptr().cast::<c_void>()) };
    check(api, "MPI_T_cvar_read", rc)
}

/// Writes a CVAR from `buf` (count elements of its datatype).
pub(crate) fn cvar_write(api: &Api, handle: &CvarHandle, buf: &[u64]) -> Result<()> {
    debug_assert!(!buf.is_empty());
    // SAFETY: `buf` holds count elements of the variable's datatype; the
    // library only reads from it despite the non-const pointer in MPI-3.0.
    let rc = unsafe { func!(api, MPI_T_cvar_write)?(handle.0, buf.as_ptr().cast::<c_void>()) };
    check(api, "MPI_T_cvar_write", rc)
}

// ---------------------------------------------------------------------------
// Enumerations.

/// An enumeration's name and items (value, name).
pub(crate) fn enum_info(api: &Api, enumtype: EnumHandle) -> Result<(String, Vec<(i32, String)>)> {
    let mut num: c_int = 0;
    let mut name = vec![0u8; 256];
    let mut name_len = name.len() as c_int;
    // SAFETY: a handle returned by get_info, a buffer of the given length.
    let rc = unsafe {
        func!(api, MPI_T_enum_get_info)?(
            enumtype.0,
            &mut num,
            name.as_mut_ptr().cast::<c_char>(),
            &mut name_len,
        )
    };
    check(api, "MPI_T_enum_get_info", rc)?;
    let mut items = Vec::with_capacity(num.clamp(0, 4096) as usize);
    for i in 0..num.clamp(0, 4096) {
        let mut value: c_int = 0;
        let mut item = vec![0u8; 256];
        let mut item_len = item.len() as c_int;
        // SAFETY: as above, for item `i < num`.
        let rc = unsafe {
            func!(api, MPI_T_enum_get_item)?(
                enumtype.0,
                i,
                &mut value,
                item.as_mut_ptr().cast::<c_char>(),
                &mut item_len,
            )
        };
        // One item the library will not name makes the names untrustworthy
        // as a whole: the caller records it and keeps the values as numbers.
        check(api, "MPI_T_enum_get_item", rc)?;
        items.push((value, string_from(&item)));
    }
    Ok((string_from(&name), items))
}

// ---------------------------------------------------------------------------
// Performance variables.

pub(crate) fn pvar_get_num(api: &Api) -> Result<c_int> {
    let mut num: c_int = 0;
    // SAFETY: valid out-pointer.
    let rc = unsafe { func!(api, MPI_T_pvar_get_num)?(&mut num) };
    check(api, "MPI_T_pvar_get_num", rc)?;
    Ok(num)
}

/// What `MPI_T_pvar_get_info` says of one index.
#[derive(Debug)]
pub(crate) struct RawPvarInfo {
    pub name: String,
    pub desc: String,
    pub verbosity: Verbosity,
    pub class: PvarClass,
    pub datatype: Datatype,
    pub enumtype: Option<EnumHandle>,
    pub binding: Binding,
    pub readonly: bool,
    pub continuous: bool,
    pub atomic: bool,
}

pub(crate) fn pvar_get_info(api: &Api, index: c_int) -> Result<RawPvarInfo> {
    let (mut verbosity, mut class, mut bind) = (0, 0, 0);
    let (mut readonly, mut continuous, mut atomic) = (0, 0, 0);
    // SAFETY: zero-initialising a C handle type (an int or a pointer) is valid.
    let mut datatype: sys::MPI_Datatype = unsafe { std::mem::zeroed() };
    let mut enumtype = api.c.enum_null.0;
    let (mut name_len, mut desc_len): (c_int, c_int) = (0, 0);
    // SAFETY: every pointer is a valid out-pointer or null with length 0.
    let rc = unsafe {
        func!(api, MPI_T_pvar_get_info)?(
            index,
            std::ptr::null_mut(),
            &mut name_len,
            &mut verbosity,
            &mut class,
            &mut datatype,
            &mut enumtype,
            std::ptr::null_mut(),
            &mut desc_len,
            &mut bind,
            &mut readonly,
            &mut continuous,
            &mut atomic,
        )
    };
    check(api, "MPI_T_pvar_get_info", rc)?;
    let mut name = vec![0u8; clamp_len(name_len)];
    let mut desc = vec![0u8; clamp_len(desc_len)];
    let (mut name_len, mut desc_len) = (name.len() as c_int, desc.len() as c_int);
    // SAFETY: buffers are as long as the lengths passed with them.
    let rc = unsafe {
        func!(api, MPI_T_pvar_get_info)?(
            index,
            name.as_mut_ptr().cast::<c_char>(),
            &mut name_len,
            &mut verbosity,
            &mut class,
            &mut datatype,
            &mut enumtype,
            desc.as_mut_ptr().cast::<c_char>(),
            &mut desc_len,
            &mut bind,
            &mut readonly,
            &mut continuous,
            &mut atomic,
        )
    };
    check(api, "MPI_T_pvar_get_info", rc)?;
    Ok(RawPvarInfo {
        name: string_from(&name),
        desc: string_from(&desc),
        verbosity: api.c.verbosity(verbosity),
        class: api.c.class(class),
        datatype: api.c.datatype(datatype),
        enumtype: (enumtype != api.c.enum_null.0).then_some(EnumHandle(enumtype)),
        binding: api.c.binding(bind),
        // Booleans are non-zero, not 1 (MVAPICH2 reports continuous as 2).
        readonly: readonly != 0,
        continuous: continuous != 0,
        atomic: atomic != 0,
    })
}

pub(crate) fn pvar_get_index(api: &Api, name: &str, class: PvarClass) -> Result<Option<c_int>> {
    let (Ok(cname), Some(raw_class)) = (std::ffi::CString::new(name), api.c.class_raw(class))
    else {
        return Ok(None);
    };
    let mut index: c_int = -1;
    // SAFETY: a NUL-terminated name and a valid out-pointer.
    let rc = unsafe { func!(api, MPI_T_pvar_get_index)?(cname.as_ptr(), raw_class, &mut index) };
    match check(api, "MPI_T_pvar_get_index", rc) {
        Ok(()) => Ok(Some(index)),
        Err(Error::Mpi(e)) if e.name == "MPI_T_ERR_INVALID_NAME" => Ok(None),
        Err(e) => Err(e.about(name)),
    }
}

pub(crate) fn pvar_session_create(api: &Api) -> Result<SessionHandle> {
    let mut session = api.c.session_null.0;
    // SAFETY: valid out-pointer.
    let rc = unsafe { func!(api, MPI_T_pvar_session_create)?(&mut session) };
    check(api, "MPI_T_pvar_session_create", rc)?;
    if session == api.c.session_null.0 {
        return Err(null_returned(
            api,
            "MPI_T_pvar_session_create",
            "MPI_T_PVAR_SESSION_NULL",
        ));
    }
    Ok(SessionHandle(session))
}

pub(crate) fn pvar_session_free(api: &Api, session: SessionHandle) -> Result<()> {
    let mut s = session.0;
    // SAFETY: a session created by pvar_session_create, freed once by its
    // owner's Drop.
    let rc = unsafe { func!(api, MPI_T_pvar_session_free)?(&mut s) };
    check(api, "MPI_T_pvar_session_free", rc)
}

pub(crate) fn pvar_handle_alloc(
    api: &Api,
    session: SessionHandle,
    index: c_int,
    object: Object,
) -> Result<(PvarHandle, c_int)> {
    let mut handle = api_pvar_handle_null();
    let mut count: c_int = 0;
    let alloc = func!(api, MPI_T_pvar_handle_alloc)?;
    let rc = with_object_ptr(object, |obj| {
        // SAFETY: `obj` points at a live handle for the duration of the
        // call (null for unbound variables); out-pointers are valid.
        unsafe { alloc(session.0, index, obj, &mut handle, &mut count) }
    });
    check(api, "MPI_T_pvar_handle_alloc", rc)?;
    if handle == api_pvar_handle_null() {
        return Err(null_returned(
            api,
            "MPI_T_pvar_handle_alloc",
            "MPI_T_PVAR_HANDLE_NULL",
        ));
    }
    Ok((PvarHandle(handle), count))
}

fn api_pvar_handle_null() -> sys::MPI_T_pvar_handle {
    // SAFETY: reading a shim constant.
    unsafe { sys::MPIT_T_PVAR_HANDLE_NULL }
}

/// A library that said MPI_SUCCESS and handed out a null handle: an error
/// (using the handle would crash it: Open MPI 4.1 with a null session).
fn null_returned(api: &Api, call: &'static str, null: &str) -> Error {
    Error::Mpi(MpiError {
        call,
        code: api.c.success,
        name: format!("{null} (with MPI_SUCCESS)"),
        variable: None,
    })
}

pub(crate) fn pvar_handle_free(
    api: &Api,
    session: SessionHandle,
    handle: PvarHandle,
) -> Result<()> {
    let mut h = handle.0;
    // SAFETY: a handle allocated in `session`, freed once by its owner.
    let rc = unsafe { func!(api, MPI_T_pvar_handle_free)?(session.0, &mut h) };
    check(api, "MPI_T_pvar_handle_free", rc)
}

pub(crate) fn pvar_start(api: &Api, session: SessionHandle, handle: &PvarHandle) -> Result<()> {
    // SAFETY: a live handle of a live session.
    let rc = unsafe { func!(api, MPI_T_pvar_start)?(session.0, handle.0) };
    check(api, "MPI_T_pvar_start", rc)
}

pub(crate) fn pvar_stop(api: &Api, session: SessionHandle, handle: &PvarHandle) -> Result<()> {
    // SAFETY: a live handle of a live session.
    let rc = unsafe { func!(api, MPI_T_pvar_stop)?(session.0, handle.0) };
    check(api, "MPI_T_pvar_stop", rc)
}

/// Stops every handle of a session (`MPI_T_PVAR_ALL_HANDLES`).
pub(crate) fn pvar_stop_all(api: &Api, session: SessionHandle) -> Result<()> {
    // SAFETY: a live session; ALL_HANDLES is the library's own constant.
    let rc = unsafe { func!(api, MPI_T_pvar_stop)?(session.0, api.c.all_handles.0) };
    check(api, "MPI_T_pvar_stop", rc)
}

/// `MPI_T_pvar_read`, resolved once: what reading a PVAR on every sampling
/// tick needs, without looking the function up and checking it each time.
#[derive(Debug, Clone, Copy)]
pub struct PvarReader {
    read:
        unsafe extern "C" fn(sys::MPI_T_pvar_session, sys::MPI_T_pvar_handle, *mut c_void) -> c_int,
    success: c_int,
}

impl PvarReader {
    /// The reader of the MPI library loaded in this process.
    pub fn current() -> Result<PvarReader> {
        PvarReader::new(api()?)
    }

    /// The reader of this process's MPI library.
    pub(crate) fn new(api: &Api) -> Result<PvarReader> {
        match api.f.MPI_T_pvar_read.as_ref() {
            Ok(read) => Ok(PvarReader {
                read: *read,
                success: api.c.success,
            }),
            Err(_) => Err(Error::MissingFunction("MPI_T_pvar_read")),
        }
    }

    /// Reads a PVAR into `buf`, which holds count elements of its datatype.
    #[inline]
    pub fn read(&self, session: SessionHandle, handle: &PvarHandle, buf: &mut [u64]) -> Result<()> {
        debug_assert!(!buf.is_empty());
        // SAFETY: `read` is the library's MPI_T_pvar_read; `buf` is at least
        // count * datatype size bytes (pvar.rs and sampler.rs size it from
        // the count the library returned for this handle).
        let rc = unsafe { (self.read)(session.0, handle.0, buf.as_mut_ptr().cast::<c_void>()) };
        if rc == self.success {
            return Ok(());
        }
        read_failed(rc)
    }
}

#[cold]
fn read_failed(rc: c_int) -> Result<()> {
    check(api()?, "MPI_T_pvar_read", rc)
}

// ---------------------------------------------------------------------------
// Categories.

pub(crate) fn category_get_num(api: &Api) -> Result<c_int> {
    let mut num: c_int = 0;
    // SAFETY: valid out-pointer.
    let rc = unsafe { func!(api, MPI_T_category_get_num)?(&mut num) };
    check(api, "MPI_T_category_get_num", rc)?;
    Ok(num)
}

/// A category: name, description, and the indices of its CVARs, PVARs and
/// sub-categories.
pub(crate) struct RawCategory {
    pub name: String,
    pub desc: String,
    pub cvars: Vec<c_int>,
    pub pvars: Vec<c_int>,
    pub categories: Vec<c_int>,
}

pub(crate) fn category_get_info(api: &Api, index: c_int) -> Result<RawCategory> {
    let (mut ncvars, mut npvars, mut ncats) = (0, 0, 0);
    let (mut name_len, mut desc_len): (c_int, c_int) = (0, 0);
    // SAFETY: null buffers with zero lengths, valid out-pointers.
    let rc = unsafe {
        func!(api, MPI_T_category_get_info)?(
            index,
            std::ptr::null_mut(),
            &mut name_len,
            std::ptr::null_mut(),
            &mut desc_len,
            &mut ncvars,
            &mut npvars,
            &mut ncats,
        )
    };
    check(api, "MPI_T_category_get_info", rc)?;
    let mut name = vec![0u8; clamp_len(name_len)];
    let mut desc = vec![0u8; clamp_len(desc_len)];
    let (mut name_len, mut desc_len) = (name.len() as c_int, desc.len() as c_int);
    // SAFETY: buffers are as long as the lengths passed with them.
    let rc = unsafe {
        func!(api, MPI_T_category_get_info)?(
            index,
            name.as_mut_ptr().cast::<c_char>(),
            &mut name_len,
            desc.as_mut_ptr().cast::<c_char>(),
            &mut desc_len,
            &mut ncvars,
            &mut npvars,
            &mut ncats,
        )
    };
    check(api, "MPI_T_category_get_info", rc)?;
    // The three member lists share one signature (index, length, array of
    // indices); each is fetched with its own function (resolved only when
    // the list is not empty) and named in errors.
    let list = |len: c_int,
                get: Result<unsafe extern "C" fn(c_int, c_int, *mut c_int) -> c_int>,
                name: &'static str|
     -> Result<Vec<c_int>> {
        let len = len.clamp(0, 1 << 20);
        let mut out = vec![0 as c_int; len as usize];
        if len == 0 {
            return Ok(out);
        }
        let get = get?;
        // SAFETY: `out` holds `len` ints, the length passed with it.
        let rc = unsafe { get(index, len, out.as_mut_ptr()) };
        check(api, name, rc)?;
        Ok(out)
    };
    Ok(RawCategory {
        name: string_from(&name),
        desc: string_from(&desc),
        cvars: list(
            ncvars,
            func!(api, MPI_T_category_get_cvars),
            "MPI_T_category_get_cvars",
        )?,
        pvars: list(
            npvars,
            func!(api, MPI_T_category_get_pvars),
            "MPI_T_category_get_pvars",
        )?,
        categories: list(
            ncats,
            func!(api, MPI_T_category_get_categories),
            "MPI_T_category_get_categories",
        )?,
    })
}
