//! The policy engine: runs compiled policies (crate `policies`) for this
//! rank in each phase, against a [`Backend`] that serves variable values and
//! performs writes: MPI_T in a running job ([`MpiBackend`]), recorded logs
//! in `mpit-tuner replay` (`crate::replay`).
//!
//! Every decision and every write attempt becomes a log record (`decision`,
//! `write`, `note`, `recommendation`, `policy_disabled`).

use super::actuator::{CvarWrite, Outcome, Request, When};
use super::backends::SetenvError;

use mpit::meta::Datatype;
use mpit::Catalogue;
use mpit::Cvar;
use mpit::MpiT;
use mpit::Object;
use policies::{
    ActionView, CompiledPolicy, CvarInfo, CvarType, Decision, Env, Phase, PolicySet, PvarClass,
    PvarInfo, Scope, SetValue, Severity, Skip, Value, Values, VarKind, VariableLookup,
};
use std::time::Duration;
use vocab::record::{self, Record};

/// The default policy set, embedded in the library (the repository's
/// top-level `policies.toml`).
pub const DEFAULT_POLICIES: &str =
    include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../../policies.toml"));

/// Where values come from and where writes go.
///
/// Performance variables are served by position: the engine asks where
/// each PVAR its policies read is ([`Backend::pvar_position`]) once per
/// [`Backend::layout`], and on every evaluation reads the value at that
/// position, with no lookup by name.
pub trait Backend {
    /// The id of the current positions of the PVARs: it changes whenever a
    /// name may have moved or appeared, and ids of different positions
    /// differ within the process (take new ones from
    /// [`Layout::new_id`](crate::sample::Layout::new_id)).
    fn layout(&self) -> u64;
    /// The position of the performance variable `name` (unbound, or bound
    /// to `MPI_COMM_WORLD`) in the current layout.
    fn pvar_position(&self, name: &str) -> Option<usize>;
    /// The latest value of the performance variable at `position`,
    /// element-wise.
    fn pvar_at(&self, position: usize) -> Option<&[f64]>;
    /// The latest value of the performance variable `name`, found by name.
    fn pvar(&self, name: &str) -> Option<&[f64]> {
        self.pvar_at(self.pvar_position(name)?)
    }
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
    ) -> CvarWrite;
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
    /// Policies a user paused (`mpit-tuner pause`).
    paused: Vec<bool>,
    /// Which slots read PVARs (true) or CVARs (false), decided at bind time.
    slot_is_pvar: Vec<bool>,
    /// Which slots an expression reads: a variable the policies only write
    /// is not gathered (its value would go unused, and reading a CVAR opens
    /// a handle through MPI_T).
    slot_is_read: Vec<bool>,
    /// Where the backend serves each PVAR slot's values, for the backend
    /// layout `positions_of` (see [`Engine::bind_positions`]).
    positions: Vec<Option<usize>>,
    positions_of: Option<u64>,
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
            paused: vec![false; n],
            slot_is_pvar: vec![false; slots],
            slot_is_read: set
                .variables()
                .iter()
                .map(|v| v.uses.read || v.uses.delta || v.uses.rate || v.uses.changes)
                .collect(),
            positions: vec![None; slots],
            positions_of: None,
            values: vec![Vec::new(); slots],
            present: vec![false; slots],
            last_skip: vec![None; n],
            recommendations: Vec::new(),
            counts: vec![WriteCounts::default(); n],
            set,
        }
    }

    /// The policy set it runs.
    pub fn set(&self) -> &PolicySet {
        &self.set
    }

    /// The compiled policies, in file order.
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

    /// Pauses (`paused`) or resumes the policy called `name`, or every
    /// policy; a paused policy is not evaluated until it is resumed.
    /// Returns the names of the policies concerned, or why none is.
    pub fn pause(&mut self, name: Option<&str>, paused: bool) -> Result<Vec<String>, String> {
        let chosen: Vec<usize> = match name {
            None => (0..self.policies.len()).collect(),
            Some(name) => match self.policies.iter().position(|p| p.name() == name) {
                Some(i) => vec![i],
                None => {
                    let names: Vec<&str> = self.policies.iter().map(|p| p.name()).collect();
                    return Err(format!(
                        "no policy named `{name}` runs here (policies: {})",
                        if names.is_empty() {
                            "none".to_string()
                        } else {
                            names.join(", ")
                        }
                    ));
                }
            },
        };
        if chosen.is_empty() {
            return Err("no policy runs here".into());
        }
        for &i in &chosen {
            self.paused[i] = paused;
        }
        Ok(chosen
            .iter()
            .map(|&i| self.policies[i].name().to_string())
            .collect())
    }

    /// Whether policy `i` is paused.
    pub fn paused(&self, i: usize) -> bool {
        self.paused[i]
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
        catalogue: &dyn VariableLookup,
        phases: &[Phase],
    ) -> Vec<(usize, String, bool)> {
        // Which slots are PVARs may change: positions are bound again.
        self.positions_of = None;
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
                (true, Some(var)) => format!("{}{}", vocab::record::NOT_EXPORTED, var.name),
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
        self.bind_positions(backend);
        for i in 0..self.policies.len() {
            if self.policies[i].phase() != phase
                || self.disabled[i].is_some()
                || self.other_host[i]
                || self.paused[i]
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
                                phase: phase.into(),
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
                        phase: phase.into(),
                        fired: true,
                        reason: None,
                        branch: Some(branch.into()),
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
                                let attempt = backend.write(cvar, index, &request, when, dry_run);
                                let refused = refused(attempt.outcome);
                                self.counts[i].writes += u64::from(!refused && !dry_run);
                                self.counts[i].refused += u64::from(refused);
                                out(Record::Write(record::Write {
                                    t: backend.time(),
                                    policy: policy.name().to_string(),
                                    phase: phase.into(),
                                    attempt,
                                    source: source.to_string(),
                                    dry_run,
                                }));
                            }
                            ActionView::SetEnv { name, value } => {
                                let result = backend.setenv(name, value, dry_run);
                                out(Record::Setenv(record::Setenv {
                                    t: backend.time(),
                                    policy: policy.name().to_string(),
                                    phase: phase.into(),
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

    /// Finds where `backend` serves each PVAR the policies read, once per
    /// layout of the backend: when policies are bound (a new engine after
    /// a reload starts unbound), and when the sampler's variables change.
    fn bind_positions(&mut self, backend: &dyn Backend) {
        let layout = backend.layout();
        if self.positions_of == Some(layout) {
            return;
        }
        for (i, var) in self.set.variables().iter().enumerate() {
            self.positions[i] = if self.slot_is_pvar[i] {
                backend.pvar_position(&var.name)
            } else {
                None
            };
        }
        self.positions_of = Some(layout);
    }

    /// Fills the slot values policy `i` reads.
    fn gather(&mut self, i: usize, backend: &mut dyn Backend) {
        for &slot in self.policies[i].slots() {
            let s = slot.index();
            let Some(buf) = self.values.get_mut(s).filter(|_| self.slot_is_read[s]) else {
                continue;
            };
            buf.clear();
            self.present[s] = if self.slot_is_pvar[s] {
                match self.positions[s].and_then(|p| backend.pvar_at(p)) {
                    Some(v) => {
                        buf.extend_from_slice(v);
                        true
                    }
                    None => false,
                }
            } else {
                let name = &self.set.variables()[s].name;
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
    catalogue: &'a Catalogue,
    mpit: &'a MpiT,
    suggest: bool,
}

impl<'a> CatalogueView<'a> {
    /// A view of `catalogue`; CVAR element counts are asked of the library
    /// (a handle is opened and freed; no value is read).
    pub fn new(mpit: &'a MpiT, catalogue: &'a Catalogue) -> Self {
        CatalogueView {
            catalogue,
            mpit,
            suggest: true,
        }
    }

    /// The same view without "closest known names" for missing variables
    /// (it gives no names): for every rank but 0 at start, where the
    /// suggestions would cost each rank a comparison with every variable
    /// of the library (about 10 ms with Open MPI's 1,300) for a message
    /// rank 0 gives the job.
    pub fn without_suggestions(mut self) -> Self {
        self.suggest = false;
        self
    }
}

impl VariableLookup for CatalogueView<'_> {
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
        Some(cvar_info(c, convert_scope(c.scope)?, count))
    }

    fn names(&self) -> Vec<String> {
        if !self.suggest {
            return Vec::new();
        }
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
        crate::sample::toolmetrics::metric_names()
            .iter()
            .any(|n| n == name)
    }
}

/// What the policies know of a library CVAR of `scope` and `count`
/// elements (a string's count is its maximum length).
pub(crate) fn cvar_info(info: &mpit::CvarInfo, scope: Scope, count: usize) -> CvarInfo {
    CvarInfo {
        scope,
        count: count.max(1),
        ty: cvar_type(info),
    }
}

/// The policy language's type of a library CVAR: its enumeration's names,
/// a string, a double, else an integer.
pub(crate) fn cvar_type(info: &mpit::CvarInfo) -> CvarType {
    match (&info.enumeration, info.datatype) {
        (Some(e), _) => CvarType::Enum(e.items.iter().map(|i| i.name.clone()).collect()),
        (None, Datatype::Char) => CvarType::String,
        (None, Datatype::Double) => CvarType::Double,
        _ => CvarType::Int,
    }
}

/// A scope the policies can reason about: none for one this build's header
/// does not define.
pub fn convert_scope(s: Scope) -> Option<Scope> {
    (s != Scope::Unknown).then_some(s)
}

/// A class the policies can reason about: an undefined one is generic.
pub fn convert_class(c: PvarClass) -> PvarClass {
    if c == PvarClass::Unknown {
        PvarClass::Generic
    } else {
        c
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decide::{set_environment, EnvBackend};

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

    /// PVARs by position, counting the lookups by name and the CVAR reads;
    /// no CVAR (as before MPI_T: [`EnvBackend`]).
    struct Positions {
        layout: u64,
        names: Vec<&'static str>,
        values: Vec<Vec<f64>>,
        lookups: std::cell::Cell<usize>,
        cvar_reads: usize,
    }

    impl Backend for Positions {
        fn layout(&self) -> u64 {
            self.layout
        }
        fn pvar_position(&self, name: &str) -> Option<usize> {
            self.lookups.set(self.lookups.get() + 1);
            self.names.iter().position(|n| *n == name)
        }
        fn pvar_at(&self, position: usize) -> Option<&[f64]> {
            self.values.get(position).map(Vec::as_slice)
        }
        fn cvar(&mut self, name: &str) -> Option<Vec<f64>> {
            self.cvar_reads += 1;
            EnvBackend.cvar(name)
        }
        fn write(&mut self, n: &str, i: Option<u32>, r: &Request, w: When, d: bool) -> CvarWrite {
            EnvBackend.write(n, i, r, w, d)
        }
        fn setenv(&mut self, n: &str, v: &str, d: bool) -> Result<(), SetenvError> {
            EnvBackend.setenv(n, v, d)
        }
        fn time(&self) -> f64 {
            EnvBackend.time()
        }
    }

    /// Positions are looked up once per layout, and again when the layout
    /// changes (a variable moved): the values read follow the move. A CVAR
    /// the policies only write is never read.
    #[test]
    fn pvars_are_bound_to_positions_once_per_layout() {
        let policy = r#"[[policy]]
name = "watch"
every = "1ms"
when = "x > 5"
then = [ { note = "high" }, { set = "C", value = 1 } ]
otherwise = [ { note = "low" } ]"#;
        let set = PolicySet::parse(policy, "t.toml").unwrap();
        let mut catalogue = policies::MemoryCatalogue::default();
        catalogue.add_pvar(
            "x",
            PvarInfo {
                class: PvarClass::Level,
                count: 1,
            },
        );
        catalogue.add_cvar(
            "C",
            CvarInfo {
                scope: Scope::Local,
                count: 1,
                ty: CvarType::Int,
            },
        );
        let mut engine = Engine::new(set);
        assert!(engine.bind(&catalogue, RUNTIME_PHASES).is_empty());
        let mut backend = Positions {
            layout: 1,
            names: vec!["y", "x"],
            values: vec![vec![0.0], vec![9.0]],
            lookups: Default::default(),
            cvar_reads: 0,
        };
        let mut notes = Vec::new();
        let mut tick = |engine: &mut Engine, backend: &mut Positions, ms: u64| {
            let env = Env::new(0, 1, Duration::from_millis(ms));
            engine.run(Phase::Periodic, backend, &env, &mut |r| {
                if let Record::Note(n) = r {
                    notes.push(n.text);
                }
            });
        };
        for ms in [0, 10, 20] {
            tick(&mut engine, &mut backend, ms);
        }
        assert_eq!(backend.lookups.get(), 1);
        // The sampler's variables change: `x` moves, with another value.
        backend.layout = 2;
        backend.names = vec!["x", "y"];
        backend.values = vec![vec![1.0], vec![9.0]];
        for ms in [30, 40] {
            tick(&mut engine, &mut backend, ms);
        }
        assert_eq!(backend.lookups.get(), 2);
        assert_eq!(notes, ["high", "low"]);
        assert_eq!(backend.cvar_reads, 0);
    }

    #[test]
    fn environment_values_are_validated() {
        assert!(set_environment("", "x", true).is_err());
        assert!(set_environment("A=B", "x", true).is_err());
        assert!(set_environment("UCX_RNDV_THRESH", "", true).is_err());
        assert!(set_environment("UCX_RNDV_THRESH", "65536", true).is_ok());
    }
}
