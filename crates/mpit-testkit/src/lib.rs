//! Test support: runs real MPI jobs under the `mpiexec` that goes with the
//! MPI library of the build, one job at a time, each with a timeout
//! (feature `mpi`, on by default); and, without MPI, the counting allocator
//! of the zero-allocation tests ([`alloc_count`]), so that crates that
//! build without MPI (`policies`) test with it too.
//!
//! A test that needs several ranks re-launches its own test binary under
//! `mpiexec` ([`run_self`]); in the launched ranks [`in_rank`] is true and
//! the test body runs there. A test that needs MPI and finds none fails:
//! nothing is skipped. Jobs over several nodes run on the emulated cluster
//! of `scripts/cluster.sh` ([`cluster`]).
//!
//! ```no_run
//! #[test]
//! fn four_ranks_agree() {
//!     if mpit_testkit::in_rank() {
//!         // ... the MPI work and its assertions, in every rank ...
//!         return;
//!     }
//!     mpit_testkit::run_self("four_ranks_agree", 4).assert_success();
//! }
//! ```
#![warn(missing_docs)]

pub mod alloc_count;
#[cfg(feature = "mpi")]
pub mod cluster;
#[cfg(feature = "mpi")]
mod jobs;
#[cfg(feature = "mpi")]
pub mod netns;
pub mod rng;

#[cfg(feature = "mpi")]
pub use jobs::*;
