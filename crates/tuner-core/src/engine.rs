//! The policy engine: runs compiled policies (crate `policies`) for this
//! rank in each phase, against a [`Backend`] that serves variable values and
//! performs writes: MPI_T in a running job ([`MpiBackend`]), recorded logs
//! in `mpit-tuner replay` (`crate::replay`).
//!
//! Every decision and every write attempt becomes a log record (`decision`,
//! `write`, `note`, `recommendation`, `policy_disabled`).

use crate::actuator::{self, Outcome, Request, When, WriteRecord};
use crate::sampler::Snapshot;
use mpit::meta::Datatype;
use mpit::Catalogue as MpiCatalogue;
use mpit::Cvar;
use mpit::MpiT;
use mpit::Object;
use policies::{
    ActionView, Catalogue, CompiledPolicy, CvarInfo, CvarType, Decision, Env, Phase, PolicySet,
    PvarClass, PvarInfo, Scope, SetValue, Severity, Skip, Value, Values, VarKind,
};
use std::time::Duration;
use vocab::record::{self, Record};

/// The default policy set, embedded in the library (the repository's
/// top-level `policies.toml`).
pub const DEFAULT_POLICIES: &str =
    include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../../policies.toml"));

/// Where values come from and where writes go.
pub trait Backend {
    /// The latest value of a performance variable (unbound, or bound to
    /// `MPI_COMM_WORLD`), element-wise.
    fn pvar(&self, name: &str) -> Option<&[f64]>;
    /// The current value of a numeric control variable.
    fn cvar(&mut self, name: &str) -> Option<Vec<f64>>;
    /// Writes a control variable and reports what happened.
    fn write(
        &mut self,
        name: &str,
        index: Option<u32>,
        request: &Request,
        when: When,
        dry_run: bool,
    ) -> WriteRecord;
    /// Sets an environment variable of this process (phase pre-init).
    fn setenv(&mut self, name: &str, value: &str, dry_run: bool) -> Result<(), SetenvError>;
    /// Seconds since the tuner started.
    fn time(&self) -> f64;
}

/// Why a policy file was not loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file could not be read.
    #[error("cannot read policy file {} (MPIT_TUNER_POLICY): {source}", path.display())]
    Read {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file does not parse or check (every problem, with
    /// `file:line:column`).
    #[error("{0:#}")]
    Policy(policies::PolicyErrors),
}

/// Loads a policy file (`None`: the embedded default set).
pub fn load(path: Option<&std::path::Path>) -> Result<PolicySet, LoadError> {
    match path {
        None => PolicySet::parse(DEFAULT_POLICIES, "policies.toml (embedded)")
            .map_err(LoadError::Policy),
        Some(p) => {
            let source = std::fs::read_to_string(p).map_err(|source| LoadError::Read {
                path: p.to_path_buf(),
                source,
            })?;
            PolicySet::parse(&source, &p.display().to_string()).map_err(LoadError::Policy)
        }
    }
}

/// What one policy's writes came to so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct WriteCounts {
    /// Writes the library took (not dry runs).
    pub writes: u64,
    /// Writes refused.
    pub refused: u64,
}

/// The policies of this rank and their bookkeeping.
#[derive(Debug)]
pub struct Engine {
    policies: Vec<CompiledPolicy>,
    set: PolicySet,
    /// Why a policy is off, if it is.
    disabled: Vec<Option<String>>,
    /// Policies whose `hosts` leave out this rank's node.
    other_host: Vec<bool>,
    /// Which slots read PVARs (true) or CVARs (false), decided at bind time.
    slot_is_pvar: Vec<bool>,
    /// Slot values gathered for the current evaluation.
    values: Vec<Vec<f64>>,
    present: Vec<bool>,
    /// Last skip reason logged per policy (to log changes, not repeats).
    last_skip: Vec<Option<std::mem::Discriminant<Skip>>>,
    recommendations: Vec<String>,
    /// How many times each policy wrote, and how many writes were refused.
    pub(crate) counts: Vec<WriteCounts>,
}

