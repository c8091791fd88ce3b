//! The tool's own collective MPI calls, made so that they can never end or
//! hang the job.
//!
//! Every collective of the tool (the agreements at init, the cross-rank
//! summary at finalize, collective tuning's set-up and its private
//! communicators) goes through a [`Collectives`] sequence:
//!
//! - the communicator's error handler returns (`MPI_ERRORS_RETURN`: set on
//!   collective tuning's private communicators for good, swapped in on
//!   `MPI_COMM_WORLD` for the calls made there inside `MPI_Init` and
//!   `MPI_Finalize`, see [`ErrorsReturn`]), so a failing call returns its
//!   code instead of aborting;
//! - every return code is checked; the first failure of a rank is kept, and
//!   the rank still makes every later call of the sequence, with its own
//!   contribution as it is, so that no other rank waits in a call this rank
//!   skipped;
//! - [`Collectives::agree`] ends a stage: one `MPI_Allreduce` of `MPI_MIN`
//!   over a few integers tells every rank whether all succeeded, and if not,
//!   which ranks failed and in which call. Every rank then turns the same
//!   feature off at the same point.
//!
//! If the agreement itself fails on a rank, that rank cannot know what the
//! others decided. It goes on as if they went on (it voted yes only if it
//! had no failure), and keeps the failure, so that its "no" reaches every
//! rank at the next agreement. Only basic datatypes and operations are used
//! (no pair types, no MINLOC/MAXLOC: MVAPICH2 2.3.7 rejects them in builds
//! without Fortran).

use crate::comm::PrivateComm;
use crate::error::{Error, Result};
use crate::ffi::{self, Comm};
pub use crate::ffi::{Mixed, MixedOp, ReduceOp};

/// The MPI calls a failure can be reported for, by number (the agreement
/// reduces the number, so it must be the same table on every rank).
pub const CALLS: &[&str] = &[
    "MPI_Comm_rank",
    "MPI_Comm_size",
    "MPI_Comm_group",
    "MPI_Group_free",
    "MPI_Comm_create_group",
    "MPI_Comm_get_errhandler",
    "MPI_Comm_set_errhandler",
    "MPI_Errhandler_free",
    "MPI_Bcast",
    "MPI_Reduce",
    "MPI_Allreduce",
    "MPI_Comm_free",
    "MPI_Gather",
    "MPI_Type_contiguous",
    "MPI_Type_commit",
    "MPI_Op_create",
    "MPI_Op_free",
    "MPI_Type_free",
    "MPI_Iallreduce",
    "MPI_Wait",
];

/// A failure of the tool on this rank, not an MPI call's (a log that cannot
/// be opened, MPI_T unavailable): reported under this name.
pub const LOCAL: &str = "the tuner's start on that rank";

/// One rank's failure in a sequence.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    /// The MPI routine (`"MPI_Reduce"`), or what failed locally.
    pub call: String,
    /// The library's error class, when an MPI routine returned a code.
    pub class: Option<i32>,
    /// What happened, for this rank's log.
    pub message: String,
}

impl Failure {
    fn from_error(call: &str, e: &Error) -> Failure {
        let class = match e {
            Error::Mpi(m) => ffi::error_class(m.code),
            _ => None,
        };
        Failure {
            call: call.to_string(),
            class,
            message: e.to_string(),
        }
    }
}

/// What an agreement found.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Every rank succeeded (or this rank could not learn otherwise: the
    /// agreement itself failed here, see the module documentation).
    AllOk,
    /// Some ranks failed: the same verdict on every rank.
    Failed(FailedOn),
}

/// The ranks that failed and how, as every rank learns it.
#[derive(Debug, Clone, PartialEq)]
pub struct FailedOn {
    /// Lowest and highest failing rank.
    pub ranks: (i32, i32),
    /// The failing call: of the calls that failed anywhere, the one listed
    /// first in the tool's table (or a local failure).
    pub call: String,
    /// The smallest error class among the failing ranks, with the
    /// library's text for it.
    pub class: Option<(i32, String)>,
    /// This rank's own failure, if it failed.
    pub mine: Option<Failure>,
}

