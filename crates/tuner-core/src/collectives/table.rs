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
use super::search::{Agreed, Event, Params, Search};
use atomic_refcell::{AtomicRefCell, AtomicRefMut};
use crossbeam_channel::{Receiver, Sender};
use mpit::collective::{self, Collectives, ErrorsReturn, FailedOn, ReduceOp, Verdict};
use mpit::quirks::LibraryVersion;
use mpit::{Comm, Cvar, CvarInfo, HandleBits, MpiT, PrivateComm};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicU64, AtomicUsize, Ordering::*};
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

/// Communicators tuned at once; later ones run with the defaults.
pub const MAX_COMMS: usize = 64;
/// Events kept between two ticks of the helper (more are counted lost).
const EVENT_QUEUE: usize = 4096;
/// An entry whose communicator was freed while its state was in use.
const TOMBSTONE: u64 = u64::MAX;
/// A free entry.
const FREE: u64 = 0;

static ON: AtomicBool = AtomicBool::new(false);
static TUNER: OnceLock<Tuner> = OnceLock::new();

/// Message-size bins: bin `i` holds sizes from `bounds[i]` up to the next
/// bound (the last one is open).
#[derive(Clone, PartialEq, Eq)]
pub struct Bins {
    bounds: Vec<u64>,
    /// The bin of every size of `j` significant bits, at index `j` (0 to
    /// 64), or [`SPLIT`] where a bound falls among those sizes: one load
    /// per call instead of a binary search, for bounds that are powers of
    /// two (the default's and most policies').
    by_bits: [u8; 65],
}

/// A [`Bins::by_bits`] entry whose sizes span two bins.
const SPLIT: u8 = u8::MAX;

impl std::fmt::Debug for Bins {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bins")
            .field("bounds", &self.bounds)
            .finish()
    }
}

impl Bins {
    /// Bins from lower bounds in bytes (0 is added, duplicates dropped).
    pub fn new(mut bounds: Vec<u64>) -> Bins {
        bounds.push(0);
        bounds.sort_unstable();
        bounds.dedup();
        let mut bins = Bins {
            bounds,
            by_bits: [SPLIT; 65],
        };
        for bits in 0..=64u32 {
            // The sizes of `bits` significant bits: [2^(bits-1), 2^bits).
            let (lo, hi) = match bits {
                0 => (0, 0),
                64 => (1 << 63, u64::MAX),
                _ => (1 << (bits - 1), (1 << bits) - 1),
            };
            let bin = bins.search(lo);
            if bin == bins.search(hi) {
                bins.by_bits[bits as usize] = u8::try_from(bin).unwrap_or(SPLIT);
            }
        }
        bins
    }

    /// How many bins.
    pub fn len(&self) -> usize {
        self.bounds.len()
    }

    /// Never empty (0 is always a bound).
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The bin of a message of `bytes` bytes.
    #[inline]
    pub fn of(&self, bytes: u64) -> usize {
        match self.by_bits[(64 - bytes.leading_zeros()) as usize] {
            SPLIT => self.search(bytes),
            bin => usize::from(bin),
        }
    }

    /// [`Bins::of`] by binary search over the bounds.
    fn search(&self, bytes: u64) -> usize {
        self.bounds
            .partition_point(|&b| b <= bytes)
            .saturating_sub(1)
    }

    /// The sizes bin `i` holds: `[lo, hi)`, `hi` `None` for the last.
    pub fn range(&self, i: usize) -> (u64, Option<u64>) {
        (self.bounds[i], self.bounds.get(i + 1).copied())
    }
}

/// A size bin for people: `[4 KiB, 64 KiB)`, `>= 1 MiB`.
pub fn bin_text(lo: u64, hi: Option<u64>) -> String {
    let size = |b: u64| match b {
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{} KiB", b >> 10),
        b => format!("{b} B"),
    };
    match hi {
        Some(hi) => format!("[{}, {})", size(lo), size(hi)),
        None => format!(">= {}", size(lo)),
    }
}

impl Default for Bins {
    /// 0, 256 B, 4 KiB, 64 KiB, 1 MiB.
    fn default() -> Bins {
        Bins::new(vec![256, 4 << 10, 64 << 10, 1 << 20])
    }
}

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
}

/// A variable the tuner writes around the application's calls.
struct Written {
    cvar: Cvar<'static>,
    /// The value set now (process-wide).
    current: AtomicI64,
    /// The first write error, reported once.
    failed: AtomicBool,
    /// The application wrote the variable itself: never written again.
    foreign: AtomicBool,
}

impl Written {
    fn new(cvar: Cvar<'static>, value: i64) -> Written {
        Written {
            cvar,
            current: AtomicI64::new(value),
            failed: AtomicBool::new(false),
            foreign: AtomicBool::new(false),
        }
    }

    /// Whether `value` is set now (the compare the wrapper inlines).
    #[inline(always)]
    fn holds(&self, value: i64) -> bool {
        self.current.load(Relaxed) == value
    }

    /// Writes `value` unless it is set already, or the application's own.
    fn put(&self, value: i64) -> mpit::Result<()> {
        if !self.holds(value) && !self.foreign.load(Relaxed) {
            self.cvar.write_scalar_int(value)?;
            self.current.store(value, Relaxed);
        }
        Ok(())
    }

    fn name(&self) -> &str {
        &self.cvar.info().name
    }
}

/// Writes `value` to `cvar` and reads it back: `Err` says why the library
/// does not take it (`refused: ...` or `reads back as ...`).
pub fn try_write(cvar: &Cvar<'_>, value: i64) -> Result<(), String> {
    match cvar.write_scalar_int(value).and_then(|()| cvar.read()) {
        Ok(v) if v.as_i64() == Some(value) => Ok(()),
        Ok(v) => Err(format!("reads back as {v:?}")),
        Err(e) => Err(format!("refused: {e}")),
    }
}

/// Opens the integer variable `info` (no object) and reads its value; an
/// error names it and says what failed.
fn open_int(mpit: &'static MpiT, info: &CvarInfo) -> Result<(Cvar<'static>, i64), String> {
    let name = &info.name;
    let cvar = Cvar::open(mpit, info, mpit::Object::None)
        .map_err(|e| format!("{name}: cannot open it: {e}"))?;
    let value = cvar
        .read()
        .map_err(|e| format!("{name}: cannot read it: {e}"))?
        .as_i64()
        .ok_or_else(|| format!("{name}: its value is not an integer"))?;
    Ok((cvar, value))
}