impl Engine {
    /// An engine over a parsed set; call [`Engine::bind`] before running.
    pub fn new(set: PolicySet) -> Engine {
        let n = set.policies().len();
        let slots = set.variables().len();
        Engine {
            policies: set.policies().to_vec(),
            disabled: vec![None; n],
            other_host: vec![false; n],
            slot_is_pvar: vec![false; slots],
            values: vec![Vec::new(); slots],
            present: vec![false; slots],
            last_skip: vec![None; n],
            recommendations: Vec::new(),
            counts: vec![WriteCounts::default(); n],
            set,
        }
    }

    /// The policies.
    pub fn policies(&self) -> &[CompiledPolicy] {
        &self.policies
    }

    /// Leaves out, silently like ranks that `ranks` does not select, the
    /// policies whose `hosts` do not match `host`, this rank's node.
    pub fn set_host(&mut self, host: &str) {
        for (i, p) in self.policies.iter().enumerate() {
            self.other_host[i] = !p.applies_to_host(host);
        }
    }

    /// Why policy `i` is disabled, if it is.
    pub fn disabled(&self, i: usize) -> Option<&str> {
        self.disabled[i].as_deref()
    }

    /// Recommendations emitted so far.
    pub fn recommendations(&self) -> &[String] {
        &self.recommendations
    }

    /// Checks the policies whose phase is in `phases` against what the
    /// library exports: a policy that names a missing variable, or breaks a
    /// rule (a read-only or *_EQ CVAR written per rank), is disabled with a
    /// reason. Returns (policy index, reason, is-missing) for each newly
    /// disabled policy.
    pub fn bind(
        &mut self,
        catalogue: &dyn Catalogue,
        phases: &[Phase],
    ) -> Vec<(usize, String, bool)> {
        for (i, var) in self.set.variables().iter().enumerate() {
            self.slot_is_pvar[i] = match var.kind {
                VarKind::Pvar => true,
                VarKind::Cvar => false,
                VarKind::Tool => true,
                VarKind::Auto => {
                    catalogue.pvar(&var.name).is_some() || catalogue.cvar(&var.name).is_none()
                }
            };
        }
        let mut newly = Vec::new();
        for d in self.set.check(catalogue) {
            let i = d.policy;
            if i >= self.policies.len()
                || !phases.contains(&self.policies[i].phase())
                || self.disabled[i].is_some()
                || d.severity == Severity::Warning
            {
                continue;
            }
            let missing = d.severity == Severity::Missing;
            let reason = match (missing, d.slot.and_then(|s| self.set.variable(s))) {
                (true, Some(var)) => format!("MPI library does not export {}", var.name),
                _ => format!("{}: {}", d.location, d.message),
            };
            self.disabled[i] = Some(reason.clone());
            newly.push((i, reason, missing));
        }
        newly
    }

