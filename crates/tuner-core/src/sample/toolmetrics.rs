//! Tool metrics: what the interposer counts on the application's hot path.
//!
//! For each family of MPI calls (point-to-point and collectives), the number
//! of calls, the bytes they carried, a power-of-two histogram of message
//! sizes, and the time spent in them. The first [`TIMED_ALWAYS`] calls of a
//! family are all timed; after that one call in [`TIMING_PERIOD`] is, and
//! its time is scaled to the calls not timed, so that timing costs nearly
//! nothing (a clock read is 20-40 ns, several times the rest of the
//! wrapper) while rare calls are still timed exactly. All counters are
//! static relaxed atomics: recording a call takes no lock and allocates
//! nothing.
//!
//! When the application cannot call MPI from two threads at once (its
//! thread level is below `MPI_THREAD_MULTIPLE`, see
//! [`set_concurrent_callers`]) a counter is updated with a relaxed load and
//! a relaxed store instead of an atomic read-modify-write: the MPI standard
//! forbids concurrent MPI calls below that level, so the application's own
//! synchronisation orders the wrappers' updates and none is lost, and the
//! `lock`-prefixed instruction (most of a wrapper's cost) is avoided. The
//! helper thread only reads the counters.
//!
//! The sampler publishes them like PVARs, under names such as
//! `tool.allreduce.calls`, `tool.allreduce.bytes`, `tool.allreduce.time`
//! (seconds), `tool.allreduce.bytes_p50` and `tool.allreduce.hist`, so that
//! policies and logs see them as any other variable.
//!
//! Histogram bucket `b` counts messages of `[2^(b-1), 2^b)` bytes; bucket 0
//! counts empty messages.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

/// Number of histogram buckets: up to 2^30 bytes and more in the last one.
pub const BUCKETS: usize = 32;

/// The first calls of each family are all timed.
pub const TIMED_ALWAYS: u64 = 64;

/// After the first [`TIMED_ALWAYS`] calls, one call in this many is timed
/// (per family); their time is scaled to the others.
pub const TIMING_PERIOD: u64 = 64;

/// Whether the application may call MPI from several threads at once.
/// Until told otherwise (before `MPI_Init` returns), assume it may.
/// Calls whose byte count is 0 because `MPI_Type_size` failed (counted on
/// the hot path, told at finalize).
static SIZE_FAILURES: AtomicU64 = AtomicU64::new(0);

/// Counts a failed `MPI_Type_size` of the hot path (one relaxed add).
#[inline]
pub fn type_size_failed() {
    SIZE_FAILURES.fetch_add(1, Relaxed);
}

/// How many calls so far counted 0 bytes because `MPI_Type_size` failed.
pub fn type_size_failures() -> u64 {
    SIZE_FAILURES.load(Relaxed)
}

static CONCURRENT_CALLERS: AtomicBool = AtomicBool::new(true);

/// Tells the counters whether the application may make MPI calls from
/// several threads at the same time (it was provided
/// `MPI_THREAD_MULTIPLE`). Called once, right after `MPI_Init`.
pub fn set_concurrent_callers(concurrent: bool) {
    CONCURRENT_CALLERS.store(concurrent, Relaxed);
}

/// Whether counters are updated with atomic read-modify-writes.
pub fn concurrent_callers() -> bool {
    CONCURRENT_CALLERS.load(Relaxed)
}

/// Adds `by` to `counter` and returns the old value: an atomic
/// read-modify-write when calls may be concurrent, else a load and a store
/// (see the module documentation for why no update is lost).
#[inline(always)]
fn add(counter: &AtomicU64, by: u64, concurrent: bool) -> u64 {
    if concurrent {
        counter.fetch_add(by, Relaxed)
    } else {
        let old = counter.load(Relaxed);
        counter.store(old.wrapping_add(by), Relaxed);
        old
    }
}

/// Whether a call must be timed, and how its time counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Timing {
    /// Not timed.
    No,
    /// One of the first calls: its time counts as it is.
    Exact,
    /// A sampled call: its time stands for [`TIMING_PERIOD`] calls.
    Sampled,
}

