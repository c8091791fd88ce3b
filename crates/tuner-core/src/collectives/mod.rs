//! Online collective tuning: the library's algorithm for a collective is
//! chosen per (communicator, collective, message-size bin), on the
//! application's own calls, and changed only at calls that every rank of
//! the communicator reaches in the same order.
//!
//! The algorithm variables are ALL_EQ: every rank of a communicator must
//! use the same value in the same call. So no helper thread and no single
//! rank ever decides them. The interposer calls [`before`] and [`after`]
//! around each blocking collective; a [`Search`] per key
//! counts the calls (the same count on every rank: MPI orders a
//! communicator's collectives, and the size bin is the same everywhere),
//! and at the end of each window of calls one reduction on a private
//! communicator derived from the application's combines the ranks'
//! measurements, so that every rank feeds the same numbers to the same
//! deterministic search.
//!
//! Steady state costs a lookup and a compare per call where the default
//! won; where another algorithm won, the variable is written through MPI_T
//! before the call and the default written back after it, because the
//! library's internal collectives (context ids of new communicators,
//! `MPI_Finalize`, the tool's own reductions) read the same process-wide
//! variable. Calls on communicators or sizes not tuned run with the
//! default.
//!
//! Only libraries whose algorithm variables take effect at the next call
//! are tuned online (see [`support`]); for the others the run says so and
//! points to tuning across runs.
//!
//! # MPI behind one trait
//!
//! Every MPI call the tuner makes of its own goes through [`TuningMpi`]:
//! rank, size and intercommunicator test of a communicator, errors returned
//! on it, the tool's collectives over it ([`Sequence`]: broadcast,
//! reductions of a few `i64`, the agreement), the private communicator
//! derived from it ([`TuningComm`]), the algorithm variables
//! ([`AlgorithmVar`]), the clock of the agreed points and the lines said on
//! standard error. The process's tuner runs [`RealMpi`], whose methods are
//! the `mpit` calls; [`Tuner`] is generic over the trait and monomorphised,
//! so a call costs what it costs with direct calls. The unit tests
//! (`tests/`) implement the trait over a simulated world of ranks that are
//! threads of one process, whose collectives meet whatever the schedule:
//! the table of communicators under several threads, and the agreed
//! protocol of up to 64 ranks with scripted call times and injected
//! failures, which must leave every rank with the same decisions at the
//! same calls.
//!
//! # A user's choice while the job runs
//!
//! `mpit-tuner set RUN_DIR MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM=recursive_doubling`
//! is the one way to change an ALL_EQ variable while the job runs, and only
//! for the algorithm variables this tuner drives:
//! ```text
//! helper thread (control.rs, its own moment on each rank)
//!   -> checks: tuning runs (not measuring), drives this variable, the
//!      value is one of its candidates (name or number), no --ranks/--hosts
//!   -> Tuner::request_pin: the collective's atomic slot := key(id) << 5 | candidate
//!   -> `control` answer: applied at the next agreed point (nothing switched yet)
//! app thread, at an agreed point of that collective on a communicator
//!   -> the slot rides in the reduction already made there: MAX(slot), MAX(-slot)
//!   -> equal (every rank holds the same request): every search of that
//!      collective on the communicator is pinned to the candidate, here,
//!      on every rank: `pinned` records (request id, calls before it)
//!   -> from the next call on the candidate runs every call; searching
//!      stops; the first point after it logs `held` (calls since, time)
//! ```
//! No rank decides alone and the helper never writes the variable: the pin
//! is decided from reduced data at a call every rank of the communicator
//! reaches in the same order. Ranks that hold different requests (one
//! arrived late) wait for the next point. The slot stays set, so later
//! points of other communicators, and communicators created later, pin to
//! the same choice. A `set` of the default's name (`auto`) pins the
//! default; searching does not resume in this run.

mod bins;
mod exact;
mod library;
mod mpi;
pub mod search;
#[cfg(test)]
mod tests;
mod tuner;