    /// Runs every enabled policy of `phase` once.
    pub fn run(
        &mut self,
        phase: Phase,
        backend: &mut dyn Backend,
        env: &Env,
        out: &mut dyn FnMut(Record<'static>),
    ) {
        self.run_where(phase, &|_| true, backend, env, out);
    }

    /// Runs once every enabled policy of `phase` for which `select` is true
    /// (phase pre-init runs in two steps: policies with `setenv` before
    /// MPI_T is initialised, the others after).
    pub fn run_where(
        &mut self,
        phase: Phase,
        select: &dyn Fn(&CompiledPolicy) -> bool,
        backend: &mut dyn Backend,
        env: &Env,
        out: &mut dyn FnMut(Record<'static>),
    ) {
        let when = match phase {
            Phase::PreInit | Phase::Init => When::Collective,
            Phase::Periodic | Phase::Finalize => When::RankLocal,
        };
        for i in 0..self.policies.len() {
            if self.policies[i].phase() != phase
                || self.disabled[i].is_some()
                || self.other_host[i]
                || !select(&self.policies[i])
            {
                continue;
            }
            self.gather(i, backend);
            let values = SlotValues {
                values: &self.values,
                present: &self.present,
            };
            let policy = &mut self.policies[i];
            let decision = policy.evaluate(&values, env);
            let t = backend.time();
            match decision {
                Decision::Skipped(skip) => {
                    // A skip is logged when its reason changes; "not due
                    // yet" between two evaluations does not count as a
                    // change (a 20 ms policy on a 10 ms tick would otherwise
                    // log "max_writes reached" at every evaluation).
                    if !matches!(skip, Skip::NotDue | Skip::NotSelected) {
                        let kind = std::mem::discriminant(&skip);
                        if self.last_skip[i] != Some(kind) {
                            out(Record::Decision(record::Decision {
                                t,
                                policy: policy.name().to_string(),
                                phase: phase.name().to_string(),
                                fired: false,
                                reason: Some(skip.to_string()),
                                branch: None,
                                write: None,
                                condition: None,
                                inputs: None,
                            }));
                        }
                        self.last_skip[i] = Some(kind);
                    }
                }
                Decision::Fired { branch, write } => {
                    self.last_skip[i] = None;
                    let inputs = policy
                        .condition_inputs()
                        .map(|(name, v)| (name.to_string(), v.map(|v| v.as_slice().to_vec())))
                        .collect();
                    out(Record::Decision(record::Decision {
                        t,
                        policy: policy.name().to_string(),
                        phase: phase.name().to_string(),
                        fired: true,
                        reason: None,
                        branch: Some(branch.to_string()),
                        write: Some(write),
                        condition: policy.condition_value().map(|v| v.as_slice().to_vec()),
                        inputs: Some(inputs),
                    }));
                    let dry_run = !write;
                    let actions: Vec<ActionView<'_>> = policy.actions(branch).collect();
                    for action in actions {
                        match action {
                            ActionView::Set {
                                cvar,
                                index,
                                value,
                                source,
                                ..
                            } => {
                                let request = match value {
                                    SetValue::Number(x) => Request::Number(x),
                                    SetValue::Numbers(xs) => Request::Numbers(xs.to_vec()),
                                    SetValue::Text(t) => Request::Text(t.to_string()),
                                };
                                let record = backend.write(cvar, index, &request, when, dry_run);
                                let refused = refused(record.outcome);
                                self.counts[i].writes += u64::from(!refused && !dry_run);
                                self.counts[i].refused += u64::from(refused);
                                out(Record::Write(record::Write {
                                    t: backend.time(),
                                    policy: policy.name().to_string(),
                                    phase: phase.name().to_string(),
                                    cvar: record.cvar,
                                    index: record.index,
                                    old: record.old,
                                    requested: record.requested,
                                    readback: record.readback,
                                    outcome: record.outcome,
                                    error: record.error,
                                    source: source.to_string(),
                                    dry_run,
                                }));
                            }
                            ActionView::SetEnv { name, value } => {
                                let result = backend.setenv(name, value, dry_run);
                                out(Record::Setenv(record::Setenv {
                                    t: backend.time(),
                                    policy: policy.name().to_string(),
                                    phase: phase.name().to_string(),
                                    name: name.to_string(),
                                    value: value.to_string(),
                                    dry_run,
                                    error: result.err().map(|e| e.to_string()),
                                }));
                            }
                            ActionView::Note(text) => out(Record::Note(record::PolicyText {
                                t,
                                policy: policy.name().to_string(),
                                text: text.to_string(),
                            })),
                            ActionView::Recommend(text) => {
                                let line = format!("{}: {text}", policy.name());
                                if !self.recommendations.contains(&line) {
                                    self.recommendations.push(line);
                                }
                                out(Record::Recommendation(record::PolicyText {
                                    t,
                                    policy: policy.name().to_string(),
                                    text: text.to_string(),
                                }));
                            }
                        }
                    }
                }
            }
        }
    }

    /// Fills the slot values policy `i` reads.
    fn gather(&mut self, i: usize, backend: &mut dyn Backend) {
        for &slot in self.policies[i].slots() {
            let s = slot.index();
            let name = match self.set.variables().get(s) {
                Some(v) => v.name.as_str(),
                None => continue,
            };
            let buf = &mut self.values[s];
            buf.clear();
            self.present[s] = if self.slot_is_pvar[s] {
                match backend.pvar(name) {
                    Some(v) => {
                        buf.extend_from_slice(v);
                        true
                    }
                    None => false,
                }
            } else {
                match backend.cvar(name) {
                    Some(v) => {
                        buf.extend_from_slice(&v);
                        true
                    }
                    None => false,
                }
            };
        }
    }
}

/// The gathered values, served by slot.
struct SlotValues<'a> {
    values: &'a [Vec<f64>],
    present: &'a [bool],
}

impl Values for SlotValues<'_> {
    fn get(&self, slot: policies::VarSlot) -> Option<Value<'_>> {
        let i = slot.index();
        if !*self.present.get(i)? {
            return None;
        }
        let v = &self.values[i];
        Some(if v.len() == 1 {
            Value::Scalar(v[0])
        } else {
            Value::Array(v)
        })
    }
}

