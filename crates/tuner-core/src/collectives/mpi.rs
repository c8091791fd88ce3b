//! What collective tuning needs from MPI, behind one trait.
//!
//! The tuner ([`Tuner`](super::Tuner)) makes every MPI call of its own
//! through a [`TuningMpi`]: the rank and size of an application's
//! communicator and whether it is an intercommunicator, `MPI_ERRORS_RETURN`
//! swapped in on it, a [`Sequence`] of the tool's collectives over it
//! (broadcast, element-wise reductions of a few `i64`, the agreement that
//! ends a stage), the private communicator derived from it and its free,
//! the algorithm variables ([`AlgorithmVar`]) written around calls and
//! read back, the clock of the agreed points, and the lines it says on the
//! rank's standard error.
//!
//! [`RealMpi`] is the one implementation a job runs: each method is the
//! `mpit` call it names, so the calls, their error messages and the log's
//! records are those of the library. The tuner is generic over the trait
//! and monomorphised, so its hot path is the same code as with direct
//! calls; the process's tuner is a `Tuner<RealMpi>`. The unit tests
//! implement it over a simulated world of ranks in one process
//! (`collectives/tests/`), which drives the table of communicators and the
//! agreed protocol of many ranks without MPI.

use mpit::collective::{self, Collectives, ErrorsReturn, Failure, ReduceOp, Verdict};
use mpit::{Comm, Cvar, PrivateComm};
use std::time::{Duration, Instant};

/// What collective tuning needs from MPI (see the module documentation).
///
/// Every collective method must be called by every rank of the
/// communicator, in the same order, as MPI requires; errors come back as
/// values (the communicator returns errors while the tool calls on it).
pub trait TuningMpi: Send + Sync + 'static {
    /// The tool's private communicator derived from an application's,
    /// owned until freed.
    type Private: TuningComm;
    /// A sequence of the tool's collectives over one communicator.
    type Seq: Sequence;
    /// The application's error handler, swapped out of its communicator
    /// while the tool calls on it.
    type Guard;
    /// An algorithm variable (or another variable written around calls).
    type Var: AlgorithmVar;

    /// This process's rank in `comm`, and its size.
    fn rank_size(&self, comm: Comm) -> mpit::Result<(i32, i32)>;

    /// Whether `comm` is an intercommunicator.
    fn is_inter(&self, comm: Comm) -> mpit::Result<bool>;

    /// `MPI_ERRORS_RETURN` on `comm` until [`TuningMpi::restore`]; the
    /// error when it could not be swapped in (the caller must vote no at
    /// the next agreement).
    fn errors_return(&self, comm: Comm) -> (Self::Guard, Option<mpit::Error>);

    /// Puts the application's error handler back.
    fn restore(&self, guard: Self::Guard) -> mpit::Result<()>;

    /// A sequence of the tool's collectives over `comm`, where this
    /// process has rank `rank` (for messages).
    fn sequence(&self, comm: Comm, rank: i32) -> Self::Seq;

    /// The private communicator over every process of `parent`, made
    /// collectively as a step of `seq` (which runs on `parent`); a failure
    /// is kept in `seq`.
    fn create_private(&self, seq: &mut Self::Seq, parent: Comm) -> Option<Self::Private>;

    /// Time since the tuner started (events' times, and the agreed
    /// points' least time since the start over ranks).
    fn elapsed(&self) -> Duration;

    /// Says one line on this rank's standard error.
    fn say(&self, line: std::fmt::Arguments<'_>);
}

/// A sequence of the tool's collectives over one communicator, which every
/// rank of it goes through in the same order: the first failure of a rank
/// is kept, and the rank still makes every later call
/// ([`mpit::collective::Collectives`]).
pub trait Sequence {
    /// Records a failure of this rank (the first one is kept).
    fn fail(&mut self, call: &str, e: &mpit::Error);
    /// Records a failure that is not an MPI call's.
    fn fail_local(&mut self, message: String);
    /// Whether this rank has a failure not yet agreed on.
    fn failed(&self) -> bool;
    /// Broadcast of bytes from `root`; whether this call succeeded.
    fn bcast_bytes(&mut self, buf: &mut [u8], root: i32) -> bool;
    /// Element-wise reduction of `i64`s to every rank.
    fn allreduce_i64(&mut self, send: &[i64], recv: &mut [i64], op: ReduceOp);
    /// Whether `x` is the same on every rank (yes after a failed call: the
    /// agreement that must follow fails).
    fn all_equal(&mut self, x: i64) -> bool;
    /// Ends a stage: whether every rank's calls since the last agreement
    /// succeeded, the same verdict on every rank.
    fn agree(&mut self) -> Verdict;
    /// Ends the sequence, returning a failure not yet agreed on.
    fn into_pending(self) -> Option<Failure>;
}

