//! The one module of `mpit` that calls C.
//!
//! Every MPI_T routine is wrapped here in a safe function that checks its
//! return code ([`check`]) and converts its outputs; the rest of the crate
//! never sees a raw pointer. Functions come from the MPI library already
//! loaded in the process ([`mpit_sys::MpiFunctions::load`]); constants come
//! from the C shim, read once into [`Consts`].

use crate::error::{Error, MpiError, Result};
pub use crate::handle::{Comm, Win};
use crate::handle::{
    CvarHandle, DatatypeHandle, EnumHandle, Errhandler, Group, PvarHandle, SessionHandle,
};
use crate::meta::{Binding, Datatype, PvarClass, Scope, Verbosity};
use mpit_sys as sys;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::OnceLock;

// The vocabulary sizes `MPI_Count` buffers without a header: it must agree
// with the header of this build.
const _: () = assert!(std::mem::size_of::<sys::MPI_Count>() == vocab::meta::COUNT_BYTES);

/// The MPI object a bound variable's handle is allocated for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Object {
    /// No object (unbound variables).
    None,
    /// A communicator.
    Comm(Comm),
    /// A window.
    Win(Win),
}

impl Object {
    /// The binding this object satisfies.
    pub fn binding(self) -> Binding {
        match self {
            Object::None => Binding::NoObject,
            Object::Comm(_) => Binding::Comm,
            Object::Win(_) => Binding::Win,
        }
    }
}

/// Header constants of this build, read from the shim.
#[derive(Debug)]
pub(crate) struct Consts {
    pub success: c_int,
    pub err_set_not_now: Option<c_int>,
    pub err_set_never: Option<c_int>,
    pub thread_single: c_int,
    pub thread_funneled: c_int,
    pub thread_serialized: c_int,
    pub thread_multiple: c_int,
    enum_null: EnumHandle,
    session_null: SessionHandle,
    all_handles: PvarHandle,
    pub comm_world: Comm,
    pub comm_null: Comm,
    group_null: Group,
    scopes: [(c_int, Scope); 7],
    classes: [(c_int, PvarClass); 10],
    bindings: [(c_int, Binding); 11],
    verbosities: [(c_int, Verbosity); 9],
    datatypes: [(DatatypeHandle, Datatype); 10],
}

