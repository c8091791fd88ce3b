//! The search for one (communicator, collective, size bin): which of the
//! library's algorithms to use, found on the application's own calls.
//!
//! Every rank of the communicator runs the same [`Search`] on the same
//! calls (MPI orders the collectives of a communicator, and the size bin is
//! the same on every rank), so the points where a window of calls ends are
//! the same calls everywhere. At each such point the ranks combine their
//! measurements in one reduction (the maximum over ranks of each rank's mean
//! time per call, and whether any rank stopped) and feed the same
//! [`Agreed`] numbers to [`Search::agree`]: every transition below depends
//! only on agreed numbers and call counts, so every rank makes the same
//! choice, deterministically, without any rank deciding alone.
//!
//! The schedule ([`Params`] holds its knobs):
//!
//! 1. Warm-up and settling: `warmup` calls with the default; then, until
//!    every rank has run `settle` since tuning started, agreed windows of
//!    the default that are thrown away, each twice as long as the last (up
//!    to [`MAX_SETTLE_WINDOW`] calls). A job's first milliseconds are
//!    slower than its steady state and would favour whichever algorithm
//!    runs last.
//! 2. Trials: each candidate (index 0 is the library's default) for one
//!    window, in order; then, one window at a time, the contenders for up
//!    to `windows` windows each, fewest first. A contender is within
//!    `margin` of the fastest time so far (the default included); the
//!    others could win only by noise and are not run again. A candidate
//!    slower than `drop_factor` times the default after its first window is
//!    dropped there. A candidate's time is the mean over its windows,
//!    weighted by their calls.
//! 3. Window lengths: with `window_time` set, the default's first window
//!    is [`MIN_WINDOW`] calls and sizes the others at `ceil(window_time / the default's time per
//!    call)` calls, from [`MIN_WINDOW`] to `window`, so that long calls are
//!    not explored `window` times each; and at least `min_window_time`
//!    worth of calls, up to [`MAX_WINDOW`], so that one preemption of a
//!    rank cannot double a window of sub-microsecond calls. When the first
//!    window sized the others longer than itself, the default runs the
//!    difference at once, so its first measurement is as long as every
//!    other window. A window's first call is not timed when the window
//!    has more than one: its lead-in ([`Search::wants_time`]).
//! 4. The choice: the fastest candidate if it beats the default by
//!    `margin`, else the default. Before switching away from the default,
//!    the default runs one more window ([`State::Confirm`]) and its time is
//!    the smaller of its two measurements: a slow first window of the
//!    default (a job's first calls, a burst of another process) must not
//!    hand the win to a candidate measured after it.
//! 5. While decided, a check point every `check_every` windows: a drift of
//!    the time per call by more than `drift` at `drift_confirm` check
//!    points in a row (one noisy window is not a drift), or `recheck`
//!    calls, starts the search again. A search that ends where the last one
//!    did doubles the distance between check points, up to [`MAX_BACKOFF`]
//!    times `check_every` windows, so a job whose times wander without a
//!    better algorithm to find pays for a bounded number of searches; a
//!    different choice brings the distance back to `check_every`. A search
//!    that ends in a tie (another candidate within `margin` of its choice)
//!    or a marginal switch (away from the default by less than twice
//!    `margin`) searches once more at the first check point and keeps what
//!    that second search finds: both are what a phase of the machine can
//!    make of a few windows.
//! 6. The search is priced and bounded (`search_budget`; item 3 of
//!    docs/collective-tuning.md#how-it-stays-safe). Everything it spends is
//!    counted, in agreed numbers only: every agreed point
//!    ([`Agreed::point_ns`], the least time a rank spent in the last one
//!    on the communicator), the tool's other collectives there
//!    ([`Agreed::other_ns`]), and every call of a candidate beyond the
//!    default's time per call (a faster candidate's calls count as
//!    savings, as do the calls of a choice that beats the default). Before
//!    each window the search estimates what it will cost (its point, and
//!    its calls at the candidate's time so far, or at `drop_factor` times
//!    the default's for a candidate not measured yet); when what was spent
//!    and that estimate exceed `search_budget` of the time the job has run
//!    this collective (its calls so far at the default's time), the next
//!    window waits ([`Search::resting`]), untimed, running what the search
//!    would choose now (the default unless a candidate already beats it by
//!    `margin`), until the job's calls (and the savings of that choice)
//!    have paid for it. So whenever the job ends, the search has cost it
//!    at most `search_budget` of its time in that collective beyond what
//!    it saved, plus one window. Windows are long enough that their point
//!    costs at most [`AGREE_SHARE`] of their calls' time (up to
//!    [`MAX_WINDOW`]); a collective whose windows cannot be made that
//!    long (an agreed point dearer than [`LEAVE_CALLS`] calls) is not
//!    searched at all ([`Event::Left`]: the default, with a check point as
//!    rare as a decided search's, where a cheaper point starts the
//!    search); a candidate is first run for one call (a probe,
//!    when windows are longer than a call and a point costs at most
//!    [`AGREE_SHARE`] of one) and dropped there if that call is
//!    `drop_factor` times the default's. While decided,
//!    check points are at least far enough apart to cost [`CHECK_SHARE`]
//!    of the calls' time. On one host a point costs microseconds; across
//!    nodes, with more ranks than cores, one costs milliseconds, more
//!    than a window of short calls.
//!
//! Why the search is shaped this way, and the wrong choices each step
//! prevents: docs/design.md#decisions-worth-knowing; the defaults and
//! what they cost: docs/collective-tuning.md#how-it-stays-safe.
//!
//! A user's choice (`mpit-tuner set`, handed over by the helper thread and
//! agreed on by the communicator table in `tuner`) ends the search:
//! [`Search::pin`] at an agreed point puts it in [`State::Pinned`], where
//! the user's candidate runs every call and nothing is searched any more.
//! A pinned search still has an agreed point every `check_every` windows
//! (for a later request and for a stop), and reports once, at the first
//! of them, what ran since the pin ([`Event::Held`]).

/// Candidates per search at most (the default included).
pub const MAX_CANDIDATES: usize = 16;

/// The shortest window `window_time` makes (calls).
pub const MIN_WINDOW: u32 = 2;

/// The longest window while settling (calls).
pub const MAX_SETTLE_WINDOW: u32 = 1024;

/// The longest window `min_window_time` makes (calls).
pub const MAX_WINDOW: u32 = 4096;

/// While decided, check points cost at most this share of the calls'
/// time (when `search_budget` is on).
pub const CHECK_SHARE: f64 = 0.01;

/// While searching, a window's agreed point costs at most this share of
/// the window's calls at the default's time (when `search_budget` is on):
/// windows are lengthened to that, up to [`MAX_WINDOW`] calls.
pub const AGREE_SHARE: f64 = 0.02;

/// A collective whose agreed point costs more than this many of its calls
/// is left alone ([`Event::Left`]): no window of at most [`MAX_WINDOW`]
/// calls would keep its point within [`AGREE_SHARE`] of it (81.92 calls).
pub const LEAVE_CALLS: f64 = AGREE_SHARE * MAX_WINDOW as f64;

/// Whether an agreed point of `point_ns` is too dear to search a
/// collective whose call takes `call_ns` ([`LEAVE_CALLS`]).
fn point_too_dear(point_ns: f64, call_ns: f64) -> bool {
    point_ns > LEAVE_CALLS * call_ns
}

/// The distance between check points grows to at most this many times
/// `check_every` windows.
pub const MAX_BACKOFF: u32 = 64;

/// The default's first window in a search, which measures its time per
/// call to size the other windows: [`MIN_WINDOW`] calls when windows are
/// sized by `window_time` (a long call is not run `window` times at the
/// default before anything else is tried), else `window`.
fn first_window(params: Params) -> u32 {
    if params.measure || params.window_time_ns <= 0.0 {
        params.window
    } else {
        MIN_WINDOW.min(params.window)
    }
}

/// The knobs of a search, the same on every rank (they come from the
/// policy file, whose identity the ranks agree on at start).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Params {
    /// Calls with the default before measuring (first-call effects).
    pub warmup: u32,
    /// Nothing is measured until every rank has run this long since
    /// tuning started (ns; 0: off; measure mode never settles).
    pub settle_ns: f64,
    /// Calls in one measurement window (at least 1).
    pub window: u32,
    /// After the default's first window, windows of about this many
    /// nanoseconds (from [`MIN_WINDOW`] to `window` calls); 0: always
    /// `window` calls.
    pub window_time_ns: f64,
    /// After the default's first window, windows of at least this many
    /// nanoseconds (from `window` to [`MAX_WINDOW`] calls); 0: off.
    pub min_window_time_ns: f64,
    /// Windows per candidate at most (at least 1): each runs one, and
    /// only those within `margin` of the fastest so far run more.
    pub windows: u32,
    /// A candidate whose first window is this many times slower than the
    /// default is dropped at once.
    pub drop_factor: f64,
    /// A candidate must be this much faster than the default (0.05: 5%)
    /// to be kept, and within this much of the fastest so far to run
    /// more than one window.
    pub margin: f64,
    /// While decided: windows between check points (at least 1).
    pub check_every: u32,
    /// While decided: relative change of the time per call that restarts
    /// the search (0.5: 50%); 0 disables the drift check.
    pub drift: f64,
    /// Check points in a row that must see the drift (at least 1).
    pub drift_confirm: u32,
    /// Calls after a decision before it is searched again (0: never).
    pub recheck: u64,
    /// What searching may cost beyond what it saved, as a share of the
    /// time the job ran the collective in this bin at the default's time
    /// per call (0.02: 2%; see the module's item 6); 0: off (no pacing,
    /// no probes, no window lengthened for its point, nothing left alone).
    pub search_budget: f64,
    /// Communicators smaller than this are not tuned.
    pub min_comm_size: u32,
    /// Measure only (for tuning across runs): the algorithm set at start
    /// runs every call, every window is timed and agreed, nothing is
    /// switched, and [`Search::measurement`] gives the agreed time per call.
    pub measure: bool,
    /// Mode `safe`: the interposer hands the tuner only the calls whose
    /// result cannot depend on the algorithm ([`crate::collectives::exact_only`]);
    /// the others run the library's default and are not counted.
    pub exact_only: bool,
}

impl Default for Params {
    fn default() -> Params {
        Params {
            warmup: 2,
            settle_ns: 20.0e6,
            window: 8,
            window_time_ns: 25.0e6,
            min_window_time_ns: 200.0e3,
            windows: 2,
            drop_factor: 3.0,
            margin: 0.05,
            check_every: 64,
            drift: 0.5,
            drift_confirm: 3,
            recheck: 0,
            search_budget: 0.02,
            min_comm_size: 2,
            measure: false,
            exact_only: false,
        }
    }
}

impl Params {
    /// The same parameters with every count at least 1.
    pub fn sanitized(self) -> Params {
        Params {
            window: self.window.max(1),
            window_time_ns: duration_ns(self.window_time_ns),
            min_window_time_ns: duration_ns(self.min_window_time_ns),
            settle_ns: duration_ns(self.settle_ns),
            windows: self.windows.max(1),
            check_every: self.check_every.max(1),
            drop_factor: if self.drop_factor.is_finite() && self.drop_factor > 1.0 {
                self.drop_factor
            } else {
                f64::INFINITY
            },
            margin: self.margin.clamp(0.0, 0.99),
            drift: self.drift.max(0.0),
            drift_confirm: self.drift_confirm.max(1),
            search_budget: if self.search_budget.is_finite() {
                self.search_budget.clamp(0.0, 1.0)
            } else {
                0.0
            },
            ..self
        }
    }
}

/// A duration knob in nanoseconds: 0 (off) unless finite and positive.
fn duration_ns(ns: f64) -> f64 {
    if ns.is_finite() {
        ns.max(0.0)
    } else {
        0.0
    }
}

/// What the ranks agreed on at a point: the maximum over ranks of each
/// rank's mean time per call in the window (nanoseconds), whether a rank
/// stopped tuning, and what the last point cost.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Agreed {
    /// Max over ranks of the mean nanoseconds per call (0 if not timed).
    pub max_mean_ns: f64,
    /// Some rank stopped tuning: every rank goes back to the default.
    pub stop: bool,
    /// The least time any rank has run since tuning started (ns).
    pub min_elapsed_ns: f64,
    /// The least time a rank spent in the last agreed point on this
    /// communicator (ns; 0: none measured yet). The least, because a
    /// rank that arrives early also waits for the others, which the
    /// application's own calls would have done.
    pub point_ns: f64,
    /// What the tool's other collectives on this communicator (its setup,
    /// Open MPI's candidate communicators) cost since the last point, the
    /// least over ranks (ns): a search pays for them as for its points.
    pub other_ns: f64,
}

impl Agreed {
    /// What the ranks agree after the job's start: `max_mean_ns`, and
    /// whether one stopped.
    pub fn settled(max_mean_ns: f64, stop: bool) -> Agreed {
        Agreed {
            max_mean_ns,
            stop,
            min_elapsed_ns: f64::INFINITY,
            point_ns: 0.0,
            other_ns: 0.0,
        }
    }
}

/// Where a search is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// The first calls, with the default.
    Warmup,
    /// Measuring candidate `candidate`.
    Trial {
        /// The candidate's index.
        candidate: usize,
    },
    /// Every candidate measured and one beats the default: the default
    /// runs one more window before the decision.
    Confirm,
    /// Using `candidate`; `since` calls since the decision.
    Decided {
        /// The chosen candidate.
        candidate: usize,
        /// Calls since the decision.
        since: u64,
    },
    /// Pinned by a user's request: `candidate` every call, no search.
    Pinned {
        /// The user's candidate.
        candidate: usize,
        /// Calls since the pin.
        since: u64,
    },
    /// Tuning stopped: the default for good.
    Off,
}

