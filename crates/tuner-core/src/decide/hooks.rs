//! The policy engine as the runtime's hooks: which phase runs when, the
//! policies' init-time agreement across ranks, and what goes to the log.

use super::backends::{EnvBackend, MpiBackend};
use super::engine::*;
use crate::run::log::LogWriter;
use crate::run::{LaunchEnv, RunInfo};
use crate::sample::Snapshot;
use mpit::collective::Mixed;
use mpit::{Catalogue, MpiT};
use policies::{CompiledPolicy, Phase, PolicySet};
use std::collections::BTreeMap;
use vocab::record::{self, Record};

/// The warning of a rank that runs pre-init policies without knowing its
/// rank.
fn no_rank_warning() -> Record<'static> {
    Record::Warning(record::Warning::new(
        0.0,
        "the launcher did not say this process's rank before MPI_Init; pre-init policies see \
         rank 0 of 1",
    ))
}

/// The policy engine at the moments of a rank's life (the policies
/// service, [`crate::services::policies`], drives it).
pub struct PolicyHooks {
    engine: Engine,
    /// Whether the user chose the file (messages go to the terminal) or it
    /// is the embedded default (one summary line).
    user_file: bool,
    rank: u32,
    size: u32,
    /// This rank's node, for the policies' `hosts`.
    host: String,
    pending: Vec<Record<'static>>,
    messages: Vec<String>,
    pre_catalogue_names: usize,
    /// Writes and refusals of the policies that `mpit-tuner reload`
    /// replaced, by name: the `policy.<name>.*` quantities count the whole
    /// run.
    earlier: BTreeMap<String, WriteCounts>,
    /// The policies the start agreement found disabled on every rank:
    /// their `policy.<name>.*` quantities (zero everywhere) are left out
    /// of the summary. Emptied by `mpit-tuner reload`, whose policies of
    /// the same name may run.
    disabled_everywhere: Vec<String>,
}

impl PolicyHooks {
    /// Runs the policies of `phase` against the running job's values.
    fn run(
        &mut self,
        phase: Phase,
        mpit: &MpiT,
        catalogue: &Catalogue,
        snapshot: &Snapshot,
        log: &mut LogWriter,
    ) {
        let mut backend = MpiBackend {
            mpit,
            catalogue,
            snapshot,
            now: snapshot.t,
        };
        let env = env(self.rank, self.size, snapshot.t);
        self.engine
            .run(phase, &mut backend, &env, &mut |r| log.record(&r));
    }

    /// Loads the policies the configuration names (`None` = the embedded
    /// default, `none` = monitor only). A file that does not parse is
    /// reported and the tuner runs in monitor mode: the returned message
    /// (with `file:line:column`) is for rank 0 to print.
    pub fn from_config(config: &crate::run::Config) -> (Option<PolicyHooks>, Option<String>) {
        let path = config.policy.as_deref();
        if path.is_some_and(|p| p.as_os_str() == "none") {
            return (None, None);
        }
        match load(path) {
            Ok(set) => (
                Some(PolicyHooks {
                    engine: Engine::new(set),
                    user_file: path.is_some(),
                    rank: 0,
                    size: 1,
                    host: String::new(),
                    pending: Vec::new(),
                    messages: Vec::new(),
                    pre_catalogue_names: 0,
                    earlier: BTreeMap::new(),
                    disabled_everywhere: Vec::new(),
                }),
                None,
            ),
            Err(e) => (
                None,
                Some(format!("policies not loaded, monitoring only:\n{e}")),
            ),
        }
    }

    /// The engine.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }
}

impl PolicyHooks {
    /// What identifies the policies' collective behaviour at init: the
    /// collectives of `init` depend on how many policies there are and in
    /// which order.
    pub fn identity(&self) -> u64 {
        // FNV-1a over the policy names. Never 0 (monitor mode), and below
        // 2^63.
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for p in self.engine.policies() {
            for b in p.name().bytes().chain([0]) {
                hash ^= u64::from(b);
                hash = hash.wrapping_mul(0x0100_0000_01b3);
            }
        }
        (hash >> 1) | 1
    }