/// A switchable collective in this process.
struct Switch {
    target: Target,
    var: Written,
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
    /// ([`super::library::open_mpi_needs_commutative`]).
    commutative_only: u32,
}

/// Open MPI: a written algorithm reaches only communicators created after
/// the write ([`super::library::Support::NextCommunicator`]), so a tuned
/// call writes nothing. It runs on a communicator the tuner created over
/// the same group right after writing the candidate's algorithm: one per
/// (collective, candidate) and communicator, made on first use
/// ([`Tuner::candidate_comm`]), at a call every rank makes with the same
/// choice. Only that collective's algorithm is forced there; the others
/// keep the library's own choice, so an algorithm made of other
/// collectives (allreduce `nonoverlapping` is a reduce and a bcast) runs
/// them as the library would. Every rank of the communicator calls the
/// same collectives on the same candidate communicators, in the same
/// order, so matching is that of the application's calls.
pub struct ByComms {
    /// `coll_tuned_use_dynamic_rules` when it is off at start and
    /// writable (Open MPI 5.0): on while a candidate communicator is
    /// created, off again right after. `None`: on from the start.
    rules: Option<Written>,
    /// Open MPI's version, `(major, minor)`.
    version: (u32, u32),
    /// A hash of this process's host name: from 5.0, a communicator that
    /// spans several nodes is not tuned (`coll/han` runs its collectives
    /// and snapshots the forced algorithms on its own schedule).
    host: i64,
}

impl std::fmt::Debug for ByComms {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ByComms")
            .field("rules", &self.rules.as_ref().map(Written::name))
            .finish()
    }
}

impl ByComms {
    /// Opens Open MPI's `coll_tuned_use_dynamic_rules` (`info`): a forced
    /// algorithm is read only while it is on. On at start: nothing to do.
    /// Off: it must take 1 and 0 back now (Open MPI 5.0 does; 4.1 reads it
    /// only at start). An error says why and what to do.
    pub fn open(
        mpit: &'static MpiT,
        info: &CvarInfo,
        version: LibraryVersion,
    ) -> Result<ByComms, String> {
        let name = &info.name;
        let version = version
            .major_minor()
            .ok_or_else(|| "the Open MPI version could not be read".to_string())?;
        let host = fnv1a(&mpit::host_name()) as i64;
        let (cvar, value) = open_int(mpit, info)?;
        if value != 0 {
            return Ok(ByComms {
                rules: None,
                version,
                host,
            });
        }
        try_write(&cvar, 1)
            .and_then(|()| try_write(&cvar, 0))
            .map_err(|why| {
                format!(
                    "{name} is off, and turning it on after start {why}: Open MPI reads a forced \
                     algorithm only when it is on, and this version reads it only at start; run \
                     with OMPI_MCA_coll_tuned_use_dynamic_rules=1 (`mpit-tuner run \
                     --tune-collectives` sets it)"
                )
            })?;
        Ok(ByComms {
            rules: Some(Written::new(cvar, 0)),
            version,
            host,
        })
    }

    /// Open MPI's version, `(major, minor)`.
    pub fn version(&self) -> (u32, u32) {
        self.version
    }
}

/// MPICH's fallback variable ([`super::library::MPICH_FALLBACK_CVAR`])
/// when the application runs with a value other than `silent`: each call
/// the tuner switches to another algorithm runs with `silent`, so that a
/// candidate MPICH cannot use for that call's arguments falls back to
/// MPICH's own choice instead of failing the call (`error`) or printing a
/// message on the rank (`print`); every other call keeps the application's
/// value. Prepared with [`Fallback::open`].
pub struct Fallback {
    var: Written,
    /// The application's value.
    user: i64,
    /// The value that falls back silently.
    silent: i64,
    /// What one write costs (ns), measured at start ([`write_cost`]).
    write_ns: u64,
}

impl std::fmt::Debug for Fallback {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fallback")
            .field("user", &self.user)
            .field("silent", &self.silent)
            .finish_non_exhaustive()
    }
}

impl Fallback {
    /// Opens `info` (the fallback variable, whose value `silent` falls
    /// back silently) and reads the application's value: `Ok(None)` when
    /// it already is `silent`. Otherwise it proves here that the library
    /// takes `silent` and the application's value back: refused here, the
    /// start turns tuning off on every rank; refused on a call, that call
    /// would run its candidate without the fallback. An error says why the
    /// variable cannot be kept `silent` around switched calls.
    pub fn open(
        mpit: &'static MpiT,
        info: &CvarInfo,
        silent: i64,
    ) -> Result<Option<Fallback>, String> {
        let name = &info.name;
        let (cvar, user) = open_int(mpit, info)?;
        if user == silent {
            return Ok(None);
        }
        try_write(&cvar, silent).map_err(|why| format!("{name}: `silent` ({silent}) {why}"))?;
        try_write(&cvar, user).map_err(|why| {
            format!("{name}: the application's value ({user}) {why}; it may stay `silent`")
        })?;
        let write_ns = write_cost(&cvar, user)
            .map_err(|e| format!("{name}: writing its value back fails: {e}"))?;
        Ok(Some(Fallback {
            var: Written::new(cvar, user),
            user,
            silent,
            write_ns,
        }))
    }

    /// The application's value.
    pub fn user(&self) -> i64 {
        self.user
    }
}

/// One communicator's tuning.
struct CommState {
    /// Set up: label and private communicator agreed.
    ready: bool,
    /// Tuning is off on this communicator (setup failed everywhere, or a
    /// reduction failed here).
    off: bool,
    label: u64,
    /// This process's rank in the communicator, and its size.
    rank: i32,
    size: i32,
    private: Option<PrivateComm>,
    /// [`ByComms`]: the candidate communicators made so far, at
    /// `collective * stride + candidate` ([`Tuner::stride`]; candidate 0,
    /// the default, is the application's communicator).
    dups: Vec<Option<PrivateComm>>,
    /// One search per (collective, bin).
    searches: Vec<Search>,
    /// Per collective, the user's choice (a [`Switch`]'s `pin`) pinned on
    /// this communicator (0: none).
    pinned: [u64; COLLECTIVES.len()],
    /// Per search, the quiet calls handed to the entry's `quiet` slot
    /// when it was last filled (see [`Tuner::settle`]).
    given: Vec<u32>,
}