/// What happened at a point, for the log (identical on every rank).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Event {
    /// A candidate's measurement ended.
    Trial {
        /// The candidate.
        candidate: usize,
        /// Its agreed time per call (ns).
        ns: f64,
        /// Calls it ran.
        calls: u64,
        /// Dropped after its first window (too slow).
        dropped: bool,
    },
    /// The search ended.
    Decision {
        /// The chosen candidate (0: the default).
        candidate: usize,
        /// The default's time per call (ns).
        default_ns: f64,
        /// The chosen one's (ns).
        chosen_ns: f64,
        /// Time the search cost beyond what the best would have taken
        /// (ns): its trials' calls, each beyond the fastest candidate's
        /// time, and its agreed points.
        cost_ns: f64,
        /// The choice came from the tuning store ([`Search::warm`]) and
        /// this search confirmed it against the default.
        stored: bool,
    },
    /// The collective is not searched: one agreed point costs more than
    /// a call of the default (`search_budget` on). The default runs; a
    /// check point now and then (as rare as a decided search's) starts
    /// the search once a point costs less than a call.
    /// Also a tuning store's choice kept without its confirmation
    /// (`candidate` not 0, `stored`): no window could confirm it within
    /// [`AGREE_SHARE`] either. It runs from here; the first timed check
    /// point measures it, and the default comes back, with another
    /// `Left` (candidate 0, `stored` false, `stored_ns` that time), when
    /// it is slower than the default by `margin`.
    Left {
        /// What runs from here (0: the default).
        candidate: usize,
        /// `candidate` is the tuning store's choice, kept unconfirmed.
        stored: bool,
        /// The tuning store's choice measured at a check point, when it
        /// was slower than the default (ns; 0 otherwise).
        stored_ns: f64,
        /// The default's agreed time per call (ns).
        default_ns: f64,
        /// What an agreed point costs (ns).
        point_ns: f64,
        /// What this search spent before it left (ns): its points and
        /// the tool's other collectives.
        cost_ns: f64,
    },
    /// The decision is searched again.
    Recheck {
        /// Why.
        why: Why,
        /// The agreed time per call now (ns).
        ns: f64,
    },
    /// A rank stopped tuning: the default from now on.
    Stopped,
    /// A user's request pinned the search to `candidate` at this point
    /// (the same call on every rank): searching stops.
    Pinned {
        /// The user's candidate (0: the default).
        candidate: usize,
        /// Calls of this search before the pin (the same on every rank).
        calls: u64,
        /// The request's key (see the table's `request_key`).
        request: u64,
    },
    /// The first agreed point after a pin: what ran since.
    Held {
        /// The pinned candidate, which ran every call since the pin.
        candidate: usize,
        /// Its agreed time per call in the timed window (ns; 0 if none
        /// was timed).
        ns: f64,
        /// Calls since the pin.
        calls: u64,
        /// The request's key.
        request: u64,
    },
    /// Measure mode, at the end: the agreed time per call of the algorithm
    /// set at start over the windows measured.
    Measured {
        /// Agreed time per call (ns): the mean over windows, weighted by
        /// their calls, of the maximum over ranks of each rank's mean.
        ns: f64,
        /// Calls measured (whole windows; the warm-up and the last,
        /// unfinished window are not).
        calls: u64,
    },
}

/// Why a decision is searched again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Why {
    /// The time per call drifted (`drift`, `drift_confirm` check points in
    /// a row).
    Drift,
    /// `recheck` calls passed.
    Periodic,
    /// The search could not tell its choice from another candidate (within
    /// `margin` of each other): once, at the first check point.
    Tie,
    /// The search switched away from the default for a gain of less than
    /// twice `margin`: once, at the first check point.
    Marginal,
    /// The collective was left alone ([`Event::Left`]) and an agreed point
    /// now costs at most [`LEAVE_CALLS`] calls.
    Cheaper,
    /// The search started from the tuning store's choice
    /// ([`Search::warm`]), which did not beat the default by `margin`
    /// here: every other candidate is searched now.
    Unconfirmed,
}

/// One search.
#[derive(Debug, Clone)]
pub struct Search {
    params: Params,
    candidates: usize,
    state: State,
    /// Calls seen (the same on every rank).
    calls: u64,
    /// Calls in the current window.
    in_window: u64,
    /// This rank's timed nanoseconds and timed calls in the window.
    window_ns: u64,
    window_timed: u32,
    /// Agreed time per call of each candidate times the calls of the
    /// window, summed over its windows.
    sums: [f64; MAX_CANDIDATES],
    /// Calls each candidate ran in its windows (0: not measured).
    calls_of: [u64; MAX_CANDIDATES],
    /// The default's confirming window ([`State::Confirm`]): agreed time
    /// per call times its calls, and its calls (0: not run).
    confirm_sum: f64,
    confirm_calls: u64,
    dropped: [bool; MAX_CANDIDATES],
    /// Candidates never tried here ([`Search::exclude`]): dropped again
    /// at every new search.
    excluded: [bool; MAX_CANDIDATES],
    /// Calls per window in this search ([`first_window`] until the
    /// default's first window is agreed, then `window_time` worth of calls).
    window: u32,
    /// Windows each candidate has run in this search (the default's
    /// top-up is one; measure mode counts every window).
    windows_of: [u32; MAX_CANDIDATES],
    /// Calls of the candidate's windows since it last took over (one
    /// [`Event::Trial`] reports them).
    visit_calls: u64,
    /// The decided candidate's time per call, for the drift check.
    decided_ns: f64,
    /// Check points in a row that saw a drift.
    strikes: u32,
    /// The distance between check points, in `check_every` windows
    /// (1 to [`MAX_BACKOFF`]).
    backoff: u32,
    /// What the last search chose, to tell a search that found the same.
    last_choice: Option<usize>,
    /// The last search ended in a tie or a marginal switch: search again
    /// at the first check point, for this reason.
    second_look: Option<Why>,
    /// This search is that second look: what it finds is kept.
    second_search: bool,
    /// Pinned: whether [`Event::Held`] was reported.
    held: bool,
    /// Pinned: the request's key.
    request: u64,
    /// The agreed cost of an agreed point here (ns; 0: not known yet).
    point_ns: f64,
    /// What the agreed points of this search cost so far (ns).
    points_ns: f64,
    /// Points of this search before any point was priced.
    unpriced: u32,
    /// Calls before this search began.
    search_start: u64,
    /// The default's agreed time per call while settling (ns).
    default_est: f64,
    /// The window under way is thrown away (settling) whatever the
    /// elapsed time at its end: the last point predicted, from agreed
    /// numbers, that it ends before `settle`. Its calls are neither timed
    /// nor counted one by one (the quiet path), so settling costs a short
    /// job no more than its points.
    settling: bool,
    /// Calls with the default, untimed, before the next window starts
    /// (pacing, item 6).
    rest: u64,
    /// The candidate those calls run (see [`Search::pace`]).
    rest_with: usize,
    /// While decided: the fewest calls between check points that keep
    /// them within [`CHECK_SHARE`] of the calls' time.
    check_floor: u64,
    /// What searching has spent over the search's life, beyond the
    /// default's time and net of savings (ns; item 6).
    spent_ns: f64,
    /// The default's agreed time per call, the latest known (ns; 0: not
    /// known yet).
    ref_ns: f64,
    /// The candidate each call since the last point ran while resting,
    /// and how many (for the account: what they saved or cost).
    rested: (usize, u64),
    /// Calls at the last agreed point (for the account of a decided
    /// search's calls).
    last_point: u64,
    /// The window under way is a probe of its candidate (one call).
    probing: bool,
    /// Candidates probed in this search, and each probe's agreed time (ns).
    probed: [bool; MAX_CANDIDATES],
    probe_ns: [f64; MAX_CANDIDATES],
    /// Calls each candidate ran in this search, whatever the window
    /// (rests, probes, warm-up and settling for the default): for the
    /// decision's cost.
    ran: [u64; MAX_CANDIDATES],
    /// Decided on the default because a point costs more than a call
    /// ([`Event::Left`]).
    left: bool,
    /// Points over the search's life before any point was priced.
    unpriced_spent: u32,
    /// The tuning store's choice this search started from
    /// ([`Search::warm`]), while it is being confirmed.
    confirming: Option<usize>,
    /// The candidates left out while the store's choice is confirmed.
    deferred: [bool; MAX_CANDIDATES],
    /// Left with the store's choice unconfirmed: the next timed check
    /// point measures it against the default's `ref_ns`.
    unconfirmed: bool,
}

impl Search {
    /// A search over `candidates` candidates (index 0 is the default;
    /// clamped to 1..=[`MAX_CANDIDATES`]).
    pub fn new(params: Params, candidates: usize) -> Search {
        let candidates = if params.measure { 1 } else { candidates };
        Search {
            params: params.sanitized(),
            candidates: candidates.clamp(1, MAX_CANDIDATES),
            state: if candidates > 1 || params.measure {
                State::Warmup
            } else {
                State::Off
            },
            calls: 0,
            in_window: 0,
            window_ns: 0,
            window_timed: 0,
            sums: [0.0; MAX_CANDIDATES],
            calls_of: [0; MAX_CANDIDATES],
            confirm_sum: 0.0,
            confirm_calls: 0,
            dropped: [false; MAX_CANDIDATES],
            excluded: [false; MAX_CANDIDATES],
            window: first_window(params.sanitized()),
            windows_of: [0; MAX_CANDIDATES],
            visit_calls: 0,
            decided_ns: 0.0,
            strikes: 0,
            backoff: 1,
            last_choice: None,
            second_look: None,
            second_search: false,
            held: false,
            request: 0,
            point_ns: 0.0,
            points_ns: 0.0,
            unpriced: 0,
            search_start: 0,
            default_est: 0.0,
            settling: false,
            rest: 0,
            rest_with: 0,
            check_floor: 0,
            spent_ns: 0.0,
            ref_ns: 0.0,
            rested: (0, 0),
            last_point: 0,
            probing: false,
            probed: [false; MAX_CANDIDATES],
            probe_ns: [0.0; MAX_CANDIDATES],
            ran: [0; MAX_CANDIDATES],
            left: false,
            unpriced_spent: 0,
            confirming: None,
            deferred: [false; MAX_CANDIDATES],
            unconfirmed: false,
        }
    }

    /// Starts from a choice the tuning store holds for this search
    /// (docs/tuning-store.md): the first search measures only the default
    /// and `candidate` (with the usual warm-up, settling, probe, windows,
    /// confirming window and pricing) and keeps `candidate` if it beats
    /// the default by `margin` ([`Event::Decision`] with `stored`); if not,
    /// the other candidates are searched at once ([`Why::Unconfirmed`]).
    /// With `candidate` 0 (the store kept the default, or left the
    /// collective alone) only the default's windows run before it is
    /// decided. Call it before the search's first measured window (at or
    /// before an agreed point that ends a warm-up or settling window),
    /// after [`Search::exclude`], the same on every rank. Returns false,
    /// and changes nothing, for a candidate the search cannot run
    /// (excluded, not one of its) or a search that is off, measuring or
    /// has measured a window.
    pub fn warm(&mut self, candidate: usize) -> bool {
        // Settling windows of the default may have run: they are thrown
        // away (a communicator is set up at its first agreed point).
        let fresh = match self.state {
            State::Warmup => true,
            State::Trial { candidate: 0 } => {
                self.windows_of.iter().all(|&w| w == 0) && !self.probed.iter().any(|&p| p)
            }
            _ => false,
        };
        if self.params.measure || !fresh || candidate >= self.candidates || self.excluded[candidate]
        {
            return false;
        }
        self.confirming = Some(candidate);
        for c in 1..self.candidates {
            if c != candidate && !self.dropped[c] {
                self.dropped[c] = true;
                self.deferred[c] = true;
            }
        }
        true
    }

    /// Whether the search is confirming the tuning store's choice.
    pub fn confirming(&self) -> Option<usize> {
        self.confirming
    }

    /// What searching has spent so far, beyond the default's time and net
    /// of what its choices saved (ns): its points, the tool's other
    /// collectives, its candidates' calls.
    pub fn spent(&self) -> f64 {
        self.spent_ns
    }

    /// Whether the collective is left alone ([`Event::Left`]).
    pub fn is_left(&self) -> bool {
        self.left
    }

    /// Never tries `candidate` (the library cannot run it here): call it
    /// before the first call, the same on every rank. A user's pin of it
    /// pins the default instead.
    pub fn exclude(&mut self, candidate: usize) {
        if (1..self.candidates).contains(&candidate) {
            self.excluded[candidate] = true;
            self.dropped[candidate] = true;
        }
    }

    /// Where it is.
    pub fn state(&self) -> State {
        self.state
    }

    /// Calls seen.
    pub fn calls(&self) -> u64 {
        self.calls
    }

    /// Calls the search waits, with the default, before its next window
    /// (its agreed points are over budget).
    pub fn resting(&self) -> u64 {
        self.rest
    }

    /// The candidate the next call uses.
    #[inline]
    pub fn choice(&self) -> usize {
        match self.state {
            State::Trial { .. } | State::Confirm if self.rest > 0 => self.rest_with,
            State::Trial { candidate, .. }
            | State::Decided { candidate, .. }
            | State::Pinned { candidate, .. } => candidate,
            State::Confirm | State::Warmup | State::Off => 0,
        }
    }

    /// Whether the next call should be timed: not a window's lead-in
    /// (see `past_lead_in`).
    #[inline]
    pub fn wants_time(&self) -> bool {
        match self.state {
            State::Trial { .. } | State::Confirm => {
                self.rest == 0 && !self.settling && self.past_lead_in(self.trial_length())
            }
            // Drift check: a few calls of each check interval.
            State::Decided { .. } => {
                self.params.drift > 0.0
                    && self.in_window < u64::from(self.window)
                    && self.past_lead_in(u64::from(self.window))
            }
            // What ran after a pin: the first window of each interval.
            State::Pinned { .. } => {
                self.in_window < u64::from(self.params.window)
                    && self.past_lead_in(u64::from(self.params.window))
            }
            State::Warmup | State::Off => false,
        }
    }

    /// Whether the window under way, of `length` calls, is past its
    /// lead-in: the first call of a window longer than one call is not
    /// timed. It starts right after an agreed point (or a rest on another
    /// algorithm), with every rank leaving the point's reduction together
    /// and the network idle, which the application's own calls back to
    /// back never see: an algorithm whose calls overlap back to back (a
    /// chain, a pipeline) pays its whole start-up there
    /// (Open MPI's default bcast of 1 MiB on 4 emulated nodes: 27 ms for
    /// such a call against 17 ms back to back), so two-call windows ranked
    /// it behind a 10% slower tree (docs/collective-tuning.md#how-it-stays-safe).
    /// A job whose calls are apart (work between them) starts each call
    /// that way anyway and keeps that cost in every timed call.
    #[inline]
    fn past_lead_in(&self, length: u64) -> bool {
        self.in_window > 0 || length < 2
    }

