//! One newtype per MPI/MPI_T handle kind, each with its own reasons to
//! cross threads (or none).
//!
//! A handle is an `int` in MPICH's ABI and a pointer in Open MPI's; Rust
//! never dereferences one, it only hands it back to the library. The raw
//! value is `pub(crate)`: outside this crate a handle comes from the
//! library (or from the bits a lock-free table stored, [`HandleBits`]).

use mpit_sys as sys;
use std::ffi::c_int;

/// A communicator handle of the MPI library in this process (not owned:
/// the application's, or `MPI_COMM_WORLD`; the tool's own is
/// [`PrivateComm`](crate::PrivateComm)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Comm(pub(crate) sys::MPI_Comm);

// SAFETY: a communicator handle is a process-wide identifier, not memory
// owned by a thread: MPI (initialised with MPI_THREAD_MULTIPLE, or used by
// one thread at a time otherwise) accepts it from any thread, and this crate
// never dereferences it. The object table hands the application's
// communicators to the helper thread, which only binds PVAR handles to them.
unsafe impl Send for Comm {}
// SAFETY: as for Send; a shared reference only allows copying the value.
unsafe impl Sync for Comm {}

impl Comm {
    /// Wraps a communicator the application passed to an intercepted MPI
    /// function.
    pub fn from_raw(raw: sys::MPI_Comm) -> Comm {
        Comm(raw)
    }

    /// The raw handle, for the interposer to pass to the library (a
    /// communicator the tool made in place of the application's).
    pub fn into_raw(self) -> sys::MPI_Comm {
        self.0
    }
}

/// A window handle of the MPI library in this process (the application's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Win(pub(crate) sys::MPI_Win);

// SAFETY: as for `Comm`: a process-wide identifier the helper thread only
// binds PVAR handles to, never dereferenced here.
unsafe impl Send for Win {}
// SAFETY: as for Send; a shared reference only allows copying the value.
unsafe impl Sync for Win {}

impl Win {
    /// Wraps a window the application passed to an intercepted MPI function.
    pub fn from_raw(raw: sys::MPI_Win) -> Win {
        Win(raw)
    }
}

/// A PVAR session handle, as a value: the session itself is owned by a
/// [`PvarSession`](crate::PvarSession) or an
/// [`OwnedPvarSession`](crate::OwnedPvarSession), which frees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionHandle(pub(crate) sys::MPI_T_pvar_session);

// SAFETY: MPI_T routines are thread-safe once MPI_T_init_thread succeeded
// (MPI-3.1 section 14.3.1); the object table's slots carry the sampler's
// session from the helper thread to the application's thread, which frees
// handles of it inside MPI_Comm_free while the helper is kept off that slot.
unsafe impl Send for SessionHandle {}
// SAFETY: as for Send; a shared reference only allows copying the value.
unsafe impl Sync for SessionHandle {}

/// An allocated PVAR handle. Not `Copy`: it is used until freed with
/// [`PvarHandle::free`], once, in the session it was allocated in.
#[derive(Debug, PartialEq, Eq)]
pub struct PvarHandle(pub(crate) sys::MPI_T_pvar_handle);

// SAFETY: as for `SessionHandle`: allocated on the helper thread, freed on
// the application's thread by the object table (never both at once, the
// table's busy flag sees to it); MPI_T is thread-safe after
// MPI_T_init_thread.
unsafe impl Send for PvarHandle {}
// SAFETY: `&PvarHandle` only allows reading and starting/stopping it, which
// MPI_T allows from any thread.
unsafe impl Sync for PvarHandle {}

/// A CVAR handle, owned by [`Cvar`](crate::Cvar), which frees it.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct CvarHandle(pub(crate) sys::MPI_T_cvar_handle);

// SAFETY: a `Cvar` is opened on the application's thread at MPI_Init and
// written by the helper thread afterwards; MPI_T routines are thread-safe
// after MPI_T_init_thread, and the handle is never dereferenced here.
unsafe impl Send for CvarHandle {}
// SAFETY: as for Send; `&CvarHandle` only allows passing the value to
// MPI_T_cvar_read/write, which are thread-safe.
unsafe impl Sync for CvarHandle {}

