//! The process-wide tuner: the switchable collectives, a fixed table of
//! communicators with one [`Search`] per (collective, size bin), and the
//! hot-path entry points [`before`] and [`after`].
//!
//! A tuned call sets the variable before the call and puts the default
//! back right after it (see [`after`]): in steady state that is one lookup
//! and one compare when the default won, and two MPI_T writes around the
//! call when another algorithm did (four when MPICH's fallback variable
//! must be `silent` around it: [`Fallback`]).
//!
//! Nothing here blocks or allocates on a call in steady state: the table is
//! allocated when tuning starts, a communicator claims an entry with one
//! compare-and-swap, and its state is borrowed with `AtomicRefCell`, whose
//! failure to borrow never waits: it means two threads are in collectives
//! on one communicator (erroneous in MPI) and stops tuning. In steady state
//! (a decided search between its timed windows) a call does not borrow the
//! state: it takes one of the calls [`Search::quiet`] handed to its
//! entry's slot, with a plain load and store, and the search counts them
//! at its next call that times or ends a window. Calls on several
//! communicators from several threads at once stop it too, because the
//! algorithm variable is process-wide. A rank that stops keeps the agreed
//! choices until its peers learn of the stop at the next agreed point of
//! each communicator, so no call ever runs with different algorithms on
//! different ranks.
//!
//! A user's choice (`mpit-tuner set` of an algorithm variable the tuner
//! drives) reaches each rank's helper thread at its own moment, so the
//! helper only stores it in the collective's atomic slot
//! ([`Tuner::request_pin`]: the request's key and the candidate, one
//! `u64`). The slot goes into the reduction of every agreed point of that
//! collective, as its maximum and (negated) its minimum over ranks: only
//! when every rank of the communicator holds the same request do they pin
//! every search of that collective on the communicator, at that point,
//! together. A rank without it, or with a newer one, holds the pin back
//! until the ranks agree; the slot stays set, so communicators that reach
//! their points later, or are created later, pin too.

use super::library::{Collective, Target, COLLECTIVES};
use super::mpi::{AlgorithmVar, RealMpi, Sequence, TuningComm, TuningMpi};
use super::search::{Agreed, Event, Params, Search};
use atomic_refcell::{AtomicRefCell, AtomicRefMut};
use crossbeam_channel::{Receiver, Sender};
use mpit::collective::{FailedOn, ReduceOp, Verdict};
use mpit::quirks::LibraryVersion;
use mpit::{Comm, Cvar, CvarInfo, HandleBits, MpiT};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicU64, AtomicUsize, Ordering::*};
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

use super::bins::{bin_text, Bins};

mod agreed;
mod by_comms;
mod events;
mod fallback;
mod hot;
#[cfg(test)]
mod inspect;
mod process;
mod written;

pub use by_comms::*;
pub use events::*;
pub use fallback::*;
pub use hot::*;
#[cfg(test)]
pub(crate) use inspect::{Begun, Slot};
pub use process::*;
pub use written::*;

/// Communicators tuned at once; later ones run with the defaults.
pub const MAX_COMMS: usize = 64;
/// Events kept between two ticks of the helper (more are counted lost).
const EVENT_QUEUE: usize = 4096;
/// An entry whose communicator was freed while its state was in use.
const TOMBSTONE: u64 = u64::MAX;
/// A free entry.
const FREE: u64 = 0;

/// A switchable collective in this process.
struct Switch<V: AlgorithmVar> {
    target: Target,
    /// The library's default value (`target`'s candidate 0), kept here
    /// for the calls.
    default: i64,
    var: Written<V>,
    /// What a timed call that ran another value than the default is
    /// charged (ns): two writes of its variable and two of the fallback
    /// variable, if the tuner keeps one, at the cost per write measured at
    /// start ([`write_cost`]).
    switch_ns: u64,
    /// A user's pending choice: `key << 5 | candidate` (0: none), written
    /// by the helper thread, read at agreed points.
    pin: AtomicU64,
    /// [`ByComms`]: the candidates (bit `i`: candidate `i`) that run only
    /// calls with a commutative operation
    /// ([`crate::collectives::library::open_mpi_needs_commutative`]).
    commutative_only: u32,
}