impl Timing {
    #[inline(always)]
    fn of_call(n: u64) -> Timing {
        if n < TIMED_ALWAYS {
            Timing::Exact
        } else if n % TIMING_PERIOD == 0 {
            Timing::Sampled
        } else {
            Timing::No
        }
    }
}

/// A family of MPI calls counted together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(usize)]
pub enum Family {
    /// `MPI_Send`, `MPI_Ssend`, `MPI_Rsend`, `MPI_Bsend`.
    Send,
    /// `MPI_Isend`, `MPI_Issend`, `MPI_Irsend`, `MPI_Ibsend`.
    Isend,
    /// `MPI_Recv` (bytes: the posted size).
    Recv,
    /// `MPI_Irecv` (bytes: the posted size).
    Irecv,
    /// `MPI_Sendrecv` (bytes: those sent).
    Sendrecv,
    /// `MPI_Wait`, `MPI_Waitall`, `MPI_Waitany`, `MPI_Waitsome` (time only).
    Wait,
    /// `MPI_Allreduce` (bytes: one rank's contribution).
    Allreduce,
    /// `MPI_Reduce`.
    Reduce,
    /// `MPI_Bcast`.
    Bcast,
    /// `MPI_Barrier`.
    Barrier,
    /// `MPI_Allgather` (bytes: one rank's contribution).
    Allgather,
    /// `MPI_Alltoall` (bytes: sent to each peer).
    Alltoall,
    /// `MPI_Gather`.
    Gather,
    /// `MPI_Scatter`.
    Scatter,
}

impl Family {
    /// Every family, in order.
    pub const ALL: [Family; 14] = [
        Family::Send,
        Family::Isend,
        Family::Recv,
        Family::Irecv,
        Family::Sendrecv,
        Family::Wait,
        Family::Allreduce,
        Family::Reduce,
        Family::Bcast,
        Family::Barrier,
        Family::Allgather,
        Family::Alltoall,
        Family::Gather,
        Family::Scatter,
    ];

    /// The name in metric names (`tool.<name>.calls`).
    pub fn name(self) -> &'static str {
        match self {
            Family::Send => "send",
            Family::Isend => "isend",
            Family::Recv => "recv",
            Family::Irecv => "irecv",
            Family::Sendrecv => "sendrecv",
            Family::Wait => "wait",
            Family::Allreduce => "allreduce",
            Family::Reduce => "reduce",
            Family::Bcast => "bcast",
            Family::Barrier => "barrier",
            Family::Allgather => "allgather",
            Family::Alltoall => "alltoall",
            Family::Gather => "gather",
            Family::Scatter => "scatter",
        }
    }

    /// Whether the family moves data point to point (for the eager advice).
    pub fn is_point_to_point(self) -> bool {
        matches!(self, Family::Send | Family::Isend | Family::Sendrecv)
    }
}

/// The counters of one family.
#[derive(Debug)]
pub struct Counters {
    calls: AtomicU64,
    bytes: AtomicU64,
    exact_nanos: AtomicU64,
    sampled_calls: AtomicU64,
    sampled_nanos: AtomicU64,
    hist: [AtomicU64; BUCKETS],
}

impl Counters {
    const fn new() -> Counters {
        Counters {
            calls: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            exact_nanos: AtomicU64::new(0),
            sampled_calls: AtomicU64::new(0),
            sampled_nanos: AtomicU64::new(0),
            hist: [const { AtomicU64::new(0) }; BUCKETS],
        }
    }
}

static COUNTERS: [Counters; 14] = [const { Counters::new() }; 14];

/// The bucket of a message of `bytes` bytes.
#[inline]
pub fn bucket(bytes: u64) -> usize {
    if bytes == 0 {
        0
    } else {
        ((64 - bytes.leading_zeros()) as usize).min(BUCKETS - 1)
    }
}

/// The smallest size bucket `b` holds.
pub fn bucket_floor(b: usize) -> u64 {
    if b == 0 {
        0
    } else {
        1u64 << (b - 1)
    }
}