    /// See [`crate::services::Service::before_mpit`].
    pub fn before_mpit(&mut self, launch: &LaunchEnv) {
        self.host = mpit::host_name();
        self.engine.set_host(&self.host);
        let has_env = self
            .engine
            .policies()
            .iter()
            .any(|p| p.phase() == Phase::PreInit && p.sets_environment());
        if !has_env {
            return;
        }
        if launch.rank.is_none() {
            self.pending.push(no_rank_warning());
        }
        let env = env(launch.rank.unwrap_or(0), launch.size.unwrap_or(1), 0.0);
        let pending = &mut self.pending;
        self.engine.run_where(
            Phase::PreInit,
            &CompiledPolicy::sets_environment,
            &mut EnvBackend,
            &env,
            &mut |r| pending.push(r),
        );
    }

    /// See [`crate::services::Service::pre_init`].
    pub fn pre_init(&mut self, mpit: &MpiT, catalogue: &Catalogue, launch: &LaunchEnv) {
        self.rank = launch.rank.unwrap_or(0);
        self.size = launch.size.unwrap_or(1);
        self.pre_catalogue_names = catalogue.cvars().len();
        let has_pre_init = self
            .engine
            .policies()
            .iter()
            .any(|p| p.phase() == Phase::PreInit && !p.sets_environment());
        if !has_pre_init {
            return;
        }
        let warned = self.pending.iter().any(|r| matches!(r, Record::Warning(_)));
        if launch.rank.is_none() && !warned {
            self.pending.push(no_rank_warning());
        }
        let view = CatalogueView::new(mpit, catalogue);
        for (i, reason, _) in self.engine.bind(&view, &[Phase::PreInit]) {
            let name = self.engine.policies()[i].name().to_string();
            self.pending
                .push(Record::PolicyDisabled(record::PolicyDisabled {
                    t: 0.0,
                    policy: name.clone(),
                    reason: reason.clone(),
                }));
            self.messages
                .push(format!("policy {name} disabled: {reason}"));
        }
        let snapshot = Snapshot::default();
        let mut backend = MpiBackend {
            mpit,
            catalogue,
            snapshot: &snapshot,
            now: 0.0,
        };
        let env = env(self.rank, self.size, 0.0);
        let pending = &mut self.pending;
        self.engine.run_where(
            Phase::PreInit,
            &|p| !p.sets_environment(),
            &mut backend,
            &env,
            &mut |r| pending.push(r),
        );
    }

    /// Right after `MPI_Init`: binds the policies of the phases from now
    /// on to this library's variables; those that cannot run here are
    /// disabled, each with a record for the log.
    /// Only rank 0's reasons name the closest known names (`suggest`), and
    /// only for the user's file: the embedded policies name variables of
    /// other libraries on purpose, and their message is one line ("N of 5
    /// default policies do not apply"), so comparing their names with
    /// every variable of the library would cost rank 0 about 10 ms (Open
    /// MPI's 1,300 variables) for nothing.
    pub fn bind(&mut self, mpit: &MpiT, catalogue: &Catalogue, suggest: bool) {
        let view = CatalogueView::new(mpit, catalogue);
        let view = if suggest && self.user_file {
            view
        } else {
            view.without_suggestions()
        };
        let newly = self.engine.bind(&view, RUNTIME_PHASES);
        for (i, reason, _) in &newly {
            self.pending
                .push(Record::PolicyDisabled(record::PolicyDisabled {
                    t: 0.0,
                    policy: self.engine.policies()[*i].name().to_string(),
                    reason: reason.clone(),
                }));
        }
    }

