//! The safe MPI_T layer of mpit-tuner: every call into the MPI library the
//! tool makes, behind owned types.
//!
//! Its place in the flow: **MPI_T** -> sampler -> policies -> actuator -> log.
//! This crate wraps the raw bindings of `mpit-sys` in owned types:
//!
//! - [`MpiT`] owns `MPI_T_init_thread` (before or after `MPI_Init`);
//! - [`Catalogue`] lists every CVAR, PVAR, category and enumeration with its
//!   metadata, skips indices the library will not describe, and grows with
//!   [`Catalogue::refresh`];
//! - [`Cvar`] reads and writes control variables (scalars, arrays, strings,
//!   enumeration items by name), refusing CONSTANT and READONLY scopes;
//! - [`PvarSession`] and [`Pvar`] allocate, start, stop and read
//!   performance variables, bound to communicators and windows when they
//!   are; [`OwnedPvarSession`], [`PvarHandle`] and [`PvarReader`] do the
//!   same for long-lived state and lock-free tables (the sampler's);
//! - [`PrivateComm`] is the tool's own communicator, and [`collective`] the
//!   tool's collectives on it, which return errors instead of ending the job;
//! - every failure is an [`Error`] naming the MPI_T error and the variable.
//!
//! All C calls live in one module (`ffi`); each handle kind is its own
//! type (`Comm`, `Win`, `PvarHandle`, ...). MPI functions are resolved at
//! run time from the library the process already loaded, so nothing here
//! links MPI.
//!
//! ```no_run
//! use mpit::{Catalogue, Cvar, MpiT, Object, Value};
//!
//! let mpit = MpiT::init()?;
//! let catalogue = Catalogue::load(&mpit)?;
//! println!("{} CVARs, {} PVARs", catalogue.cvars().len(), catalogue.pvars().len());
//! if let Some(info) = catalogue.cvar("MPIR_CVAR_REQUEST_POLL_FREQ") {
//!     let cvar = Cvar::open(&mpit, info, Object::None)?;
//!     cvar.write(&Value::Int(vec![32]))?;
//!     assert_eq!(cvar.read()?, Value::Int(vec![32]));
//! }
//! # Ok::<(), mpit::Error>(())
//! ```
#![warn(missing_docs)]

/// Prints one line on this rank's standard error in a single `write`, so
/// that the lines of ranks sharing a launcher's stderr never interleave in
/// the middle (`eprintln!` writes a formatted line piece by piece), unless
/// the tool was asked to be quiet ([`set_quiet`]): for what the logs also
/// record (warnings, the tuning banner, the summary). What nothing else
/// records goes through [`say_always!`]. An error writing to stderr has
/// nowhere else to go and is dropped.
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {{
        if !$crate::quiet() {
            $crate::say_always!($($arg)*);
        }
    }};
}

/// [`say!`] even when the tool is quiet: for what no log records (a log
/// that cannot be written, the tuner stopping on a rank, a clean-up that
/// fails in a drop, a policy file that does not parse).
#[macro_export]
macro_rules! say_always {
    ($($arg:tt)*) => {{
        use ::std::io::Write as _;
        let mut line = ::std::format!($($arg)*);
        line.push('\n');
        let _ = ::std::io::stderr().lock().write_all(line.as_bytes());
    }};
}

static QUIET: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Makes [`say!`] silent (`MPIT_TUNER_QUIET=1`), for the whole process.
pub fn set_quiet(quiet: bool) {
    QUIET.store(quiet, std::sync::atomic::Ordering::Relaxed);
}

/// Whether [`set_quiet`] silenced [`say!`].
pub fn quiet() -> bool {
    QUIET.load(std::sync::atomic::Ordering::Relaxed)
}

static VERBOSE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Lets the tool say everything it has to say on rank 0's terminal
/// (`MPIT_TUNER_VERBOSE=1`, which `mpit-tuner run` sets): the tuning line
/// at start, the finalize table and recommendations. Without it the tool
/// prints warnings and, at finalize, one line when it changed something.
pub fn set_verbose(verbose: bool) {
    VERBOSE.store(verbose, std::sync::atomic::Ordering::Relaxed);
}

/// Whether [`set_verbose`] asked for everything (never when quiet).
pub fn verbose() -> bool {
    VERBOSE.load(std::sync::atomic::Ordering::Relaxed) && !quiet()
}

mod catalogue;
pub mod collective;
mod comm;
mod cvar;
mod error;
mod ffi;
mod handle;
pub use vocab::meta;
mod pvar;
pub mod quirks;
mod session;
pub use vocab::value;

pub use catalogue::{
    Catalogue, Category, CvarInfo, EnumItem, Enumeration, Growth, PvarInfo, Skipped,
};
pub use comm::PrivateComm;
pub use cvar::Cvar;
pub use error::{Error, MpiError, Result};
pub use ffi::{
    comm_world, describe_error, every_basic_datatype, host_name, is_comm_null, is_inter, rank_size,
    Object, PvarReader, ThreadLevel,
};
pub use handle::{datatype_bits, op_bits, Comm, HandleBits, PvarHandle, SessionHandle, Win};
pub use meta::{Binding, Datatype, PvarClass, Scope, Verbosity};
pub use pvar::{OwnedPvarSession, Pvar, PvarSession};
pub use session::{Library, MpiProcess, MpiT};
pub use value::Value;