impl FailedOn {
    /// This rank's own failure, not agreed with anyone.
    pub fn local(rank: i32, message: &str) -> FailedOn {
        FailedOn {
            ranks: (rank, rank),
            call: LOCAL.to_string(),
            class: None,
            mine: Some(Failure {
                call: LOCAL.to_string(),
                class: None,
                message: message.to_string(),
            }),
        }
    }
}

impl std::fmt::Display for FailedOn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (lo, hi) = self.ranks;
        let ranks = if lo == hi {
            format!("rank {lo}")
        } else {
            format!("ranks {lo}-{hi}")
        };
        match &self.mine {
            Some(m) => write!(f, "{} (failed on {ranks})", m.message)?,
            None if self.call == LOCAL => write!(
                f,
                "it could not start on {ranks} (their standard error says why)"
            )?,
            None => write!(f, "{} failed on {ranks}", self.call)?,
        }
        match &self.class {
            Some((_, text)) if self.mine.is_none() => write!(f, ": {text}")?,
            // Failed without an error class (e.g. a null result).
            None if self.mine.is_none() && self.call != LOCAL => {
                let whose = if lo == hi { "its" } else { "their" };
                write!(f, " ({whose} standard error says how)")?;
            }
            _ => {}
        }
        Ok(())
    }
}

/// A sequence of the tool's collectives over one communicator, which every
/// rank of it goes through in the same order (see the module docs).
#[derive(Debug)]
pub struct Collectives {
    comm: Comm,
    rank: i32,
    failure: Option<Failure>,
    mixed: Option<MixedOp>,
}

impl Collectives {
    /// A sequence over `comm`, on which this process has rank `rank` (for
    /// messages). The communicator's error handler must return: a private
    /// communicator of collective tuning, or one inside an [`ErrorsReturn`].
    pub fn new(comm: Comm, rank: i32) -> Collectives {
        Collectives {
            comm,
            rank,
            failure: None,
            mixed: None,
        }
    }

    /// A sequence over `comm` that carries the failure `pending` (one that
    /// no agreement has told the other ranks yet).
    pub fn resume(comm: Comm, rank: i32, pending: Option<Failure>) -> Collectives {
        Collectives {
            comm,
            rank,
            failure: pending,
            mixed: None,
        }
    }

    /// Ends the sequence, returning a failure not yet agreed on.
    pub fn into_pending(self) -> Option<Failure> {
        self.failure
    }

    /// Makes the type and operation of [`Collectives::reduce_mixed`] (local
    /// calls), as a step of the sequence: before the agreement that must
    /// hear of a rank that could not.
    pub fn prepare_mixed(&mut self) {
        if self.mixed.is_none() {
            let made = ffi::mixed_op_create();
            let call = called(&made, "MPI_Op_create");
            self.mixed = self.step(call, made);
        }
    }

    /// Hands the mixed reductions' type and operation over (to a later
    /// sequence, [`Collectives::with_mixed`]).
    pub fn take_mixed(&mut self) -> Option<MixedOp> {
        self.mixed.take()
    }

    /// The sequence with `mixed` for its mixed reductions.
    pub fn with_mixed(mut self, mixed: Option<MixedOp>) -> Collectives {
        self.mixed = mixed;
        self
    }

    /// Frees the mixed reductions' type and operation (local calls).
    pub fn release_mixed(&mut self) -> Result<()> {
        self.mixed.take().map_or(Ok(()), ffi::mixed_op_free)
    }

    /// The communicator.
    pub fn comm(&self) -> Comm {
        self.comm
    }

    /// This rank in it.
    pub fn rank(&self) -> i32 {
        self.rank
    }

