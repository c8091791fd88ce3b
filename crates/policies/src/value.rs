//! What the runtime feeds into an evaluation: variable values and the rank's environment.

use std::fmt;
use std::time::Duration;

/// Index of a variable in [`PolicySet::variables`](crate::PolicySet::variables).
///
/// Slots are assigned once, when the file is loaded. The runtime binds each
/// slot to an MPI_T handle (or a tool metric) and answers
/// [`Values::get`] with the slot's latest sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct VarSlot(pub(crate) u32);

impl VarSlot {
    /// The slot as an index into [`PolicySet::variables`](crate::PolicySet::variables).
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for VarSlot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "slot {}", self.0)
    }
}

/// A sampled value: one number, or an array of numbers (array PVARs and
/// CVARs with more than one element).
///
/// Integers are given as `f64`; counters up to 2^53 are exact.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value<'a> {
    /// A single number.
    Scalar(f64),
    /// An array of numbers (one per element of the MPI_T variable).
    Array(&'a [f64]),
}

impl Value<'_> {
    /// The numbers of this value: one for a scalar.
    pub fn as_slice(&self) -> &[f64] {
        match self {
            Value::Scalar(x) => std::slice::from_ref(x),
            Value::Array(a) => a,
        }
    }
}

impl fmt::Display for Value<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Scalar(x) => write!(f, "{x}"),
            Value::Array(a) => {
                write!(f, "[")?;
                for (i, x) in a.iter().enumerate() {
                    if i > 0 {
                        write!(f, ", ")?;
                    }
                    write!(f, "{x}")?;
                }
                write!(f, "]")
            }
        }
    }
}

/// The source of variable values for one evaluation, implemented by the
/// runtime (live MPI_T samples) and by the replay backend (recorded logs).
///
/// Return `None` when the variable has no value now (not bound, not yet
/// sampled, read failed): the policy is then skipped with
/// [`Skip::Missing`](crate::Skip::Missing).
pub trait Values {
    /// The latest value of the variable bound to `slot`.
    fn get(&self, slot: VarSlot) -> Option<Value<'_>>;
}

/// A value source with no values at all (every variable is missing).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoValues;

impl Values for NoValues {
    fn get(&self, _slot: VarSlot) -> Option<Value<'_>> {
        None
    }
}

/// The rank's environment for one evaluation: the built-ins `rank`, `size`
/// and `time` of the expression language.
///
/// `elapsed` is the time since the tuner started in this rank; tests and the
/// replay backend pass a fake clock here.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Env {
    /// This process' rank in `MPI_COMM_WORLD` (in phase pre-init: as announced by the launcher).
    pub rank: u32,
    /// Number of ranks in `MPI_COMM_WORLD`.
    pub size: u32,
    /// Time since the tuner started in this rank.
    pub elapsed: Duration,
}

impl Env {
    /// An environment for `rank` of `size` at `elapsed` since start.
    pub fn new(rank: u32, size: u32, elapsed: Duration) -> Env {
        Env {
            rank,
            size,
            elapsed,
        }
    }
}