/// The MPI library's catalogue as the policy checker sees it.
pub struct CatalogueView<'a> {
    catalogue: &'a MpiCatalogue,
    mpit: &'a MpiT,
}

impl<'a> CatalogueView<'a> {
    /// A view of `catalogue`; CVAR element counts are asked of the library
    /// (a handle is opened and freed; no value is read).
    pub fn new(mpit: &'a MpiT, catalogue: &'a MpiCatalogue) -> Self {
        CatalogueView { catalogue, mpit }
    }
}

impl Catalogue for CatalogueView<'_> {
    fn pvar(&self, name: &str) -> Option<PvarInfo> {
        let p = self.catalogue.pvars_named(name).next()?;
        Some(PvarInfo {
            class: convert_class(p.class),
            count: 1,
        })
    }

    fn cvar(&self, name: &str) -> Option<CvarInfo> {
        let c = self.catalogue.cvar(name)?;
        let count = if c.binding == mpit::meta::Binding::NoObject {
            Cvar::open(self.mpit, c, Object::None)
                .map(|h| h.count())
                .unwrap_or(1)
        } else {
            1
        };
        Some(CvarInfo {
            scope: convert_scope(c.scope)?,
            count: count.max(1),
            ty: match (&c.enumeration, c.datatype) {
                (Some(e), _) => CvarType::Enum(e.items.iter().map(|i| i.name.clone()).collect()),
                (None, Datatype::Char) => CvarType::String,
                (None, Datatype::Double) => CvarType::Double,
                _ => CvarType::Int,
            },
        })
    }

    fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .catalogue
            .cvars()
            .iter()
            .map(|c| c.name.clone())
            .collect();
        names.extend(self.catalogue.pvars().iter().map(|p| p.name.clone()));
        names
    }

    fn has_tool_metric(&self, name: &str) -> bool {
        crate::toolmetrics::metric_names().iter().any(|n| n == name)
    }
}

/// A scope the policies can reason about: none for one this build's header
/// does not define.
pub(crate) fn convert_scope(s: Scope) -> Option<Scope> {
    (s != Scope::Unknown).then_some(s)
}

/// A class the policies can reason about: an undefined one is generic.
pub(crate) fn convert_class(c: PvarClass) -> PvarClass {
    if c == PvarClass::Unknown {
        PvarClass::Generic
    } else {
        c
    }
}

/// The backend of a running job: values from the sampler's snapshot and
/// MPI_T, writes through the [`actuator`].
pub struct MpiBackend<'a> {
    /// The MPI_T guard.
    pub mpit: &'a MpiT,
    /// The library's catalogue.
    pub catalogue: &'a MpiCatalogue,
    /// The latest snapshot (empty before the first sample).
    pub snapshot: &'a Snapshot,
    /// Seconds since start.
    pub now: f64,
}

impl Backend for MpiBackend<'_> {
    fn pvar(&self, name: &str) -> Option<&[f64]> {
        self.snapshot.get(name).map(|v| v.metric.value.as_slice())
    }

    fn cvar(&mut self, name: &str) -> Option<Vec<f64>> {
        let info = self.catalogue.cvar(name)?;
        let cvar = Cvar::open(self.mpit, info, Object::None).ok()?;
        let v = cvar.read().ok()?.to_f64s();
        (!v.is_empty()).then_some(v)
    }

    fn write(
        &mut self,
        name: &str,
        index: Option<u32>,
        request: &Request,
        when: When,
        dry_run: bool,
    ) -> WriteRecord {
        actuator::write(
            self.mpit,
            self.catalogue,
            name,
            index,
            request,
            when,
            dry_run,
        )
    }

    fn setenv(&mut self, name: &str, value: &str, dry_run: bool) -> Result<(), SetenvError> {
        set_environment(name, value, dry_run)
    }

    fn time(&self) -> f64 {
        self.now
    }
}