/// One communicator's tuning.
struct CommState<M: TuningMpi> {
    /// Set up: label and private communicator agreed.
    ready: bool,
    /// Tuning is off on this communicator (setup failed everywhere, or a
    /// reduction failed here).
    off: bool,
    label: u64,
    /// This process's rank in the communicator, and its size.
    rank: i32,
    size: i32,
    private: Option<M::Private>,
    /// [`ByComms`]: the candidate communicators made so far, at
    /// `collective * stride + candidate` ([`Tuner::stride`]; candidate 0,
    /// the default, is the application's communicator).
    dups: Vec<Option<M::Private>>,
    /// One search per (collective, bin).
    searches: Vec<Search>,
    /// Per collective, the user's choice (a [`Switch`]'s `pin`) pinned on
    /// this communicator (0: none).
    pinned: [u64; COLLECTIVES.len()],
    /// Per search, the quiet calls handed to the entry's `quiet` slot
    /// when it was last filled (see [`Tuner::settle`]).
    given: Vec<u32>,
    /// The time this rank spent in the last agreed point here (ns), sent
    /// at the next one.
    point_ns: u64,
    /// The time this rank spent in the tool's other collectives here
    /// since the last agreed point (setup, candidate communicators; ns),
    /// sent at the next one.
    other_ns: f64,
}

struct Entry<M: TuningMpi> {
    bits: AtomicU64,
    state: AtomicRefCell<CommState<M>>,
    /// Per search, the steady state the wrapper may run without borrowing
    /// `state`: `candidate << 32 | calls left` ([`Search::quiet`]). Only
    /// the thread in the collective touches it, with a plain load and
    /// store (as `in_flight`); 0 sends the call the long way.
    quiet: Box<[AtomicU64]>,
    /// [`ByComms`]: the bits of each candidate communicator made so far,
    /// at the index of `CommState::dups` (0: none; the calls read them
    /// without borrowing `state`).
    dups: Box<[AtomicU64]>,
    /// Per collective, the size bin of its last call here (a plain store
    /// per call): the bin of a call whose size the library would not give
    /// ([`before`]).
    last_bin: [AtomicU32; COLLECTIVES.len()],
}

/// The arguments of a tuned call that fix its size, as the interposer
/// keys them (a predefined datatype's handle, the count, the operation's
/// handle; see [`quick`]): two calls of one collective with the same key
/// on the same communicator move the same bytes, so they fall in the same
/// size bin of the same entry.
pub type CallKey = [u64; 3];

/// No [`Recent`] call (its `slot`).
const NO_SLOT: u64 = u64::MAX;

/// A collective's last call that [`Tuner::before`] saw with a
/// [`CallKey`]: where its search is (`slot`: the entry's index `<< 32 |`
/// the search's), so that a call repeating it finds its steady state
/// with one comparison of the key instead of the size, class, entry and
/// bin lookups ([`Tuner::quick`]). Plain loads and stores, as
/// `in_flight`: tuning runs only below `MPI_THREAD_MULTIPLE`. Forgotten
/// when a call of the collective comes without a key, and when its
/// communicator is freed.
struct Recent {
    comm: AtomicU64,
    key: [AtomicU64; 3],
    bytes: AtomicU64,
    slot: AtomicU64,
}

impl Recent {
    fn new() -> Self {
        Recent {
            comm: AtomicU64::new(0),
            key: std::array::from_fn(|_| AtomicU64::new(0)),
            bytes: AtomicU64::new(0),
            slot: AtomicU64::new(NO_SLOT),
        }
    }
}

/// The tuner of this process: a `Tuner<RealMpi>` (the tests run it over a
/// simulated MPI, see [`TuningMpi`]).
pub struct Tuner<M: TuningMpi = RealMpi> {
    /// Every MPI call the tuner makes of its own.
    mpi: M,
    switches: Vec<Option<Switch<M::Var>>>,
    /// MPICH's fallback variable, when it must be `silent` around
    /// switched calls.
    fallback: Option<Fallback<M::Var>>,
    /// Open MPI: calls switch communicators instead of variables.
    by_comms: Option<ByComms<M::Var>>,
    /// [`ByComms`]: candidates per collective in an entry's `dups` (the
    /// most any tuned collective has).
    stride: usize,
    bins: Bins,
    params: Params,
    /// The fresh searches, one per (collective, bin), copied into an entry
    /// when a communicator claims it.
    fresh: Vec<Search>,
    entries: Box<[Entry<M>]>,
    high: AtomicUsize,
    /// 1 while a tuned collective runs. Set and cleared with a plain load
    /// and store, not a read-modify-write: tuning runs only below
    /// `MPI_THREAD_MULTIPLE`, where the MPI standard forbids two threads in
    /// MPI at once, so this catches an erroneous program (at one of its
    /// overlapping calls, if not at the first) without making every correct
    /// one pay two locked instructions per call.
    in_flight: AtomicU32,
    /// Per collective, its last keyed call ([`Tuner::quick`]).
    recent: [Recent; COLLECTIVES.len()],
    stop: AtomicBool,
    tx: Sender<TuneEvent>,
    rx: Receiver<TuneEvent>,
    lost: AtomicU64,
    /// Events queued (the tests check that none is lost uncounted).
    #[cfg(test)]
    sent: AtomicU64,
    world_rank: i32,
    labels: AtomicU64,
    /// The ids of the users' requests by key, for the log (the helper
    /// thread's only: never touched on a call).
    requests: Mutex<Vec<(u64, String)>>,
    /// The tuning store's choices the searches start from (the same on
    /// every rank), applied when a communicator of their size is set up.
    warm: Vec<Warm>,
}

