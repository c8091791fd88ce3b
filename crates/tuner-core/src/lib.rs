//! The safe MPI_T layer of mpit-tuner, and (in later modules) the runtime
//! that samples, decides and acts on the helper thread.
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
//!   are;
//! - every failure is an [`Error`] naming the MPI_T error and the variable.
//!
//! All C calls live in one module (`ffi`); MPI functions are resolved at run
//! time from the library the process already loaded, so nothing here links
//! MPI.
//!
//! ```no_run
//! use tuner_core::{Catalogue, Cvar, MpiT, Object, Value};
//!
//! let mpit = MpiT::init()?;
//! let catalogue = Catalogue::load(&mpit)?;
//! println!("{} CVARs, {} PVARs", catalogue.cvars().len(), catalogue.pvars().len());
//! if let Some(info) = catalogue.cvar("MPIR_CVAR_REQUEST_POLL_FREQ") {
//!     let cvar = Cvar::open(&mpit, info, Object::None)?;
//!     cvar.write(&Value::Int(vec![32]))?;
//!     assert_eq!(cvar.read()?, Value::Int(vec![32]));
//! }
//! # Ok::<(), tuner_core::Error>(())
//! ```
#![warn(missing_docs)]

mod catalogue;
mod cvar;
mod error;
mod ffi;
mod meta;
mod pvar;
mod session;
mod value;

pub use catalogue::{
    Catalogue, Category, CvarInfo, EnumItem, Enumeration, Growth, PvarInfo, Skipped,
};
pub use cvar::Cvar;
pub use error::{Error, MpiError, Result};
pub use ffi::{comm_world, is_comm_null, Comm, Object, Raw, ThreadLevel, Win};
pub use meta::{Binding, Datatype, PvarClass, Scope, Verbosity};
pub use pvar::{Pvar, PvarSession};
pub use session::{Library, MpiProcess, MpiT};
pub use value::Value;