pub use bins::{bin_text, Bins};
pub use exact::exact_datatype;
pub use library::{
    algorithm_cvar, algorithm_variable, algorithms, left_out, mpich41_algorithms,
    mpich4_algorithms, mpich5_algorithms, mpich_algorithms, mpich_any_series_algorithms,
    mpich_cvar, mpich_fallback, mpich_fallback_name, mvapich2_algorithms, mvapich2_cvar,
    mvapich2_left_out, mvapich2_named, open_mpi_left_out, open_mpi_needs_commutative,
    open_mpi_unsuitable, openmpi_cvar, support, Collective, LibraryAlgorithms, Support, Target,
    COLLECTIVES, MPICH_FALLBACK_CVAR, MVAPICH2_DEFAULT, MVAPICH2_DEFAULT_NAME,
    OPENMPI_DYNAMIC_RULES_CVAR,
};
pub use mpi::{AlgorithmVar, RealMpi, Sequence, TuningComm, TuningMpi};
pub use search::{Agreed, Event, Params, Search, State, Why};
pub use tuner::{
    activate, after, after_quick, application_wrote, before, call_failed, comm_freeing, events,
    exact_only, on, prepare, quick, request_key, signature, started, stop, try_write, tuner,
    unclassified_call, write_cost, ByComms, CallKey, Fallback, Place, Quick, Ticket, TuneEvent,
    Tuner, Warm, What, MAX_COMMS,
};

use std::collections::BTreeMap;
use std::sync::{Mutex, OnceLock};
use vocab::record::{CollectiveEvent, CollectiveTuning, Record};
use vocab::summary::{CandidateTime, CollectiveOutcome};

/// What this process logged so far, folded (for summary.json).
static LOGGED: Mutex<Outcomes> = Mutex::new(Outcomes {
    map: BTreeMap::new(),
});

/// Why online tuning is off in this process, when it was asked for and
/// did not start (for the answers to a user's request).
static OFF: OnceLock<String> = OnceLock::new();

/// Records why online tuning did not start here (the first reason kept).
pub fn set_off_reason(why: String) {
    let _ = OFF.set(why);
}

/// Why online tuning did not start here, if it was asked for.
pub fn off_reason() -> Option<&'static str> {
    OFF.get().map(String::as_str)
}

/// An outcome's key: (communicator, collective, size bin).
pub type OutcomeKey = (String, String, Option<(u64, Option<u64>)>);

/// `collective` records folded, in log order, into the outcome of each
/// (communicator, collective, size bin) searched: what summary.json and
/// `mpit-tuner report` say about collective tuning.
#[derive(Debug, Default)]
pub struct Outcomes {
    map: BTreeMap<OutcomeKey, CollectiveOutcome>,
}

impl Outcomes {
    /// Folds one record in (records other than trials, decisions and
    /// pins are ignored).
    pub fn add(&mut self, r: &CollectiveTuning) {
        use CollectiveEvent::{Decision, Held, Left, Pinned, Trial};
        if !matches!(r.event, Trial | Decision | Left | Pinned | Held) {
            return;
        }
        let Some(collective) = &r.collective else {
            return;
        };
        let o = self
            .map
            .entry((r.comm.clone(), collective.clone(), r.bin))
            .or_insert_with(|| CollectiveOutcome {
                comm: r.comm.clone(),
                comm_size: r.comm_size,
                collective: collective.clone(),
                bin: r.bin,
                default: None,
                chosen: None,
                default_us: None,
                chosen_us: None,
                chosen_value: None,
                gain: None,
                cost_us: 0.0,
                searches: 0,
                candidates: Vec::new(),
                pinned: None,
                pinned_by: None,
                from_store: false,
            });
        let algorithm = r.algorithm.clone().unwrap_or_default();
        if matches!(r.event, Pinned | Held) {
            // The user's choice, not a search result: `chosen` keeps what
            // the last search found.
            o.pinned = Some(algorithm);
            o.pinned_by = r.request.clone();
        } else if r.event == Trial {
            // A search measures the default first.
            o.default.get_or_insert_with(|| algorithm.clone());
            match o.candidates.iter_mut().find(|c| c.algorithm == algorithm) {
                Some(c) => {
                    c.time_us = r.time_us;
                    c.calls += r.calls.unwrap_or(0);
                    c.dropped = r.dropped;
                }
                None => o.candidates.push(CandidateTime {
                    algorithm,
                    time_us: r.time_us,
                    calls: r.calls.unwrap_or(0),
                    dropped: r.dropped,
                }),
            }
        } else {
            // Left alone, the default runs; a tuning store's choice kept
            // unconfirmed (`stored`) is not the default.
            if r.event == Left && !r.stored {
                o.default.get_or_insert_with(|| algorithm.clone());
            }
            o.chosen = Some(algorithm);
            o.chosen_value = r.value;
            o.from_store = r.stored;
            o.default_us = r.default_us;
            o.chosen_us = r.time_us;
            o.gain = match (r.default_us, r.time_us) {
                (Some(d), Some(c)) if c > 0.0 => Some(d / c),
                _ => None,
            };
            o.cost_us += r.cost_us.unwrap_or(0.0);
            // Left alone: the default kept, not searched.
            if r.event != Left {
                o.searches += 1;
            }
        }
    }

