//! Sampling: what the helper thread reads from the library and the
//! interposer, and what it keeps of it.
//!
//! - [`Sampler`] (`sampler.rs`): one owned PVAR session, the unbound PVARs
//!   read every tick into a [`Snapshot`] published lock-free: the names of
//!   its variables in a [`Layout`] shared by every snapshot until they
//!   change, its metrics refilled in place;
//! - [`Metric`] (`metrics.rs`): class-aware values (rates of counters,
//!   levels of levels, high watermarks);
//! - [`objects`]: the lock-free table of live communicators and windows
//!   whose bound PVAR handles the helper creates, reads and frees;
//! - [`toolmetrics`]: the interposer's own per-call counters and timings
//!   (the application's hot path: relaxed atomics only).

mod metrics;
pub mod objects;
mod sampler;
pub mod toolmetrics;

pub use metrics::Metric;
pub use objects::{ObjectTable, Tracked};
pub use sampler::{Layout, SampledVar, Sampler, Snapshot, VarName};