/// A choice of the tuning store for the searches of one collective and
/// size bin on the communicators of one size
/// ([`crate::collectives::Search::warm`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Warm {
    /// The collective.
    pub collective: Collective,
    /// The size bin's index.
    pub bin: usize,
    /// The communicators' size.
    pub comm_size: i32,
    /// The stored choice (an index into the collective's candidates).
    pub candidate: usize,
    /// Where it was learned, for the `stored` record.
    pub note: String,
}

/// Bits of a pin slot that hold the candidate (candidates are fewer than
/// 32: [`crate::collectives::search::MAX_CANDIDATES`]).
const PIN_CANDIDATE_BITS: u32 = 5;

/// The key of a user's request: a hash of its id (the same on every rank,
/// never 0), in the 58 bits a pin slot leaves it.
pub fn request_key(id: &str) -> u64 {
    (fnv1a(id) & ((1 << (63 - PIN_CANDIDATE_BITS)) - 1)).max(1)
}

pub(crate) use crate::run::fnv1a;

impl<M: TuningMpi> std::fmt::Debug for Tuner<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tuner")
            .field("collectives", &self.tuned().collect::<Vec<_>>())
            .field("bins", &self.bins)
            .field("params", &self.params)
            .finish_non_exhaustive()
    }
}

impl<M: TuningMpi> Tuner<M> {
    /// [`signature`] of this tuner: what every rank must hold the same of.
    pub fn signature(&self) -> u64 {
        signature(self.tuned(), &self.bins, &self.params)
    }

    /// The collectives tuned, with their candidates (name, value).
    pub fn tuned(&self) -> impl Iterator<Item = &Target> {
        self.switches.iter().flatten().map(|s| &s.target)
    }

    /// The size bins.
    pub fn bins(&self) -> &Bins {
        &self.bins
    }

    /// The candidate names of `collective` (index 0 is the default).
    pub fn candidate_name(&self, collective: Collective, i: usize) -> Option<&str> {
        let s = self.switches.get(collective as usize)?.as_ref()?;
        s.target.candidates.get(i).map(|(n, _)| n.as_str())
    }

    /// The collective whose algorithm variable is `cvar`, if tuned here.
    pub fn driving(&self, cvar: &str) -> Option<&Target> {
        self.tuned().find(|t| t.cvar.name == cvar)
    }

    /// This rank failed at start after the start agreement's vote (`why`:
    /// that call, after taking part, or its log): it tunes with what the
    /// library returned, as its peers do, and stops at its first agreed
    /// point, where every rank stops with it.
    pub fn start_agreement_failed(&self, why: String) {
        self.stop.store(true, Release);
        self.tell(None, What::ReductionFailed(why));
    }

    /// Whether tuning stopped on this rank (a failed reduction or write,
    /// collectives from two threads): the defaults from the next agreed
    /// points on, and no pin ever again.
    pub fn stopped(&self) -> bool {
        self.stop.load(Acquire)
    }