    /// The outcomes, by communicator, collective and bin.
    pub fn to_vec(&self) -> Vec<CollectiveOutcome> {
        self.map.values().cloned().collect()
    }
}

/// The outcomes of the records this process logged so far (through
/// [`record`]).
pub fn logged() -> Vec<CollectiveOutcome> {
    LOGGED.lock().unwrap_or_else(|e| e.into_inner()).to_vec()
}

/// The log record of `event` (names from the tuner this process started),
/// folded into what this process [`logged`].
pub fn record(event: &TuneEvent) -> Record<'static> {
    let r = make_record(event);
    if let Record::Collective(c) = &r {
        LOGGED.lock().unwrap_or_else(|e| e.into_inner()).add(c);
    }
    r
}

/// The record's event for `what`.
fn kind(what: &What) -> CollectiveEvent {
    match what {
        What::Search(Event::Trial { .. }) => CollectiveEvent::Trial,
        What::Search(Event::Decision { .. }) => CollectiveEvent::Decision,
        What::Search(Event::Left { .. }) => CollectiveEvent::Left,
        What::Search(Event::Recheck { .. }) => CollectiveEvent::Recheck,
        What::Search(Event::Measured { .. }) => CollectiveEvent::Measured,
        What::Search(Event::Pinned { .. }) => CollectiveEvent::Pinned,
        What::Search(Event::Held { .. }) => CollectiveEvent::Held,
        What::Search(Event::Stopped) => CollectiveEvent::Stopped,
        What::SetupFailed(_) => CollectiveEvent::SetupFailed,
        What::ReductionFailed(_) => CollectiveEvent::ReductionFailed,
        What::WriteFailed(_) => CollectiveEvent::WriteFailed,
        What::ApplicationWrote(_) => CollectiveEvent::ApplicationWrote,
        What::Excluded(_) => CollectiveEvent::Excluded,
        What::CallFailed(_) => CollectiveEvent::CallFailed,
        What::Concurrent => CollectiveEvent::Concurrent,
        What::Stored { .. } => CollectiveEvent::Stored,
    }
}

