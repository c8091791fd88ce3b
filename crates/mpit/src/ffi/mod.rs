//! The one module of `mpit` that calls C.
//!
//! Every MPI_T routine is wrapped here in a safe function that checks its
//! return code ([`check`]) and converts its outputs; the rest of the crate
//! never sees a raw pointer. Functions come from the MPI library already
//! loaded in the process ([`mpit_sys::MpiFunctions::load`]); constants come
//! from the C shim, read once into [`Consts`].
//!
//! By concern: this file holds what every call shares (the loaded
//! functions, the constants, return-code checks, strings); [`tools`] wraps
//! the MPI_T interface (variables, enumerations, categories), [`process`]
//! the few MPI calls about the process and its communicators,
//! [`collectives`] the tool's own collectives and reductions (through
//! PMPI), [`datatypes`] a datatype taken apart into its basic ones,
//! [`errors`] error handlers and error strings.

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

/// Runs `f` with a pointer to the object handle MPI_T expects (or null).
fn with_object_ptr<R>(object: Object, f: impl FnOnce(*mut c_void) -> R) -> R {
    match object {
        Object::None => f(std::ptr::null_mut()),
        Object::Comm(mut comm) => f((&mut comm.0 as *mut sys::MPI_Comm).cast()),
        Object::Win(mut win) => f((&mut win.0 as *mut sys::MPI_Win).cast()),
    }
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

// After the macros above (`func!`), which the modules by concern use.
mod collectives;
mod datatypes;
mod errors;
mod process;
mod tools;

pub use collectives::*;
pub use datatypes::*;
pub use errors::*;
pub use process::*;
pub use tools::*;