    /// This rank's failure not yet agreed on, if any.
    pub fn failure(&self) -> Option<&Failure> {
        self.failure.as_ref()
    }

    /// Takes this rank's failure (its caller tells it otherwise than by
    /// an agreement).
    pub fn take_failure(&mut self) -> Option<Failure> {
        self.failure.take()
    }

    /// Whether this rank has a failure not yet agreed on.
    pub fn failed(&self) -> bool {
        self.failure.is_some()
    }

    /// Records a failure of this rank (the first one is kept); the rank
    /// goes on with the sequence.
    pub fn fail(&mut self, call: &str, e: &Error) {
        if self.failure.is_none() {
            self.failure = Some(Failure::from_error(call, e));
        }
    }

    /// Records a failure that is not an MPI call's (the rank goes on).
    pub fn fail_local(&mut self, message: impl Into<String>) {
        if self.failure.is_none() {
            self.failure = Some(Failure {
                call: LOCAL.to_string(),
                class: None,
                message: message.into(),
            });
        }
    }

    /// Keeps the error of a step, if any, and returns its value.
    pub fn step<T>(&mut self, call: &str, r: Result<T>) -> Option<T> {
        match r {
            Ok(v) => Some(v),
            Err(e) => {
                self.fail(call, &e);
                None
            }
        }
    }

    /// `MPI_Bcast` of bytes from `root`; whether this call succeeded.
    pub fn bcast_bytes(&mut self, buf: &mut [u8], root: i32) -> bool {
        let r = ffi::bcast_bytes(self.comm, buf, root);
        self.step("MPI_Bcast", r).is_some()
    }

    /// Element-wise `MPI_SUM` of doubles onto `root`.
    pub fn reduce_sum(&mut self, send: &[f64], recv: &mut [f64], root: i32) {
        let r = ffi::reduce_sum(self.comm, send, recv, root);
        self.step("MPI_Reduce", r);
    }

    /// Element-wise reduction of `i64`s to every rank.
    pub fn allreduce_i64(&mut self, send: &[i64], recv: &mut [i64], op: ReduceOp) {
        let r = ffi::allreduce_i64(self.comm, send, recv, op);
        self.step("MPI_Allreduce", r);
    }

    /// [`Collectives::allreduce_i64`] without `MPI_Allreduce`: an
    /// `MPI_Reduce` onto rank 0 and an `MPI_Bcast` of its result. For
    /// agreeing while this rank's allreduce algorithm may not be its
    /// peers' (a library reads its algorithm variable in every
    /// allreduce, the tool's own too).
    pub fn reduce_bcast_i64(&mut self, send: &[i64], recv: &mut [i64], op: ReduceOp) {
        let r = ffi::reduce_i64(self.comm, send, recv, op, 0);
        self.step("MPI_Reduce", r);
        let mut bytes: Vec<u8> = recv.iter().flat_map(|x| x.to_ne_bytes()).collect();
        if self.bcast_bytes(&mut bytes, 0) {
            for (x, b) in recv.iter_mut().zip(bytes.chunks_exact(8)) {
                *x = i64::from_ne_bytes(b.try_into().unwrap_or_default());
            }
        }
    }

    /// A reduction of elements each with its own operation ([`Mixed`]) to
    /// every rank (`root` `None`) or onto `root` (elsewhere the result is
    /// `send` as it was). One call whatever the mix: what several
    /// reductions of basic operations would need.
    pub fn reduce_mixed(&mut self, send: &[Mixed], root: Option<i32>) -> Vec<Mixed> {
        let mut recv = send.to_vec();
        let r = match &self.mixed {
            Some(m) => ffi::reduce_mixed(self.comm, m, send, &mut recv, root),
            None => Err(not_prepared()),
        };
        let call = if root.is_some() {
            "MPI_Reduce"
        } else {
            "MPI_Allreduce"
        };
        self.step(called(&r, call), r);
        if root.is_some_and(|r| r != self.rank) {
            recv.copy_from_slice(send);
        }
        recv
    }