/// Counts one call that moved `bytes` bytes. Returns whether and how this
/// call should be timed (then report it with [`record_time`]). Lock-free,
/// allocation-free.
#[inline]
pub fn record(family: Family, bytes: u64) -> Timing {
    let c = &COUNTERS[family as usize];
    let concurrent = CONCURRENT_CALLERS.load(Relaxed);
    let n = add(&c.calls, 1, concurrent);
    add(&c.bytes, bytes, concurrent);
    add(&c.hist[bucket(bytes)], 1, concurrent);
    Timing::of_call(n)
}

/// Counts a call that moves no data of its own (`MPI_Wait`,
/// `MPI_Barrier`). Returns whether and how to time it.
#[inline]
pub fn record_call(family: Family) -> Timing {
    let c = &COUNTERS[family as usize];
    Timing::of_call(add(&c.calls, 1, CONCURRENT_CALLERS.load(Relaxed)))
}

/// Adds the duration of a timed call.
#[inline]
pub fn record_time(family: Family, timing: Timing, nanos: u64) {
    let c = &COUNTERS[family as usize];
    let concurrent = CONCURRENT_CALLERS.load(Relaxed);
    match timing {
        Timing::No => {}
        Timing::Exact => {
            add(&c.exact_nanos, nanos, concurrent);
        }
        Timing::Sampled => {
            add(&c.sampled_nanos, nanos, concurrent);
            add(&c.sampled_calls, 1, concurrent);
        }
    }
}

/// Estimated seconds in `calls` calls: the first ones exactly, the rest
/// from the sampled ones' mean.
#[cfg(test)]
fn estimated_seconds(calls: u64, exact_nanos: u64, sampled_calls: u64, sampled_nanos: u64) -> f64 {
    let mut e = TimeEstimate::default();
    e.advance(Raw {
        calls,
        exact_nanos,
        sampled_calls,
        sampled_nanos,
    })
}

/// One reading of a family's timing counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Raw {
    calls: u64,
    exact_nanos: u64,
    sampled_calls: u64,
    sampled_nanos: u64,
}

/// A family's estimated time, advanced reading by reading so that it never
/// goes down: the calls not timed since the last reading count at the mean
/// of the calls sampled since then (at the run's sampled mean when none
/// was). Scaling every call by the run's mean at each reading instead made
/// the total fall whenever the mean fell (calls getting faster after slow
/// first ones), and a total's rate negative (`watch` showed
/// `tool.mpi.time` at -0.53/s).
#[derive(Debug, Clone, Copy, Default)]
struct TimeEstimate {
    last: Raw,
    seconds: f64,
}

impl TimeEstimate {
    /// Takes a new reading; returns the estimated seconds so far.
    fn advance(&mut self, now: Raw) -> f64 {
        let d = |a: u64, b: u64| a.saturating_sub(b);
        let last = self.last;
        let exact = d(now.exact_nanos, last.exact_nanos) as f64;
        let untimed = d(
            now.calls.saturating_sub(TIMED_ALWAYS),
            last.calls.saturating_sub(TIMED_ALWAYS),
        ) as f64;
        let sampled = d(now.sampled_calls, last.sampled_calls);
        let mean = if sampled > 0 {
            d(now.sampled_nanos, last.sampled_nanos) as f64 / sampled as f64
        } else if now.sampled_calls > 0 {
            now.sampled_nanos as f64 / now.sampled_calls as f64
        } else {
            0.0
        };
        self.seconds += (exact + untimed * mean) * 1e-9;
        // Counters only grow; keep the largest reading of each (they are
        // read one by one, a call apart, so one may lag another).
        self.last = Raw {
            calls: now.calls.max(last.calls),
            exact_nanos: now.exact_nanos.max(last.exact_nanos),
            sampled_calls: now.sampled_calls.max(last.sampled_calls),
            sampled_nanos: now.sampled_nanos.max(last.sampled_nanos),
        };
        self.seconds
    }
}