/// An enumeration handle (`MPI_T_enum`): library-owned, never freed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct EnumHandle(pub(crate) sys::MPI_T_enum);

// SAFETY: enumeration handles are read-only descriptions owned by the
// library for the life of the process; the catalogue holding them moves to
// the helper thread and is read from both.
unsafe impl Send for EnumHandle {}
// SAFETY: as for Send.
unsafe impl Sync for EnumHandle {}

/// An error handler handle, held by [`ErrorsReturn`](crate::collective::ErrorsReturn)
/// between the swap and the restore, then freed.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Errhandler(pub(crate) sys::MPI_Errhandler);

// SAFETY: the runtime keeps the `ErrorsReturn` holding it in state shared
// with other threads; it is only used on the application's thread (inside
// MPI_Init and MPI_Finalize), and MPI handles are process-wide identifiers.
unsafe impl Send for Errhandler {}
// SAFETY: no method takes `&Errhandler` to call MPI; as for Send.
unsafe impl Sync for Errhandler {}

/// A group handle: only the null constant is kept (the groups themselves
/// live within one function).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Group(pub(crate) sys::MPI_Group);

// SAFETY: the constant `MPI_GROUP_NULL` in the process-wide `Consts`, only
// copied out; never dereferenced.
unsafe impl Send for Group {}
// SAFETY: as for Send.
unsafe impl Sync for Group {}

/// A datatype handle: only the header's predefined ones are kept, to
/// decode `MPI_T_*_get_info` results.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DatatypeHandle(pub(crate) sys::MPI_Datatype);

// SAFETY: predefined datatypes are constants of the library valid in every
// thread; they sit in the process-wide `Consts` and are only compared.
unsafe impl Send for DatatypeHandle {}
// SAFETY: as for Send.
unsafe impl Sync for DatatypeHandle {}

/// Conversion of a handle to and from the bits stored in lock-free tables
/// (an `int` in MPICH's ABI, a pointer in Open MPI's).
pub trait HandleBits: Sized {
    /// The handle as 64 bits.
    fn to_bits(&self) -> u64;
    /// The handle from bits made by `to_bits` of a handle of the same kind
    /// (the table owns the handle while it holds the bits).
    fn from_bits(bits: u64) -> Self;
}

/// The raw C handle types, as bits.
trait RawBits: Copy {
    fn to_bits(self) -> u64;
    fn from_bits(bits: u64) -> Self;
}

impl RawBits for c_int {
    #[inline]
    fn to_bits(self) -> u64 {
        self as u32 as u64
    }
    fn from_bits(bits: u64) -> Self {
        bits as u32 as c_int
    }
}

impl<T> RawBits for *mut T {
    #[inline]
    fn to_bits(self) -> u64 {
        self as usize as u64
    }
    fn from_bits(bits: u64) -> Self {
        bits as usize as *mut T
    }
}

macro_rules! handle_bits {
    ($($t:ident),*) => {$(
        impl HandleBits for $t {
            fn to_bits(&self) -> u64 {
                RawBits::to_bits(self.0)
            }
            fn from_bits(bits: u64) -> Self {
                $t(RawBits::from_bits(bits))
            }
        }
    )*};
}

handle_bits!(Comm, Win, SessionHandle, PvarHandle);

/// A datatype handle as 64 bits, the key of a table of datatypes (the
/// interposer's sizes of the predefined ones).
#[inline]
pub fn datatype_bits(raw: sys::MPI_Datatype) -> u64 {
    RawBits::to_bits(raw)
}

/// A reduction operation's handle as 64 bits (the interposer's table of
/// the predefined ones).
#[inline]
pub fn op_bits(raw: sys::MPI_Op) -> u64 {
    RawBits::to_bits(raw)
}