    /// Counts a call (with its duration if it was timed). Returns this
    /// rank's mean nanoseconds per timed call of the window when this call
    /// ends one: an agreed point, where the caller must reduce across the
    /// communicator and call [`Search::agree`].
    #[inline]
    pub fn count(&mut self, ns: Option<u64>) -> Option<f64> {
        self.calls += 1;
        if let Some(ns) = ns {
            self.window_ns = self.window_ns.saturating_add(ns);
            self.window_timed += 1;
        }
        match &mut self.state {
            State::Off => return None,
            State::Warmup => {
                if self.calls >= u64::from(self.params.warmup) {
                    self.state = State::Trial { candidate: 0 };
                    self.reset_window();
                }
                return None;
            }
            State::Decided { since, .. } | State::Pinned { since, .. } => *since += 1,
            State::Trial { .. } | State::Confirm if self.rest > 0 => {
                self.rest -= 1;
                return None;
            }
            State::Trial { .. } | State::Confirm => {}
        }
        self.in_window += 1;
        let length = match self.state {
            State::Decided { .. } => self.check_interval(),
            State::Pinned { .. } => self.pinned_interval(),
            _ => self.trial_length(),
        };
        (self.in_window >= length).then(|| {
            if self.window_timed == 0 {
                0.0
            } else {
                self.window_ns as f64 / f64::from(self.window_timed)
            }
        })
    }

    /// How many of the next calls change nothing but the counts: untimed,
    /// on the same candidate, none ending a window. The table lets the
    /// wrapper run that many without borrowing the search (steady state),
    /// and [`Search::count_quiet`] adds them later. 0 while searching,
    /// warming up or measuring, and from the call that starts a timed
    /// window on.
    pub fn quiet(&self) -> u32 {
        let length = match self.state {
            State::Off if !self.params.measure => return u32::MAX,
            State::Decided { .. }
                if self.params.drift <= 0.0 || self.in_window >= u64::from(self.window) =>
            {
                self.check_interval()
            }
            State::Pinned { .. } if self.in_window >= u64::from(self.params.window) => {
                self.pinned_interval()
            }
            // Resting: untimed calls of the default, none ending a window.
            State::Trial { .. } | State::Confirm if self.rest > 0 => {
                return u32::try_from(self.rest).unwrap_or(u32::MAX);
            }
            // Settling: untimed calls of the default, all but the one
            // that ends the window.
            State::Trial { candidate: 0 } if self.settling => self.trial_length(),
            _ => return 0,
        };
        // The call that makes `in_window` reach `length` ends the window.
        let left = length.saturating_sub(self.in_window).saturating_sub(1);
        u32::try_from(left).unwrap_or(u32::MAX)
    }

    /// Counts `n` calls that [`Search::quiet`] allowed, as `n` calls of
    /// [`Search::count`] without a duration would have.
    pub fn count_quiet(&mut self, n: u32) {
        if n == 0 {
            return;
        }
        let n = u64::from(n);
        self.calls += n;
        match &mut self.state {
            State::Off => return,
            State::Decided { since, .. } | State::Pinned { since, .. } => *since += n,
            // Resting.
            State::Trial { .. } | State::Confirm if self.rest > 0 => {
                self.rest = self.rest.saturating_sub(n);
                return;
            }
            // Settling (quiet() gives 0 otherwise there).
            State::Trial { .. } | State::Confirm => {}
            // Not reached: quiet() gives 0 there.
            State::Warmup => {}
        }
        self.in_window += n;
    }

    /// Calls between two check points while decided: `check_every`
    /// windows (times the backoff), or more when check points would cost
    /// more than [`CHECK_SHARE`] of the calls' time (item 6).
    pub fn check_interval(&self) -> u64 {
        (u64::from(self.window) * u64::from(self.params.check_every) * u64::from(self.backoff))
            .max(self.check_floor)
    }

    /// Calls between two agreed points while pinned: `check_every`
    /// windows, never backed off (a later request waits at most this).
    pub fn pinned_interval(&self) -> u64 {
        u64::from(self.params.window) * u64::from(self.params.check_every)
    }

    /// Pins the search to `candidate` (a user's request), at an agreed
    /// point: every rank must call it at the same call of the
    /// communicator with the same arguments. The window starts again and
    /// the candidate runs from the next call on. Returns the event for the
    /// log, or `None` when the search is off (stopped, measuring, or no
    /// candidates) or `candidate` is not one of its candidates.
    pub fn pin(&mut self, candidate: usize, request: u64) -> Option<Event> {
        if self.state == State::Off || self.params.measure || candidate >= self.candidates {
            return None;
        }
        let candidate = if self.excluded[candidate] {
            0
        } else {
            candidate
        };
        self.reset_window();
        self.strikes = 0;
        self.held = false;
        self.confirming = None;
        self.request = request;
        self.state = State::Pinned {
            candidate,
            since: 0,
        };
        Some(Event::Pinned {
            candidate,
            calls: self.calls,
            request,
        })
    }

    /// Calls in the window under way while searching: `window`, except
    /// during the default's top-up ([`Search::trial_point`]), which runs
    /// what its first window lacked of `window`. The top-up is the only
    /// default window that follows a first window shorter than `window`:
    /// without one, the default's first window was at least `window` long,
    /// and any later window of the default is a whole one.
    fn trial_length(&self) -> u64 {
        let window = u64::from(self.window);
        let first = self.calls_of[0];
        match self.state {
            State::Trial { .. } if self.probing => 1,
            State::Trial { candidate: 0 }
                if !self.params.measure && self.windows_of[0] == 1 && window > first =>
            {
                window - first
            }
            _ => window,
        }
    }

    fn reset_window(&mut self) {
        self.in_window = 0;
        self.window_ns = 0;
        self.window_timed = 0;
    }

    /// Applies what the ranks agreed at the point [`Search::count`]
    /// announced; returns what happened, for the log (at most two events:
    /// the last trial and the decision). Allocates nothing.
    pub fn agree(&mut self, agreed: Agreed) -> [Option<Event>; 2] {
        if agreed.point_ns > 0.0 && agreed.point_ns.is_finite() {
            self.point_ns = agreed.point_ns;
        }
        let priced = !matches!(self.state, State::Pinned { .. } | State::Off);
        if priced && !self.params.measure {
            self.account(agreed);
        }
        // Only a search that has run no candidate yet leaves: one that has
        // goes on, paced.
        let may_leave = matches!(self.state, State::Trial { candidate: 0 })
            && self.windows_of[1..self.candidates].iter().all(|&w| w == 0)
            && !self.probed[1..self.candidates].iter().any(|&p| p);
        if matches!(self.state, State::Trial { .. } | State::Confirm) {
            // The points before the first was priced cost what it did.
            self.unpriced += 1;
            if self.point_ns > 0.0 {
                self.points_ns += self.point_ns * f64::from(std::mem::take(&mut self.unpriced));
            }
            if agreed.other_ns > 0.0 && agreed.other_ns.is_finite() {
                self.points_ns += agreed.other_ns;
            }
        }
        let events = self.transition(agreed);
        let events = if may_leave {
            self.leave_if_dear(events)
        } else {
            events
        };
        self.pace();
        self.last_point = self.calls;
        events
    }

    /// Item 6's account, at an agreed point: what the calls since the
    /// last point ran (the rest, the window, the warm-up before it) and
    /// what that cost beyond the default's time per call, this point and
    /// the tool's other collectives. Agreed numbers and call counts only.
    fn account(&mut self, agreed: Agreed) {
        let window_of = match self.state {
            State::Trial { candidate } => Some(candidate),
            State::Confirm => Some(0),
            State::Decided { candidate, .. } => Some(candidate),
            _ => None,
        };
        if let (Some(State::Trial { candidate: 0 }), true) = (
            Some(self.state),
            agreed.max_mean_ns > 0.0 && agreed.max_mean_ns.is_finite(),
        ) {
            // The default's latest measurement, settling windows included.
            self.ref_ns = agreed.max_mean_ns;
        }
        let since = self.calls.saturating_sub(self.last_point);
        let (rest_with, rest_calls) = std::mem::take(&mut self.rested);
        let window_calls = if matches!(self.state, State::Decided { .. }) {
            since.saturating_sub(rest_calls)
        } else {
            self.in_window.min(since.saturating_sub(rest_calls))
        };
        let warm = since.saturating_sub(rest_calls + window_calls);
        self.ran[0] += warm;
        self.ran[rest_with] += rest_calls;
        let mut spent = 0.0;
        if let Some(c) = window_of {
            self.ran[c] += window_calls;
            let ns = match self.state {
                State::Decided { .. } if self.decided_ns > 0.0 => self.decided_ns,
                _ => agreed.max_mean_ns,
            };
            if c != 0 && ns > 0.0 && self.ref_ns > 0.0 {
                spent += (ns - self.ref_ns) * window_calls as f64;
            }
        }
        if rest_with != 0 && self.ref_ns > 0.0 && self.calls_of[rest_with] > 0 {
            spent += (self.mean(rest_with) - self.ref_ns) * rest_calls as f64;
        }
        // The points before the first was priced cost what it did.
        self.unpriced_spent += 1;
        if self.point_ns > 0.0 {
            spent += self.point_ns * f64::from(std::mem::take(&mut self.unpriced_spent));
        }
        if agreed.other_ns > 0.0 && agreed.other_ns.is_finite() {
            spent += agreed.other_ns;
        }
        if spent.is_finite() {
            self.spent_ns += spent;
        }
    }

    /// What the search may have spent by now: `search_budget` of the
    /// calls so far at the default's time per call (ns).
    fn allowance(&self) -> f64 {
        self.params.search_budget * self.calls as f64 * self.ref_ns
    }

    /// After a search's point: when an agreed point costs more than
    /// [`LEAVE_CALLS`] calls of the default, the collective is left alone
    /// ([`Event::Left`], in place of whatever the point decided otherwise).
    fn leave_if_dear(&mut self, events: [Option<Event>; 2]) -> [Option<Event>; 2] {
        let searching = matches!(self.state, State::Trial { .. } | State::Confirm);
        if self.params.search_budget <= 0.0
            || self.params.measure
            || !searching
            || self.ref_ns <= 0.0
            || !point_too_dear(self.point_ns, self.ref_ns)
        {
            return events;
        }
        let cost_ns = self.points_ns
            + self.ran[1..self.candidates]
                .iter()
                .zip(&self.probe_ns[1..self.candidates])
                .map(|(&n, &t)| (t - self.ref_ns).max(0.0) * n as f64)
                .sum::<f64>();
        self.left = true;
        // The tuning store's choice for this job's shape, where no window
        // could confirm it either: kept, measured at the first timed
        // check point (docs/tuning-store.md#when-confirming-costs-too-much).
        let kept = self.confirming.take().unwrap_or(0);
        self.unconfirmed = kept != 0;
        self.decided_ns = self.ref_ns;
        self.state = State::Decided {
            candidate: kept,
            since: 0,
        };
        self.reset_window();
        self.rest = 0;
        self.probing = false;
        let left = Event::Left {
            candidate: kept,
            stored: kept != 0,
            stored_ns: 0.0,
            default_ns: self.ref_ns,
            point_ns: self.point_ns,
            cost_ns,
        };
        match events {
            [Some(e), _] => [Some(e), Some(left)],
            _ => [Some(left), None],
        }
    }

    /// Item 6: while searching, the calls the next window waits so that
    /// what the search spent, and what the next window will cost, stay
    /// within `search_budget` of the job's time in the collective, net of
    /// what the wait's choice saves (at the time per call of what the
    /// wait runs); while decided, the distance between check points that
    /// keeps them within [`CHECK_SHARE`]. Agreed numbers and call counts
    /// only.
    fn pace(&mut self) {
        let budget = self.params.search_budget;
        self.rest = 0;
        self.check_floor = 0;
        if budget <= 0.0 || self.params.measure {
            return;
        }
        match self.state {
            State::Trial { .. } | State::Confirm if self.ref_ns > 0.0 => {
                // Windows long enough that their point is a small share.
                if self.point_ns > 0.0 && self.windows_of[0] > 0 {
                    let calls = (self.point_ns / (AGREE_SHARE * self.ref_ns)).ceil();
                    let calls = calls.clamp(1.0, f64::from(MAX_WINDOW)) as u32;
                    self.window = self.window.max(calls);
                }
                self.start_probe();
                // The wait runs what the search would choose now: the
                // fastest candidate measured if it beats the default by
                // `margin`, else the default. A job whose search found a
                // better algorithm does not wait on the default.
                self.rest_with = self.winner().unwrap_or(0);
                let per_call = if self.calls_of[self.rest_with] > 0 {
                    self.mean(self.rest_with)
                } else {
                    self.ref_ns
                };
                let saved = (self.ref_ns - per_call).max(0.0);
                let deficit = self.spent_ns + self.next_cost() - self.allowance();
                if deficit > 0.0 {
                    let calls = (deficit / (budget * self.ref_ns + saved)).ceil();
                    // Capped: a search that needs longer than this waits
                    // again at its next point.
                    self.rest = calls.clamp(0.0, f64::from(u32::MAX)) as u64;
                }
                self.rested = (self.rest_with, self.rest);
            }
            State::Decided { .. } if self.decided_ns > 0.0 && self.point_ns > 0.0 => {
                let calls = (self.point_ns / (CHECK_SHARE * self.decided_ns)).ceil();
                self.check_floor = calls.clamp(0.0, 1.0e15) as u64;
            }
            _ => {}
        }
    }

    /// What the next window will cost beyond the default's time (ns): its
    /// point, and its calls at its candidate's time so far (a probe's, or
    /// for a candidate not run yet, `drop_factor` times the default's,
    /// the most it can cost before it is dropped; the default's for the
    /// tuning store's choice being confirmed).
    fn next_cost(&self) -> f64 {
        let point = self.point_ns;
        let calls = self.trial_length() as f64;
        let c = match self.state {
            State::Trial { candidate } => candidate,
            _ => 0,
        };
        let per_call = if c == 0 {
            self.ref_ns
        } else if self.calls_of[c] > 0 {
            self.mean(c)
        } else if self.probed[c] {
            self.probe_ns[c]
        } else if self.confirming == Some(c) {
            // The store's choice was faster than the default where it was
            // learned: its first call (a probe, when windows are longer)
            // bounds what a wrong entry costs.
            self.ref_ns
        } else if self.params.drop_factor.is_finite() {
            self.params.drop_factor * self.ref_ns
        } else {
            4.0 * self.ref_ns
        };
        point + (per_call - self.ref_ns).max(0.0) * calls
    }

