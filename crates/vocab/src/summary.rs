//! `summary.json`: the cross-rank summary rank 0 writes at finalize.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The whole file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SummaryFile {
    /// The log format version ([`crate::FORMAT_VERSION`]).
    pub version: u32,
    /// Ranks in the job.
    pub size: i32,
    /// Library family (as in the log header).
    pub library: crate::record::LibraryFamily,
    /// `MPI_Get_library_version`.
    pub library_version: String,
    /// Samples rank 0 took.
    pub samples_rank0: u64,
    /// Seconds from start to finalize on rank 0.
    #[serde(deserialize_with = "crate::nan::f64")]
    #[schemars(with = "Option<f64>")]
    pub duration_s: f64,
    /// Statistics of each quantity across ranks.
    pub variables: Vec<VariableStats>,
    /// Functional classes of ranks.
    pub classes: Vec<RankClass>,
    /// The ranks of each host (node), by lowest rank (absent in older
    /// files).
    #[serde(default)]
    pub hosts: Vec<HostRanks>,
    /// Message-size histograms summed over all ranks, per MPI call family
    /// (bucket `b`: `[2^(b-1), 2^b)` bytes).
    pub size_histograms: BTreeMap<String, Vec<u64>>,
    /// End-of-run advice.
    pub recommendations: Vec<Recommendation>,
    /// What the policies told the job (`kind`: `recommendation`, `note`,
    /// `disabled`, ...).
    pub messages: Vec<Message>,
    /// What online collective tuning found, per communicator, collective
    /// and message-size bin searched, on the communicators rank 0 belongs
    /// to (empty when tuning did not run; absent in older files).
    #[serde(default)]
    pub collectives: Vec<CollectiveOutcome>,
    /// The mode online collective tuning ran in (`safe`, `all`,
    /// `measure`); absent when it did not run (and in older files).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collective_mode: Option<String>,
}

/// Online collective tuning's outcome for one (communicator, collective,
/// message-size bin): the same on every rank of the communicator, whose
/// ranks agree on every number (the `collective` records of the logs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CollectiveOutcome {
    /// The communicator's label (`c<world rank of its rank 0>.<n>`).
    pub comm: String,
    /// Its size.
    pub comm_size: Option<i32>,
    /// The collective (`allreduce`, ...).
    pub collective: String,
    /// The message-size bin, `[lo, hi)` bytes (`hi` null for the last).
    pub bin: Option<(u64, Option<u64>)>,
    /// The library's default algorithm (the value at start).
    pub default: Option<String>,
    /// The algorithm kept by the last search that ended (`None`: none ended).
    pub chosen: Option<String>,
    /// The default's agreed time per call in that search (microseconds).
    pub default_us: Option<f64>,
    /// The kept algorithm's agreed time per call (microseconds).
    pub chosen_us: Option<f64>,
    /// The kept algorithm's value of the library's variable (MPICH's
    /// enumeration, Open MPI's `coll_tuned_<coll>_algorithm` number), as
    /// the decision recorded it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chosen_value: Option<i64>,
    /// `default_us / chosen_us`.
    pub gain: Option<f64>,
    /// What every search cost over the run (time spent in candidates
    /// slower than the default), microseconds.
    pub cost_us: f64,
    /// Searches that ended.
    pub searches: u32,
    /// Each candidate tried: its last agreed time per call.
    pub candidates: Vec<CandidateTime>,
    /// The algorithm a user's request (`mpit-tuner set`) pinned, which ran
    /// from then on instead of any search's choice (`None`: not pinned).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pinned: Option<String>,
    /// The id of that request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pinned_by: Option<String>,
    /// The last search started from the tuning store's choice and
    /// confirmed it (docs/tuning-store.md).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub from_store: bool,
}

impl CollectiveOutcome {
    /// The algorithm that ran instead of the library's default at the
    /// end: the pinned one, else the one the last search kept; `None`
    /// when that is the default (or nothing ended).
    pub fn switched_to(&self) -> Option<&str> {
        self.pinned
            .as_ref()
            .or(self.chosen.as_ref())
            .filter(|a| Some(*a) != self.default.as_ref())
            .map(String::as_str)
    }
}

/// A candidate algorithm as a search last measured it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CandidateTime {
    /// The algorithm's name in the library.
    pub algorithm: String,
    /// Its agreed time per call in its last trial (microseconds).
    pub time_us: Option<f64>,
    /// Calls it ran, over all its trials.
    pub calls: u64,
    /// Dropped after its first window in its last trial (too slow).
    pub dropped: bool,
}

/// A message of the summary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Message {
    /// Its kind.
    pub kind: String,
    /// Its text.
    pub text: String,
}

/// Statistics of one quantity across ranks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct VariableStats {
    /// `name` or `name@object`, with the quantity (`total`, `final`, `mean`).
    pub name: String,
    /// What the per-rank number is: `total` (counters, timers), `final`
    /// (watermarks), `mean` (levels, sizes).
    pub kind: String,
    /// How many ranks had it.
    pub ranks: u32,
    /// Smallest per-rank value.
    #[serde(deserialize_with = "crate::nan::f64")]
    #[schemars(with = "Option<f64>")]
    pub min: f64,
    /// The rank that held it.
    pub min_rank: i32,
    /// Largest per-rank value.
    #[serde(deserialize_with = "crate::nan::f64")]
    #[schemars(with = "Option<f64>")]
    pub max: f64,
    /// The rank that held it.
    pub max_rank: i32,
    /// Mean over the ranks that had it.
    #[serde(deserialize_with = "crate::nan::f64")]
    #[schemars(with = "Option<f64>")]
    pub mean: f64,
    /// Population standard deviation over those ranks.
    #[serde(deserialize_with = "crate::nan::f64")]
    #[schemars(with = "Option<f64>")]
    pub stddev: f64,
    /// How many ranks fall in each of `HISTOGRAM_BINS` (8) equal bins from
    /// `min` to `max` (all in the first when they are equal).
    pub histogram: Vec<u32>,
}

/// A functional class of ranks: ranks whose behaviour signature (calls and
/// bytes per MPI call family) is the same.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RankClass {
    /// How many ranks.
    pub count: u32,
    /// The members, compactly: `0-7`, `0-6:2` (every second rank), or
    /// `12 ranks in 3-40` when they follow no pattern.
    pub ranks: String,
    /// The members, when they can be listed (a pattern, or few ranks).
    pub members: Option<Vec<u32>>,
    /// What the class does, from its lowest rank.
    pub signature: String,
}

/// The ranks that ran on one host (node), by the host name each rank's
/// log header has.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct HostRanks {
    /// The host name; after the first 32 hosts, one entry counts the rest
    /// (`more than 32 hosts: the rest`).
    pub host: String,
    /// How many ranks.
    pub count: u32,
    /// The ranks, compactly, as a class has them: `0-7`, `0-6:2`, or
    /// `12 ranks in 3-40`.
    pub ranks: String,
    /// The ranks, when they can be listed.
    pub members: Option<Vec<u32>>,
}

/// One piece of advice.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Recommendation {
    /// A stable identifier: `eager-threshold`, `small-allreduce`,
    /// `unexpected-queue`, `policy-refused`, `policy-churn`.
    pub id: String,
    /// What to do.
    pub advice: String,
    /// Why: the numbers from this run.
    pub evidence: String,
    /// The exact setting(s) for this library, e.g.
    /// `OMPI_MCA_btl_vader_eager_limit=131072`.
    pub setting: String,
}