/// The backend before MPI_T is initialised: no variable to read, no CVAR
/// to write (policies with `setenv` do neither, a load-time rule), only
/// environment variables to set.
pub struct EnvBackend;

impl Backend for EnvBackend {
    fn pvar(&self, _name: &str) -> Option<&[f64]> {
        None
    }

    fn cvar(&mut self, _name: &str) -> Option<Vec<f64>> {
        None
    }

    fn write(
        &mut self,
        name: &str,
        index: Option<u32>,
        _request: &Request,
        _when: When,
        _dry_run: bool,
    ) -> WriteRecord {
        WriteRecord {
            cvar: name.to_string(),
            index,
            old: None,
            requested: None,
            readback: None,
            outcome: Outcome::Refused,
            error: Some("no CVAR can be written before MPI_T is initialised".into()),
        }
    }

    fn setenv(&mut self, name: &str, value: &str, dry_run: bool) -> Result<(), SetenvError> {
        set_environment(name, value, dry_run)
    }

    fn time(&self) -> f64 {
        0.0
    }
}

/// Why an environment variable was not set.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SetenvError {
    /// An empty name, or one with `=` or NUL (or NUL in the value).
    #[error("`{0}` is not a valid environment variable name")]
    BadName(String),
    /// An empty value.
    #[error("refusing to set {0} to an empty value")]
    EmptyValue(String),
}

/// Sets an environment variable before the MPI library reads it (pre-init).
/// Refuses empty names and values with `=` or NUL in the name, and empty
/// values (MPICH over UCX aborts MPI_Init on an empty `UCX_*` value).
pub fn set_environment(name: &str, value: &str, dry_run: bool) -> Result<(), SetenvError> {
    if name.is_empty() || name.contains(['=', '\0']) || value.contains('\0') {
        return Err(SetenvError::BadName(name.to_string()));
    }
    if value.trim().is_empty() {
        return Err(SetenvError::EmptyValue(name.to_string()));
    }
    if !dry_run {
        // Runs inside MPI_Init before PMPI_Init, before the tuner starts any
        // thread; the application's own threads do not read the
        // environment of an MPI library that is not initialised yet.
        std::env::set_var(name, value);
    }
    Ok(())
}

/// An environment for the policies: rank, size and time since start.
pub fn env(rank: u32, size: u32, seconds: f64) -> Env {
    Env::new(rank, size, Duration::from_secs_f64(seconds.max(0.0)))
}

/// Which phases a branch of checks covers.
pub const RUNTIME_PHASES: &[Phase] = &[Phase::Init, Phase::Periodic, Phase::Finalize];

/// Helper for logs and reports: "0-3,8".
pub fn format_ranks(ranks: &[u32]) -> String {
    let mut sorted = ranks.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut out = Vec::new();
    let mut i = 0;
    while i < sorted.len() {
        let start = sorted[i];
        let mut end = start;
        while i + 1 < sorted.len() && sorted[i + 1] == end + 1 {
            i += 1;
            end = sorted[i];
        }
        out.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    out.join(",")
}

/// True when a branch's writes were all refused.
pub fn refused(outcome: Outcome) -> bool {
    !matches!(
        outcome,
        Outcome::Written | Outcome::WrittenDiffers | Outcome::WrittenUnverified | Outcome::DryRun
    )
}

/// The warning of a rank that runs pre-init policies without knowing its
/// rank.
fn no_rank_warning() -> Record<'static> {
    Record::Warning(record::Warning {
        t: 0.0,
        message: "the launcher did not say this process's rank before MPI_Init; pre-init \
                  policies see rank 0 of 1"
            .into(),
    })
}