fn make_record(event: &TuneEvent) -> Record<'static> {
    let t = started();
    let mut r = CollectiveTuning::new(event.t, kind(&event.what));
    if event.comm_size != 0 {
        r.comm = format!("c{}.{}", event.comm >> 32, event.comm & 0xffff_ffff);
        r.comm_size = Some(event.comm_size);
    }
    r.collective = event.collective.map(|c| c.name().to_string());
    r.bin = match (event.collective, &event.what) {
        (Some(_), What::Search(_) | What::ReductionFailed(_) | What::Stored { .. }) => {
            t.map(|t| t.bins().range(event.bin))
        }
        _ => None,
    };
    // The algorithm the event names: its name and its variable's value.
    let candidate = match &event.what {
        What::Search(
            Event::Trial { candidate, .. }
            | Event::Decision { candidate, .. }
            | Event::Pinned { candidate, .. }
            | Event::Held { candidate, .. }
            | Event::Left { candidate, .. },
        )
        | What::Stored { candidate, .. } => Some(*candidate),
        // Measure mode measures the algorithm set at start.
        What::Search(Event::Measured { .. }) => Some(0),
        _ => None,
    };
    if let (Some(i), Some(c)) = (candidate, event.collective) {
        r.algorithm = t.and_then(|t| t.candidate_name(c, i)).map(str::to_string);
        r.value = t
            .and_then(|t| t.tuned().find(|x| x.collective == c))
            .and_then(|x| x.candidates.get(i))
            .map(|(_, v)| *v);
    }
    let request = |key: u64| t.and_then(|t| t.request_id(key));
    match &event.what {
        What::Search(Event::Trial {
            ns, calls, dropped, ..
        }) => {
            r.time_us = Some(ns / 1e3);
            r.calls = Some(*calls);
            r.dropped = *dropped;
        }
        What::Search(Event::Decision {
            default_ns,
            chosen_ns,
            cost_ns,
            stored,
            ..
        }) => {
            r.stored = *stored;
            r.time_us = Some(chosen_ns / 1e3);
            r.default_us = Some(default_ns / 1e3);
            r.cost_us = Some(cost_ns / 1e3);
        }
        What::Search(Event::Left {
            candidate,
            stored,
            stored_ns,
            default_ns,
            point_ns,
            cost_ns,
        }) => {
            r.stored = *stored;
            // The kept store's choice has no time of its own yet.
            r.time_us = (*candidate == 0).then_some(default_ns / 1e3);
            r.default_us = Some(default_ns / 1e3);
            r.cost_us = Some(cost_ns / 1e3);
            let algorithm = r.algorithm.as_deref().unwrap_or("?");
            let why = format!(
                "an agreed point between the ranks costs {:.1} us, more than {:.0} calls ({:.2} us \
                 each), which no window of at most {} calls keeps at {:.0}%",
                point_ns / 1e3,
                search::LEAVE_CALLS,
                default_ns / 1e3,
                search::MAX_WINDOW,
                search::AGREE_SHARE * 100.0
            );
            r.message = Some(if *stored {
                format!(
                    "the tuning store's {algorithm} runs unconfirmed: {why}, so no window \
                     confirms it against the default; the first timed check point measures it, \
                     and the default comes back if it is slower by the margin"
                )
            } else if *stored_ns > 0.0 {
                format!(
                    "the tuning store's choice measured {:.2} us a call at a check point, slower \
                     than the default's {:.2} us by more than the margin: the default {algorithm} \
                     runs from here, unsearched ({why})",
                    stored_ns / 1e3,
                    default_ns / 1e3
                )
            } else {
                format!(
                    "not searched: {why}; the library's default runs, and the search starts once \
                     a point costs less"
                )
            });
        }
        What::Search(Event::Recheck { why, ns }) => {
            r.time_us = Some(ns / 1e3);
            r.message = Some(
                match why {
                    Why::Drift => "the time per call drifted",
                    Why::Periodic => "periodic recheck",
                    Why::Tie => "the last search measured another algorithm within the margin of its choice: searched once more",
                    Why::Marginal => "the last search's choice beat the default by less than twice the margin: searched once more",
                    Why::Cheaper => "an agreed point now costs at most 82 calls: searched",
                    Why::Unconfirmed => "the tuning store's choice did not beat the default here by the margin: every algorithm is searched",
                }
                .into(),
            );
        }
        What::Search(Event::Measured { ns, calls }) => {
            r.time_us = Some(ns / 1e3);
            r.calls = Some(*calls);
        }
        What::Search(Event::Pinned {
            calls,
            request: key,
            ..
        }) => {
            let id = request(*key);
            r.calls = Some(*calls);
            r.message = Some(format!(
                "user request {}: {} from the next call on, on every rank of the communicator; searching stops",
                id.as_deref().unwrap_or("?"),
                r.algorithm.as_deref().unwrap_or("?"),
            ));
            r.request = id;
        }
        What::Search(Event::Held {
            ns,
            calls,
            request: key,
            ..
        }) => {
            r.calls = Some(*calls);
            r.time_us = (*ns > 0.0).then_some(ns / 1e3);
            r.message = Some(format!(
                "the pinned {} ran every one of the {calls} calls since the pin",
                r.algorithm.as_deref().unwrap_or("?"),
            ));
            r.request = request(*key);
        }
        What::Search(Event::Stopped) => {
            r.message = Some("a rank stopped tuning: the library's default from now on".into());
        }
        What::SetupFailed(why)
        | What::ReductionFailed(why)
        | What::WriteFailed(why)
        | What::ApplicationWrote(why)
        | What::Excluded(why)
        | What::CallFailed(why)
        | What::Stored { note: why, .. } => r.message = Some(why.clone()),
        What::Concurrent => {
            r.message = Some(
                "collectives were called from two threads at once: tuning stops on every rank at the next agreed point"
                    .into(),
            );
        }
    }
    Record::Collective(r)
}

/// Measure mode's record of a collective: the algorithm set at start
/// (`algorithm`, `value`) and every one its variable has.
pub fn algorithms_record(target: &Target, all: &[(String, i64)]) -> Record<'static> {
    let mut r = CollectiveTuning::new(0.0, CollectiveEvent::Algorithms);
    r.message = Some(target.cvar.name.clone());
    r.collective = Some(target.collective.name().to_string());
    r.algorithm = target.candidates.first().map(|(n, _)| n.clone());
    r.value = target.candidates.first().map(|(_, v)| *v);
    r.algorithms = all
        .iter()
        .map(|(name, value)| vocab::record::Algorithm {
            name: name.clone(),
            value: *value,
        })
        .collect();
    Record::Collective(r)
}

/// A record of the process (`start`, `off`, `skipped`) with a message.
pub fn note(t: f64, event: CollectiveEvent, message: String) -> Record<'static> {
    let mut r = CollectiveTuning::new(t, event);
    r.message = Some(message);
    Record::Collective(r)
}