    /// Starts the window of a candidate not run yet in this search with a
    /// probe of one call, when windows are longer than one call and the
    /// probe's point costs at most [`AGREE_SHARE`] of a window: a
    /// candidate hundreds of times slower than the default then costs
    /// one call, not a window, for a point that is a small share of one.
    fn start_probe(&mut self) {
        if let State::Trial { candidate } = self.state {
            let window_ns = f64::from(self.window) * self.ref_ns;
            self.probing = candidate != 0
                && !self.probed[candidate]
                && self.windows_of[candidate] == 0
                && self.in_window == 0
                && self.window > 1
                && self.point_ns <= AGREE_SHARE * window_ns;
        }
    }

    fn transition(&mut self, agreed: Agreed) -> [Option<Event>; 2] {
        let window_calls = self.in_window;
        let timed = self.window_timed > 0;
        let settling = std::mem::take(&mut self.settling);
        self.reset_window();
        if agreed.stop {
            let was_on = self.state != State::Off;
            self.state = State::Off;
            return [was_on.then_some(Event::Stopped), None];
        }
        match self.state {
            State::Trial { candidate: 0 }
                if self.windows_of[0] == 0
                    && !self.params.measure
                    && (settling || agreed.min_elapsed_ns < self.params.settle_ns) =>
            {
                // The job's first calls: thrown away.
                self.window = self.window.saturating_mul(2).min(MAX_SETTLE_WINDOW);
                if agreed.max_mean_ns > 0.0 {
                    self.default_est = agreed.max_mean_ns;
                }
                // The next window is untimed when, at the default's time
                // per call, it ends before `settle` (the calls' own time
                // only: the job's work between them makes it end later,
                // by at most one window of delay).
                let end = agreed.min_elapsed_ns + f64::from(self.window) * self.default_est;
                self.settling = self.default_est > 0.0 && end < self.params.settle_ns;
                [None, None]
            }
            State::Trial { candidate } if std::mem::take(&mut self.probing) => {
                self.probe_point(candidate, agreed)
            }
            State::Trial { candidate } => {
                self.calls_of[candidate] += window_calls;
                self.trial_point(candidate, window_calls, agreed)
            }
            State::Confirm => {
                self.confirm_sum += agreed.max_mean_ns * window_calls as f64;
                self.confirm_calls += window_calls;
                let event = Event::Trial {
                    candidate: 0,
                    ns: self.mean(0),
                    calls: window_calls,
                    dropped: false,
                };
                [Some(event), Some(self.decide())]
            }
            State::Decided { candidate, .. }
                if self.unconfirmed && timed && agreed.max_mean_ns > 0.0 =>
            {
                self.stored_checked(candidate, window_calls, agreed.max_mean_ns)
            }
            State::Decided { candidate, since } => {
                let drifted = self.params.drift > 0.0
                    && agreed.max_mean_ns > 0.0
                    && self.decided_ns > 0.0
                    && (agreed.max_mean_ns - self.decided_ns).abs()
                        > self.params.drift * self.decided_ns;
                self.strikes = if drifted { self.strikes + 1 } else { 0 };
                let drifted = self.strikes >= self.params.drift_confirm;
                let due = self.params.recheck > 0 && since >= self.params.recheck;
                let cheaper = self.left
                    && self.point_ns > 0.0
                    && !point_too_dear(self.point_ns, self.decided_ns);
                let why = if cheaper {
                    Some(Why::Cheaper)
                } else if drifted {
                    Some(Why::Drift)
                } else if due {
                    Some(Why::Periodic)
                } else {
                    self.second_look
                };
                if let Some(why) = why {
                    self.strikes = 0;
                    self.last_choice = Some(candidate);
                    self.second_search = self.second_look == Some(why);
                    self.second_look = None;
                    self.restart();
                    [
                        Some(Event::Recheck {
                            why,
                            ns: agreed.max_mean_ns,
                        }),
                        None,
                    ]
                } else {
                    self.state = State::Decided { candidate, since };
                    [None, None]
                }
            }
            State::Pinned { candidate, since } => {
                if self.held {
                    return [None, None];
                }
                self.held = true;
                [
                    Some(Event::Held {
                        candidate,
                        ns: if timed { agreed.max_mean_ns } else { 0.0 },
                        calls: since,
                        request: self.request,
                    }),
                    None,
                ]
            }
            State::Warmup | State::Off => [None, None],
        }
    }

    /// The first timed check point of a tuning store's choice kept
    /// unconfirmed ([`Event::Left`] with `stored`): `ns` is its agreed
    /// time per call over the check window of `calls` calls. Slower than
    /// the default's time by `margin`: the default runs from here (another
    /// `Left`, which the store keeps in place of the entry); else it is
    /// kept, and its own time is what drift is measured against.
    fn stored_checked(&mut self, candidate: usize, calls: u64, ns: f64) -> [Option<Event>; 2] {
        self.unconfirmed = false;
        self.strikes = 0;
        let slower = ns > self.ref_ns * (1.0 + self.params.margin);
        let trial = Event::Trial {
            candidate,
            ns,
            calls,
            dropped: slower,
        };
        if !slower {
            self.decided_ns = ns;
            self.state = State::Decided {
                candidate,
                since: 0,
            };
            return [Some(trial), None];
        }
        let cost_ns = (ns - self.ref_ns).max(0.0) * self.ran[candidate] as f64;
        self.decided_ns = self.ref_ns;
        self.state = State::Decided {
            candidate: 0,
            since: 0,
        };
        let back = Event::Left {
            candidate: 0,
            stored: false,
            stored_ns: ns,
            default_ns: self.ref_ns,
            point_ns: self.point_ns,
            cost_ns,
        };
        [Some(trial), Some(back)]
    }

    fn restart(&mut self) {
        self.unconfirmed = false;
        self.left = false;
        self.confirming = None;
        self.deferred = [false; MAX_CANDIDATES];
        self.probing = false;
        self.probed = [false; MAX_CANDIDATES];
        self.probe_ns = [0.0; MAX_CANDIDATES];
        self.ran = [0; MAX_CANDIDATES];
        self.sums = [0.0; MAX_CANDIDATES];
        self.calls_of = [0; MAX_CANDIDATES];
        self.confirm_sum = 0.0;
        self.confirm_calls = 0;
        self.dropped = self.excluded;
        self.windows_of = [0; MAX_CANDIDATES];
        self.visit_calls = 0;
        self.window = first_window(self.params);
        self.state = State::Trial { candidate: 0 };
        self.points_ns = 0.0;
        self.unpriced = 0;
        self.search_start = self.calls;
        self.settling = false;
        self.rest = 0;
        self.rest_with = 0;
        self.check_floor = 0;
    }

    /// A candidate's agreed time per call over its windows, each window
    /// weighted by its calls (the default's first window is shorter); for
    /// the default after its confirming window, the smaller of that window's
    /// time and the one measured first.
    fn mean(&self, c: usize) -> f64 {
        if c == 0 && self.confirm_calls > 0 {
            self.trial_mean(0).min(self.confirm_mean())
        } else {
            self.trial_mean(c)
        }
    }

    /// A candidate's time per call over its trial windows (the default's
    /// confirming window apart).
    fn trial_mean(&self, c: usize) -> f64 {
        self.sums[c] / self.calls_of[c].max(1) as f64
    }

    /// The default's time per call in its confirming window (0 before it).
    fn confirm_mean(&self) -> f64 {
        self.confirm_sum / self.confirm_calls.max(1) as f64
    }

    /// The fastest candidate measured, if it beats the default by `margin`.
    fn winner(&self) -> Option<usize> {
        (1..self.candidates)
            .filter(|&c| !self.dropped[c] && self.calls_of[c] > 0)
            .min_by(|&a, &b| self.mean(a).total_cmp(&self.mean(b)))
            .filter(|&b| self.mean(b) < self.mean(0) * (1.0 - self.params.margin))
    }

    /// The end of `candidate`'s probe (one call): dropped when that call
    /// took `drop_factor` times the default's time, else its first window
    /// follows.
    fn probe_point(&mut self, candidate: usize, agreed: Agreed) -> [Option<Event>; 2] {
        self.probed[candidate] = true;
        self.probe_ns[candidate] = agreed.max_mean_ns;
        if agreed.max_mean_ns <= self.params.drop_factor * self.mean(0) {
            return [None, None];
        }
        self.dropped[candidate] = true;
        let event = Event::Trial {
            candidate,
            ns: agreed.max_mean_ns,
            calls: 1,
            dropped: true,
        };
        if let Some(next) = self.next_trial() {
            self.state = State::Trial { candidate: next };
            return [Some(event), None];
        }
        if self.winner().is_some() {
            self.state = State::Confirm;
            return [Some(event), None];
        }
        [Some(event), Some(self.decide())]
    }

    /// The end of a window of `candidate`, of `calls` calls.
    fn trial_point(&mut self, candidate: usize, calls: u64, agreed: Agreed) -> [Option<Event>; 2] {
        self.sums[candidate] += agreed.max_mean_ns * calls as f64;
        self.windows_of[candidate] = self.windows_of[candidate].saturating_add(1);
        if self.params.measure {
            return [None, None];
        }
        self.visit_calls += calls;
        let done = self.windows_of[candidate];
        if candidate == 0 && done == 1 {
            self.window = self.window_for(agreed.max_mean_ns);
            // The default's first measurement is as long as every other
            // window: when the first window sized them longer, the
            // default runs the difference now (its length:
            // `trial_length`).
            if u64::from(self.window) > calls {
                return [None, None];
            }
        }
        let too_slow = candidate != 0
            && done == 1
            && agreed.max_mean_ns > self.params.drop_factor * self.mean(0);
        self.dropped[candidate] |= too_slow;
        let event = Event::Trial {
            candidate,
            ns: self.mean(candidate),
            calls: std::mem::take(&mut self.visit_calls),
            dropped: too_slow,
        };
        if let Some(next) = self.next_trial() {
            self.state = State::Trial { candidate: next };
            return [Some(event), None];
        }
        if self.winner().is_some() {
            self.state = State::Confirm;
            return [Some(event), None];
        }
        [Some(event), Some(self.decide())]
    }

    /// The candidate the next window measures: first each candidate's
    /// first window, in order; then, one window at a time, the
    /// contenders' further windows (up to `windows`), fewest windows
    /// first. A contender is a candidate not dropped whose time so far is
    /// within `margin` of the fastest measured (the default included):
    /// one further behind is not measured again. `None`: every candidate
    /// is measured.
    fn next_trial(&self) -> Option<usize> {
        let n = self.candidates;
        if let Some(c) = (1..n).find(|&c| self.windows_of[c] == 0 && !self.dropped[c]) {
            return Some(c);
        }
        let fastest = (0..n)
            .filter(|&c| !self.dropped[c] && self.windows_of[c] > 0)
            .map(|c| self.mean(c))
            .fold(f64::INFINITY, f64::min);
        (1..n)
            .filter(|&c| {
                !self.dropped[c]
                    && self.windows_of[c] < self.params.windows
                    && self.mean(c) <= fastest * (1.0 + self.params.margin)
            })
            .min_by_key(|&c| (self.windows_of[c], c))
    }

    fn decide(&mut self) -> Event {
        let default_ns = self.mean(0);
        let chosen = self.winner().unwrap_or(0);
        let stored = self.confirming.take();
        if stored.is_some_and(|c| c != chosen) {
            // The store's choice did not hold here: the rest is searched.
            for c in 0..self.candidates {
                if std::mem::take(&mut self.deferred[c]) {
                    self.dropped[c] = self.excluded[c];
                }
            }
            if let Some(next) = self.next_trial() {
                self.state = State::Trial { candidate: next };
                return Event::Recheck {
                    why: Why::Unconfirmed,
                    ns: default_ns,
                };
            }
        }
        let stored = stored == Some(chosen);
        let chosen_ns = self.mean(chosen);
        // What the search cost beyond running the chosen one from its
        // start: every call it ran of each candidate (windows, probes,
        // rests, the warm-up and settling of the default) at that
        // candidate's time, beyond the chosen one's, and its agreed points
        // and the tool's other collectives. A faster candidate's calls
        // (one kept out by `margin`) count as savings: the cost is what
        // the job lost to the search, as a benchmark would measure it.
        let ran_cost = (0..self.candidates)
            .map(|c| {
                let ns = if self.calls_of[c] > 0 {
                    self.mean(c)
                } else if self.probed[c] {
                    self.probe_ns[c]
                } else {
                    chosen_ns
                };
                (ns - chosen_ns) * self.ran[c] as f64
            })
            .sum::<f64>();
        let cost_ns = ran_cost + self.points_ns;
        self.decided_ns = chosen_ns;
        // A tie: another candidate measured within `margin` of the choice
        // (a phase of the machine can slow the fastest algorithm to the
        // default's time for a few windows). A marginal switch: the choice
        // beats the default by less than twice `margin` (the same phases
        // can make a slower algorithm look faster). Either is searched once
        // more at the first check point, unless this search was that
        // second look. Both cases, as the benchmark's logs showed them:
        // docs/design.md#decisions-worth-knowing.
        let tie = (0..self.candidates).any(|c| {
            c != chosen
                && !self.dropped[c]
                && self.calls_of[c] > 0
                && self.mean(c) < chosen_ns * (1.0 + self.params.margin)
        });
        let marginal = chosen != 0 && chosen_ns > default_ns * (1.0 - 2.0 * self.params.margin);
        self.second_look = match (tie, marginal) {
            // A stored choice was found and confirmed before.
            _ if self.second_search || stored => None,
            (true, _) => Some(Why::Tie),
            (false, true) => Some(Why::Marginal),
            (false, false) => None,
        };
        self.second_search = false;
        self.backoff = match self.last_choice {
            Some(last) if last == chosen => (self.backoff * 2).min(MAX_BACKOFF),
            _ => 1,
        };
        self.state = State::Decided {
            candidate: chosen,
            since: 0,
        };
        Event::Decision {
            candidate: chosen,
            default_ns,
            chosen_ns,
            cost_ns,
            stored,
        }
    }

    /// Calls per window once the default's time per call is known (from
    /// its first window, of [`first_window`] calls):
    /// `window_time` worth of calls, from [`MIN_WINDOW`] to `window`, or
    /// for short calls `min_window_time` worth, from `window` to
    /// [`MAX_WINDOW`].
    fn window_for(&self, ns_per_call: f64) -> u32 {
        let full = self.params.window;
        if ns_per_call <= 0.0 {
            return full;
        }
        let short = (self.params.min_window_time_ns / ns_per_call).ceil();
        if short > f64::from(full) {
            return (short.min(f64::from(MAX_WINDOW)) as u32).max(full);
        }
        if self.params.window_time_ns <= 0.0 {
            return full;
        }
        let calls = (self.params.window_time_ns / ns_per_call).ceil();
        if calls >= f64::from(full) {
            full
        } else {
            (calls as u32).clamp(MIN_WINDOW.min(full), full)
        }
    }