struct Entry {
    bits: AtomicU64,
    state: AtomicRefCell<CommState>,
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

/// The tuner of this process.
pub struct Tuner {
    switches: Vec<Option<Switch>>,
    /// MPICH's fallback variable, when it must be `silent` around
    /// switched calls.
    fallback: Option<Fallback>,
    /// Open MPI: calls switch communicators instead of variables.
    by_comms: Option<ByComms>,
    /// [`ByComms`]: candidates per collective in an entry's `dups` (the
    /// most any tuned collective has).
    stride: usize,
    bins: Bins,
    params: Params,
    /// The fresh searches, one per (collective, bin), copied into an entry
    /// when a communicator claims it.
    fresh: Vec<Search>,
    entries: Box<[Entry]>,
    high: AtomicUsize,
    /// 1 while a tuned collective runs. Set and cleared with a plain load
    /// and store, not a read-modify-write: tuning runs only below
    /// `MPI_THREAD_MULTIPLE`, where the MPI standard forbids two threads in
    /// MPI at once, so this catches an erroneous program (at one of its
    /// overlapping calls, if not at the first) without making every correct
    /// one pay two locked instructions per call.
    in_flight: AtomicU32,
    stop: AtomicBool,
    tx: Sender<TuneEvent>,
    rx: Receiver<TuneEvent>,
    lost: AtomicU64,
    start: Instant,
    world_rank: i32,
    labels: AtomicU64,
    /// The ids of the users' requests by key, for the log (the helper
    /// thread's only: never touched on a call).
    requests: Mutex<Vec<(u64, String)>>,
}

/// Bits of a pin slot that hold the candidate (candidates are fewer than
/// 32: [`super::search::MAX_CANDIDATES`]).
const PIN_CANDIDATE_BITS: u32 = 5;

/// The key of a user's request: a hash of its id (the same on every rank,
/// never 0), in the 58 bits a pin slot leaves it.
pub fn request_key(id: &str) -> u64 {
    (fnv1a(id) & ((1 << (63 - PIN_CANDIDATE_BITS)) - 1)).max(1)
}

/// FNV-1a of `s`: stable across processes and builds, unlike the std
/// hasher, so every rank hashes the same string alike.
fn fnv1a(s: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

impl std::fmt::Debug for Tuner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tuner")
            .field("collectives", &self.tuned().collect::<Vec<_>>())
            .field("bins", &self.bins)
            .field("params", &self.params)
            .finish_non_exhaustive()
    }
}