impl Consts {
    fn read() -> Self {
        // SAFETY: every MPIT_* static is defined by the shim with a value
        // from the header, initialised at load time and never written. The
        // handle-typed ones may be null when libmpi is absent, but `load`
        // only runs once the MPI functions were found in the process.
        unsafe {
            let named = |name: &str| {
                std::slice::from_raw_parts(
                    sys::MPIT_ERROR_NAMES.as_ptr(),
                    sys::MPIT_ERROR_NAMES_LEN as usize,
                )
                .iter()
                .find(|e| CStr::from_ptr(e.name).to_bytes() == name.as_bytes())
                .map(|e| e.code)
            };
            Consts {
                success: sys::MPIT_SUCCESS,
                err_set_not_now: named("MPI_T_ERR_CVAR_SET_NOT_NOW"),
                err_set_never: named("MPI_T_ERR_CVAR_SET_NEVER"),
                thread_single: sys::MPIT_THREAD_SINGLE,
                thread_funneled: sys::MPIT_THREAD_FUNNELED,
                thread_serialized: sys::MPIT_THREAD_SERIALIZED,
                thread_multiple: sys::MPIT_THREAD_MULTIPLE,
                enum_null: EnumHandle(sys::MPIT_T_ENUM_NULL),
                session_null: SessionHandle(sys::MPIT_T_PVAR_SESSION_NULL),
                all_handles: PvarHandle(sys::mpit_pvar_all_handles()),
                comm_world: Comm(sys::MPIT_COMM_WORLD),
                comm_null: Comm(sys::MPIT_COMM_NULL),
                group_null: Group(sys::MPIT_GROUP_NULL),
                scopes: [
                    (sys::MPIT_SCOPE_CONSTANT, Scope::Constant),
                    (sys::MPIT_SCOPE_READONLY, Scope::Readonly),
                    (sys::MPIT_SCOPE_LOCAL, Scope::Local),
                    (sys::MPIT_SCOPE_GROUP, Scope::Group),
                    (sys::MPIT_SCOPE_GROUP_EQ, Scope::GroupEq),
                    (sys::MPIT_SCOPE_ALL, Scope::All),
                    (sys::MPIT_SCOPE_ALL_EQ, Scope::AllEq),
                ],
                classes: [
                    (sys::MPIT_PVAR_CLASS_STATE, PvarClass::State),
                    (sys::MPIT_PVAR_CLASS_LEVEL, PvarClass::Level),
                    (sys::MPIT_PVAR_CLASS_SIZE, PvarClass::Size),
                    (sys::MPIT_PVAR_CLASS_PERCENTAGE, PvarClass::Percentage),
                    (sys::MPIT_PVAR_CLASS_HIGHWATERMARK, PvarClass::Highwatermark),
                    (sys::MPIT_PVAR_CLASS_LOWWATERMARK, PvarClass::Lowwatermark),
                    (sys::MPIT_PVAR_CLASS_COUNTER, PvarClass::Counter),
                    (sys::MPIT_PVAR_CLASS_AGGREGATE, PvarClass::Aggregate),
                    (sys::MPIT_PVAR_CLASS_TIMER, PvarClass::Timer),
                    (sys::MPIT_PVAR_CLASS_GENERIC, PvarClass::Generic),
                ],
                bindings: [
                    (sys::MPIT_BIND_NO_OBJECT, Binding::NoObject),
                    (sys::MPIT_BIND_MPI_COMM, Binding::Comm),
                    (sys::MPIT_BIND_MPI_DATATYPE, Binding::Datatype),
                    (sys::MPIT_BIND_MPI_ERRHANDLER, Binding::Errhandler),
                    (sys::MPIT_BIND_MPI_FILE, Binding::File),
                    (sys::MPIT_BIND_MPI_GROUP, Binding::Group),
                    (sys::MPIT_BIND_MPI_OP, Binding::Op),
                    (sys::MPIT_BIND_MPI_REQUEST, Binding::Request),
                    (sys::MPIT_BIND_MPI_WIN, Binding::Win),
                    (sys::MPIT_BIND_MPI_MESSAGE, Binding::Message),
                    (sys::MPIT_BIND_MPI_INFO, Binding::Info),
                ],
                verbosities: [
                    (sys::MPIT_VERBOSITY_USER_BASIC, Verbosity::UserBasic),
                    (sys::MPIT_VERBOSITY_USER_DETAIL, Verbosity::UserDetail),
                    (sys::MPIT_VERBOSITY_USER_ALL, Verbosity::UserAll),
                    (sys::MPIT_VERBOSITY_TUNER_BASIC, Verbosity::TunerBasic),
                    (sys::MPIT_VERBOSITY_TUNER_DETAIL, Verbosity::TunerDetail),
                    (sys::MPIT_VERBOSITY_TUNER_ALL, Verbosity::TunerAll),
                    (sys::MPIT_VERBOSITY_MPIDEV_BASIC, Verbosity::MpidevBasic),
                    (sys::MPIT_VERBOSITY_MPIDEV_DETAIL, Verbosity::MpidevDetail),
                    (sys::MPIT_VERBOSITY_MPIDEV_ALL, Verbosity::MpidevAll),
                ],
                datatypes: [
                    (DatatypeHandle(sys::MPIT_INT), Datatype::Int),
                    (DatatypeHandle(sys::MPIT_UNSIGNED), Datatype::Unsigned),
                    (
                        DatatypeHandle(sys::MPIT_UNSIGNED_LONG),
                        Datatype::UnsignedLong,
                    ),
                    (
                        DatatypeHandle(sys::MPIT_UNSIGNED_LONG_LONG),
                        Datatype::UnsignedLongLong,
                    ),
                    (DatatypeHandle(sys::MPIT_COUNT), Datatype::Count),
                    (DatatypeHandle(sys::MPIT_DOUBLE), Datatype::Double),
                    (DatatypeHandle(sys::MPIT_CHAR), Datatype::Char),
                    (DatatypeHandle(sys::MPIT_LONG), Datatype::Long),
                    (DatatypeHandle(sys::MPIT_LONG_LONG), Datatype::LongLong),
                    (DatatypeHandle(sys::MPIT_C_BOOL), Datatype::CBool),
                ],
            }
        }
    }

    fn lookup<K: PartialEq + Copy, V: Copy>(table: &[(K, V)], key: K, unknown: V) -> V {
        table
            .iter()
            .find(|(k, _)| *k == key)
            .map_or(unknown, |(_, v)| *v)
    }