/// Each family's estimate, advanced by [`family_snapshot`] (the helper
/// thread's ticks and finalize; never the application's calls).
static ESTIMATES: std::sync::Mutex<[TimeEstimate; Family::ALL.len()]> = std::sync::Mutex::new(
    [TimeEstimate {
        last: Raw {
            calls: 0,
            exact_nanos: 0,
            sampled_calls: 0,
            sampled_nanos: 0,
        },
        seconds: 0.0,
    }; Family::ALL.len()],
);

/// A consistent-enough copy of one family's counters (each counter is read
/// once; they may be a call apart).
#[derive(Debug, Clone, PartialEq)]
pub struct FamilySnapshot {
    /// The family.
    pub family: Family,
    /// Calls.
    pub calls: u64,
    /// Bytes.
    pub bytes: u64,
    /// Estimated seconds spent in the calls (timed calls scaled to all).
    pub seconds: f64,
    /// The size histogram.
    pub hist: [u64; BUCKETS],
}

impl FamilySnapshot {
    /// The size below which `q` (0..1) of the calls fall, as the floor of
    /// the bucket that holds that quantile (0 when there were no calls).
    pub fn quantile_bytes(&self, q: f64) -> u64 {
        let total: u64 = self.hist.iter().sum();
        if total == 0 {
            return 0;
        }
        let target = (q.clamp(0.0, 1.0) * total as f64).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (b, n) in self.hist.iter().enumerate() {
            seen += n;
            if seen >= target {
                return bucket_floor(b);
            }
        }
        bucket_floor(BUCKETS - 1)
    }
}

/// Reads every family's counters.
pub fn snapshot() -> Vec<FamilySnapshot> {
    Family::ALL.iter().map(|&f| family_snapshot(f)).collect()
}

/// Reads one family's counters and advances its time estimate (no
/// allocation: the sampler does this for every family on every tick; an
/// uncontended lock, never taken on the application's calls).
pub fn family_snapshot(family: Family) -> FamilySnapshot {
    let c = &COUNTERS[family as usize];
    let calls = c.calls.load(Relaxed);
    let raw = Raw {
        calls,
        exact_nanos: c.exact_nanos.load(Relaxed),
        sampled_calls: c.sampled_calls.load(Relaxed),
        sampled_nanos: c.sampled_nanos.load(Relaxed),
    };
    // A poisoned lock only means a reader panicked between two plain
    // stores: the estimates are still whole numbers.
    let seconds = ESTIMATES
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)[family as usize]
        .advance(raw);
    let mut hist = [0u64; BUCKETS];
    for (h, a) in hist.iter_mut().zip(&c.hist) {
        *h = a.load(Relaxed);
    }
    FamilySnapshot {
        family,
        calls,
        bytes: c.bytes.load(Relaxed),
        seconds,
        hist,
    }
}

/// The metrics each family publishes (`tool.<family>.<metric>`), in the
/// order the sampler computes them.
pub const METRICS: [&str; 6] = ["calls", "bytes", "time", "bytes_p50", "bytes_p90", "hist"];

/// The names `tool.<family>.<metric>` of one family's [`METRICS`], formatted
/// once per process.
pub fn family_metric_names(family: Family) -> &'static [String; 6] {
    static NAMES: std::sync::OnceLock<Vec<[String; 6]>> = std::sync::OnceLock::new();
    &NAMES.get_or_init(|| {
        Family::ALL
            .iter()
            .map(|f| METRICS.map(|m| format!("tool.{}.{m}", f.name())))
            .collect()
    })[family as usize]
}