    /// This rank's part of the start agreement, after [`PolicyHooks::bind`]:
    /// per policy, whether it is disabled here, as a count and the lowest
    /// and highest such rank: three elements a policy for the first
    /// [`AGREED_POLICIES`], [`AGREEMENT_LEN`] in all whatever the policy
    /// file (the start agreement also checks that every rank has the same
    /// policies, in the same call, so its length cannot depend on them).
    pub fn disabled_votes(&self, rank: i32) -> Vec<Mixed> {
        disabled_votes(
            (0..self.engine.policies().len()).map(|i| self.engine.disabled(i).is_some()),
            rank,
        )
    }

    /// See [`crate::services::Service::start`]: `agreed` is
    /// [`PolicyHooks::disabled_votes`] reduced over every rank.
    pub fn init(
        &mut self,
        mpit: &MpiT,
        catalogue: &Catalogue,
        info: &RunInfo,
        log: &mut LogWriter,
        agreed: &[Mixed],
    ) {
        self.rank = info.rank.max(0) as u32;
        self.size = info.size.max(1) as u32;
        for r in self.pending.drain(..) {
            log.record(&r);
        }
        // One message per disabled policy for the whole job, on rank 0.
        let n = self.engine.policies().len();
        if agreed.len() == AGREEMENT_LEN {
            // The same on every rank: the agreement's minimum.
            self.disabled_everywhere = agreed
                .chunks_exact(3)
                .zip(self.engine.policies())
                .filter(|(c, _)| c[0].a == 1)
                .map(|(_, p)| p.name().to_string())
                .collect();
        }
        if info.rank == 0 && agreed.len() == AGREEMENT_LEN {
            let size = u32::try_from(info.size.max(1)).unwrap_or(1);
            let per_policy = agreed
                .chunks_exact(3)
                .map(|c| agreed_disabled(c, size))
                // Beyond the policies the agreement carries, rank 0 knows
                // only its own.
                .chain((AGREED_POLICIES..n).map(|i| {
                    self.engine.disabled(i).map(|_| DisabledOn {
                        count: None,
                        lo: 0,
                        hi: -1,
                    })
                }))
                .take(n)
                .collect();
            self.announce_disabled(per_policy, n);
        }
        let snapshot = Snapshot::default();
        let mut backend = MpiBackend {
            mpit,
            catalogue,
            snapshot: &snapshot,
            now: 0.0,
        };
        let env = env(self.rank, self.size, 0.0);
        self.engine
            .run(Phase::Init, &mut backend, &env, &mut |r| log.record(&r));
    }

    /// See [`crate::services::Service::tick`].
    pub fn tick(
        &mut self,
        mpit: &MpiT,
        catalogue: &Catalogue,
        snapshot: &Snapshot,
        log: &mut LogWriter,
    ) {
        self.run(Phase::Periodic, mpit, catalogue, snapshot, log);
    }

    /// See [`crate::services::Service::finalize`].
    pub fn finalize(
        &mut self,
        mpit: &MpiT,
        catalogue: &Catalogue,
        snapshot: &Snapshot,
        log: &mut LogWriter,
    ) {
        self.run(Phase::Finalize, mpit, catalogue, snapshot, log);
        log_summaries(&self.engine, log, snapshot.t);
    }

    /// See [`crate::services::Service::quantities`].
    pub fn quantities(&self) -> Vec<(String, &'static str, f64)> {
        let mut out = Vec::new();
        let mut push = |name: &str, c: WriteCounts| {
            out.push((format!("policy.{name}.writes"), "total", c.writes as f64));
            out.push((format!("policy.{name}.refused"), "total", c.refused as f64));
        };
        let policies = self.engine.policies();
        for (p, now) in policies.iter().zip(&self.engine.counts) {
            if self.disabled_everywhere.iter().any(|d| d == p.name()) {
                continue;
            }
            let before = self.earlier.get(p.name()).copied().unwrap_or_default();
            push(
                p.name(),
                WriteCounts {
                    writes: before.writes + now.writes,
                    refused: before.refused + now.refused,
                },
            );
        }
        for (name, c) in &self.earlier {
            if !policies.iter().any(|p| p.name() == name) {
                push(name, *c);
            }
        }
        out
    }