    /// Gathers `send` (the same length on every rank) of the `size` ranks
    /// onto `root`, in rank order; empty elsewhere.
    pub fn gather_bytes(&mut self, send: &[u8], size: usize, root: i32) -> Vec<u8> {
        let mut recv = if self.rank == root {
            vec![0u8; send.len().saturating_mul(size)]
        } else {
            Vec::new()
        };
        let r = ffi::gather_bytes(self.comm, send, &mut recv, root);
        self.step("MPI_Gather", r);
        recv
    }

    /// Whether `x` is the same on every rank (one reduction). After a
    /// failed call the answer is yes: the agreement that must follow fails.
    pub fn all_equal(&mut self, x: i64) -> bool {
        let mut ends = [0i64; 2];
        self.allreduce_i64(&[x, !x], &mut ends, ReduceOp::Min);
        self.failed() || ends[0] == !ends[1]
    }

    /// Ends a stage: every rank learns whether every rank's calls since the
    /// last agreement succeeded. A failure all ranks agreed on is cleared
    /// (every rank knows it); a failure of the agreement itself is kept for
    /// the next one.
    pub fn agree(&mut self) -> Verdict {
        self.agree_with(&[]).0
    }

    /// [`Collectives::agree`] that carries `payload` in the same reduction
    /// (one call for what would be an agreement and a reduction): the
    /// verdict, and the payload reduced over every rank. When the call
    /// fails here, what the library wrote all the same (a library that
    /// reports an error after taking part, as the faults tests' does,
    /// filled it, and the other ranks go on with the same), else the
    /// payload as this rank sent it. The payload's length and operations
    /// must be the same on every rank.
    pub fn agree_with(&mut self, payload: &[Mixed]) -> (Verdict, Vec<Mixed>) {
        self.agree_as(payload, false)
    }

    /// [`Collectives::agree_with`] for the start agreement, whose call no
    /// collective algorithm variable may select: collective tuning tries
    /// its candidates before it (writing a variable, reading it back,
    /// writing the default back), and a rank that cannot write the default
    /// back holds another algorithm than its peers until this agreement
    /// has told them. Where the library reads its algorithm variables in
    /// every call (MPICH's ABI: `MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM` in
    /// every `MPI_Allreduce`) the agreement is an `MPI_Iallreduce` and an
    /// `MPI_Wait`, whose schedule no such variable chooses (MPICH drops its
    /// progress hook for nonblocking collectives once none is left, so
    /// nothing stays behind). With Open MPI's header it stays an
    /// `MPI_Allreduce`: coll/tuned reads its forced algorithms when a
    /// communicator is made, not per call, and Open MPI 4.1's first
    /// nonblocking collective would add libnbc's progress function to every
    /// progress loop for the rest of the run (see [`crate::ffi`]'s
    /// `comm_private`); with MVAPICH2's too: MVAPICH2 2.3.7 reads its
    /// algorithm variables at start only (nothing is tuned online), and its
    /// nonblocking allreduce shows in its own PVARs (`mv2_coll_ibcast_*`,
    /// root and leaves apart), which the tool samples as the
    /// application's. Only minimums (`MPI_MIN`, a basic operation). Every
    /// rank must call the same one: the choice is the build's header, the
    /// same for every process of a job.
    pub fn agree_start(&mut self, payload: &[Mixed]) -> (Verdict, Vec<Mixed>) {
        self.agree_as(payload, ffi::start_agreement_nonblocking())
    }

