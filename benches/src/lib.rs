//! Shared pieces of mpit-tuner's overhead benchmarks (see `BENCHMARKS.md`
//! at the top of the repository).
//!
//! - [`fixtures`]: the policy files under test and synthetic values for
//!   them, a realistic [`tuner_core::sample::Snapshot`], and a fake engine
//!   backend served from it;
//! - [`paired`]: an interleaved A/B timing loop that reports the ratio of
//!   two pieces of code doing the same work (criterion measures each alone;
//!   the ratio needs both measured under the same machine load).
//!
//! - [`jobs`]: building and running MPI jobs for the application-level
//!   commands;
//! - [`fixed`]: the algorithms a command fixes at start, per library.
//!
//! The criterion benches are in `benches/`; the application-level overhead
//! command is `src/bin/overhead.rs` (run it with `benches/overhead.sh`), the
//! collective-tuning comparison `src/bin/collectives.rs`
//! (`benches/collectives.sh`), the default mode's matrix of collectives
//! `src/bin/matrix.rs` (`benches/matrix.sh`).

pub mod fixed;
pub mod fixtures;
pub mod jobs;
pub mod paired;