/// The policy engine as the runtime's [`Hooks`](crate::runtime::Hooks).
pub struct PolicyHooks {
    engine: Engine,
    /// Whether the user chose the file (messages go to the terminal) or it
    /// is the embedded default (one summary line).
    user_file: bool,
    rank: u32,
    size: u32,
    pending: Vec<Record<'static>>,
    messages: Vec<String>,
    pre_catalogue_names: usize,
    quiet: bool,
}

impl PolicyHooks {
    /// Loads the policies the configuration names (`None` = the embedded
    /// default, `none` = monitor only). A file that does not parse is
    /// reported and the tuner runs in monitor mode: the returned message
    /// (with `file:line:column`) is for rank 0 to print.
    pub fn from_config(config: &crate::config::Config) -> (Option<PolicyHooks>, Option<String>) {
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
                    pending: Vec::new(),
                    messages: Vec::new(),
                    pre_catalogue_names: 0,
                    quiet: config.quiet,
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

impl crate::runtime::Hooks for PolicyHooks {
    fn identity(&self) -> u64 {
        // FNV-1a over the policy names: the collectives of `init` depend
        // on how many policies there are and in which order. Never 0
        // (monitor mode), and below 2^63.
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for p in self.engine.policies() {
            for b in p.name().bytes().chain([0]) {
                hash ^= u64::from(b);
                hash = hash.wrapping_mul(0x0100_0000_01b3);
            }
        }
        (hash >> 1) | 1
    }

    fn before_mpit(&mut self, launch: &crate::runtime::LaunchEnv) {
        self.engine.set_host(&mpit::host_name());
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

    fn pre_init(
        &mut self,
        mpit: &MpiT,
        catalogue: &MpiCatalogue,
        launch: &crate::runtime::LaunchEnv,
    ) {
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

    fn init(
        &mut self,
        mpit: &MpiT,
        catalogue: &MpiCatalogue,
        info: &crate::runtime::RunInfo,
        log: &mut crate::log::LogWriter,
        seq: &mut mpit::collective::Collectives,
    ) {
        self.rank = info.rank.max(0) as u32;
        self.size = info.size.max(1) as u32;
        for r in self.pending.drain(..) {
            log.record(&r);
        }
        let view = CatalogueView::new(mpit, catalogue);
        let newly = self.engine.bind(&view, RUNTIME_PHASES);
        for (i, reason, _) in &newly {
            log.record(&Record::PolicyDisabled(record::PolicyDisabled {
                t: 0.0,
                policy: self.engine.policies()[*i].name().to_string(),
                reason: reason.clone(),
            }));
        }
        // One message per disabled policy for the whole job, on rank 0.
        let n = self.engine.policies().len();
        let mine: Vec<bool> = (0..n).map(|i| self.engine.disabled(i).is_some()).collect();
        let per_policy = aggregate_disabled(seq, &mine);
        match seq.agree() {
            mpit::collective::Verdict::AllOk => {
                if let Some(per_policy) = per_policy.filter(|_| info.rank == 0) {
                    self.announce_disabled(per_policy, n);
                }
            }
            mpit::collective::Verdict::Failed(why) => {
                let message = format!(
                    "disabled policies not aggregated across ranks (each rank's log lists its own): {why}"
                );
                if info.rank == 0 {
                    mpit::say!("mpit-tuner: {message}");
                }
                log.record(&Record::Warning(record::Warning { t: 0.0, message }));
            }
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

    fn tick(
        &mut self,
        mpit: &MpiT,
        catalogue: &MpiCatalogue,
        snapshot: &Snapshot,
        log: &mut crate::log::LogWriter,
    ) {
        let mut backend = MpiBackend {
            mpit,
            catalogue,
            snapshot,
            now: snapshot.t,
        };
        let env = env(self.rank, self.size, snapshot.t);
        self.engine
            .run(Phase::Periodic, &mut backend, &env, &mut |r| log.record(&r));
    }

    fn finalize(
        &mut self,
        mpit: &MpiT,
        catalogue: &MpiCatalogue,
        snapshot: &Snapshot,
        log: &mut crate::log::LogWriter,
    ) {
        let mut backend = MpiBackend {
            mpit,
            catalogue,
            snapshot,
            now: snapshot.t,
        };
        let env = env(self.rank, self.size, snapshot.t);
        self.engine
            .run(Phase::Finalize, &mut backend, &env, &mut |r| log.record(&r));
        for (i, WriteCounts { writes, refused }) in self.engine.counts.iter().enumerate() {
            log.record(&Record::PolicySummary(record::PolicySummary {
                t: snapshot.t,
                policy: self.engine.policies()[i].name().to_string(),
                writes: *writes,
                refused: *refused,
                firings: self.engine.policies()[i].state().firings,
                disabled: self.engine.disabled(i).map(str::to_string),
            }));
        }
    }

    fn quantities(&self) -> Vec<(String, &'static str, f64)> {
        let mut out = Vec::new();
        for (i, WriteCounts { writes, refused }) in self.engine.counts.iter().enumerate() {
            let name = self.engine.policies()[i].name();
            out.push((format!("policy.{name}.writes"), "total", *writes as f64));
            out.push((format!("policy.{name}.refused"), "total", *refused as f64));
        }
        out
    }

    fn report(&mut self) -> Vec<(&'static str, String)> {
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

impl PolicyHooks {
    /// Rank 0's messages about policies disabled somewhere, from the
    /// aggregated counts.
    fn announce_disabled(&mut self, per_policy: Vec<(u32, i32, i32)>, n: usize) {
        let mut lines = Vec::new();
        for (i, (count, lo, hi)) in per_policy.into_iter().enumerate() {
            if count == 0 {
                continue;
            }
            let name = self.engine.policies()[i].name();
            let where_ = if i64::from(count) == i64::from(hi) - i64::from(lo) + 1 {
                format!(
                    "ranks {}",
                    format_ranks(&(lo.max(0) as u32..=hi.max(0) as u32).collect::<Vec<_>>())
                )
            } else {
                format!("{count} ranks between {lo} and {hi}")
            };
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
        } else if !lines.is_empty() && !self.quiet {
            mpit::say!(
                "mpit-tuner: {} of {} default policies do not apply to this MPI library (see summary.json)",
                lines.len(),
                n
            );
        }
        self.messages.extend(lines);
    }
}

/// Per policy: (how many ranks disabled it, lowest such rank, highest), on
/// every rank: two reductions of 64-bit integers in `seq` (whose agreement
/// afterwards says whether they can be trusted).
fn aggregate_disabled(
    seq: &mut mpit::collective::Collectives,
    mine: &[bool],
) -> Option<Vec<(u32, i32, i32)>> {
    use mpit::collective::ReduceOp;
    const NONE: i64 = i64::MAX;
    let n = mine.len();
    if n == 0 {
        return Some(Vec::new());
    }
    let me = i64::from(seq.rank());
    let counts: Vec<i64> = mine.iter().map(|d| i64::from(*d)).collect();
    let mut total = vec![0i64; n];
    seq.allreduce_i64(&counts, &mut total, ReduceOp::Sum);
    let ends: Vec<i64> = mine
        .iter()
        .flat_map(|d| if *d { [me, -me] } else { [NONE, NONE] })
        .collect();
    let mut range = vec![0i64; 2 * n];
    seq.allreduce_i64(&ends, &mut range, ReduceOp::Min);
    Some(
        (0..n)
            .map(|i| {
                (
                    u32::try_from(total[i]).unwrap_or(0),
                    i32::try_from(range[2 * i]).unwrap_or(-1),
                    i32::try_from(-range[2 * i + 1]).unwrap_or(-1),
                )
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rank_ranges() {
        assert_eq!(format_ranks(&[0, 1, 2, 3]), "0-3");
        assert_eq!(format_ranks(&[5, 0, 1, 3]), "0-1,3,5");
        assert_eq!(format_ranks(&[]), "");
    }

    #[test]
    fn the_default_policies_parse() {
        let set = load(None).unwrap();
        assert!(set
            .policies()
            .iter()
            .any(|p| p.name() == "free-unused-vbufs"));
    }

    #[test]
    fn every_example_policy_file_parses() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/policies");
        let mut n = 0;
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "toml") {
                load(Some(&path)).unwrap_or_else(|e| panic!("{e}"));
                n += 1;
            }
        }
        assert!(n >= 5, "{n} example policy files");
    }

    #[test]
    fn environment_policies_run_alone_before_mpit() {
        let set = PolicySet::parse(
            r#"
[[policy]]
name  = "cvar"
phase = "pre-init"
then  = [ { set = "MPIR_CVAR_X", value = 1 } ]
[[policy]]
name  = "env"
phase = "pre-init"
ranks = "1"
then  = [ { setenv = "MPIT_TUNER_ENGINE_TEST_ENV", value = "65536" } ]
[[policy]]
name    = "env-dry"
phase   = "pre-init"
dry_run = true
then    = [ { setenv = "MPIT_TUNER_ENGINE_TEST_DRY", value = "1" } ]
"#,
            "t.toml",
        )
        .unwrap();
        let run = |rank| {
            let mut engine = Engine::new(set.clone());
            let mut out = Vec::new();
            engine.run_where(
                Phase::PreInit,
                &CompiledPolicy::sets_environment,
                &mut EnvBackend,
                &env(rank, 2, 0.0),
                &mut |r| out.push(r),
            );
            out
        };
        let setenvs = |out: &[Record<'static>]| -> Vec<(String, bool)> {
            out.iter()
                .filter_map(|r| match r {
                    Record::Setenv(s) => {
                        assert_eq!(s.error, None, "{s:?}");
                        Some((s.name.clone(), s.dry_run))
                    }
                    _ => None,
                })
                .collect()
        };
        let rank0 = run(0);
        assert!(
            rank0.iter().all(|r| !matches!(r,
                Record::Decision(record::Decision { policy, .. }) if policy == "cvar")),
            "{rank0:?}"
        );
        assert_eq!(
            setenvs(&rank0),
            [("MPIT_TUNER_ENGINE_TEST_DRY".to_string(), true)]
        );
        assert!(std::env::var_os("MPIT_TUNER_ENGINE_TEST_DRY").is_none());
        let rank1 = run(1);
        assert_eq!(
            setenvs(&rank1),
            [
                ("MPIT_TUNER_ENGINE_TEST_ENV".to_string(), false),
                ("MPIT_TUNER_ENGINE_TEST_DRY".to_string(), true)
            ]
        );
        assert_eq!(
            std::env::var("MPIT_TUNER_ENGINE_TEST_ENV").as_deref(),
            Ok("65536")
        );
    }

    #[test]
    fn hosts_leave_out_the_policies_of_other_nodes() {
        let set = PolicySet::parse(
            r#"
[[policy]]
name    = "here"
phase   = "pre-init"
hosts   = ["login*", "node0?"]
dry_run = true
then    = [ { setenv = "A", value = "1" } ]
[[policy]]
name    = "elsewhere"
phase   = "pre-init"
hosts   = "gpu-*"
dry_run = true
then    = [ { setenv = "B", value = "1" } ]
[[policy]]
name    = "everywhere"
phase   = "pre-init"
dry_run = true
then    = [ { setenv = "C", value = "1" } ]
"#,
            "t.toml",
        )
        .unwrap();
        let names = |host: &str| -> Vec<String> {
            let mut engine = Engine::new(set.clone());
            engine.set_host(host);
            let mut out = Vec::new();
            engine.run(Phase::PreInit, &mut EnvBackend, &env(0, 1, 0.0), &mut |r| {
                out.push(r)
            });
            out.iter()
                .filter_map(|r| match r {
                    Record::Setenv(s) => Some(s.name.clone()),
                    _ => None,
                })
                .collect()
        };
        assert_eq!(names("node07.cluster"), ["A", "C"]);
        assert_eq!(names("GPU-3"), ["B", "C"]);
        assert_eq!(names("other"), ["C"]);
    }

    #[test]
    fn environment_values_are_validated() {
        assert!(set_environment("", "x", true).is_err());
        assert!(set_environment("A=B", "x", true).is_err());
        assert!(set_environment("UCX_RNDV_THRESH", "", true).is_err());
        assert!(set_environment("UCX_RNDV_THRESH", "65536", true).is_ok());
    }
}