    fn agree_as(&mut self, payload: &[Mixed], nonblocking: bool) -> (Verdict, Vec<Mixed>) {
        let mine = self.failure.as_ref();
        let send: Vec<Mixed> = vote(self.rank, mine)
            .into_iter()
            .map(Mixed::min)
            .chain(payload.iter().copied())
            .collect();
        let mut got = send.clone();
        let r = if send.iter().all(|m| m.op == Mixed::MIN) {
            // Minimums only (the start agreement): a basic operation.
            let ints: Vec<i64> = send.iter().map(|m| m.a).collect();
            // As sent, unless the library writes it.
            let mut out = ints.clone();
            let r = if nonblocking {
                ffi::iallreduce_i64(self.comm, &ints, &mut out, ReduceOp::Min)
            } else {
                ffi::allreduce_i64(self.comm, &ints, &mut out, ReduceOp::Min)
            };
            for (g, v) in got.iter_mut().zip(out) {
                g.a = v;
            }
            r
        } else if nonblocking {
            Err(Error::BadValue {
                variable: "reduction".into(),
                message: "the start agreement carries minimums only".into(),
            })
        } else {
            match &self.mixed {
                Some(m) => ffi::reduce_mixed(self.comm, m, &send, &mut got, None),
                None => Err(not_prepared()),
            }
        };
        let reduced = got.split_off(4);
        let recv = [got[0].a, got[1].a, got[2].a, got[3].a];
        match r {
            Ok(()) => {}
            Err(e) => {
                // What the others decided is unknown here: go on as they
                // most likely do, and tell them at the next agreement.
                // A rank that voted "no" stops: the others saw its vote, if
                // the call got anywhere.
                let call = match &e {
                    Error::Mpi(m) => m.call,
                    _ if nonblocking => "MPI_Iallreduce",
                    _ => "MPI_Allreduce",
                };
                let verdict = if mine.is_some() {
                    Verdict::Failed(FailedOn {
                        ranks: (self.rank, self.rank),
                        call: call.into(),
                        class: None,
                        mine: self.failure.take(),
                    })
                } else {
                    self.fail(call, &e);
                    Verdict::AllOk
                };
                return (verdict, reduced);
            }
        }
        let verdict = tally(&recv, self.failure.take(), |c| {
            ffi::error_string(c).unwrap_or_else(|| format!("error class {c}"))
        });
        (verdict, reduced)
    }
}

/// A mixed reduction asked of a sequence without its operation: a bug of
/// the caller (the same on every rank, so no rank waits for another).
fn not_prepared() -> Error {
    Error::BadValue {
        variable: "reduction".into(),
        message: "the mixed reduction's operation was not made (prepare_mixed)".into(),
    }
}

/// The MPI routine that failed in `r` (a step may fail in a routine it
/// makes before or after its collective: creating or freeing a type or an
/// operation), else `default`.
fn called<T>(r: &Result<T>, default: &'static str) -> &'static str {
    match r {
        Err(Error::Mpi(m)) => m.call,
        _ => default,
    }
}

/// No failure, in a vote: the largest value, so that a MIN reduction keeps
/// any failure.
const NONE: i64 = i64::MAX;

/// One rank's vote at an agreement ([`Collectives::agree`]): four integers that
/// every rank reduces with `MPI_MIN`, then reads with [`tally`]. Its rank
/// (and its negation, so that the minimum gives the highest failing rank
/// too), the position of its failed call in [`CALLS`] (the first listed
/// wins), its error class. Public so that a simulated world of ranks
/// (tuner-core's tests) votes the way real ranks do.
pub fn vote(rank: i32, failure: Option<&Failure>) -> [i64; 4] {
    let call_id = failure.map(|f| {
        CALLS
            .iter()
            .position(|c| *c == f.call)
            .unwrap_or(CALLS.len())
    });
    [
        failure.map_or(NONE, |_| i64::from(rank)),
        failure.map_or(NONE, |_| -i64::from(rank)),
        call_id.map_or(NONE, |c| c as i64),
        failure.and_then(|f| f.class).map_or(NONE, i64::from),
    ]
}

/// What the votes of every rank, reduced with `MPI_MIN`, say: every rank
/// succeeded, or which failed and how (`describe` gives the text of an
/// error class). `mine` is this rank's own failure, kept in the verdict.
pub fn tally(
    reduced: &[i64; 4],
    mine: Option<Failure>,
    describe: impl Fn(i32) -> String,
) -> Verdict {
    if reduced[0] == NONE {
        return Verdict::AllOk;
    }
    let call = usize::try_from(reduced[2])
        .ok()
        .and_then(|i| CALLS.get(i))
        .map_or(LOCAL, |c| *c)
        .to_string();
    let class = (reduced[3] != NONE)
        .then(|| i32::try_from(reduced[3]).ok())
        .flatten()
        .map(|c| (c, describe(c)));
    Verdict::Failed(FailedOn {
        ranks: (
            i32::try_from(reduced[0]).unwrap_or(-1),
            i32::try_from(-reduced[1]).unwrap_or(-1),
        ),
        call,
        class,
        mine,
    })
}

/// [`tally`] of votes reduced elsewhere (gathered onto one rank and reduced
/// there), with the library's texts of error classes.
pub fn tally_votes(reduced: &[i64; 4]) -> Verdict {
    tally(reduced, None, |c| {
        ffi::error_string(c).unwrap_or_else(|| format!("error class {c}"))
    })
}

/// The minimum and maximum of a value across ranks, with the lowest rank
/// that holds each.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Extremes {
    /// Smallest value.
    pub min: f64,
    /// Lowest rank holding it.
    pub min_rank: i32,
    /// Largest value.
    pub max: f64,
    /// Lowest rank holding it.
    pub max_rank: i32,
}