    fn scope(&self, raw: c_int) -> Scope {
        Self::lookup(&self.scopes, raw, Scope::Unknown)
    }
    fn class(&self, raw: c_int) -> PvarClass {
        Self::lookup(&self.classes, raw, PvarClass::Unknown)
    }
    pub(crate) fn class_raw(&self, class: PvarClass) -> Option<c_int> {
        self.classes
            .iter()
            .find(|(_, c)| *c == class)
            .map(|(r, _)| *r)
    }
    fn binding(&self, raw: c_int) -> Binding {
        Self::lookup(&self.bindings, raw, Binding::Unknown)
    }
    fn verbosity(&self, raw: c_int) -> Verbosity {
        Self::lookup(&self.verbosities, raw, Verbosity::Unknown)
    }
    fn datatype(&self, raw: sys::MPI_Datatype) -> Datatype {
        Self::lookup(&self.datatypes, DatatypeHandle(raw), Datatype::Unknown)
    }
}

/// The MPI functions and constants of this process.
pub(crate) struct Api {
    f: sys::MpiFunctions,
    pub c: Consts,
}

static API: OnceLock<Option<Api>> = OnceLock::new();

/// The MPI library of this process, or [`Error::NoMpi`].
pub(crate) fn api() -> Result<&'static Api> {
    API.get_or_init(|| {
        sys::MpiFunctions::load().map(|f| Api {
            f,
            c: Consts::read(),
        })
    })
    .as_ref()
    .ok_or(Error::NoMpi)
}

/// An MPI function from the table, or [`Error::MissingFunction`] when this
/// library lacks it. Calling it is the caller's `unsafe` block, with its
/// own `// SAFETY:` comment (`unsafe { func!(api, MPI_X)?(args) }`), so that
/// clippy's `undocumented_unsafe_blocks` checks every call; the return code
/// is checked by the caller.
macro_rules! func {
    ($api:expr, $name:ident) => {
        $api.f
            .$name
            .as_ref()
            .map(|function| *function)
            .map_err(|_| Error::MissingFunction(stringify!($name)))
    };
}

/// Turns an MPI return code into a result, naming the routine.
pub(crate) fn check(api: &Api, call: &'static str, rc: c_int) -> Result<()> {
    if rc == api.c.success {
        return Ok(());
    }
    if Some(rc) == api.c.err_set_not_now {
        return Err(Error::SetNotNow {
            call,
            variable: String::new(),
        });
    }
    if Some(rc) == api.c.err_set_never {
        return Err(Error::SetNever {
            call,
            variable: String::new(),
        });
    }
    let name = sys::error_name(rc)
        .map(str::to_string)
        .or_else(|| {
            // Not an MPI_T code: the library's own text, first line only
            // (MPICH appends its error stack). MPI (not MPI_T) routines
            // fail only after MPI_Init, when MPI_Error_string is usable.
            (!call.starts_with("MPI_T_"))
                .then(|| error_string(rc))
                .flatten()
                .and_then(|text| {
                    text.lines()
                        .next()
                        .map(|l| l.trim_end_matches(',').to_string())
                })
                .filter(|l| !l.is_empty())
        })
        .unwrap_or_else(|| format!("unknown error {rc}"));
    Err(Error::Mpi(MpiError {
        call,
        code: rc,
        name,
        variable: None,
    }))
}

/// Largest string length we accept from the library (a guard against a
/// corrupt length, not a real limit).
const MAX_STRING: c_int = 1 << 20;

fn string_from(buf: &[u8]) -> String {
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

fn clamp_len(len: c_int) -> usize {
    len.clamp(1, MAX_STRING) as usize
}

/// Thread levels, as the `MPI_THREAD_*` constants of this library.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ThreadLevel {
    /// `MPI_THREAD_SINGLE`
    Single,
    /// `MPI_THREAD_FUNNELED`
    Funneled,
    /// `MPI_THREAD_SERIALIZED`
    Serialized,
    /// `MPI_THREAD_MULTIPLE`
    Multiple,
}

impl ThreadLevel {
    pub(crate) fn to_raw(self, c: &Consts) -> c_int {
        match self {
            ThreadLevel::Single => c.thread_single,
            ThreadLevel::Funneled => c.thread_funneled,
            ThreadLevel::Serialized => c.thread_serialized,
            ThreadLevel::Multiple => c.thread_multiple,
        }
    }

    /// Decodes a level as this MPI library numbers it (`None` for a value
    /// that is none of the four).
    pub fn from_raw(raw: c_int) -> Option<Self> {
        let c = &api().ok()?.c;
        [
            ThreadLevel::Single,
            ThreadLevel::Funneled,
            ThreadLevel::Serialized,
            ThreadLevel::Multiple,
        ]
        .into_iter()
        .find(|l| l.to_raw(c) == raw)
    }
}

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

/// Runs `f` with a pointer to the object handle MPI_T expects (or null).
fn with_object_ptr<R>(object: Object, f: impl FnOnce(*mut c_void) -> R) -> R {
    match object {
        Object::None => f(std::ptr::null_mut()),
        Object::Comm(mut comm) => f((&mut comm.0 as *mut sys::MPI_Comm).cast()),
        Object::Win(mut win) => f((&mut win.0 as *mut sys::MPI_Win).cast()),
    }
}