/// The tool's own communicator, owned until freed.
pub trait TuningComm: Send + Sync {
    /// The communicator, for the tool's collectives on it (or the calls
    /// run on it instead of the application's).
    fn comm(&self) -> Comm;
    /// Frees it now (collective over it); freeing again does nothing.
    fn free(&mut self) -> mpit::Result<()>;
}

/// A variable the tuner writes around calls and reads back.
pub trait AlgorithmVar: Send + Sync {
    /// Writes an integer value.
    fn write_int(&self, value: i64) -> mpit::Result<()>;
    /// Reads the value: `None` when it is no integer.
    fn read_int(&self) -> mpit::Result<Option<i64>>;
    /// Its name, for messages.
    fn var_name(&self) -> &str;
}

/// The MPI library of this process, through `mpit`.
#[derive(Debug)]
pub struct RealMpi {
    start: Instant,
}

impl RealMpi {
    /// The library, with the tuner's clock started now.
    pub fn new() -> RealMpi {
        RealMpi {
            start: Instant::now(),
        }
    }
}

impl Default for RealMpi {
    fn default() -> RealMpi {
        RealMpi::new()
    }
}

impl TuningMpi for RealMpi {
    type Private = PrivateComm;
    type Seq = Collectives;
    type Guard = ErrorsReturn;
    type Var = Cvar<'static>;

    #[inline]
    fn rank_size(&self, comm: Comm) -> mpit::Result<(i32, i32)> {
        mpit::rank_size(comm)
    }

    #[inline]
    fn is_inter(&self, comm: Comm) -> mpit::Result<bool> {
        mpit::is_inter(comm)
    }

    #[inline]
    fn errors_return(&self, comm: Comm) -> (ErrorsReturn, Option<mpit::Error>) {
        ErrorsReturn::swap_in(comm)
    }

    #[inline]
    fn restore(&self, guard: ErrorsReturn) -> mpit::Result<()> {
        guard.restore()
    }

    #[inline]
    fn sequence(&self, comm: Comm, rank: i32) -> Collectives {
        Collectives::new(comm, rank)
    }

    #[inline]
    fn create_private(&self, seq: &mut Collectives, parent: Comm) -> Option<PrivateComm> {
        collective::create_private(seq, parent)
    }

    #[inline]
    fn elapsed(&self) -> Duration {
        self.start.elapsed()
    }

    fn say(&self, line: std::fmt::Arguments<'_>) {
        mpit::say_always!("{line}");
    }
}

impl Sequence for Collectives {
    #[inline]
    fn fail(&mut self, call: &str, e: &mpit::Error) {
        Collectives::fail(self, call, e);
    }
    #[inline]
    fn fail_local(&mut self, message: String) {
        Collectives::fail_local(self, message);
    }
    #[inline]
    fn failed(&self) -> bool {
        Collectives::failed(self)
    }
    #[inline]
    fn bcast_bytes(&mut self, buf: &mut [u8], root: i32) -> bool {
        Collectives::bcast_bytes(self, buf, root)
    }
    #[inline]
    fn allreduce_i64(&mut self, send: &[i64], recv: &mut [i64], op: ReduceOp) {
        Collectives::allreduce_i64(self, send, recv, op);
    }
    #[inline]
    fn all_equal(&mut self, x: i64) -> bool {
        Collectives::all_equal(self, x)
    }
    #[inline]
    fn agree(&mut self) -> Verdict {
        Collectives::agree(self)
    }
    #[inline]
    fn into_pending(self) -> Option<Failure> {
        Collectives::into_pending(self)
    }
}

impl TuningComm for PrivateComm {
    #[inline]
    fn comm(&self) -> Comm {
        PrivateComm::comm(self)
    }
    #[inline]
    fn free(&mut self) -> mpit::Result<()> {
        PrivateComm::free(self)
    }
}

impl AlgorithmVar for Cvar<'static> {
    #[inline]
    fn write_int(&self, value: i64) -> mpit::Result<()> {
        self.write_scalar_int(value)
    }
    #[inline]
    fn read_int(&self) -> mpit::Result<Option<i64>> {
        self.read().map(|v| v.as_i64())
    }
    #[inline]
    fn var_name(&self) -> &str {
        &self.info().name
    }
}