/// An `i64` whose order is the order of the doubles (IEEE 754 total order;
/// NaN excluded by the callers).
pub fn order_key(x: f64) -> i64 {
    let bits = x.to_bits() as i64;
    if bits < 0 {
        bits ^ i64::MAX
    } else {
        bits
    }
}

/// The double of an [`order_key`].
pub fn from_order_key(k: i64) -> f64 {
    let bits = if k < 0 { k ^ i64::MAX } else { k };
    f64::from_bits(bits as u64)
}

/// The key that orders like the negated value (so that a maximum comes out
/// of `MPI_MIN`); never `i64::MAX`, the "absent" marker.
pub fn neg_key(k: i64) -> i64 {
    // order_key maps doubles into [i64::MIN + 1, i64::MAX - 0x000f_ffff_ffff_ffff]
    // and back; bitwise not is an order-reversing involution on i64.
    !k
}

/// `MPI_ERRORS_RETURN` on a communicator the tool shares with the
/// application (`MPI_COMM_WORLD` inside `MPI_Init`), for the life of the
/// guard; the application's handler is put back when it is dropped.
#[derive(Debug)]
pub struct ErrorsReturn {
    comm: Comm,
    old: Option<crate::handle::Errhandler>,
}

impl ErrorsReturn {
    /// Swaps the handler in. If that fails, the error comes back with the
    /// guard: the communicator keeps its handler and calls on it may still
    /// end the job, so the caller must vote "no" at the next agreement.
    pub fn swap_in(comm: Comm) -> (ErrorsReturn, Option<Error>) {
        match ffi::swap_in_errors_return(comm) {
            Ok(old) => (
                ErrorsReturn {
                    comm,
                    old: Some(old),
                },
                None,
            ),
            Err(e) => (ErrorsReturn { comm, old: None }, Some(e)),
        }
    }

    /// Puts the application's handler back now; an error doing so is
    /// returned (and the guard does nothing more when dropped).
    pub fn restore(mut self) -> Result<()> {
        match self.old.take() {
            Some(old) => ffi::restore_errhandler(self.comm, old),
            None => Ok(()),
        }
    }
}

impl Drop for ErrorsReturn {
    fn drop(&mut self) {
        if let Some(old) = self.old.take() {
            if let Err(e) = ffi::restore_errhandler(self.comm, old) {
                // Nowhere to log from a drop: the standard error of this
                // rank names it (rare: a library refusing its own handler).
                crate::say_always!(
                    "mpit-tuner: while putting the application's error handler back: {e}"
                );
            }
        }
    }
}

