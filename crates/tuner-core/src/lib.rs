//! The tuner runtime of mpit-tuner: what samples, decides and logs on the
//! helper thread of every rank.
//!
//! The modules follow the data: MPI_T (crate `mpit`) -> [`sample`] ->
//! [`decide`] -> [`finalize`], driven by the [`runtime`]; [`replay`] runs the
//! same decisions offline on recorded logs. Every record they write is a
//! type of crate `vocab`. This crate makes no C call.
//!
//! - [`run`]: what every part shares about the run: configuration, the
//!   launcher's environment, the facts of the log header, the log;
//! - [`runtime`]: what the interposer drives at `MPI_Init`, on the helper
//!   thread and at `MPI_Finalize`, and the run directory;
//! - [`services`]: what the runtime drives, each behind one trait: sampling,
//!   policies, steering and collective tuning;
//! - [`sample`]: the sampler, class-aware metrics, the lock-free table of
//!   live communicators and windows, the interposer's own counters;
//! - [`decide`]: the policy engine, its backends and the actuator;
//! - [`collectives`]: online collective tuning: the algorithm of each
//!   collective chosen per communicator and message size on the
//!   application's own calls, switched only at points every rank reaches
//!   together; behind its own boundary because its hot path runs inside
//!   the application's calls, not on the helper thread;
//! - [`finalize`]: the cross-rank summary and the end-of-run
//!   recommendations;
//! - [`replay`]: the trace format, the simulated backend and the driver of
//!   `mpit-tuner replay`.
//!
//! ```
//! use tuner_core::sample::ObjectTable;
//!
//! // The table tracks nothing until the interposer registers objects.
//! let table = ObjectTable::new(64);
//! assert_eq!(table.live(), 0);
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod collectives;
pub mod decide;
pub mod finalize;
pub mod replay;
pub mod run;
pub mod runtime;
pub mod sample;
pub mod services;