/// Every metric name the interposer can publish.
pub fn metric_names() -> Vec<String> {
    let mut names: Vec<String> = Family::ALL
        .iter()
        .flat_map(|&f| family_metric_names(f).iter().cloned())
        .collect();
    names.push("tool.mpi.time".into());
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_powers_of_two() {
        assert_eq!(bucket(0), 0);
        assert_eq!(bucket(1), 1);
        assert_eq!(bucket(7), 3);
        assert_eq!(bucket(8), 4);
        assert_eq!(bucket(65536), 17);
        assert_eq!(bucket(65535), 16);
        assert_eq!(bucket(u64::MAX), BUCKETS - 1);
        assert_eq!(bucket_floor(bucket(8)), 8);
        assert_eq!(bucket_floor(bucket(65536)), 65536);
    }

    #[test]
    fn quantiles_from_the_histogram() {
        let mut hist = [0u64; BUCKETS];
        hist[bucket(8)] = 90;
        hist[bucket(65536)] = 10;
        let s = FamilySnapshot {
            family: Family::Send,
            calls: 100,
            bytes: 0,
            seconds: 0.0,
            hist,
        };
        assert_eq!(s.quantile_bytes(0.5), 8);
        assert_eq!(s.quantile_bytes(0.95), 65536);
    }

    #[test]
    fn first_calls_timed_then_one_in_a_period() {
        assert_eq!(Timing::of_call(0), Timing::Exact);
        assert_eq!(Timing::of_call(TIMED_ALWAYS - 1), Timing::Exact);
        assert_eq!(Timing::of_call(TIMED_ALWAYS), Timing::Sampled);
        assert_eq!(Timing::of_call(TIMED_ALWAYS + 1), Timing::No);
        assert_eq!(Timing::of_call(2 * TIMING_PERIOD), Timing::Sampled);
        let timed = (0..10_000).filter(|&n| Timing::of_call(n) != Timing::No);
        assert!(timed.count() < 64 + 10_000 / TIMING_PERIOD as usize + 1);
    }

    #[test]
    fn time_estimate_is_exact_for_few_calls_and_scaled_after() {
        // 10 calls of 1 us each, all timed.
        assert!((estimated_seconds(10, 10_000, 0, 0) - 10e-6).abs() < 1e-12);
        // 64 exact calls of 1 us, then 6400 more of 2 us of which 100 sampled.
        let s = estimated_seconds(64 + 6400, 64_000, 100, 200_000);
        assert!((s - (64e-6 + 6400.0 * 2e-6)).abs() < 1e-9, "{s}");
    }

    #[test]
    fn time_estimate_never_goes_down_when_calls_get_faster() {
        let mut e = TimeEstimate::default();
        // 64 exact calls of 1 us; call 64, the first sampled, took 100 us;
        // 63 untimed ones after it.
        let mut raw = Raw {
            calls: 128,
            exact_nanos: 64_000,
            sampled_calls: 1,
            sampled_nanos: 100_000,
        };
        let first = e.advance(raw);
        assert!((first - (64e-6 + 64.0 * 100e-6)).abs() < 1e-9, "{first}");
        // Call 128, sampled, took 1 us: scaling every untimed call by the
        // run's mean (50.5 us now) took 3 ms back from the total.
        raw.calls += 1;
        raw.sampled_calls += 1;
        raw.sampled_nanos += 1000;
        let whole_run = estimated_seconds(
            raw.calls,
            raw.exact_nanos,
            raw.sampled_calls,
            raw.sampled_nanos,
        );
        assert!(whole_run < first, "the whole-run scaling went down");
        let second = e.advance(raw);
        assert!((second - (first + 1e-6)).abs() < 1e-12, "{second}");
        // No new sampled call: the run's mean prices the untimed ones.
        raw.calls += 10;
        let third = e.advance(raw);
        let mean = raw.sampled_nanos as f64 / raw.sampled_calls as f64;
        assert!((third - (second + 10.0 * mean * 1e-9)).abs() < 1e-12);
        // A reading a call behind another does not take time back.
        raw.sampled_calls -= 1;
        assert!(e.advance(raw) >= third);
    }

    #[test]
    fn load_store_counting_adds_up_on_one_thread() {
        let c = AtomicU64::new(5);
        assert_eq!(add(&c, 3, false), 5);
        assert_eq!(add(&c, 2, true), 8);
        assert_eq!(c.load(Relaxed), 10);
    }

    #[test]
    fn counting_is_exact() {
        let before = snapshot()[Family::Gather as usize].clone();
        for _ in 0..1000 {
            record(Family::Gather, 8);
        }
        let after = &snapshot()[Family::Gather as usize];
        assert_eq!(after.calls - before.calls, 1000);
        assert_eq!(after.bytes - before.bytes, 8000);
        assert_eq!(after.hist[4] - before.hist[4], 1000);
    }
}