    /// The policy file's `[collectives]` table, if it has one.
    pub fn collective_spec(&self) -> Option<policies::CollectiveSpec> {
        self.engine.set().collectives().cloned()
    }

    /// See [`crate::services::Service::report`].
    pub fn report(&mut self) -> Vec<(&'static str, String)> {
        let mut out: Vec<(&'static str, String)> = self
            .messages
            .iter()
            .map(|m| ("disabled", m.clone()))
            .collect();
        out.extend(self.engine.recommendations().iter().map(|r| {
            (
                "recommendation",
                format!("recommendation (rank {}) from {r}", self.rank),
            )
        }));
        out
    }
}

/// Phases a reloaded policy file can still run in.
const RELOAD_PHASES: &[Phase] = &[Phase::Periodic, Phase::Finalize];

impl PolicyHooks {
    /// Policies started by `mpit-tuner reload` in a job that ran without
    /// any (monitor mode): `set` once it checks here (see
    /// [`PolicyHooks::reload`]).
    pub fn reloaded(
        set: PolicySet,
        rank: u32,
        size: u32,
        mpit: &MpiT,
        catalogue: &Catalogue,
        log: &mut LogWriter,
        t: f64,
    ) -> Result<(PolicyHooks, String), String> {
        let host = mpit::host_name();
        let (engine, said) = checked_engine(set, &host, mpit, catalogue, log, t)?;
        Ok((
            PolicyHooks {
                engine,
                user_file: true,
                rank,
                size,
                host,
                pending: Vec::new(),
                messages: Vec::new(),
                pre_catalogue_names: 0,
                earlier: BTreeMap::new(),
                disabled_everywhere: Vec::new(),
            },
            said,
        ))
    }

    /// Replaces the running policies by `set` (`mpit-tuner reload`), once
    /// every policy of it checks against this library: a policy that breaks
    /// a rule (a read-only or *_EQ CVAR written while the job runs) refuses
    /// the whole file with its `file:line:column`, and nothing changes. A
    /// policy naming a variable this library lacks is disabled, as at
    /// start. Policies of phase pre-init and init never run (their moment
    /// has passed); the answer says so. Returns what was done.
    pub fn reload(
        &mut self,
        set: PolicySet,
        mpit: &MpiT,
        catalogue: &Catalogue,
        log: &mut LogWriter,
        t: f64,
    ) -> Result<String, String> {
        let (engine, said) = checked_engine(set, &self.host, mpit, catalogue, log, t)?;
        // What the replaced policies did, logged now (the report adds it
        // to what their successors of the same name do), and kept for the
        // quantities.
        log_summaries(&self.engine, log, t);
        for (i, c) in self.engine.counts.iter().enumerate() {
            let e = self
                .earlier
                .entry(self.engine.policies()[i].name().to_string())
                .or_default();
            e.writes += c.writes;
            e.refused += c.refused;
        }
        self.engine = engine;
        self.disabled_everywhere.clear();
        Ok(said)
    }

    /// Pauses or resumes one policy or all (`mpit-tuner pause|resume`).
    pub fn pause(&mut self, policy: Option<&str>, paused: bool) -> Result<String, String> {
        let names = self.engine.pause(policy, paused)?;
        Ok(format!(
            "{} {}",
            if paused { "paused" } else { "resumed" },
            names.join(", ")
        ))
    }