/// Creates the tool's private communicator over all processes of `parent`
/// (see `ffi::comm_private`) with `MPI_ERRORS_RETURN`, as one step of
/// `seq` (which must run on `parent`).
pub fn create_private(seq: &mut Collectives, parent: Comm) -> Option<PrivateComm> {
    let private = match PrivateComm::create(parent) {
        Ok(c) => c,
        Err(e) => {
            let call = match &e {
                Error::Mpi(m) => m.call,
                _ => "MPI_Comm_create_group",
            };
            seq.fail(call, &e);
            return None;
        }
    };
    if let Err(e) = ffi::set_errors_return(private.comm()) {
        seq.fail("MPI_Comm_set_errhandler", &e);
    }
    Some(private)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mixed_elements_combine_by_their_own_operation() {
        let ranks = [
            [
                Mixed::min(7),
                Mixed::sum(1),
                Mixed::min_pair(order_key(2.5), 0),
            ],
            [
                Mixed::min(3),
                Mixed::sum(0),
                Mixed::min_pair(order_key(-1.0), 1),
            ],
            [
                Mixed::min(5),
                Mixed::sum(1),
                Mixed::min_pair(order_key(-1.0), 2),
            ],
        ];
        // Any order of combination gives the same result (commutative
        // and associative, as the user-defined operation is declared).
        for order in [[0, 1, 2], [2, 1, 0], [1, 2, 0]] {
            let mut acc = ranks[order[0]];
            for &r in &order[1..] {
                for (a, x) in acc.iter_mut().zip(&ranks[r]) {
                    a.combine(x);
                }
            }
            assert_eq!(acc[0].a, 3);
            assert_eq!(acc[1].a, 2);
            assert_eq!((from_order_key(acc[2].a), acc[2].b), (-1.0, 1));
        }
        assert_eq!(std::mem::size_of::<Mixed>(), 24);
    }

    #[test]
    fn order_keys_order_like_the_doubles() {
        let xs = [
            f64::NEG_INFINITY,
            -1e300,
            -2.5,
            -0.0,
            0.0,
            1e-300,
            3.0,
            1e300,
            f64::INFINITY,
        ];
        for w in xs.windows(2) {
            assert!(order_key(w[0]) <= order_key(w[1]), "{w:?}");
            assert!(
                neg_key(order_key(w[0])) >= neg_key(order_key(w[1])),
                "{w:?}"
            );
        }
        for x in xs {
            assert_eq!(from_order_key(order_key(x)).to_bits(), x.to_bits());
            assert_eq!(neg_key(neg_key(order_key(x))), order_key(x));
            assert_ne!(order_key(x), i64::MAX);
            assert_ne!(neg_key(order_key(x)), i64::MAX);
        }
    }

    #[test]
    fn failures_read_well() {
        let f = FailedOn {
            ranks: (0, 3),
            call: "MPI_Reduce".into(),
            class: Some((7, "Invalid MPI_Op".into())),
            mine: None,
        };
        assert_eq!(
            f.to_string(),
            "MPI_Reduce failed on ranks 0-3: Invalid MPI_Op"
        );
        let f = FailedOn {
            ranks: (2, 2),
            mine: Some(Failure {
                call: "MPI_Bcast".into(),
                class: None,
                message: "MPI_Bcast failed with MPI_ERR_OTHER".into(),
            }),
            ..f
        };
        assert_eq!(
            f.to_string(),
            "MPI_Bcast failed with MPI_ERR_OTHER (failed on rank 2)"
        );
        // No error class (a null result): where to read more.
        let f = FailedOn {
            call: "MPI_Comm_create_group".into(),
            class: None,
            mine: None,
            ..f
        };
        assert_eq!(
            f.to_string(),
            "MPI_Comm_create_group failed on rank 2 (its standard error says how)"
        );
    }
}