/// The `MPI_COMM_WORLD` handle of this process.
pub fn comm_world() -> Result<Comm> {
    Ok(api()?.c.comm_world)
}

/// Whether `comm` is `MPI_COMM_NULL`.
pub fn is_comm_null(comm: Comm) -> bool {
    api().is_ok_and(|a| a.c.comm_null == comm)
}

// ---------------------------------------------------------------------------
// Collectives for the cross-rank summary, through PMPI so that other tools
// do not see them. Called only on the application's thread, inside its
// MPI_Init or MPI_Finalize.

/// A communicator of the tool's own over all the processes of `comm`,
/// made with `PMPI_Comm_create_group` on `comm`'s whole group rather than
/// with `PMPI_Comm_dup`. Open MPI 4.1 agrees on a dup's context id with a
/// non-blocking allreduce on the parent communicator, which registers
/// libnbc's progress function in every progress loop for the rest of the
/// run (measured here: +2% on 0-byte ping-pong latency for an application
/// that never dups a communicator itself); a group-based creation agrees
/// with point-to-point messages. A dup would also run the application's
/// attribute copy callbacks on `comm`. Collective over `comm`.
pub(crate) fn comm_private(comm: Comm) -> Result<Comm> {
    let api = api()?;
    let mut group = api.c.group_null.0;
    // SAFETY: a live communicator and a valid out-pointer.
    let rc = unsafe { func!(api, PMPI_Comm_group)?(comm.0, &mut group) };
    check(api, "MPI_Comm_group", rc)?;
    let mut new = api.c.comm_null.0;
    let created = func!(api, PMPI_Comm_create_group).and_then(|create| {
        // SAFETY: a live communicator, its own group, a tag (which does not
        // conflict with point-to-point tags, MPI-3.1 section 6.4.2) and a
        // valid out-pointer; every rank of `comm` calls it at the same point
        // (inside MPI_Init).
        let rc = unsafe { create(comm.0, group, PRIVATE_COMM_TAG, &mut new) };
        check(api, "MPI_Comm_create_group", rc)
    });
    let freed = func!(api, PMPI_Group_free).and_then(|free| {
        // SAFETY: the group obtained above, freed once.
        let rc = unsafe { free(&mut group) };
        check(api, "MPI_Group_free", rc)
    });
    created?;
    if new == api.c.comm_null.0 {
        // Every process of `comm` is in its group: a null result is the
        // library's failure, reported as one.
        return Err(Error::Mpi(MpiError {
            call: "MPI_Comm_create_group",
            code: api.c.success,
            name: "MPI_COMM_NULL returned for the whole group".into(),
            variable: None,
        }));
    }
    let comm = Comm(new);
    if let Err(mut e) = freed {
        // Not used: the caller turns the tuner off. A failed free of it is
        // told with the first error, not dropped.
        if let (Err(free), Error::Mpi(m)) = (comm_free(comm), &mut e) {
            m.name = format!("{} (then freeing the new communicator: {free})", m.name);
        }
        return Err(e);
    }
    Ok(comm)
}

/// The tag of the tool's `MPI_Comm_create_group` call: any value up to
/// 32767, the least `MPI_TAG_UB` the standard allows.
const PRIVATE_COMM_TAG: c_int = 0x6d70;

/// Frees a communicator made by [`comm_private`] (through
/// [`PrivateComm`](crate::PrivateComm), which frees it once).
pub(crate) fn comm_free(comm: Comm) -> Result<()> {
    let api = api()?;
    let mut c = comm.0;
    // SAFETY: a communicator this crate created, freed once.
    let rc = unsafe { func!(api, PMPI_Comm_free)?(&mut c) };
    check(api, "MPI_Comm_free", rc)
}

/// Rank and size of a communicator.
pub fn rank_size(comm: Comm) -> Result<(i32, i32)> {
    comm_rank_size(api()?, comm)
}

/// Broadcasts bytes from `root` (`PMPI_Bcast` of MPI_BYTE).
pub(crate) fn bcast_bytes(comm: Comm, buf: &mut [u8], root: i32) -> Result<()> {
    let api = api()?;
    let n = c_int::try_from(buf.len()).map_err(|_| Error::BadValue {
        variable: "broadcast".into(),
        message: "too large".into(),
    })?;
    // SAFETY: `buf` holds `n` bytes on every rank (the length is broadcast
    // first by the caller); MPIT_BYTE is the header's MPI_BYTE.
    let rc = unsafe {
        func!(api, PMPI_Bcast)?(buf.as_mut_ptr().cast(), n, sys::MPIT_BYTE, root, comm.0)
    };
    check(api, "MPI_Bcast", rc)
}

