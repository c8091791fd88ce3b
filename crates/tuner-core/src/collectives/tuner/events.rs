//! What the tuner tells the helper thread, for the log.

use super::*;

/// What happened, for the log: the same on every rank of the communicator
/// but for `t`.
#[derive(Debug, Clone, PartialEq)]
pub struct TuneEvent {
    /// Seconds since the tuner started.
    pub t: f64,
    /// The communicator's label (the same on all its ranks).
    pub comm: u64,
    /// Its size.
    pub comm_size: i32,
    /// The collective (None for events of the communicator).
    pub collective: Option<Collective>,
    /// The size bin.
    pub bin: usize,
    /// What happened.
    pub what: What,
}

/// What a [`TuneEvent`] says.
#[derive(Debug, Clone, PartialEq)]
pub enum What {
    /// A search event, with the names of the candidates it mentions.
    Search(Event),
    /// The communicator could not be set up for tuning (on every rank).
    SetupFailed(String),
    /// This rank's reduction at an agreed point failed: tuning stopped here.
    ReductionFailed(String),
    /// The library refused a write of the algorithm variable.
    WriteFailed(String),
    /// The application wrote a variable the tuner writes around calls:
    /// the tuner leaves it alone from now on.
    ApplicationWrote(String),
    /// Two threads were in collectives at once.
    Concurrent,
    /// A candidate is not tried on this communicator (the same on every
    /// rank): why.
    Excluded(String),
    /// A call on a candidate communicator failed: tuning stops on this
    /// rank, and the application's error handler saw the error.
    CallFailed(String),
    /// The search starts from the tuning store's `candidate`
    /// ([`crate::collectives::Search::warm`]); `note`: where it was learned.
    Stored {
        /// The store's choice.
        candidate: usize,
        /// Which store, when, where it was learned.
        note: String,
    },
}