    /// Measure mode: what was measured (`None` before the first window, or
    /// when not measuring).
    pub fn measurement(&self) -> Option<Event> {
        (self.params.measure && self.calls_of[0] > 0).then(|| Event::Measured {
            ns: self.mean(0),
            calls: self.calls_of[0],
        })
    }

    /// The agreed time per call measured for each candidate so far (NaN for
    /// one not measured), for the summary.
    pub fn measured(&self) -> impl Iterator<Item = (usize, f64)> + '_ {
        (0..self.candidates).map(|c| {
            if self.calls_of[c] > 0 {
                (c, self.mean(c))
            } else {
                (c, f64::NAN)
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The defaults without `min_window_time`: these tests count windows
    /// of `window` calls on times of a few hundred nanoseconds;
    /// `short_calls_get_windows_of_min_window_time` tests it.
    fn params() -> Params {
        Params {
            min_window_time_ns: 0.0,
            search_budget: 0.0,
            ..Params::default()
        }
    }

    /// What the ranks agree when none stopped and the slowest mean is
    /// `mine` (one rank, or all alike).
    fn agreed(mine: f64) -> Agreed {
        Agreed::settled(mine, false)
    }

    /// Each trial's candidate and calls, in order.
    fn trial_calls(events: &[Event]) -> Vec<(usize, u64)> {
        events
            .iter()
            .filter_map(|e| match e {
                Event::Trial {
                    candidate, calls, ..
                } => Some((*candidate, *calls)),
                _ => None,
            })
            .collect()
    }

    /// Runs a search to its decision with a fixed time per candidate;
    /// returns the events.
    fn run(params: Params, times: &[f64], calls: usize) -> (Search, Vec<Event>) {
        let mut s = Search::new(params, times.len());
        let mut events = Vec::new();
        for _ in 0..calls {
            let c = s.choice();
            let ns = s.wants_time().then_some(times[c] as u64);
            if let Some(mine) = s.count(ns) {
                events.extend(s.agree(agreed(mine)).into_iter().flatten());
            }
        }
        (s, events)
    }

    /// [`run`] of a search started from the store's `stored` choice.
    fn run_warm(params: Params, times: &[f64], stored: usize, calls: usize) -> Vec<Event> {
        let mut s = Search::new(params, times.len());
        assert!(s.warm(stored));
        let mut events = Vec::new();
        for _ in 0..calls {
            let c = s.choice();
            let ns = s.wants_time().then_some(times[c] as u64);
            if let Some(mine) = s.count(ns) {
                events.extend(s.agree(agreed(mine)).into_iter().flatten());
            }
        }
        events
    }

    /// The calls before the first decision, and that decision.
    fn first_decision(events: &[Event], p: Params) -> (usize, Event) {
        let trials: u64 = events
            .iter()
            .take_while(|e| !matches!(e, Event::Decision { .. }))
            .map(|e| match e {
                Event::Trial { calls, .. } => *calls,
                _ => 0,
            })
            .sum();
        let d = events
            .iter()
            .find(|e| matches!(e, Event::Decision { .. }))
            .copied()
            .unwrap_or_else(|| panic!("no decision: {events:?}"));
        (trials as usize + p.warmup as usize, d)
    }

    #[test]
    fn a_stored_choice_that_holds_is_confirmed_against_the_default_alone() {
        let p = params();
        let times = [100.0, 400.0, 50.0, 120.0];
        let cold = run(p, &times, 400).1;
        let warm = run_warm(p, &times, 2, 400);
        let tried: Vec<usize> = trial_calls(&warm).iter().map(|t| t.0).collect();
        assert!(tried.iter().all(|&c| c == 0 || c == 2), "{warm:?}");
        let (warm_calls, d) = first_decision(&warm, p);
        assert!(
            matches!(
                d,
                Event::Decision {
                    candidate: 2,
                    stored: true,
                    ..
                }
            ),
            "{d:?}"
        );
        let (cold_calls, d) = first_decision(&cold, p);
        assert!(matches!(
            d,
            Event::Decision {
                candidate: 2,
                stored: false,
                ..
            }
        ));
        assert!(warm_calls < cold_calls, "{warm_calls} vs {cold_calls}");
        // Confirmed: no second look at the first check point.
        assert!(
            !warm.iter().any(|e| matches!(e, Event::Recheck { .. })),
            "{warm:?}"
        );
    }

    #[test]
    fn a_stored_choice_that_does_not_hold_here_searches_the_others() {
        let p = params();
        let warm = run_warm(p, &[100.0, 400.0, 150.0, 50.0], 2, 600);
        let recheck = warm
            .iter()
            .position(|e| {
                matches!(
                    e,
                    Event::Recheck {
                        why: Why::Unconfirmed,
                        ..
                    }
                )
            })
            .unwrap_or_else(|| panic!("{warm:?}"));
        assert!(warm[..recheck]
            .iter()
            .all(|e| !matches!(e, Event::Decision { .. })));
        let tried: Vec<usize> = trial_calls(&warm[recheck..]).iter().map(|t| t.0).collect();
        assert!(tried.contains(&1) && tried.contains(&3), "{warm:?}");
        let (_, d) = first_decision(&warm, p);
        assert!(
            matches!(
                d,
                Event::Decision {
                    candidate: 3,
                    stored: false,
                    ..
                }
            ),
            "{d:?}"
        );
    }

    #[test]
    fn a_stored_default_runs_only_the_default_s_windows() {
        let p = params();
        let warm = run_warm(p, &[100.0, 50.0, 60.0], 0, 200);
        assert!(trial_calls(&warm).iter().all(|t| t.0 == 0), "{warm:?}");
        let (calls, d) = first_decision(&warm, p);
        assert!(
            matches!(
                d,
                Event::Decision {
                    candidate: 0,
                    stored: true,
                    ..
                }
            ),
            "{d:?}"
        );
        assert!(calls <= (p.warmup + 2 * p.window) as usize, "{calls}");
    }

    #[test]
    fn a_stored_choice_the_search_cannot_run_is_refused() {
        let p = params();
        let mut s = Search::new(p, 3);
        s.exclude(2);
        assert!(!s.warm(2), "excluded");
        assert!(!s.warm(3), "not a candidate");
        assert!(s.confirming().is_none());
        let mut m = Search::new(Params { measure: true, ..p }, 3);
        assert!(!m.warm(1), "measuring");
        // Through the warm-up, it may still start from the store.
        let mut late = Search::new(p, 3);
        for _ in 0..p.warmup {
            late.count(None);
        }
        assert!(late.clone().warm(1), "after the warm-up");
        // Not once the default's first window is measured.
        let mut measured = false;
        while !measured {
            let ns = late.wants_time().then_some(100);
            if let Some(mine) = late.count(ns) {
                let events = late.agree(agreed(mine));
                measured = events
                    .iter()
                    .flatten()
                    .any(|e| matches!(e, Event::Trial { .. }))
                    || late.calls_of[0] > 0;
            }
        }
        assert!(!late.warm(1), "under way");
        assert!(s.warm(1));
        assert_eq!(s.confirming(), Some(1));
    }

    #[test]
    fn the_fastest_candidate_wins() {
        let p = params();
        let (s, events) = run(p, &[100.0, 400.0, 50.0, 120.0], 200);
        assert!(matches!(s.state(), State::Decided { candidate: 2, .. }));
        let Some(Event::Decision {
            candidate,
            default_ns,
            chosen_ns,
            cost_ns,
            stored: false,
        }) = events
            .iter()
            .find(|e| matches!(e, Event::Decision { .. }))
            .copied()
        else {
            panic!("no decision: {events:?}")
        };
        assert_eq!(candidate, 2);
        assert_eq!((default_ns, chosen_ns), (100.0, 50.0));
        // Every call of the search beyond the chosen one's time: the
        // default's 2 warm-up calls and 8 window calls (a first window of
        // 2, topped up to 8) 50 ns over, candidate 1 dropped after 8 calls
        // at 350 ns over, candidate 3 (not within 5% of the fastest: no
        // second window) 8 calls 70 ns over, and the default's confirming
        // window, 8 calls 50 ns over.
        assert_eq!(cost_ns, 10.0 * 50.0 + 8.0 * 350.0 + 8.0 * 70.0 + 8.0 * 50.0);
        assert_eq!(
            trial_calls(&events),
            vec![(0, 8), (1, 8), (2, 8), (3, 8), (2, 8), (0, 8)]
        );
        // The 3x slower candidate ran one window only.
        assert!(events.contains(&Event::Trial {
            candidate: 1,
            ns: 400.0,
            calls: 8,
            dropped: true
        }));
    }

    #[test]
    fn an_excluded_candidate_never_runs_nor_is_pinned() {
        // Candidate 2 would win, but the library cannot run it here.
        let mut s = Search::new(params(), 4);
        s.exclude(2);
        let mut events = Vec::new();
        for _ in 0..400 {
            let c = s.choice();
            assert_ne!(c, 2, "{events:?}");
            let ns = s.wants_time().then_some([100, 90, 10, 120][c]);
            if let Some(mine) = s.count(ns) {
                events.extend(s.agree(agreed(mine)).into_iter().flatten());
            }
        }
        assert!(matches!(s.state(), State::Decided { candidate: 1, .. }));
        assert!(trial_calls(&events).iter().all(|(c, _)| *c != 2));
        // A search started again (a periodic recheck) leaves it out too.
        s.restart();
        assert!(s.dropped[2] && !s.dropped[1]);
        // A user's pin of it pins the default.
        assert!(matches!(
            s.pin(2, 7),
            Some(Event::Pinned { candidate: 0, .. })
        ));
        // The default and out-of-range candidates are never excluded.
        let mut t = Search::new(params(), 2);
        t.exclude(0);
        t.exclude(5);
        assert!(!t.dropped.iter().any(|d| *d));
    }

    #[test]
    fn long_calls_get_short_windows_and_only_contenders_a_second() {
        // 1 MiB allreduces on 4 ranks: the default 20 ms per call, one
        // algorithm 15% faster, one twice as fast. A window is 25 ms: 2
        // calls.
        let ms = 1.0e6;
        let (s, events) = run(params(), &[20.0 * ms, 17.0 * ms, 10.0 * ms], 200);
        assert!(matches!(s.state(), State::Decided { candidate: 2, .. }));
        // The default's first window of 2 calls; each candidate one window
        // of 2; then candidate 2, the only one within 5% of the fastest,
        // its second (candidate 1 beats the default, but cannot win); the
        // default's confirming window before switching.
        assert_eq!(
            trial_calls(&events),
            vec![(0, 2), (1, 2), (2, 2), (2, 2), (0, 2)]
        );
        // Checks while decided are `check_every` short windows apart.
        assert_eq!(s.check_interval(), 2 * 64);
        // A close race: both within 5% of the fastest run a second window,
        // the one with fewer windows first, then the lower index (the
        // first search's trials; a tie is searched once more later).
        let (s, events) = run(params(), &[20.0 * ms, 10.2 * ms, 10.0 * ms], 200);
        assert!(matches!(s.state(), State::Decided { candidate: 2, .. }));
        assert_eq!(
            trial_calls(&events)[..6],
            [(0, 2), (1, 2), (2, 2), (1, 2), (2, 2), (0, 2)]
        );
        // Without window_time, every window is `window` calls, the
        // default's first included.
        let p = Params {
            window_time_ns: 0.0,
            ..params()
        };
        let (_, events) = run(p, &[20.0 * ms, 19.5 * ms, 10.0 * ms], 200);
        assert_eq!(
            trial_calls(&events),
            vec![(0, 8), (1, 8), (2, 8), (2, 8), (0, 8)]
        );
    }

    #[test]
    fn the_default_tops_up_its_first_window_and_weighs_it_by_its_calls() {
        // Warm-up 2 calls; the default's first window: 2 calls at 10 ms
        // sets windows of 25 ms / 10 ms = 3 calls, so the default runs 1
        // more call at once, at 4 ms. Its time is (2 * 10 + 4) / 3 = 8 ms,
        // and a candidate at 7.8 ms is not 5% faster.
        let ms = 1.0e6;
        let mut s = Search::new(params(), 2);
        let mut points = Vec::new();
        let mut default_trial = None;
        for call in 0..12u64 {
            let c = s.choice();
            let ns = match (c, call) {
                (0, 0..=3) => 10.0 * ms,
                (0, _) => 4.0 * ms,
                _ => 7.8 * ms,
            };
            let timed = s.wants_time().then_some(ns as u64);
            if let Some(mine) = s.count(timed) {
                points.push(s.calls());
                for e in s.agree(agreed(mine)).into_iter().flatten() {
                    if let Event::Trial {
                        candidate: 0,
                        ns,
                        calls,
                        ..
                    } = e
                    {
                        default_trial = Some((ns, calls));
                    }
                }
            }
        }
        assert_eq!(default_trial, Some((8.0 * ms, 3)));
        // Points after calls 4 (the first window), 5 (the top-up), 8 (the
        // candidate's first window), 11 (its second: it is the fastest).
        assert_eq!(points, vec![4, 5, 8, 11]);
        assert!(matches!(s.state(), State::Decided { candidate: 0, .. }));
    }

    /// Runs a search to its decision where the default takes `first` ns
    /// per call until `slow_calls` calls, then `later`; every other
    /// candidate `other`. Returns the decision's candidate, default time
    /// and chosen time.
    fn decide_after_a_slow_start(
        first: f64,
        slow_calls: u64,
        later: f64,
        other: f64,
    ) -> (usize, f64, f64) {
        let mut s = Search::new(params(), 3);
        for call in 0..200u64 {
            let ns = match s.choice() {
                0 if call < slow_calls => first,
                0 => later,
                _ => other,
            };
            let timed = s.wants_time().then_some(ns as u64);
            if let Some(mine) = s.count(timed) {
                if let [_, Some(Event::Decision {
                    candidate,
                    default_ns,
                    chosen_ns,
                    ..
                })] = s.agree(agreed(mine))
                {
                    return (candidate, default_ns, chosen_ns);
                }
            }
        }
        panic!("no decision in 200 calls")
    }

    #[test]
    fn a_default_slowed_at_the_start_is_measured_again_before_it_is_left() {
        // The default at 1200 ns per call in the job's first 12 calls (its
        // whole first measurement), 450 ns after; the other algorithms 480
        // ns. Without the confirming window they would win by 60%.
        let (candidate, default_ns, chosen_ns) =
            decide_after_a_slow_start(1200.0, 12, 450.0, 480.0);
        assert_eq!((candidate, default_ns, chosen_ns), (0, 450.0, 450.0));
        // A better algorithm still wins: the default's smaller measurement
        // counts, whichever of the two it is.
        let (candidate, default_ns, chosen_ns) =
            decide_after_a_slow_start(1200.0, 12, 900.0, 480.0);
        assert_eq!((default_ns, chosen_ns), (900.0, 480.0));
        assert_ne!(candidate, 0);
        // Slow in the confirming window instead (after the 28 calls of the
        // trials): the first measurement stands, and a candidate 11% faster
        // than it wins.
        let (candidate, default_ns, chosen_ns) =
            decide_after_a_slow_start(450.0, 30, 1200.0, 400.0);
        assert_eq!((default_ns, chosen_ns), (450.0, 400.0));
        assert_ne!(candidate, 0);
    }

    #[test]
    fn nothing_is_measured_until_every_rank_has_run_settle() {
        // An 8-byte allreduce at 1200 ns for the job's first 10 ms, 400 ns
        // after; the others 450 ns (not 5% better than 400). One rank
        // reports its time since start at each point: 0.5 us per call.
        let mut s = Search::new(params(), 3);
        let mut points = Vec::new();
        let mut events = Vec::new();
        for call in 0..60_000u64 {
            let elapsed = call as f64 * 500.0;
            let ns = match s.choice() {
                0 if elapsed < 10.0e6 => 1200.0,
                0 => 400.0,
                _ => 450.0,
            };
            let timed = s.wants_time().then_some(ns as u64);
            if let Some(mine) = s.count(timed) {
                points.push(s.calls());
                let agreed = Agreed {
                    min_elapsed_ns: elapsed,
                    ..Agreed::settled(mine, false)
                };
                events.extend(s.agree(agreed).into_iter().flatten());
            }
        }
        // Warm-up 2, then windows of 2, 4, 8, ... 1024 calls thrown away
        // until the point after 20 ms (40,000 calls) of every rank.
        assert_eq!(&points[..4], &[4, 8, 16, 32]);
        let Some(Event::Trial { calls, ns, .. }) = events.first() else {
            panic!("no trial: {events:?}")
        };
        assert_eq!(
            *calls, 1024,
            "the first measured window, longer than `window`: no top-up"
        );
        assert_eq!(*ns, 400.0);
        assert!(matches!(s.state(), State::Decided { candidate: 0, .. }));
        // Measure mode never settles (its windows start at the first call).
        let p = Params {
            measure: true,
            ..params()
        };
        let mut s = Search::new(p, 1);
        for _ in 0..2 + p.window {
            s.count(Some(100));
        }
        s.agree(Agreed {
            min_elapsed_ns: 0.0,
            ..Agreed::settled(100.0, false)
        });
        assert!(s.measurement().is_some());
    }

    #[test]
    fn settling_windows_are_neither_timed_nor_counted_one_by_one() {
        // The job above, driven as the tuner drives it: the quiet calls
        // the search allows in one go, the others one by one. Settling
        // (20 ms, 40,000 calls) times the first windows, which give the
        // default's time per call, and the one predicted to end after
        // `settle`; the others run on the quiet path.
        let mut s = Search::new(params(), 3);
        let (mut call, mut timed_calls, mut counted) = (0u64, 0u64, 0u64);
        let mut events = Vec::new();
        while call < 60_000 && events.is_empty() {
            let quiet = s.quiet();
            if quiet > 0 {
                s.count_quiet(quiet);
                call += u64::from(quiet);
                continue;
            }
            let elapsed = call as f64 * 500.0;
            let ns = if elapsed < 10.0e6 { 1200 } else { 400 };
            let timed = s.wants_time().then_some(ns);
            timed_calls += u64::from(timed.is_some());
            counted += 1;
            call += 1;
            if let Some(mine) = s.count(timed) {
                let agreed = Agreed {
                    min_elapsed_ns: elapsed,
                    ..Agreed::settled(mine, false)
                };
                events.extend(s.agree(agreed).into_iter().flatten());
            }
        }
        let Some(Event::Trial { calls, ns, .. }) = events.first() else {
            panic!("no trial: {events:?}")
        };
        // The first measured window as before: 1024 calls at 400 ns, timed.
        assert_eq!((*calls, *ns), (1024, 400.0));
        assert!(call > 40_000, "measured before settle: {call}");
        // Timed: warm-up's windows of 2 and 4 calls, the last settling
        // window or two, and the first measured one; not 40,000.
        assert!(timed_calls <= 2 + 4 + 3 * 1024, "{timed_calls} timed");
        assert!(counted <= 2 + 4 + 3 * 1024 + 64, "{counted} counted");
    }

    #[test]
    fn the_default_stays_unless_beaten_by_the_margin() {
        let (s, _) = run(params(), &[100.0, 97.0, 99.0], 200);
        assert!(matches!(s.state(), State::Decided { candidate: 0, .. }));
    }

    #[test]
    fn a_stop_goes_back_to_the_default_for_good() {
        let mut s = Search::new(params(), 3);
        for _ in 0..2 {
            s.count(None);
        }
        for _ in 1..MIN_WINDOW {
            assert_eq!(s.count(Some(10)), None);
        }
        assert_eq!(s.count(Some(10)), Some(10.0));
        assert_eq!(
            s.agree(Agreed::settled(10.0, true)),
            [Some(Event::Stopped), None]
        );
        assert_eq!(s.choice(), 0);
        for _ in 0..100 {
            assert_eq!(s.count(Some(1)), None);
        }
    }

    /// Feeds `calls` calls at `ns` each (the decided candidate's time);
    /// returns the first event of each point.
    fn feed(s: &mut Search, calls: u64, ns: u64) -> Vec<Event> {
        let mut events = Vec::new();
        for _ in 0..calls {
            let timed = s.wants_time().then_some(ns);
            if let Some(mine) = s.count(timed) {
                events.extend(s.agree(agreed(mine))[0]);
            }
        }
        events
    }

    /// Runs to the next check point at `ns` per call, so that what follows
    /// starts a check interval.
    fn to_check_point(s: &mut Search, ns: u64) {
        loop {
            let timed = s.wants_time().then_some(ns);
            if let Some(mine) = s.count(timed) {
                let events = s.agree(agreed(mine));
                assert_eq!(events, [None, None]);
                return;
            }
        }
    }

    #[test]
    fn drift_restarts_the_search_once_confirmed() {
        let p = Params {
            check_every: 2,
            ..params()
        };
        let (mut s, _) = run(p, &[100.0, 50.0], 100);
        assert!(matches!(s.state(), State::Decided { candidate: 1, .. }));
        to_check_point(&mut s, 50);
        let interval = s.check_interval();
        assert_eq!(interval, 16);
        // Two check points see the drift: not yet confirmed.
        let events = feed(&mut s, interval * 2, 200);
        assert!(events.is_empty(), "{events:?}");
        assert!(matches!(s.state(), State::Decided { candidate: 1, .. }));
        // The third in a row restarts the search.
        match feed(&mut s, interval, 200)[..] {
            [Event::Recheck {
                why: Why::Drift,
                ns,
            }] => assert_eq!(ns, 200.0),
            ref other => panic!("no drift recheck: {other:?}"),
        }
        assert_eq!(s.choice(), 0);
    }

    /// The decisions and rechecks among `events`, in order.
    fn kinds(events: &[Event]) -> Vec<String> {
        events
            .iter()
            .filter_map(|e| match e {
                Event::Decision { candidate, .. } => Some(format!("decision {candidate}")),
                Event::Recheck { why, .. } => Some(format!("recheck {why:?}")),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_tie_is_searched_once_more_and_only_once() {
        let p = Params {
            check_every: 2,
            ..params()
        };
        // The default at 100 ns and candidate 1 at 102: within 5% of each
        // other. The first check point searches again; the second search
        // ends in the same tie, and that one is kept.
        let (s, events) = run(p, &[100.0, 102.0], 400);
        assert_eq!(kinds(&events), ["decision 0", "recheck Tie", "decision 0"]);
        assert!(matches!(s.state(), State::Decided { candidate: 0, .. }));
        // A tie between two candidates that beat the default.
        let (_, events) = run(p, &[100.0, 50.0, 51.0], 400);
        assert_eq!(kinds(&events), ["decision 1", "recheck Tie", "decision 1"]);
        // No other candidate within 5% of the choice: no second look.
        let (_, events) = run(p, &[100.0, 50.0, 80.0], 400);
        assert_eq!(kinds(&events), ["decision 1"]);
    }

    #[test]
    fn a_marginal_switch_is_searched_once_more_and_a_false_one_undone() {
        let p = Params {
            check_every: 2,
            ..params()
        };
        // Candidate 1 beats the default by 8%: more than the margin (5%),
        // less than twice it. Searched once more; the same choice is kept.
        let (s, events) = run(p, &[100.0, 92.0], 400);
        assert_eq!(
            kinds(&events),
            ["decision 1", "recheck Marginal", "decision 1"]
        );
        assert!(matches!(s.state(), State::Decided { candidate: 1, .. }));
        // By 10% or more: no second look; keeping the default never
        // is one.
        let (_, events) = run(p, &[100.0, 90.0], 400);
        assert_eq!(kinds(&events), ["decision 1"]);
        let (_, events) = run(p, &[100.0, 130.0], 400);
        assert_eq!(kinds(&events), ["decision 0"]);

        // The job's first phase makes candidate 1 look 8% faster than the
        // default and candidate 2 slower than both (nb and
        // recursive_doubling on 4 MPICH ranks in a job's first 0.4 s);
        // later, candidate 1 runs at the default's time and candidate 2 at
        // half of it. The second look finds candidate 2.
        let mut s = Search::new(p, 3);
        let mut events = Vec::new();
        for call in 0..400u64 {
            let times = if call < 40 {
                [100.0, 92.0, 120.0]
            } else {
                [100.0, 100.0, 50.0]
            };
            let ns = s.wants_time().then_some(times[s.choice()] as u64);
            if let Some(mine) = s.count(ns) {
                events.extend(s.agree(agreed(mine)).into_iter().flatten());
            }
        }
        assert_eq!(
            kinds(&events),
            ["decision 1", "recheck Marginal", "decision 2"]
        );
    }

    #[test]
    fn one_noisy_check_point_is_not_a_drift() {
        let p = Params {
            check_every: 2,
            ..params()
        };
        let (mut s, _) = run(p, &[100.0, 50.0], 100);
        to_check_point(&mut s, 50);
        let interval = s.check_interval();
        for _ in 0..20 {
            // Two slow check windows, then a normal one: never three in a row.
            assert!(feed(&mut s, interval * 2, 500).is_empty());
            assert!(feed(&mut s, interval, 50).is_empty());
        }
        assert!(matches!(s.state(), State::Decided { candidate: 1, .. }));
    }

    #[test]
    fn a_search_that_finds_the_same_backs_off_and_a_new_choice_resets() {
        let p = Params {
            check_every: 2,
            ..params()
        };
        // Candidate 1 (50 ns) beats the default (100 ns); the decided time
        // is then reported as 200 ns at check points, a drift, but every
        // search finds candidate 1 again.
        let mut s = Search::new(p, 2);
        let times = [100u64, 50];
        let mut intervals = Vec::new();
        let mut calls = 0u64;
        while intervals.len() < 10 && calls < 10_000_000 {
            let c = s.choice();
            let ns = match s.state() {
                State::Decided { .. } => 200,
                _ => times[c],
            };
            let timed = s.wants_time().then_some(ns);
            calls += 1;
            if let Some(mine) = s.count(timed) {
                for event in s.agree(agreed(mine)) {
                    if let Some(Event::Decision { candidate, .. }) = event {
                        assert_eq!(candidate, 1);
                        intervals.push(s.check_interval());
                    }
                }
            }
        }
        let base = 16;
        let expected: Vec<u64> = (0..10)
            .map(|i| base * u64::from(MAX_BACKOFF.min(1 << i)))
            .collect();
        assert_eq!(intervals, expected);

        // A search that chooses differently starts again at the base.
        let mut s = Search::new(p, 3);
        let mut phase_times = [100u64, 50, 400];
        let mut decisions = Vec::new();
        for call in 0..200_000u64 {
            if call == 20_000 {
                // The default's algorithm got slow, candidate 2 fast.
                phase_times = [100, 400, 20];
            }
            let c = s.choice();
            let timed = s.wants_time().then_some(phase_times[c]);
            if let Some(mine) = s.count(timed) {
                for event in s.agree(agreed(mine)) {
                    if let Some(Event::Decision { candidate, .. }) = event {
                        decisions.push((candidate, s.check_interval()));
                    }
                }
            }
        }
        assert_eq!(decisions.first(), Some(&(1, base)));
        assert!(
            decisions.contains(&(2, base)),
            "the new choice resets the distance: {decisions:?}"
        );
    }

    #[test]
    fn short_calls_get_windows_of_min_window_time() {
        // An 8-byte allreduce at 400 ns: windows of 200 us are 500 calls
        // (the default's first window of 2 is topped up to 500). Candidate
        // 1 (480 ns, not within 5% of the fastest) gets one window,
        // candidate 2 (300 ns) two, and the default its confirming window.
        let unpriced = Params {
            search_budget: 0.0,
            ..Params::default()
        };
        let (s, events) = run(unpriced, &[400.0, 480.0, 300.0], 5000);
        assert!(matches!(s.state(), State::Decided { candidate: 2, .. }));
        let trials = trial_calls(&events);
        assert_eq!(
            trials,
            vec![(0, 500), (1, 500), (2, 500), (2, 500), (0, 500)]
        );
        // Check points while decided are `check_every` such windows apart.
        assert_eq!(s.check_interval(), 500 * 64);
        // At most MAX_WINDOW calls, however short the call: warm-up 2,
        // the default's first window of 2 topped up to MAX_WINDOW, then both
        // windows of the candidate at MAX_WINDOW each reach the confirming
        // window.
        let (s, _) = run(unpriced, &[20.0, 10.0], 3 * MAX_WINDOW as usize + 4);
        assert!(matches!(s.state(), State::Confirm), "{:?}", s.state());
        // Calls of 30 us: 8 calls last 240 us, longer than 200 us, so the
        // windows stay `window`.
        let (_, events) = run(unpriced, &[30e3, 40e3], 100);
        assert!(events.contains(&Event::Trial {
            candidate: 1,
            ns: 40e3,
            calls: 8,
            dropped: false
        }));
    }

    /// The defaults without settling: the first agreed point comes after
    /// warm-up and the default's first window.
    fn unsettled() -> Params {
        Params {
            settle_ns: 0.0,
            ..Params::default()
        }
    }

    /// A job of `calls` calls under a priced search, on one rank (or all
    /// alike): each candidate's call takes `times[c]` ns, every agreed
    /// point `point(calls so far)` ns. What the job cost.
    struct Job {
        s: Search,
        events: Vec<Event>,
        /// The job's time: its calls and the search's points (ns).
        total_ns: f64,
        /// Calls each candidate ran.
        ran: Vec<u64>,
        /// Agreed points.
        points: u64,
        /// The time at each decision (ns) and its calls.
        at_decision: Vec<(f64, u64)>,
    }

    fn job(params: Params, times: &[f64], point: impl Fn(u64) -> f64, calls: u64) -> Job {
        job_from(params, times, point, calls, None)
    }

    /// [`job`], its search started from the tuning store's `stored`.
    fn job_from(
        params: Params,
        times: &[f64],
        point: impl Fn(u64) -> f64,
        calls: u64,
        stored: Option<usize>,
    ) -> Job {
        let mut s = Search::new(params, times.len());
        if let Some(c) = stored {
            assert!(s.warm(c));
        }
        let mut j = Job {
            s: s.clone(),
            events: Vec::new(),
            total_ns: 0.0,
            ran: vec![0; times.len()],
            points: 0,
            at_decision: Vec::new(),
        };
        let mut last_point = 0.0;
        for _ in 0..calls {
            let c = s.choice();
            j.ran[c] += 1;
            j.total_ns += times[c];
            let ns = s.wants_time().then_some(times[c] as u64);
            if let Some(mine) = s.count(ns) {
                j.points += 1;
                let agreed = Agreed {
                    point_ns: last_point,
                    ..agreed(mine)
                };
                let events = s.agree(agreed);
                // This point's cost, known to the next.
                last_point = point(s.calls());
                j.total_ns += last_point;
                for e in events.into_iter().flatten() {
                    if matches!(e, Event::Decision { .. }) {
                        j.at_decision.push((j.total_ns, s.calls()));
                    }
                    j.events.push(e);
                }
            }
        }
        j.s = s;
        j
    }

    #[test]
    fn a_stored_choice_too_dear_to_confirm_runs_unconfirmed_until_a_check_point_measures_it() {
        // The store kept candidate 2 for this shape; here a point costs
        // 10 ms, 285 calls of 35 us: no window could confirm it.
        let p = unsettled();
        let times = [35e3, 60e3, 28e3];
        let j = job_from(p, &times, |_| 10e6, 200_000, Some(2));
        let left = j.events.iter().find_map(|e| match e {
            Event::Left {
                candidate, stored, ..
            } => Some((*candidate, *stored)),
            _ => None,
        });
        assert_eq!(left, Some((2, true)), "{:?}", j.events);
        assert!(j.s.is_left());
        assert!(matches!(j.s.state(), State::Decided { candidate: 2, .. }));
        // Measured at a check point, and kept: it beats the default.
        assert!(
            j.events.iter().any(|e| matches!(
                e,
                Event::Trial { candidate: 2, ns, dropped: false, .. } if *ns == 28e3
            )),
            "{:?}",
            j.events
        );
        // Nothing but the default's first windows and the stored choice ran.
        assert_eq!(j.ran[1], 0, "{:?}", j.events);
        assert!(j.ran[2] > 199_000 - j.ran[0], "{:?}", j.ran);
        // Cheaper than the default alone would have been.
        assert!(j.total_ns < 200_000.0 * 35e3, "{}", j.total_ns);

        // A stored choice that is slower here: the default comes back at
        // the first timed check point, and says what it measured.
        let j = job_from(p, &times, |_| 10e6, 200_000, Some(1));
        let back = j.events.iter().find_map(|e| match e {
            Event::Left {
                candidate: 0,
                stored: false,
                stored_ns,
                ..
            } => Some(*stored_ns),
            _ => None,
        });
        assert_eq!(back, Some(60e3), "{:?}", j.events);
        assert!(matches!(j.s.state(), State::Decided { candidate: 0, .. }));
        // It ran one check interval at most before that.
        let interval = (10e6 / (CHECK_SHARE * 35e3)).ceil() as u64;
        assert!(j.ran[1] <= interval, "{} over {interval}", j.ran[1]);
        // What it cost: within the check points' share and that interval.
        let default_ns = 200_000.0 * 35e3;
        assert!(
            j.total_ns <= default_ns * (1.0 + CHECK_SHARE) + 2.0 * 10e6 + interval as f64 * 25e3,
            "{} over {default_ns}",
            j.total_ns
        );
    }

    #[test]
    fn a_collective_cheaper_than_a_point_is_left_alone() {
        // Bcasts of 8 bytes across emulated nodes: 35 us a call, an agreed
        // point 10 ms, 285 calls (over LEAVE_CALLS). Candidate 2 is 20%
        // faster, but no window could keep its point at 2%: not searched.
        let p = unsettled();
        let times = [35e3, 60e3, 28e3];
        let j = job(p, &times, |_| 10e6, 200_000);
        assert!(j.s.is_left());
        assert!(matches!(j.s.state(), State::Decided { candidate: 0, .. }));
        let left = j.events.iter().find_map(|e| match e {
            Event::Left {
                default_ns,
                point_ns,
                ..
            } => Some((*default_ns, *point_ns)),
            _ => None,
        });
        assert_eq!(left, Some((35e3, 10e6)), "{:?}", j.events);
        // No candidate ever ran.
        assert_eq!(j.ran[1] + j.ran[2], 0, "{:?}", j.events);
        // Check points cost at most 1% of the calls' time, beside the
        // first two points.
        assert_eq!(
            j.s.check_interval(),
            (10e6 / (CHECK_SHARE * 35e3)).ceil() as u64
        );
        let calls_ns = 200_000.0 * 35e3;
        assert!(
            j.total_ns <= calls_ns * (1.0 + CHECK_SHARE) + 2.0 * 10e6,
            "{} over {calls_ns}",
            j.total_ns
        );
        // A short job pays for its first two points only.
        let short = job(p, &times, |_| 10e6, 500);
        assert_eq!(short.points, 2, "{:?}", short.events);
        // Once points cost less than a call, the next check point
        // searches, and the search finds candidate 2.
        let j = job(
            p,
            &times,
            |calls| if calls < 100_000 { 10e6 } else { 5e3 },
            400_000,
        );
        assert!(j.events.iter().any(|e| matches!(
            e,
            Event::Recheck {
                why: Why::Cheaper,
                ..
            }
        )));
        assert!(
            matches!(j.s.state(), State::Decided { candidate: 2, .. }),
            "{:?}",
            j.events
        );
        assert!(!j.s.is_left());
    }

    #[test]
    fn a_call_a_few_times_cheaper_than_a_point_is_searched_in_long_windows() {
        // An 8-byte reduce on one host: 290 ns a call, a point 1.5 us (5
        // calls, under LEAVE_CALLS). Candidate 2 is 18% faster: searched in
        // windows long enough for their point (1.5 us / 2% = 75 us: 259
        // calls), found, and paid for within the budget.
        let p = unsettled();
        let times = [290.0, 600.0, 238.0];
        let calls = 2_000_000;
        let j = job(p, &times, |_| 1.5e3, calls);
        assert!(!j.s.is_left(), "{:?}", j.events);
        assert!(
            matches!(j.s.state(), State::Decided { candidate: 2, .. }),
            "{:?}",
            j.events
        );
        assert!(
            !j.events.iter().any(|e| matches!(e, Event::Left { .. })),
            "{:?}",
            j.events
        );
        let default_ns = calls as f64 * 290.0;
        assert!(
            j.total_ns < 0.9 * default_ns,
            "{} against the default's {default_ns}",
            j.total_ns
        );
    }

    #[test]
    fn windows_are_long_enough_for_their_point() {
        // Calls of 35 us, points of 20 us: a point costs at most 2% of a
        // window, so windows are at least 20 / (0.02 * 35) = 29 calls.
        let p = unsettled();
        let j = job(p, &[35e3, 36e3, 30e3], |_| 20e3, 2_000_000);
        let windows: Vec<u64> = trial_calls(&j.events)
            .iter()
            .filter(|(_, calls)| *calls > 1)
            .map(|(_, calls)| *calls)
            .collect();
        assert!(!windows.is_empty(), "{:?}", j.events);
        // The default's first window (before any point was priced) apart.
        assert!(windows[1..].iter().all(|&w| w >= 29), "{windows:?}");
        assert!(
            matches!(j.s.state(), State::Decided { candidate: 2, .. }),
            "{:?}",
            j.events
        );
    }

    #[test]
    fn a_catastrophic_candidate_costs_one_call() {
        // MPICH's scatter-allgather bcast of 8 bytes across nodes: 300
        // times the default. Windows of 7 calls (200 us) start each
        // candidate with a probe of one call, and that call drops it.
        let p = unsettled();
        let times = [30e3, 9e6, 25e3, 33e3];
        let j = job(p, &times, |_| 1e3, 200_000);
        assert_eq!(j.ran[1], 1, "{:?}", j.events);
        assert!(j.events.contains(&Event::Trial {
            candidate: 1,
            ns: 9e6,
            calls: 1,
            dropped: true
        }));
        assert!(
            matches!(j.s.state(), State::Decided { candidate: 2, .. }),
            "{:?}",
            j.events
        );
        // Without the budget (exact windows), no probe: a whole window.
        let off = Params {
            search_budget: 0.0,
            ..p
        };
        let j = job(off, &times, |_| 1e3, 200_000);
        assert!(j.ran[1] > 1);
    }

    #[test]
    fn whenever_the_job_ends_the_search_cost_at_most_its_budget() {
        // 1 MiB allreduces across nodes: the default 10 ms, a point 2 ms;
        // candidates 3x, 30x slower, 10% faster, 40% slower, 2x faster.
        // Whatever the job's length, the job under the search takes at
        // most 2% (the budget) more than at the default, plus one window
        // and its point; long enough, it gains what the 2x one gives.
        let ms = 1e6;
        let times = [
            10.0 * ms,
            30.0 * ms,
            300.0 * ms,
            9.0 * ms,
            14.0 * ms,
            5.0 * ms,
        ];
        let p = unsettled();
        for calls in [20, 100, 300, 1_000, 3_000, 10_000, 30_000] {
            let j = job(p, &times, |_| 2.0 * ms, calls);
            let plain = calls as f64 * times[0];
            let window = f64::from(p.window) * (p.drop_factor - 1.0) * times[0] + 2.0 * ms;
            // Beyond the budget: one window, the first two points (before
            // any was priced) and each candidate's first call, whose cost
            // nothing can tell before it runs.
            let first_calls: f64 = (1..times.len())
                .filter(|&c| j.ran[c] > 0)
                .map(|c| times[c] - times[0])
                .sum();
            assert!(
                j.total_ns
                    <= plain * (1.0 + p.search_budget) + window + 2.0 * 2.0 * ms + first_calls,
                "{calls} calls: {:.4} of the default; {:?}",
                j.total_ns / plain,
                j.events
            );
            // The 30x candidate ran once at most.
            assert!(j.ran[2] <= 1, "{calls}: {:?}", j.ran);
        }
        let j = job(p, &times, |_| 2.0 * ms, 30_000);
        assert!(
            matches!(j.s.state(), State::Decided { candidate: 5, .. }),
            "{:?}",
            j.events
        );
        let best = 30_000.0 * times[5];
        assert!(
            j.total_ns < best * 1.10,
            "{:.3} of the best",
            j.total_ns / best
        );
    }

    #[test]
    fn the_decision_s_cost_is_what_the_job_lost() {
        // The job's time up to the decision, minus its calls at the chosen
        // one's time: what the search cost, as a benchmark measures it.
        // The decision's cost says the same (within 1%).
        let us = 1e3;
        let times = [100.0 * us, 250.0 * us, 80.0 * us, 900.0 * us];
        for point in [1.0 * us, 20.0 * us] {
            let j = job(unsettled(), &times, |_| point, 100_000);
            let (total, calls) = j.at_decision[0];
            let Some(Event::Decision {
                cost_ns,
                candidate: 2,
                ..
            }) = j
                .events
                .iter()
                .find(|e| matches!(e, Event::Decision { .. }))
                .copied()
            else {
                panic!("{:?}", j.events)
            };
            let real = total - calls as f64 * times[2];
            assert!(
                (cost_ns - real).abs() <= 0.01 * real,
                "point {point}: reported {cost_ns}, real {real}"
            );
        }
    }

    #[test]
    fn the_points_before_the_first_priced_one_are_counted() {
        // The first agreed point on a communicator has no cost to agree
        // yet; the second brings it, for both.
        let p = unsettled();
        let mut s = Search::new(p, 3);
        let mut costs = [0.0, 10e3].into_iter();
        while let Some(point_ns) = costs.clone().next() {
            if let Some(mine) = s.count(Some(35_000)) {
                costs.next();
                s.agree(Agreed {
                    point_ns,
                    ..agreed(mine)
                });
            }
        }
        assert_eq!(s.points_ns, 20e3);
        assert_eq!(s.spent(), 20e3);
        // The tool's other collectives (setup, Open MPI's candidate
        // communicators) are paid for as points are.
        let mut t = Search::new(p, 3);
        while t.count(Some(35_000)).is_none() {}
        t.agree(Agreed {
            point_ns: 1e3,
            other_ns: 5e3,
            ..agreed(35e3)
        });
        assert_eq!(t.points_ns, 6e3);
        assert_eq!(t.spent(), 6e3);
        // Warm-up 2, the default's first window 2, its top-up to 8: 10
        // calls, 2% of which (7 us) does not pay for 20 us of points and
        // the next window (a probe of candidate 1, up to 3 times the
        // default, and its point): the search waits.
        assert_eq!(s.calls(), 10);
        let next: f64 = 10e3 + 2.0 * 35e3;
        let needed = ((20e3 + next) / (0.02 * 35e3)).ceil() as u64;
        assert_eq!(s.resting(), needed - 10);
    }

    #[test]
    fn resting_calls_are_quiet() {
        let p = unsettled();
        let mut each = Search::new(p, 3);
        let mut quiet = Search::new(p, 3);
        let (mut given, mut left, mut skipped) = (0u32, 0u32, 0u64);
        for call in 0..100_000u64 {
            let c = each.choice();
            let ns = each.wants_time().then_some([35_000, 60_000, 28_000][c]);
            let point = each.count(ns);
            if left > 0 {
                left -= 1;
                skipped += 1;
                assert_eq!((quiet.choice(), ns, point), (c, None, None), "call {call}");
                continue;
            }
            quiet.count_quiet(given);
            assert_eq!(quiet.choice(), c, "call {call}");
            assert_eq!(quiet.count(ns), point, "call {call}");
            if let Some(mine) = point {
                let agreed = Agreed {
                    point_ns: 1e6,
                    ..agreed(mine)
                };
                assert_eq!(quiet.agree(agreed), each.agree(agreed), "call {call}");
            }
            given = quiet.quiet();
            left = given;
        }
        quiet.count_quiet(given - left);
        assert_eq!(format!("{quiet:?}"), format!("{each:?}"));
        assert!(skipped > 50_000, "{skipped}");
    }

    #[test]
    fn noise_costs_a_bounded_share_of_calls() {
        // Times wander by up to +-70% around the decided candidate's, from
        // a fixed seed: searches restart now and then, but the distance
        // between them grows, so exploration stays a small share of calls.
        let p = params();
        let mut s = Search::new(p, 4);
        let base = [100.0, 60.0, 400.0, 90.0];
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut exploring = 0u64;
        let total = 5_000_000u64;
        let mut searches = 0;
        let mut noise = 1.0;
        for call in 0..total {
            if call % 8 == 0 {
                // Machine noise comes in bursts: a whole window at once.
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                noise = 0.3 + 1.4 * (seed % 1000) as f64 / 1000.0;
            }
            if !matches!(s.state(), State::Decided { .. }) {
                exploring += 1;
            }
            let ns = (base[s.choice()] * noise) as u64;
            let timed = s.wants_time().then_some(ns);
            if let Some(mine) = s.count(timed) {
                for event in s.agree(agreed(mine)).into_iter().flatten() {
                    if matches!(event, Event::Decision { .. }) {
                        searches += 1;
                    }
                }
            }
        }
        assert!(
            searches >= 3,
            "{searches} searches: the noise never restarted one"
        );
        assert!(
            exploring * 200 < total,
            "{exploring} of {total} calls exploring in {searches} searches"
        );
    }

    #[test]
    fn points_depend_only_on_call_counts_and_agreed_numbers() {
        // Two ranks with different local times make the same choices when
        // fed the same agreed numbers.
        let p = Params {
            window: 1,
            windows: 1,
            warmup: 0,
            ..params()
        };
        let mut a = Search::new(p, 4);
        let mut b = Search::new(p, 4);
        for i in 0..50u64 {
            assert_eq!(a.choice(), b.choice());
            let pa = a.count(Some(10 + i));
            let pb = b.count(Some(1000 * i));
            assert_eq!(pa.is_some(), pb.is_some());
            if let (Some(x), Some(y)) = (pa, pb) {
                let agreed = Agreed::settled(x.max(y), false);
                assert_eq!(a.agree(agreed), b.agree(agreed));
            }
        }
    }

    #[test]
    fn a_window_is_timed_after_its_lead_in() {
        // Open MPI's default bcast of 1 MiB on 4 emulated nodes, measured
        // with all ranks leaving a reduction together: 27 ms for the first
        // call, 17 ms a call back to back (its start-up); the binary
        // tree, 21 ms then 19 ms. Windows of long calls are two calls: timed
        // whole, the tree's (21 + 19) / 2 = 20 ms beat the default's 22 ms
        // by more than `margin`.
        let p = Params {
            settle_ns: 0.0,
            ..params()
        };
        let (first, steady) = ([27.0e6, 21.0e6], [17.0e6, 19.0e6]);
        let mut s = Search::new(p, 2);
        let mut events = Vec::new();
        let mut cold = true;
        for _ in 0..200 {
            let c = s.choice();
            let ns = if cold { first[c] } else { steady[c] };
            cold = false;
            if let Some(mine) = s.count(s.wants_time().then_some(ns as u64)) {
                events.extend(s.agree(agreed(mine)).into_iter().flatten());
                cold = true;
            }
        }
        let trials: Vec<(usize, f64)> = events
            .iter()
            .filter_map(|e| match *e {
                Event::Trial { candidate, ns, .. } => Some((candidate, ns)),
                _ => None,
            })
            .collect();
        assert_eq!(trials, vec![(0, 17.0e6), (1, 19.0e6)]);
        assert!(matches!(s.state(), State::Decided { candidate: 0, .. }));
        // A window of one call has no lead-in: it is timed.
        let p = Params {
            window: 1,
            settle_ns: 0.0,
            ..params()
        };
        let mut s = Search::new(p, 2);
        for call in 0..20 {
            if matches!(s.state(), State::Trial { .. } | State::Confirm) {
                assert!(s.wants_time(), "call {call}");
            }
            if let Some(mine) = s.count(s.wants_time().then_some(100)) {
                s.agree(agreed(mine));
            }
        }
        assert!(matches!(s.state(), State::Decided { .. }));
    }

    #[test]
    fn measure_mode_times_every_window_and_never_switches() {
        let p = Params {
            measure: true,
            ..params()
        };
        let mut s = Search::new(p, 5);
        assert_eq!(s.measurement(), None);
        for i in 0..(2 + 8 * 10 + 3) {
            assert_eq!(s.choice(), 0);
            let timed = s.wants_time().then_some(100);
            // Every call after the warm-up but each window's first (its
            // lead-in) is timed.
            if i >= 2 {
                let lead_in = (i - 2) % 8 == 0;
                assert_eq!(timed.is_some(), !lead_in, "call {i}");
            }
            if let Some(mine) = s.count(timed) {
                let agreed = Agreed::settled(mine * 2.0, false);
                assert_eq!(s.agree(agreed), [None, None]);
            }
        }
        assert_eq!(
            s.measurement(),
            Some(Event::Measured {
                ns: 200.0,
                calls: 80
            })
        );
    }

    /// Feeds calls at `times[choice]` until `n` agreed points passed;
    /// returns every event and the candidate each call used.
    fn points(s: &mut Search, times: &[u64], n: usize) -> (Vec<Event>, Vec<usize>) {
        let mut events = Vec::new();
        let mut used = Vec::new();
        let mut seen = 0;
        while seen < n {
            let c = s.choice();
            used.push(c);
            let timed = s.wants_time().then_some(times[c]);
            if let Some(mine) = s.count(timed) {
                seen += 1;
                events.extend(s.agree(agreed(mine)).into_iter().flatten());
            }
        }
        (events, used)
    }

    #[test]
    fn a_pin_stops_the_search_and_its_candidate_runs_every_call() {
        let p = params();
        // Pinned in the middle of a search (candidate 1 under trial).
        let mut s = Search::new(p, 4);
        points(&mut s, &[100, 50, 400, 90], 2);
        assert!(matches!(s.state(), State::Trial { candidate: 1, .. }));
        let calls = s.calls();
        assert_eq!(
            s.pin(2, 77),
            Some(Event::Pinned {
                candidate: 2,
                calls,
                request: 77
            })
        );
        assert_eq!(
            s.state(),
            State::Pinned {
                candidate: 2,
                since: 0
            }
        );
        // Candidate 2 is 8x slower than the default: a search would drop
        // it at once; pinned, it runs every call, and nothing is searched.
        let (events, used) = points(&mut s, &[100, 50, 400, 90], 10);
        assert!(used.iter().all(|&c| c == 2), "{used:?}");
        let interval = s.pinned_interval();
        assert_eq!(interval, 8 * 64);
        assert_eq!(used.len() as u64, 10 * interval);
        // One report, at the first point after the pin, with the agreed
        // time of the first (timed) window.
        assert_eq!(
            events,
            vec![Event::Held {
                candidate: 2,
                ns: 400.0,
                calls: interval,
                request: 77
            }]
        );
        // Only the first window of each interval is timed, after its
        // lead-in.
        let mut timed = Vec::new();
        for call in 0..interval {
            if s.wants_time() {
                timed.push(call);
            }
            s.count(Some(1));
        }
        assert_eq!(timed, (1..8).collect::<Vec<_>>());
    }

    #[test]
    fn a_pin_holds_through_drift_and_the_default_can_be_pinned() {
        let p = Params {
            check_every: 2,
            recheck: 100,
            ..params()
        };
        let (mut s, _) = run(p, &[100.0, 50.0], 100);
        assert!(matches!(s.state(), State::Decided { candidate: 1, .. }));
        assert!(matches!(
            s.pin(0, 1),
            Some(Event::Pinned { candidate: 0, .. })
        ));
        // Times that would restart a decided search (drift, recheck) do
        // not restart a pinned one.
        let mut events = Vec::new();
        for i in 0..10_000u64 {
            assert_eq!(s.choice(), 0);
            let timed = s.wants_time().then_some(if i % 2 == 0 { 10 } else { 5000 });
            if let Some(mine) = s.count(timed) {
                events.extend(s.agree(agreed(mine)).into_iter().flatten());
            }
        }
        assert_eq!(events.len(), 1, "{events:?}");
        assert!(matches!(events[0], Event::Held { candidate: 0, .. }));
        // A later request re-pins; a stop still ends it.
        assert!(matches!(
            s.pin(1, 2),
            Some(Event::Pinned { candidate: 1, .. })
        ));
        assert_eq!(s.choice(), 1);
        points(&mut s, &[1, 1], 1);
        let [stopped, _] = s.agree(Agreed::settled(0.0, true));
        assert_eq!(stopped, Some(Event::Stopped));
        assert_eq!(s.choice(), 0);
        assert_eq!(s.pin(1, 3), None, "a stopped search is never pinned");
    }

    #[test]
    fn a_pin_outside_the_candidates_or_while_measuring_is_ignored() {
        let mut s = Search::new(params(), 3);
        assert_eq!(s.pin(3, 1), None);
        assert_eq!(s.state(), State::Warmup);
        let mut m = Search::new(
            Params {
                measure: true,
                ..params()
            },
            3,
        );
        assert_eq!(m.pin(0, 1), None);
        assert_eq!(Search::new(params(), 1).pin(0, 1), None);
    }

    #[test]
    fn ranks_that_pin_at_the_same_point_stay_in_step() {
        // Two ranks with different local times, pinned at the same agreed
        // point, use the same candidate at every call after it.
        let p = Params {
            window: 2,
            check_every: 3,
            ..params()
        };
        let mut a = Search::new(p, 4);
        let mut b = Search::new(p, 4);
        let mut pinned_at = None;
        for i in 0..5_000u64 {
            assert_eq!(a.choice(), b.choice(), "call {i}");
            let pa = a.count(a.wants_time().then_some(10 + i % 7));
            let pb = b.count(b.wants_time().then_some(1000 + i % 13));
            assert_eq!(pa.is_some(), pb.is_some());
            if let (Some(x), Some(y)) = (pa, pb) {
                let agreed = Agreed::settled(x.max(y), false);
                assert_eq!(a.agree(agreed), b.agree(agreed));
                if pinned_at.is_none() && i > 100 {
                    assert_eq!(a.pin(3, 9), b.pin(3, 9));
                    pinned_at = Some(i);
                }
            }
        }
        assert!(pinned_at.is_some());
        assert_eq!(a.state(), b.state());
        assert_eq!(a.choice(), 3);
    }

    #[test]
    fn one_candidate_is_no_search() {
        let mut s = Search::new(params(), 1);
        assert_eq!(s.state(), State::Off);
        assert_eq!(s.count(Some(5)), None);
    }

    /// The wrapper's steady state: calls that `quiet` allows run without
    /// the search and are added later with `count_quiet`. A search driven
    /// that way reaches every agreed point at the same call, with the same
    /// choice on every call, as one that counts each call, through a
    /// search, a decision, drift, a restart and a pin.
    #[test]
    fn quiet_calls_counted_later_are_the_calls_counted_one_by_one() {
        let p = Params {
            check_every: 4,
            ..params()
        };
        let mut each = Search::new(p, 3);
        let mut quiet = Search::new(p, 3);
        // (budget handed out, left of it)
        let (mut given, mut left) = (0u32, 0u32);
        let mut skipped = 0u64;
        for call in 0..6000u64 {
            // Drift at call 2000: the chosen candidate slows down 3x.
            let times = if call < 2000 {
                [100, 300, 50]
            } else {
                [100, 300, 150]
            };
            if call == 4000 {
                let e = each.pin(1, 7);
                quiet.count_quiet(given - left);
                (given, left) = (0, 0);
                assert_eq!(quiet.pin(1, 7), e);
            }
            let c = each.choice();
            let ns = each.wants_time().then_some(times[c]);
            let point = each.count(ns);
            if left > 0 {
                left -= 1;
                skipped += 1;
                assert_eq!(quiet.choice(), c, "call {call}");
                assert_eq!((ns, point), (None, None), "call {call}");
                continue;
            }
            quiet.count_quiet(given);
            assert_eq!(quiet.choice(), c, "call {call}");
            assert_eq!(quiet.wants_time(), ns.is_some(), "call {call}");
            let quiet_point = quiet.count(ns);
            assert_eq!(quiet_point, point, "call {call}");
            if let Some(mine) = point {
                assert_eq!(
                    quiet.agree(agreed(mine)),
                    each.agree(agreed(mine)),
                    "call {call}"
                );
            }
            given = quiet.quiet();
            left = given;
        }
        quiet.count_quiet(given - left);
        assert_eq!(format!("{quiet:?}"), format!("{each:?}"));
        // Most steady-state calls took the quiet way.
        assert!(skipped > 4000, "{skipped} of 6000");
    }

    #[test]
    fn stopped_searches_are_all_quiet_and_measuring_ones_never() {
        let mut s = Search::new(params(), 3);
        assert_eq!(s.quiet(), 0);
        s.agree(Agreed::settled(0.0, true));
        assert_eq!(s.quiet(), u32::MAX);
        let m = Search::new(
            Params {
                measure: true,
                ..params()
            },
            3,
        );
        assert_eq!(m.quiet(), 0);
    }
}