    /// The mode it runs in: `measure`, `safe` or `all`.
    pub fn mode_name(&self) -> &'static str {
        match (self.params.measure, self.params.exact_only) {
            (true, _) => "measure",
            (false, true) => "safe",
            (false, false) => "all",
        }
    }

    /// Whether this tuner only measures (`MPIT_TUNER_COLLECTIVES=measure`).
    pub fn measuring(&self) -> bool {
        self.params.measure
    }

    /// Hands a user's choice of `candidate` (an index into the candidates
    /// of `collective`) to the agreed points, as request `id` (the helper
    /// thread calls it; the calls only read the slot). Replaces a pending
    /// one. Returns false when the collective is not tuned or the
    /// candidate is not one of its.
    pub fn request_pin(&self, collective: Collective, candidate: usize, id: &str) -> bool {
        let Some(switch) = self
            .switches
            .get(collective as usize)
            .and_then(Option::as_ref)
        else {
            return false;
        };
        if candidate >= switch.target.candidates.len() || self.params.measure {
            return false;
        }
        let key = request_key(id);
        {
            let mut ids = self.requests.lock().unwrap_or_else(|e| e.into_inner());
            if !ids.iter().any(|(k, _)| *k == key) {
                ids.push((key, id.to_string()));
            }
        }
        switch
            .pin
            .store((key << PIN_CANDIDATE_BITS) | candidate as u64, Release);
        true
    }

    /// The id of the request of `key` (for the log).
    pub fn request_id(&self, key: u64) -> Option<String> {
        let ids = self.requests.lock().unwrap_or_else(|e| e.into_inner());
        ids.iter()
            .find(|(k, _)| *k == key)
            .map(|(_, id)| id.clone())
    }

    /// Events that did not fit the queue between two ticks.
    pub fn lost_events(&self) -> u64 {
        self.lost.load(Relaxed)
    }

    /// Queues an event of a communicator for the log.
    fn emit(&self, comm: &CommState<M>, collective: Option<Collective>, bin: usize, what: What) {
        self.send(TuneEvent {
            t: self.mpi.elapsed().as_secs_f64(),
            comm: comm.label,
            comm_size: comm.size,
            collective,
            bin,
            what,
        });
    }

    /// A call on `entry` whose size the library would not give: the bin
    /// of the collective's last call there, and tuning stops (told once).
    #[cold]
    #[inline(never)]
    fn unsized_call(&self, entry: &Entry<M>, collective: Collective) -> usize {
        let bin =
            (entry.last_bin[collective as usize].load(Relaxed) as usize).min(self.bins.len() - 1);
        if !self.stop.swap(true, AcqRel) {
            let (lo, hi) = self.bins.range(bin);
            let range = bin_text(lo, hi);
            self.tell(
                Some(collective),
                What::CallFailed(format!(
                    "MPI_Type_size failed on this rank for the datatype of a call of {}: the call \
                     is counted in the size bin of the last {} on its communicator ({range}), \
                     and tuning stops on every rank at the next agreed point",
                    collective.name(),
                    collective.name()
                )),
            );
        }
        bin
    }

    /// Queues an event of this process (of no communicator) for the log.
    #[cold]
    fn tell(&self, collective: Option<Collective>, what: What) {
        self.send(TuneEvent {
            t: self.mpi.elapsed().as_secs_f64(),
            comm: 0,
            comm_size: 0,
            collective,
            bin: 0,
            what,
        });
    }

    fn send(&self, event: TuneEvent) {
        #[cfg(test)]
        self.sent.fetch_add(1, Relaxed);
        if self.tx.try_send(event).is_err() {
            self.lost.fetch_add(1, Relaxed);
        }
    }

    /// Adds the quiet calls of search `k` that ran since its slot was
    /// filled (the calls it had left are taken back: the next call goes
    /// the long way).
    #[inline]
    fn settle(entry: &Entry<M>, st: &mut CommState<M>, k: usize) {
        let given = st.given[k];
        if given == 0 {
            return;
        }
        let left = entry.quiet[k].load(Relaxed) as u32;
        entry.quiet[k].store(0, Relaxed);
        st.given[k] = 0;
        st.searches[k].count_quiet(given.saturating_sub(left));
    }

    /// [`Tuner::settle`] for every search of the entry.
    fn settle_all(entry: &Entry<M>, st: &mut CommState<M>) {
        for k in 0..st.searches.len() {
            Self::settle(entry, st, k);
        }
    }

    /// Fills the slot of search `k` from its state after a call.
    #[inline]
    fn refill(entry: &Entry<M>, st: &mut CommState<M>, k: usize) {
        let search = &st.searches[k];
        let calls = search.quiet();
        st.given[k] = calls;
        entry.quiet[k].store(((search.choice() as u64) << 32) | u64::from(calls), Relaxed);
    }

    /// Measure mode: the measurements of a communicator, for the log.
    fn emit_measurements(&self, st: &CommState<M>) {
        if !self.params.measure || !st.ready || st.off {
            return;
        }
        for (k, search) in st.searches.iter().enumerate() {
            if let Some(event) = search.measurement() {
                let collective = COLLECTIVES[k / self.bins.len()];
                self.emit(
                    st,
                    Some(collective),
                    k % self.bins.len(),
                    What::Search(event),
                );
            }
        }
    }

    /// The entry of `bits`, claimed if new. `None` when the table is full.
    /// (The entries in use are searched as one slice: one bounds check,
    /// not one per entry.)
    #[inline]
    fn entry(&self, comm: Comm) -> Option<(usize, &Entry<M>)> {
        let bits = comm.to_bits();
        let high = self.high.load(Acquire).min(self.entries.len());
        let found = self.entries[..high]
            .iter()
            .position(|e| e.bits.load(Acquire) == bits);
        found
            .or_else(|| self.claim(comm))
            .map(|i| (i, &self.entries[i]))
    }

    /// Claims a free entry for a new communicator. Intercommunicators are
    /// not tuned (their collectives' roots and groups work differently):
    /// `None`, and the call runs with the default.
    #[cold]
    fn claim(&self, comm: Comm) -> Option<usize> {
        if !matches!(self.mpi.is_inter(comm), Ok(false)) {
            return None;
        }
        let bits = comm.to_bits();
        for (i, e) in self.entries.iter().enumerate() {
            if e.bits.compare_exchange(FREE, bits, AcqRel, Acquire).is_ok() {
                let Ok(mut st) = e.state.try_borrow_mut() else {
                    // Only this thread can hold a FREE entry's state.
                    e.bits.store(TOMBSTONE, Release);
                    return None;
                };
                st.ready = false;
                st.off = false;
                st.label = 0;
                st.rank = 0;
                st.size = 0;
                st.dups.iter_mut().for_each(|d| *d = None);
                st.searches.clone_from(&self.fresh);
                st.pinned = [0; COLLECTIVES.len()];
                st.given.fill(0);
                drop(st);
                for q in e.quiet.iter().chain(e.dups.iter()) {
                    q.store(0, Relaxed);
                }
                for b in &e.last_bin {
                    b.store(0, Relaxed);
                }
                self.high.fetch_max(i + 1, AcqRel);
                return Some(i);
            }
        }
        None
    }

    /// Sets `collective`'s variable to `value` if it is not already (the
    /// compare inlined into the wrapper, the write not).
    #[inline(always)]
    fn set(&self, switch: &Switch<M::Var>, value: i64) {
        if !switch.var.holds(value) {
            self.write(switch, value);
        }
    }

    /// Writes `collective`'s variable; the fallback variable, if the
    /// tuner keeps one, is `silent` while the value is not the default.
    #[inline(never)]
    fn write(&self, switch: &Switch<M::Var>, value: i64) {
        let collective = switch.target.collective;
        let switched = value != switch.default;
        let fallback = self.fallback.as_ref();
        if let (Some(f), true) = (fallback, switched) {
            self.put(&f.var, f.silent, collective);
        }
        self.put(&switch.var, value, collective);
        if let (Some(f), false) = (fallback, switched) {
            self.put(&f.var, f.user, collective);
        }
    }

    /// Writes `value` to `var` for a call of `collective`. A refused write
    /// stops tuning and keeps what is set; the stop reaches the peers at
    /// the next agreed point. (For the fallback variable this call still
    /// runs the algorithm its peers agreed; for an algorithm variable it
    /// runs the value this rank holds: the start proved the value
    /// writable, so only a library that changes its mind gets here; see
    /// docs/collective-tuning.md#how-it-stays-safe, item 6.)
    fn put(&self, var: &Written<M::Var>, value: i64, collective: Collective) {
        if let Err(e) = var.put(value) {
            self.stop.store(true, Release);
            if !var.failed.swap(true, AcqRel) {
                // The error names the variable.
                self.tell(Some(collective), What::WriteFailed(e.to_string()));
            }
        }
    }

    /// Sets the tuning store's choices the searches start from: before the
    /// tuner is activated, the same on every rank.
    pub fn set_warm(&mut self, warm: Vec<Warm>) {
        self.warm = warm;
    }

    /// Starts the searches of a communicator just set up from the tuning
    /// store's choices for its size (the same on every rank: the size and
    /// the choices are).
    fn warm_searches(&self, st: &mut CommState<M>) {
        let bins = self.bins.len();
        for w in self.warm.iter().filter(|w| w.comm_size == st.size) {
            let k = w.collective as usize * bins + w.bin;
            let started =
                w.bin < bins && st.searches.get_mut(k).is_some_and(|s| s.warm(w.candidate));
            if started {
                let what = What::Stored {
                    candidate: w.candidate,
                    note: w.note.clone(),
                };
                self.emit(st, Some(w.collective), w.bin, what);
            }
        }
    }

    /// The fallback variable the tuner keeps `silent` around switched
    /// calls, if any.
    pub fn fallback(&self) -> Option<&Fallback<M::Var>> {
        self.fallback.as_ref()
    }
}