/// Element-wise sum of doubles onto `root` (`PMPI_Reduce` with MPI_SUM).
pub(crate) fn reduce_sum(comm: Comm, send: &[f64], recv: &mut [f64], root: i32) -> Result<()> {
    reduce(comm, send, recv, ReduceOp::Sum, Some(root))
}

/// The host name, from the kernel.
pub fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .or_else(|_| std::env::var("HOSTNAME"))
        .unwrap_or_else(|_| "unknown".into())
}

/// The reduction operations the tool uses (basic ones only: no pair types,
/// no MINLOC/MAXLOC, which MVAPICH2 2.3.7 rejects in builds without Fortran).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReduceOp {
    /// `MPI_MIN`
    Min,
    /// `MPI_MAX`
    Max,
    /// `MPI_SUM`
    Sum,
}

impl ReduceOp {
    /// The header's handle of the operation.
    fn handle(self) -> sys::MPI_Op {
        // SAFETY: reading shim constants.
        unsafe {
            match self {
                ReduceOp::Min => sys::MPIT_MIN,
                ReduceOp::Max => sys::MPIT_MAX,
                ReduceOp::Sum => sys::MPIT_SUM,
            }
        }
    }
}

/// Element-wise reduction of signed 64-bit integers to every rank
/// (`PMPI_Allreduce` of MPI_INT64_T).
/// (Signed on purpose: MPICH 4.0.2 compares MPI_UINT64_T as signed in
/// MPI_MIN, so values of 2^63 and above would come out wrong.)
pub(crate) fn allreduce_i64(
    comm: Comm,
    send: &[i64],
    recv: &mut [i64],
    op: ReduceOp,
) -> Result<()> {
    reduce(comm, send, recv, op, None)
}

/// Element-wise reduction of signed 64-bit integers onto `root`
/// (`PMPI_Reduce` of MPI_INT64_T; `recv` is written on `root` only).
pub(crate) fn reduce_i64(
    comm: Comm,
    send: &[i64],
    recv: &mut [i64],
    op: ReduceOp,
    root: i32,
) -> Result<()> {
    reduce(comm, send, recv, op, Some(root))
}

/// The element types the tool reduces, with their MPI datatype.
trait Reduced: Copy {
    fn datatype() -> sys::MPI_Datatype;
}

impl Reduced for f64 {
    fn datatype() -> sys::MPI_Datatype {
        // SAFETY: reading a shim constant (the header's MPI_DOUBLE).
        unsafe { sys::MPIT_DOUBLE }
    }
}

impl Reduced for i64 {
    fn datatype() -> sys::MPI_Datatype {
        // SAFETY: reading a shim constant (the header's MPI_INT64_T).
        unsafe { sys::MPIT_INT64_T }
    }
}

/// `PMPI_Reduce` onto `root`, or `PMPI_Allreduce` when `root` is `None`,
/// of `send` into `recv` element-wise.
fn reduce<T: Reduced>(
    comm: Comm,
    send: &[T],
    recv: &mut [T],
    op: ReduceOp,
    root: Option<i32>,
) -> Result<()> {
    let api = api()?;
    let count = c_int::try_from(send.len())
        .ok()
        .filter(|_| send.len() == recv.len())
        .ok_or_else(|| Error::BadValue {
            variable: "reduction".into(),
            message: format!("{} elements into {}", send.len(), recv.len()),
        })?;
    let (sendbuf, recvbuf) = (
        send.as_ptr().cast::<c_void>() as *mut c_void,
        recv.as_mut_ptr().cast::<c_void>(),
    );
    // SAFETY: both buffers hold `count` elements of `T`, whose MPI datatype
    // is `T::datatype()`; the same count, operation and root on every rank
    // (the callers' contract); collective over `comm`, called by every
    // rank at the same point.
    let rc = unsafe {
        match root {
            None => func!(api, PMPI_Allreduce)?(
                sendbuf,
                recvbuf,
                count,
                T::datatype(),
                op.handle(),
                comm.0,
            ),
            Some(root) => func!(api, PMPI_Reduce)?(
                sendbuf,
                recvbuf,
                count,
                T::datatype(),
                op.handle(),
                root,
                comm.0,
            ),
        }
    };
    check(
        api,
        if root.is_some() {
            "MPI_Reduce"
        } else {
            "MPI_Allreduce"
        },
        rc,
    )
}

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
