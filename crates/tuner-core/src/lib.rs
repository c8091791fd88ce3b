//! The tuner runtime of mpit-tuner: what samples, decides and logs on the
//! helper thread of every rank.
//!
//! Its place in the flow: MPI_T -> **sampler -> policies -> actuator ->
//! log**. The MPI_T calls themselves live in the `mpit` crate (owned
//! sessions, handles and communicators); this crate makes no C call.
//!
//! - [`runtime`]: what the interposer drives at `MPI_Init`, on the helper
//!   thread, and at `MPI_Finalize`;
//! - [`sampler`] with class-aware [`metrics`], and the lock-free [`objects`]
//!   table of live communicators and windows;
//! - [`engine`] and [`actuator`]: the policies' decisions and the CVAR
//!   writes that carry them out;
//! - the per-rank JSON Lines [`log`], the cross-rank [`summary`], the
//!   end-of-run [`recommend`]ations and offline [`replay`]. Configuration
//!   comes from [`config`].
//!
//! ```
//! use tuner_core::objects::ObjectTable;
//!
//! // The table tracks nothing until the interposer registers objects.
//! let table = ObjectTable::new(64);
//! assert_eq!(table.live(), 0);
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod actuator;
pub mod config;
pub mod engine;
pub mod log;
pub mod metrics;
pub mod objects;
pub mod recommend;
pub mod replay;
pub mod runtime;
pub mod sampler;
pub mod summary;
pub mod toolmetrics;