    /// Rank 0's messages about policies disabled somewhere, from the
    /// aggregated counts.
    fn announce_disabled(&mut self, per_policy: Vec<Option<DisabledOn>>, n: usize) {
        let mut lines = Vec::new();
        for (i, on) in per_policy.into_iter().enumerate() {
            let Some(on) = on else {
                continue;
            };
            let name = self.engine.policies()[i].name();
            let where_ = on.describe();
            let reason = self
                .engine
                .disabled(i)
                .map(str::to_string)
                .unwrap_or_else(|| "see the logs of those ranks".into());
            lines.push(format!("policy {name} disabled on {where_}: {reason}"));
        }
        if self.user_file {
            for l in &lines {
                mpit::say!("mpit-tuner: {l}");
            }
        } else if !lines.is_empty() && mpit::verbose() {
            mpit::say!(
                "mpit-tuner: {} of {} default policies do not apply to this MPI library (see summary.json)",
                lines.len(),
                n
            );
        }
        self.messages.extend(lines);
    }
}

/// The policies whose disabling every rank reports in the start
/// agreement; rank 0 says of the others only whether they are disabled
/// on rank 0 itself.
pub const AGREED_POLICIES: usize = 64;

/// The length of [`PolicyHooks::disabled_votes`], whatever the policies.
pub const AGREEMENT_LEN: usize = 3 * AGREED_POLICIES;

/// [`PolicyHooks::disabled_votes`] of a rank whose policies are disabled
/// or not as `disabled` says, in order: per policy, whether it is
/// disabled here (its minimum says whether it is disabled everywhere), this rank if
/// disabled and its negation (their minimums: the lowest and the highest
/// rank where it is). Minimums only, so that the start agreement is one
/// `MPI_MIN`, which needs no operation of the tool's.
fn disabled_votes(disabled: impl Iterator<Item = bool>, rank: i32) -> Vec<Mixed> {
    const NONE: i64 = i64::MAX;
    let me = i64::from(rank);
    let mut votes: Vec<Mixed> = disabled
        .take(AGREED_POLICIES)
        .flat_map(|d| {
            [
                Mixed::min(i64::from(d)),
                Mixed::min(if d { me } else { NONE }),
                Mixed::min(if d { -me } else { NONE }),
            ]
        })
        .collect();
    while votes.len() < AGREEMENT_LEN {
        votes.extend([Mixed::min(0), Mixed::min(NONE), Mixed::min(NONE)]);
    }
    votes
}

/// Where a policy is disabled, as the start agreement says.
#[derive(Debug, Clone, Copy, PartialEq)]
struct DisabledOn {
    /// How many ranks, when the agreement tells (every rank, or one).
    count: Option<u32>,
    /// The lowest and highest rank (`hi < lo`: a policy beyond
    /// [`AGREED_POLICIES`], disabled on rank 0, others unknown).
    lo: i32,
    hi: i32,
}

impl DisabledOn {
    /// "ranks 0-3", "rank 5", "some ranks between 2 and 9".
    fn describe(&self) -> String {
        match self.count {
            Some(count) if i64::from(count) == i64::from(self.hi) - i64::from(self.lo) + 1 => {
                format!(
                    "ranks {}",
                    format_ranks(
                        &(self.lo.max(0) as u32..=self.hi.max(0) as u32).collect::<Vec<_>>()
                    )
                )
            }
            None if self.hi < self.lo => format!(
                "rank 0 at least (the start agreement carries the first {AGREED_POLICIES} policies)"
            ),
            _ => format!("some ranks between {} and {}", self.lo, self.hi),
        }
    }
}

/// One policy's three reduced [`disabled_votes`] in a job of `size`
/// ranks: `None` where it is disabled on no rank.
fn agreed_disabled(c: &[Mixed], size: u32) -> Option<DisabledOn> {
    let (everywhere, lo, hi) = (c[0].a == 1, c[1].a, c[2].a);
    if lo == i64::MAX {
        return None;
    }
    let lo = i32::try_from(lo).unwrap_or(-1);
    let hi = i32::try_from(-hi).unwrap_or(-1);
    let count = if everywhere {
        Some(size)
    } else if lo == hi {
        Some(1)
    } else {
        None
    };
    Some(DisabledOn { count, lo, hi })
}

/// A `policy_summary` record per policy of `engine`: its writes, refusals
/// and firings so far.
fn log_summaries(engine: &Engine, log: &mut LogWriter, t: f64) {
    for (i, WriteCounts { writes, refused }) in engine.counts.iter().enumerate() {
        log.record(&Record::PolicySummary(record::PolicySummary {
            t,
            policy: engine.policies()[i].name().to_string(),
            writes: *writes,
            refused: *refused,
            firings: engine.policies()[i].state().firings,
            disabled: engine.disabled(i).map(str::to_string),
        }));
    }
}

/// An engine over `set` bound to this library for the phases a reload can
/// run, with its disabled policies logged; or every rule a policy breaks,
/// with `file:line:column`. Also returns what it runs, in words.
fn checked_engine(
    set: PolicySet,
    host: &str,
    mpit: &MpiT,
    catalogue: &Catalogue,
    log: &mut LogWriter,
    t: f64,
) -> Result<(Engine, String), String> {
    let file = set.file_name().to_string();
    let mut engine = Engine::new(set);
    engine.set_host(host);
    let view = CatalogueView::new(mpit, catalogue);
    let newly = engine.bind(&view, RELOAD_PHASES);
    let broken: Vec<&str> = newly
        .iter()
        .filter(|(_, _, missing)| !missing)
        .map(|(_, reason, _)| reason.as_str())
        .collect();
    if !broken.is_empty() {
        return Err(format!(
            "{file} not loaded, the running policies are unchanged: {}",
            broken.join("; ")
        ));
    }
    let mut parts = Vec::new();
    for (i, reason, _) in &newly {
        let policy = engine.policies()[*i].name().to_string();
        parts.push(format!("{policy} disabled: {reason}"));
        log.record(&Record::PolicyDisabled(record::PolicyDisabled {
            t,
            policy,
            reason: reason.clone(),
        }));
    }
    let late: Vec<&str> = engine
        .policies()
        .iter()
        .filter(|p| !RELOAD_PHASES.contains(&p.phase()))
        .map(CompiledPolicy::name)
        .collect();
    if !late.is_empty() {
        parts.push(format!(
            "{} never run (phase pre-init or init has passed)",
            late.join(", ")
        ));
    }
    let running = engine.policies().len() - newly.len() - late.len();
    let mut said = format!("{file} loaded: {running} policies run");
    if !parts.is_empty() {
        said.push_str(&format!(" ({})", parts.join("; ")));
    }
    Ok((engine, said))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reduces the ranks' votes as the start agreement does (minimums).
    fn reduce(ranks: &[Vec<Mixed>]) -> Vec<Mixed> {
        let mut out = ranks[0].clone();
        for r in &ranks[1..] {
            for (o, v) in out.iter_mut().zip(r) {
                o.a = o.a.min(v.a);
            }
        }
        out
    }

    #[test]
    fn disabled_votes_are_minimums_of_one_length() {
        for policies in [0, 1, 5, AGREED_POLICIES, AGREED_POLICIES + 10] {
            let v = disabled_votes((0..policies).map(|i| i % 2 == 0), 3);
            assert_eq!(v.len(), AGREEMENT_LEN, "{policies} policies");
            assert!(v.iter().all(|m| m.op == Mixed::MIN));
        }
    }

    #[test]
    fn where_a_policy_is_disabled_from_the_reduced_votes() {
        // Policy 0 disabled everywhere, 1 on rank 2 only, 2 on ranks 1 and
        // 3, 3 nowhere, in a job of 4 ranks.
        let on = |rank: i32| {
            disabled_votes(
                [true, rank == 2, rank == 1 || rank == 3, false].into_iter(),
                rank,
            )
        };
        let got = reduce(&(0..4).map(on).collect::<Vec<_>>());
        let told: Vec<Option<String>> = got
            .chunks_exact(3)
            .take(4)
            .map(|c| agreed_disabled(c, 4).map(|d| d.describe()))
            .collect();
        assert_eq!(
            told,
            [
                Some("ranks 0-3".to_string()),
                Some("ranks 2".to_string()),
                Some("some ranks between 1 and 3".to_string()),
                None
            ]
        );
        let beyond = DisabledOn {
            count: None,
            lo: 0,
            hi: -1,
        };
        assert!(beyond.describe().starts_with("rank 0 at least"));
    }
}