impl Tuner {
    /// What every rank must have the same of before tuning starts: the
    /// collectives, their candidates' values, the bins and the parameters
    /// (a hash; ranks that differ would reach different agreed points).
    pub fn signature(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        for t in self.tuned() {
            (t.collective as usize).hash(&mut h);
            for (_, v) in &t.candidates {
                v.hash(&mut h);
            }
        }
        self.bins.bounds.hash(&mut h);
        format!("{:?}", self.params).hash(&mut h);
        h.finish()
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

    /// Whether tuning stopped on this rank (a failed reduction or write,
    /// collectives from two threads): the defaults from the next agreed
    /// points on, and no pin ever again.
    pub fn stopped(&self) -> bool {
        self.stop.load(Acquire)
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
    fn emit(&self, comm: &CommState, collective: Option<Collective>, bin: usize, what: What) {
        self.send(TuneEvent {
            t: self.start.elapsed().as_secs_f64(),
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
    fn unsized_call(&self, entry: &Entry, collective: Collective) -> usize {
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
            t: self.start.elapsed().as_secs_f64(),
            comm: 0,
            comm_size: 0,
            collective,
            bin: 0,
            what,
        });
    }

    fn send(&self, event: TuneEvent) {
        if self.tx.try_send(event).is_err() {
            self.lost.fetch_add(1, Relaxed);
        }
    }

    /// Adds the quiet calls of search `k` that ran since its slot was
    /// filled (the calls it had left are taken back: the next call goes
    /// the long way).
    #[inline]
    fn settle(entry: &Entry, st: &mut CommState, k: usize) {
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
    fn settle_all(entry: &Entry, st: &mut CommState) {
        for k in 0..st.searches.len() {
            Tuner::settle(entry, st, k);
        }
    }

    /// Fills the slot of search `k` from its state after a call.
    #[inline]
    fn refill(entry: &Entry, st: &mut CommState, k: usize) {
        let search = &st.searches[k];
        let calls = search.quiet();
        st.given[k] = calls;
        entry.quiet[k].store(((search.choice() as u64) << 32) | u64::from(calls), Relaxed);
    }

    /// Measure mode: the measurements of a communicator, for the log.
    fn emit_measurements(&self, st: &CommState) {
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
    #[inline]
    fn entry(&self, comm: Comm) -> Option<usize> {
        let bits = comm.to_bits();
        let high = self.high.load(Acquire);
        if let Some(i) = (0..high).find(|&i| self.entries[i].bits.load(Acquire) == bits) {
            return Some(i);
        }
        self.claim(comm)
    }

    /// Claims a free entry for a new communicator. Intercommunicators are
    /// not tuned (their collectives' roots and groups work differently):
    /// `None`, and the call runs with the default.
    #[cold]
    fn claim(&self, comm: Comm) -> Option<usize> {
        if !matches!(mpit::is_inter(comm), Ok(false)) {
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
    fn set(&self, switch: &Switch, value: i64) {
        if !switch.var.holds(value) {
            self.write(switch, value);
        }
    }

    /// Writes `collective`'s variable; the fallback variable, if the
    /// tuner keeps one, is `silent` while the value is not the default.
    #[inline(never)]
    fn write(&self, switch: &Switch, value: i64) {
        let collective = switch.target.collective;
        let switched = value != switch.target.candidates[0].1;
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
    fn put(&self, var: &Written, value: i64, collective: Collective) {
        if let Err(e) = var.put(value) {
            self.stop.store(true, Release);
            if !var.failed.swap(true, AcqRel) {
                // The error names the variable.
                self.tell(Some(collective), What::WriteFailed(e.to_string()));
            }
        }
    }

    /// The fallback variable the tuner keeps `silent` around switched
    /// calls, if any.
    pub fn fallback(&self) -> Option<&Fallback> {
        self.fallback.as_ref()
    }

    /// The first agreed point on a communicator: label and private
    /// communicator, agreed over the application's communicator (with
    /// errors returned while the tool uses it).
    #[cold]
    fn setup(&self, comm: Comm, st: &mut CommState) {
        st.ready = true;
        let (rank, size) = match mpit::rank_size(comm) {
            Ok(rs) => rs,
            Err(e) => {
                // Local and without a collective: the peers will wait in
                // theirs. Only a broken library gets here.
                st.off = true;
                self.stop.store(true, Release);
                self.emit(st, None, 0, What::SetupFailed(e.to_string()));
                return;
            }
        };
        st.rank = rank;
        st.size = size;
        if size < i32::try_from(self.params.min_comm_size).unwrap_or(i32::MAX) {
            // The same size on every rank: off everywhere, no collective.
            st.off = true;
            return;
        }
        let (guard, swap_error) = ErrorsReturn::swap_in(comm);
        let mut seq = Collectives::new(comm, rank);
        if let Some(e) = swap_error {
            seq.fail("MPI_Comm_set_errhandler", &e);
        }
        let mut label = [0u8; 8];
        if rank == 0 {
            let n = self.labels.fetch_add(1, Relaxed);
            let value = (u64::try_from(self.world_rank).unwrap_or(0) << 32) | (n & 0xffff_ffff);
            label = value.to_le_bytes();
        }
        seq.bcast_bytes(&mut label, 0);
        st.label = u64::from_le_bytes(label);
        // From Open MPI 5.0, coll/han runs the collectives of a
        // communicator over several nodes, on sub-communicators it makes at
        // its first call (copying the forced algorithms of that moment):
        // such a communicator is not tuned.
        let one_node = match &self.by_comms {
            Some(b) if b.version >= (5, 0) => seq.all_equal(b.host),
            _ => true,
        };
        let private = collective::create_private(&mut seq, comm);
        let verdict = seq.agree();
        if let Err(e) = guard.restore() {
            mpit::say!("mpit-tuner[rank {}]: while putting the application's error handler back on a communicator: {e}", self.world_rank);
        }
        match verdict {
            Verdict::AllOk if private.is_some() && !one_node => {
                st.private = private;
                st.off = true;
                self.emit(
                    st,
                    None,
                    0,
                    What::Excluded(
                        "this communicator spans several nodes: from Open MPI 5.0 its collectives \
                         run in coll/han, which copies the forced algorithms when it first runs, \
                         so it is not tuned"
                            .into(),
                    ),
                );
            }
            Verdict::AllOk if private.is_some() => {
                st.private = private;
                if self.by_comms.is_some() {
                    self.exclude_unsuitable(st);
                }
            }
            Verdict::AllOk => {
                st.off = true;
                self.emit(
                    st,
                    None,
                    0,
                    What::SetupFailed("no private communicator".into()),
                );
            }
            Verdict::Failed(why) => {
                if let Some(mut p) = private {
                    if let Err(e) = p.free() {
                        mpit::say!(
                            "mpit-tuner[rank {}]: freeing a tuning communicator: {e}",
                            self.world_rank
                        );
                    }
                }
                st.off = true;
                let why = self.agreed(why);
                self.emit(st, None, 0, What::SetupFailed(why));
            }
        }
    }

    /// The part of a failed agreement every rank holds alike, for a
    /// communicator's record (identical on all its ranks). This rank's own
    /// failure, if it had one, goes to its standard error, where the
    /// others' records point.
    #[cold]
    fn agreed(&self, why: FailedOn) -> String {
        if let Some(mine) = &why.mine {
            mpit::say!(
                "mpit-tuner[rank {}]: collective tuning: {}",
                self.world_rank,
                mine.message
            );
        }
        FailedOn { mine: None, ..why }.to_string()
    }

    /// [`ByComms`]: the candidates the library cannot run on a
    /// communicator of this size are left out of its searches (the size is
    /// the same on every rank, so is this).
    fn exclude_unsuitable(&self, st: &mut CommState) {
        if self.by_comms.is_none() {
            return;
        }
        let bins = self.bins.len();
        for s in self.switches.iter().flatten() {
            let c = s.target.collective;
            for (i, (name, _)) in s.target.candidates.iter().enumerate().skip(1) {
                let Some(why) = super::library::open_mpi_unsuitable(c, name, st.size) else {
                    continue;
                };
                for b in 0..bins {
                    st.searches[c as usize * bins + b].exclude(i);
                }
                let message = format!(
                    "{}: `{name}` {why}: not tried on this communicator of {} processes",
                    c.name(),
                    st.size
                );
                self.emit(st, Some(c), 0, What::Excluded(message));
            }
        }
    }

    /// [`ByComms`]: the communicator a call of `switch`'s collective with
    /// its candidate `i` runs on (its bits; 0: the application's `comm`),
    /// made now if it is the first. Every rank of `comm` gets here at the
    /// same call with the same `i` (the choice changes only at agreed
    /// points, and calls that need no new communicator do not come here),
    /// so the creation is a collective every rank makes: the collective's
    /// variable is set to candidate `i`, a communicator is created over
    /// `comm`'s group (it copies that algorithm), and the default is
    /// written back, with errors returned on `comm` meanwhile. Any rank's
    /// failure turns tuning off on this communicator on every rank.
    #[cold]
    #[inline(never)]
    fn candidate_comm(
        &self,
        entry: &Entry,
        st: &mut CommState,
        comm: Comm,
        switch: &Switch,
        i: usize,
    ) -> u64 {
        let c = switch.target.collective;
        let slot = c as usize * self.stride + i;
        let made = entry.dups.get(slot).map_or(0, |d| d.load(Relaxed));
        if i == 0 || made != 0 || st.off || !st.ready || slot >= entry.dups.len() {
            return made;
        }
        let Some(by) = &self.by_comms else { return 0 };
        let Some((name, value)) = switch.target.candidates.get(i) else {
            return 0;
        };
        // Excluded at setup, so never chosen: a user's pin of it runs the
        // default.
        debug_assert!(super::library::open_mpi_unsuitable(c, name, st.size).is_none());
        let (guard, swap_error) = ErrorsReturn::swap_in(comm);
        let mut seq = Collectives::new(comm, st.rank);
        if let Some(e) = swap_error {
            seq.fail("MPI_Comm_set_errhandler", &e);
        }
        let wrote = by
            .rules
            .as_ref()
            .map_or(Ok(()), |r| r.put(1))
            .and_then(|()| switch.var.put(*value));
        if let Err(e) = &wrote {
            seq.fail_local(format!("setting `{name}`: {e}"));
        }
        let private = collective::create_private(&mut seq, comm);
        if let Err(e) = switch.var.put(switch.target.candidates[0].1) {
            seq.fail_local(format!("writing the default back: {e}"));
        }
        if let Some(Err(e)) = by.rules.as_ref().map(|r| r.put(0)) {
            seq.fail_local(format!("turning the dynamic rules off again: {e}"));
        }
        let verdict = seq.agree();
        if let Err(e) = guard.restore() {
            mpit::say!("mpit-tuner[rank {}]: while putting the application's error handler back on a communicator: {e}", self.world_rank);
        }
        match (verdict, private) {
            (Verdict::AllOk, Some(p)) => {
                let bits = p.comm().to_bits();
                st.dups[slot] = Some(p);
                entry.dups[slot].store(bits, Relaxed);
                bits
            }
            (verdict, private) => {
                if let Some(mut p) = private {
                    if let Err(e) = p.free() {
                        mpit::say!(
                            "mpit-tuner[rank {}]: freeing a candidate communicator: {e}",
                            self.world_rank
                        );
                    }
                }
                let why = match verdict {
                    Verdict::Failed(why) => self.agreed(why),
                    Verdict::AllOk => "no communicator was created".into(),
                };
                st.off = true;
                self.emit(
                    st,
                    None,
                    0,
                    What::SetupFailed(format!(
                        "creating the communicator of {} `{name}`: {why}",
                        c.name()
                    )),
                );
                0
            }
        }
    }

    /// An agreed point of search `k`: one reduction, the same numbers on
    /// every rank, the same transition.
    fn agree(&self, entry: &Entry, comm: Comm, st: &mut CommState, k: usize, mine: f64) {
        if !st.ready {
            self.setup(comm, st);
        }
        let collective = COLLECTIVES[k / self.bins.len()];
        let bin = k % self.bins.len();
        if st.off {
            st.searches[k].agree(Agreed::settled(0.0, true));
            return;
        }
        let Some(private) = &st.private else { return };
        let stop = self.stop.load(Acquire);
        // The user's pending choice, as its maximum and (negated) minimum
        // over ranks: equal only when every rank holds the same request.
        let pin = self.switches[collective as usize]
            .as_ref()
            .map_or(0, |s| s.pin.load(Acquire));
        let pin = i64::try_from(pin).unwrap_or(0);
        // This rank's time since tuning started, negated: its maximum is
        // the least over ranks.
        let elapsed = i64::try_from(self.start.elapsed().as_nanos()).unwrap_or(i64::MAX);
        let send = [
            mine.round().clamp(0.0, 9.0e18) as i64,
            i64::from(stop),
            pin,
            -pin,
            -elapsed,
        ];
        let mut recv = [0i64; 5];
        let mut seq = Collectives::new(private.comm(), 0);
        seq.allreduce_i64(&send, &mut recv, ReduceOp::Max);
        if seq.failed() {
            // MPI's state after an error is undefined. A library that
            // reports an error after taking part (what its peers, whose
            // call returned, most likely saw) has filled `recv`: go on with
            // it as they do, so that every rank makes the same transition
            // here, and stop: this rank sends stop from now on, so every
            // rank stops together at its next agreed point. Leaving this
            // communicator alone instead would leave its peers waiting in
            // their next reduction for a rank that never comes.
            self.stop.store(true, Release);
            let why = seq
                .into_pending()
                .map_or_else(|| "MPI_Allreduce failed".to_string(), |f| f.message);
            let why = format!(
                "{why}: going on with what it returned, as the other ranks do; tuning stops on \
                 every rank at the next agreed point"
            );
            self.emit(st, Some(collective), bin, What::ReductionFailed(why));
        }
        let agreed = Agreed {
            max_mean_ns: recv[0] as f64,
            stop: recv[1] != 0,
            min_elapsed_ns: -(recv[4] as f64),
        };
        let agreed_pin =
            (!agreed.stop && recv[2] == -recv[3] && recv[2] > 0).then(|| recv[2] as u64);
        for event in st.searches[k].agree(agreed).into_iter().flatten() {
            self.emit(st, Some(collective), bin, What::Search(event));
        }
        let c = collective as usize;
        if let Some(pin) = agreed_pin.filter(|p| st.pinned[c] != *p) {
            self.pin(entry, st, collective, pin, bin);
        }
    }

    /// Every rank of the communicator agreed on the user's choice `pin` for
    /// `collective` at this point (of the search of bin `bin`): every
    /// search of that collective on the communicator is pinned, here, on
    /// every rank alike. Logged for the bins that had calls.
    fn pin(&self, entry: &Entry, st: &mut CommState, collective: Collective, pin: u64, bin: usize) {
        let candidate = (pin & ((1 << PIN_CANDIDATE_BITS) - 1)) as usize;
        let key = pin >> PIN_CANDIDATE_BITS;
        st.pinned[collective as usize] = pin;
        let bins = self.bins.len();
        for b in 0..bins {
            let k = collective as usize * bins + b;
            // Its quiet calls counted, and its slot emptied: the next call
            // on that bin runs the pinned candidate.
            Tuner::settle(entry, st, k);
            let search = &mut st.searches[k];
            let called = search.calls() > 0 || b == bin;
            let event = search.pin(candidate, key);
            if let Some(event) = event.filter(|_| called) {
                self.emit(st, Some(collective), b, What::Search(event));
            }
        }
    }
}

/// A tuned call in progress: returned by [`before`], given to [`after`].
pub struct Ticket {
    collective: Collective,
    /// The communicator's state, its entry, the search and the
    /// communicator (`None`: nothing to count after the call).
    state: Option<(
        AtomicRefMut<'static, CommState>,
        &'static Entry,
        usize,
        Comm,
    )>,
    timed: bool,
    /// This call runs a value other than the default: its variable is
    /// written before and after it (read only for timed calls, to charge
    /// them the writes).
    switched: bool,
    /// [`ByComms`]: the bits of the communicator to call on instead of the
    /// application's (0: the application's).
    on: u64,
    /// [`ByComms`]: that communicator's algorithm is right only for a
    /// commutative operation.
    commutative_only: bool,
}

impl Ticket {
    /// A call that runs untimed and is not counted after (the default
    /// without a search, or a quiet call of a decided one).
    #[inline(always)]
    fn uncounted(collective: Collective) -> Ticket {
        Ticket {
            collective,
            state: None,
            timed: false,
            switched: false,
            on: 0,
            commutative_only: false,
        }
    }

    /// Whether the caller should time the call.
    #[inline]
    pub fn timed(&self) -> bool {
        self.timed
    }

    /// The communicator to call on instead of the application's, if any
    /// (a candidate communicator of [`ByComms`]).
    #[inline]
    pub fn on(&self) -> Option<Comm> {
        (self.on != 0).then(|| Comm::from_bits(self.on))
    }

    /// Whether the communicator of [`Ticket::on`] may run this call only if
    /// its operation is commutative (the caller runs it on the
    /// application's communicator otherwise: the operation is the same on
    /// every rank, so is that choice).
    #[inline]
    pub fn commutative_only(&self) -> bool {
        self.commutative_only
    }
}

/// Before a blocking collective on `comm` moving `bytes` (one rank's
/// contribution): sets the algorithm this call must use. `None` when
/// tuning is off for this collective (nothing to do after).
///
/// `bytes` is `None` when the library would not give the size of the
/// call's datatype (`MPI_Type_size` failed): this rank cannot tell the
/// call's size bin, which its peers know. It counts the call in the bin of
/// the collective's last call on the communicator (right when the
/// application repeats a size, as it mostly does), and stops tuning, which
/// its peers learn at their next agreed point ([`Tuner::unsized_call`]).
#[inline(always)]
pub fn before(collective: Collective, comm: Comm, bytes: Option<u64>) -> Option<Ticket> {
    if !ON.load(Relaxed) {
        return None;
    }
    let t = TUNER.get()?;
    let switch = t.switches[collective as usize].as_ref()?;
    let overlapping = t.in_flight.load(Relaxed) != 0;
    t.in_flight.store(1, Relaxed);
    if overlapping && !t.stop.swap(true, AcqRel) {
        t.tell(Some(collective), What::Concurrent);
    }
    let default = switch.target.candidates[0].1;
    let Some(i) = t.entry(comm) else {
        t.set(switch, default);
        return Some(Ticket::uncounted(collective));
    };
    let entry = &t.entries[i];
    let bin = match bytes {
        Some(bytes) => t.bins.of(bytes),
        None => t.unsized_call(entry, collective),
    };
    entry.last_bin[collective as usize].store(bin as u32, Relaxed);
    let k = collective as usize * t.bins.len() + bin;
    // Steady state: a call that changes nothing but the counts.
    let quiet = entry.quiet[k].load(Relaxed);
    if quiet as u32 != 0 {
        entry.quiet[k].store(quiet - 1, Relaxed);
        let c = (quiet >> 32) as usize;
        if t.by_comms.is_some() {
            let mut ticket = Ticket::uncounted(collective);
            ticket.on = entry
                .dups
                .get(collective as usize * t.stride + c)
                .map_or(0, |d| d.load(Relaxed));
            ticket.commutative_only =
                switch.commutative_only.checked_shr(c as u32).unwrap_or(0) & 1 != 0;
            return Some(ticket);
        }
        let value = switch.target.candidates.get(c).map_or(default, |c| c.1);
        t.set(switch, value);
        return Some(Ticket::uncounted(collective));
    }
    let Ok(mut st) = entry.state.try_borrow_mut() else {
        // Another thread holds this communicator: erroneous, and the
        // algorithm cannot be chosen consistently any more.
        t.stop.store(true, Release);
        return Some(Ticket::uncounted(collective));
    };
    Tuner::settle(entry, &mut st, k);
    let choice = st.searches[k].choice();
    let value = switch.target.candidates[choice].1;
    let on = if t.by_comms.is_some() {
        t.candidate_comm(entry, &mut st, comm, switch, choice)
    } else {
        t.set(switch, value);
        0
    };
    let timed = st.searches[k].wants_time();
    Some(Ticket {
        collective,
        state: Some((st, entry, k, comm)),
        timed,
        switched: value != default && t.by_comms.is_none(),
        on,
        commutative_only: switch
            .commutative_only
            .checked_shr(choice as u32)
            .unwrap_or(0)
            & 1
            != 0,
    })
}

/// After the call [`before`] prepared, with its duration if it was timed.
///
/// The variable goes back to the library's default first: outside a tuned
/// call the library's own internal collectives (a communicator's context
/// id is agreed with an allreduce, `MPI_Finalize` runs collectives, and so
/// do the tool's own reductions) read the same variable, and each rank's
/// last tuned call may have been on a different communicator.
///
/// A timed call that ran another value than the default is charged for
/// its writes (`Switch::switch_ns`, fixed at start): for calls of a
/// few hundred nanoseconds the switch itself could cost more than a faster
/// algorithm saves, and the search must see that. (Timing the write here
/// instead would charge the clock's own cost: two clock reads of 25 ns
/// around a 5 ns write on MPICH 4.0.2, counted twice, made every candidate
/// of an 8-byte allreduce look 15% slower than it was.)
#[inline(always)]
pub fn after(ticket: Ticket, ns: Option<u64>) {
    let Some(t) = TUNER.get() else { return };
    let mut ns = ns;
    if let Some(switch) = t.switches[ticket.collective as usize].as_ref() {
        t.set(switch, switch.target.candidates[0].1);
        if let (true, Some(n)) = (ticket.switched, ns.as_mut()) {
            *n = n.saturating_add(switch.switch_ns);
        }
    }
    if let Some((mut st, entry, k, comm)) = ticket.state {
        if let Some(mine) = st.searches[k].count(ns) {
            t.agree(entry, comm, &mut st, k, mine);
        }
        Tuner::refill(entry, &mut st, k);
    }
    t.in_flight.store(0, Relaxed);
}

/// A call the tuner ran on a candidate communicator ([`ByComms`]) failed
/// with `code` (`message`: the library's words). Tuning stops on this rank
/// (its peers learn it at their next agreed point); the interposer hands
/// the error to the application's handler on its own communicator, as if
/// the call had failed there.
#[cold]
pub fn call_failed(collective: Collective, message: &str) {
    let Some(t) = TUNER.get() else { return };
    t.stop.store(true, Release);
    t.tell(
        Some(collective),
        What::CallFailed(format!(
            "{} failed on a candidate communicator: {message}; the application's error handler \
             has the error, and tuning stops on every rank at the next agreed point",
            collective.name()
        )),
    );
}

/// The application frees `comm` (every rank of it does): its tuning
/// communicator goes with it, and its entry is free for a new one.
pub fn comm_freeing(comm: Comm) {
    let Some(t) = TUNER.get() else { return };
    let bits = comm.to_bits();
    let high = t.high.load(Acquire);
    let Some(e) = t.entries[..high]
        .iter()
        .find(|e| e.bits.load(Acquire) == bits)
    else {
        return;
    };
    e.bits.store(TOMBSTONE, Release);
    match e.state.try_borrow_mut() {
        Ok(mut st) => {
            Tuner::settle_all(e, &mut st);
            t.emit_measurements(&st);
            for d in e.dups.iter() {
                d.store(0, Relaxed);
            }
            for err in free_comms(&mut st) {
                mpit::say!("mpit-tuner[rank {}]: {err}", t.world_rank);
            }
            drop(st);
            e.bits.store(FREE, Release);
        }
        // In use by another thread: stays a tombstone until finalize.
        Err(_) => t.stop.store(true, Release),
    }
}

/// Frees a communicator's private and candidate communicators (collective
/// over it: the application is freeing it, or finalizing); a message per
/// failure.
fn free_comms(st: &mut CommState) -> Vec<String> {
    let mut messages = Vec::new();
    let dups = st.dups.iter_mut().filter_map(Option::take);
    for (mut p, what) in st
        .private
        .take()
        .map(|p| (p, "tuning"))
        .into_iter()
        .chain(dups.map(|p| (p, "candidate")))
    {
        if let Err(err) = p.free() {
            messages.push(format!("freeing a {what} communicator: {err}"));
        }
    }
    messages
}

/// What one write of `cvar` costs (ns): the fastest of a few batches of
/// writes of `value`, the value already set (so nothing changes), timed
/// per batch so that the clock's own cost is not in it.
fn write_cost(cvar: &Cvar<'static>, value: i64) -> mpit::Result<u64> {
    const BATCH: u32 = 64;
    let mut best = u64::MAX;
    for _ in 0..4 {
        let start = Instant::now();
        for _ in 0..BATCH {
            cvar.write_scalar_int(value)?;
        }
        best = best.min(start.elapsed().as_nanos() as u64 / u64::from(BATCH));
    }
    Ok(best)
}

/// Prepares tuning `targets` in this process: opens the variables'
/// handles (kept for the life of the process, on `mpit`, which is never
/// finalized by the tool) and allocates the table. Returns the tuner, to be
/// started with [`activate`] once every rank agreed on the same
/// [`Tuner::signature`], and a message per collective that cannot be
/// tuned here. With `by_comms` (Open MPI), calls switch communicators
/// instead of writing variables.
pub fn prepare(
    mpit: &'static MpiT,
    targets: Vec<Target>,
    fallback: Option<Fallback>,
    by_comms: Option<ByComms>,
    bins: Bins,
    params: Params,
    world_rank: i32,
) -> (Option<Tuner>, Vec<String>) {
    let mut messages = Vec::new();
    let mut switches: Vec<Option<Switch>> = COLLECTIVES.iter().map(|_| None).collect();
    let fallback_ns = fallback.as_ref().map_or(0, |f| f.write_ns);
    for target in targets {
        let name = target.cvar.name.clone();
        let opened = Cvar::open(mpit, &target.cvar, mpit::Object::None)
            .map_err(|e| format!("{name}: cannot open it: {e}"))
            .and_then(|cvar| {
                // Measuring never writes the variable (nothing is switched;
                // Open MPI's may not be writable after init at all), and
                // switching communicators writes none around calls.
                if params.measure || by_comms.is_some() {
                    return Ok((cvar, 0));
                }
                let cost = write_cost(&cvar, target.candidates[0].1)
                    .map_err(|e| format!("{name}: writing its default value fails: {e}"))?;
                Ok((cvar, cost))
            });
        match opened {
            Ok((cvar, write_ns)) => {
                let i = target.collective as usize;
                let commutative_only = match by_comms {
                    Some(_) => target
                        .candidates
                        .iter()
                        .enumerate()
                        .filter(|(_, (n, _))| {
                            super::library::open_mpi_needs_commutative(target.collective, n)
                        })
                        .fold(0, |m, (i, _)| m | 1u32.checked_shl(i as u32).unwrap_or(0)),
                    None => 0,
                };
                switches[i] = Some(Switch {
                    var: Written::new(cvar, target.candidates[0].1),
                    switch_ns: 2 * (write_ns + fallback_ns),
                    target,
                    pin: AtomicU64::new(0),
                    commutative_only,
                });
            }
            Err(message) => messages.push(message),
        }
    }
    if switches.iter().all(Option::is_none) {
        return (None, messages);
    }
    let mut fresh = Vec::with_capacity(COLLECTIVES.len() * bins.len());
    for s in &switches {
        let n = s.as_ref().map_or(1, |s| s.target.candidates.len());
        fresh.extend((0..bins.len()).map(|_| Search::new(params, n)));
    }
    let (tx, rx) = crossbeam_channel::bounded(EVENT_QUEUE);
    // Candidate communicators: per collective, one slot per candidate of
    // the collective with the most (none without ByComms).
    let stride = match by_comms {
        Some(_) => switches
            .iter()
            .flatten()
            .map(|s| s.target.candidates.len())
            .max()
            .unwrap_or(0),
        None => 0,
    };
    let dups = COLLECTIVES.len() * stride;
    let entries = (0..MAX_COMMS)
        .map(|_| Entry {
            bits: AtomicU64::new(FREE),
            state: AtomicRefCell::new(CommState {
                ready: false,
                off: false,
                label: 0,
                rank: 0,
                size: 0,
                private: None,
                dups: (0..dups).map(|_| None).collect(),
                searches: fresh.clone(),
                pinned: [0; COLLECTIVES.len()],
                given: vec![0; fresh.len()],
            }),
            quiet: (0..fresh.len()).map(|_| AtomicU64::new(0)).collect(),
            dups: (0..dups).map(|_| AtomicU64::new(0)).collect(),
            last_bin: std::array::from_fn(|_| AtomicU32::new(0)),
        })
        .collect();
    let tuner = Tuner {
        switches,
        fallback,
        by_comms,
        stride,
        bins,
        params,
        fresh,
        entries,
        high: AtomicUsize::new(0),
        in_flight: AtomicU32::new(0),
        stop: AtomicBool::new(false),
        tx,
        rx,
        lost: AtomicU64::new(0),
        start: Instant::now(),
        world_rank,
        labels: AtomicU64::new(0),
        requests: Mutex::new(Vec::new()),
    };
    (Some(tuner), messages)
}

/// Starts a prepared tuner: the application's collectives go through it
/// from now on. Fails if one already runs in this process.
pub fn activate(tuner: Tuner) -> Result<&'static Tuner, String> {
    TUNER
        .set(tuner)
        .map_err(|_| "collective tuning was already started in this process".to_string())?;
    ON.store(true, Release);
    TUNER
        .get()
        .ok_or_else(|| "collective tuning did not start".to_string())
}

/// Whether tuning runs (one relaxed load: the interposer's test).
#[inline]
pub fn on() -> bool {
    ON.load(Relaxed)
}

/// The tuner, if it runs.
pub fn tuner() -> Option<&'static Tuner> {
    ON.load(Acquire).then(|| TUNER.get()).flatten()
}

/// The tuner started in this process, running or stopped (names of the
/// events drained after [`stop`]).
pub fn started() -> Option<&'static Tuner> {
    TUNER.get()
}

/// Events since the last call (the helper logs them on its tick).
pub fn events() -> impl Iterator<Item = TuneEvent> {
    TUNER.get().into_iter().flat_map(|t| t.rx.try_iter())
}

/// The application wrote a control variable through MPI_T itself (the
/// preload sees its `MPI_T_cvar_write`; the tool's own writes go past it).
/// Each variable the tuner writes around calls is read back: one whose
/// value changed is the application's from now on. The tuner never writes
/// it again, this call's peers (which ran the same write, as an ALL_EQ
/// variable requires) do the same, and tuning stops on every rank at the
/// next agreed point. A write of the value set now changes nothing and is
/// not seen (between calls that is the value set at start).
#[cold]
pub fn application_wrote() {
    let Some(t) = tuner() else { return };
    let fallback = t.fallback.as_ref().map(|f| (&f.var, None));
    let switches = t
        .switches
        .iter()
        .flatten()
        .map(|s| (&s.var, Some(&s.target)));
    for (var, target) in switches.chain(fallback) {
        if var.foreign.load(Acquire) {
            continue;
        }
        let held = var.current.load(Relaxed);
        let message = match var.cvar.read().map(|v| v.as_i64()) {
            Ok(Some(v)) if v == held => continue,
            Ok(Some(v)) => {
                var.current.store(v, Relaxed);
                let name = match target {
                    Some(t) => t.name_of(v),
                    None => super::library::mpich_fallback_name(v),
                };
                let value = name.map_or_else(|| v.to_string(), |n| format!("`{n}` ({v})"));
                format!("the application wrote {value} itself")
            }
            Ok(None) => "the application wrote it, and it reads back as no integer".into(),
            Err(e) => {
                format!("the application wrote a variable, and reading this one back failed ({e})")
            }
        };
        var.foreign.store(true, Release);
        t.stop.store(true, Release);
        let message = format!(
            "{}: {message}: the tool never writes it again, and tuning stops on every rank at \
             the next agreed point",
            var.name()
        );
        t.tell(
            target.map(|t| t.collective),
            What::ApplicationWrote(message),
        );
    }
}

/// Stops tuning inside `MPI_Finalize`, before the library's own
/// finalization: every variable back to its default and the tuning
/// communicators freed. (The variables' handles stay open: they live in a
/// process-wide table, and `MPI_Finalize` frees them.) Returns messages for
/// the log.
pub fn stop() -> Vec<String> {
    let mut messages = Vec::new();
    if !ON.swap(false, AcqRel) {
        return messages;
    }
    let Some(t) = TUNER.get() else {
        return messages;
    };
    let mut restore = |var: &Written, value: i64, what: &str| {
        if let Err(e) = var.put(value) {
            messages.push(format!("{}: could not write {what} back: {e}", var.name()));
        }
    };
    for s in t.switches.iter().flatten() {
        restore(&s.var, s.target.candidates[0].1, "the default");
    }
    if let Some(f) = &t.fallback {
        restore(&f.var, f.user, "the application's value");
    }
    for e in t.entries.iter() {
        match e.state.try_borrow_mut() {
            Ok(mut st) => {
                Tuner::settle_all(e, &mut st);
                if e.bits.load(Acquire) != FREE {
                    t.emit_measurements(&st);
                }
                for d in e.dups.iter() {
                    d.store(0, Relaxed);
                }
                messages.extend(free_comms(&mut st));
            }
            Err(_) => messages.push("a tuning communicator was still in use at finalize".into()),
        }
    }
    messages
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bins_by_bits_agree_with_the_bounds() {
        for bounds in [
            vec![],
            vec![256, 4 << 10, 64 << 10, 1 << 20],
            vec![1, 2, 3, 1000, 1024, 1025, 5 << 20],
            vec![u64::MAX, 1 << 63, 7],
            (1..300).map(|i| i * 3).collect(),
        ] {
            let bins = Bins::new(bounds.clone());
            let mut sizes: Vec<u64> = vec![0, 1, u64::MAX];
            for b in &bins.bounds {
                sizes.extend([b.saturating_sub(1), *b, b.saturating_add(1)]);
            }
            sizes.extend((0..64).map(|j| 1u64 << j));
            sizes.extend((1..64).map(|j| (1u64 << j) - 1));
            for size in sizes {
                assert_eq!(bins.of(size), bins.search(size), "{bounds:?}: {size} bytes");
            }
        }
        // Powers of two never need the search.
        let bins = Bins::default();
        assert!(
            bins.by_bits.iter().all(|&b| b != SPLIT),
            "{:?}",
            bins.by_bits
        );
        assert_eq!(bins.of(8), 0);
        assert_eq!(bins.of(1 << 20), 4);
    }
}
