//! Stage two: validated, compiled policies, their variables, and their
//! per-tick evaluation.

use std::collections::HashMap;
use std::fmt;
use std::ops::Range;
use std::time::Duration;

use serde::Deserialize;
use toml::de::{DeTable, DeValue, ValueDeserializer};
use toml::Spanned;

use crate::duration::parse_duration;
use crate::error::{Location, PolicyError, PolicyErrors, SourceMap};
use crate::expr::parser::{parse, Derived, Expr, VarRef};
use crate::expr::program::{EvalError, Program, Truth, Undef};
use crate::expr::{ExprError, VarKind};
use crate::hosts::HostSelector;
use crate::ranks::RankSelector;
use crate::schema::{RawAction, RawPolicy};
use crate::value::{Env, Value, Values, VarSlot};

/// Default interval of a periodic policy.
pub const DEFAULT_EVERY: Duration = Duration::from_secs(1);
/// Shortest interval of a periodic policy.
pub const MIN_EVERY: Duration = Duration::from_millis(1);

/// When a policy runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Phase {
    /// Once, in `MPI_Init` before the library initialises (`PMPI_Init` not
    /// yet called): CVARs read during initialisation, environment variables.
    PreInit,
    /// Once, right after `MPI_Init` returned, at the same point on every rank.
    Init,
    /// Every `every` while the application runs (the default).
    Periodic,
    /// Once, in `MPI_Finalize` before the library shuts down.
    Finalize,
}

impl Phase {
    /// The name used in policy files: `pre-init`, `init`, `periodic`, `finalize`.
    pub fn name(self) -> &'static str {
        match self {
            Phase::PreInit => "pre-init",
            Phase::Init => "init",
            Phase::Periodic => "periodic",
            Phase::Finalize => "finalize",
        }
    }

    fn parse(s: &str) -> Option<Phase> {
        Some(match s {
            "pre-init" => Phase::PreInit,
            "init" => Phase::Init,
            "periodic" => Phase::Periodic,
            "finalize" => Phase::Finalize,
            _ => return None,
        })
    }
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Which list of actions a decision selects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Branch {
    /// The condition held (or there is no condition): `then`.
    Then,
    /// The condition did not hold: `otherwise`.
    Otherwise,
}

impl fmt::Display for Branch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Branch::Then => "then",
            Branch::Otherwise => "otherwise",
        })
    }
}

/// Why an evaluation did not fire.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Skip {
    /// This rank is not selected by `ranks`.
    NotSelected,
    /// A periodic policy evaluated sooner than its `every` (less 10% tolerance).
    NotDue,
    /// A variable had no value (see [`Values::get`]).
    Missing(VarSlot),
    /// `delta` or `rate` of a variable before its second sample.
    Warmup,
    /// The condition or a computed value could not be evaluated.
    Error(EvalError),
    /// The condition asks for another branch, but has not done so on
    /// `needed` consecutive evaluations yet (`streak` so far).
    Hysteresis {
        /// Consecutive evaluations pointing to the new branch so far.
        streak: u32,
        /// The policy's `hysteresis`.
        needed: u32,
    },
    /// The selected branch is already in effect with the same values.
    Steady,
    /// The branch writes, and the policy already fired `limit` times with writes.
    MaxWrites {
        /// The policy's `max_writes`.
        limit: u32,
    },
    /// The branch writes, and the last firing with writes is more recent than `cooldown`.
    Cooldown {
        /// Time until the cooldown ends.
        remaining: Duration,
    },
}

impl fmt::Display for Skip {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Skip::NotSelected => write!(f, "rank not selected"),
            Skip::NotDue => write!(f, "not due"),
            Skip::Missing(slot) => write!(f, "no value for variable ({slot})"),
            Skip::Warmup => write!(f, "delta/rate need a second sample"),
            Skip::Error(e) => write!(f, "evaluation error: {e}"),
            Skip::Hysteresis { streak, needed } => {
                write!(
                    f,
                    "hysteresis: {streak} of {needed} consecutive evaluations"
                )
            }
            Skip::Steady => write!(f, "already in effect"),
            Skip::MaxWrites { limit } => write!(f, "max_writes ({limit}) reached"),
            Skip::Cooldown { remaining } => {
                write!(f, "cooldown: {} ms left", remaining.as_millis())
            }
        }
    }
}

/// The outcome of one [`CompiledPolicy::evaluate`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Decision {
    /// The policy fired `branch`: the caller now performs
    /// [`CompiledPolicy::actions`]`(branch)`.
    Fired {
        /// The branch whose actions are to be performed.
        branch: Branch,
        /// True if the branch has `set`/`setenv` actions and the policy is
        /// not `dry_run`: the caller must write. False: only log.
        write: bool,
    },
    /// Nothing to do this time, and why.
    Skipped(Skip),
}

/// How a policy file uses a variable.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Uses {
    /// Read as a value in an expression.
    pub read: bool,
    /// Written by a `set` action.
    pub written: bool,
    /// Read through `delta(...)`.
    pub delta: bool,
    /// Read through `rate(...)`.
    pub rate: bool,
    /// Read through `changes(...)`.
    pub changes: bool,
}

/// A variable named by a policy file: the runtime binds one MPI_T handle
/// (or tool metric) per variable and serves its values by [`VarSlot`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Variable {
    /// The name without `pvar:`/`cvar:` prefix.
    pub name: String,
    /// PVAR, CVAR, either (bare name) or tool metric.
    pub kind: VarKind,
    /// How the file uses it.
    pub uses: Uses,
    /// Where it is first named in the file.
    pub first_use: Location,
    /// Each policy (index into [`PolicySet::policies`]) that names it, with
    /// the first place it does so.
    pub used_by: Vec<(usize, Location)>,
}

/// The value of a `set` action.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SetValue<'a> {
    /// One number (written to the element `index`, or to every element).
    Number(f64),
    /// One number per element.
    Numbers(&'a [f64]),
    /// A text (string CVAR) or the name of an enum item (enum CVAR).
    Text(&'a str),
}

/// An action to perform, with its value computed by the last evaluation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ActionView<'a> {
    /// Write a control variable.
    Set {
        /// CVAR name.
        cvar: &'a str,
        /// Its slot.
        slot: VarSlot,
        /// Element to write, if only one.
        index: Option<u32>,
        /// Value to write. For a computed value: as of the last evaluation.
        value: SetValue<'a>,
        /// The value as written in the file (for logs).
        source: &'a str,
    },
    /// Set an environment variable (phase pre-init only).
    SetEnv {
        /// Variable name.
        name: &'a str,
        /// Its value.
        value: &'a str,
    },
    /// Write a note into the log.
    Note(&'a str),
    /// Write a recommendation into the log (and the end-of-run report).
    Recommend(&'a str),
}

#[derive(Debug, Clone)]
pub(crate) enum SetSource {
    Number(f64),
    Numbers(Vec<f64>),
    Text(String),
    Expr(Program),
}

#[derive(Debug, Clone)]
pub(crate) enum ActionKind {
    Set {
        cvar: String,
        slot: VarSlot,
        index: Option<u32>,
        value: SetSource,
        source: String,
        /// Variables the value expression reads.
        reads_vars: bool,
    },
    SetEnv {
        name: String,
        value: String,
    },
    Note(String),
    Recommend(String),
}

#[derive(Debug, Clone)]
pub(crate) struct Action {
    pub kind: ActionKind,
    pub location: Location,
    /// Values at the last firing of this action's branch (computed values only).
    last: Vec<f64>,
}

impl Action {
    fn writes(&self) -> bool {
        matches!(
            self.kind,
            ActionKind::Set { .. } | ActionKind::SetEnv { .. }
        )
    }

    fn view(&self) -> ActionView<'_> {
        match &self.kind {
            ActionKind::Set {
                cvar,
                slot,
                index,
                value,
                source,
                ..
            } => ActionView::Set {
                cvar,
                slot: *slot,
                index: *index,
                value: match value {
                    SetSource::Number(x) => SetValue::Number(*x),
                    SetSource::Numbers(v) => SetValue::Numbers(v),
                    SetSource::Text(t) => SetValue::Text(t),
                    SetSource::Expr(p) => match p.result() {
                        Ok(Value::Scalar(x)) => SetValue::Number(x),
                        Ok(Value::Array(a)) if a.len() == 1 => SetValue::Number(a[0]),
                        Ok(Value::Array(a)) => SetValue::Numbers(a),
                        Err(_) => SetValue::Number(f64::NAN),
                    },
                },
                source,
            },
            ActionKind::SetEnv { name, value } => ActionView::SetEnv { name, value },
            ActionKind::Note(t) => ActionView::Note(t),
            ActionKind::Recommend(t) => ActionView::Recommend(t),
        }
    }

    /// Computes an expression value; `Ok(changed)` compares with the last firing.
    fn compute(&mut self, values: &dyn Values, env: &Env) -> Result<bool, Skip> {
        let ActionKind::Set {
            value: SetSource::Expr(p),
            index,
            ..
        } = &mut self.kind
        else {
            return Ok(false);
        };
        p.run(values, env).map_err(Skip::Error)?;
        let v = p.result().map_err(|u| match u {
            Undef::Missing(s) => Skip::Missing(s),
            Undef::Warmup => Skip::Warmup,
        })?;
        let xs = v.as_slice();
        if index.is_some() && xs.len() != 1 {
            return Err(Skip::Error(EvalError::ArrayForElement { len: xs.len() }));
        }
        if xs.iter().any(|x| !x.is_finite()) {
            return Err(Skip::Error(EvalError::NotFinite));
        }
        Ok(xs != self.last.as_slice())
    }

    fn remember(&mut self) {
        if let ActionKind::Set {
            value: SetSource::Expr(p),
            ..
        } = &self.kind
        {
            self.last.clear();
            if let Ok(v) = p.result() {
                self.last.extend_from_slice(v.as_slice());
            }
        }
    }
}

/// What a policy remembers between evaluations.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PolicyState {
    /// Evaluations that got past rank selection and scheduling.
    pub evaluations: u64,
    /// Firings (any branch).
    pub firings: u64,
    /// Firings of a branch with `set`/`setenv` actions (counted for `max_writes`, dry run included).
    pub write_firings: u32,
    /// Time of the last evaluation.
    pub last_evaluation: Option<Duration>,
    /// Branch of the last firing.
    pub last_fired: Option<Branch>,
    /// Time of the last firing with writes (for `cooldown`).
    pub last_write_time: Option<Duration>,
    /// Truth of the condition at the last evaluation (`None`: undefined or error).
    pub last_condition: Option<bool>,
    /// Branch the condition pointed to on the last evaluations, and how many in a row.
    pub streak: Option<(Branch, u32)>,
}

/// One validated, compiled policy with its evaluation state.
///
/// Cloning gives an independent copy (state included), e.g. one per rank
/// in a replay.
#[derive(Debug, Clone)]
pub struct CompiledPolicy {
    name: String,
    location: Location,
    ranks: RankSelector,
    hosts: Option<HostSelector>,
    phase: Phase,
    every: Duration,
    cooldown: Option<Duration>,
    hysteresis: u32,
    max_writes: Option<u32>,
    dry_run: bool,
    when_text: Option<String>,
    when: Option<Program>,
    pub(crate) then: Vec<Action>,
    pub(crate) otherwise: Vec<Action>,
    slots: Vec<VarSlot>,
    state: PolicyState,
}

impl CompiledPolicy {
    /// The policy's `name`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Where the policy's `[[policy]]` table starts.
    pub fn location(&self) -> &Location {
        &self.location
    }

    /// The `phase`.
    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// The `every` interval (meaningful for periodic policies).
    pub fn every(&self) -> Duration {
        self.every
    }

    /// The `cooldown`, if any.
    pub fn cooldown(&self) -> Option<Duration> {
        self.cooldown
    }

    /// The `hysteresis` (1 when not given).
    pub fn hysteresis(&self) -> u32 {
        self.hysteresis
    }

    /// The `max_writes`, if any.
    pub fn max_writes(&self) -> Option<u32> {
        self.max_writes
    }

    /// True if the policy decides and logs but never writes.
    pub fn dry_run(&self) -> bool {
        self.dry_run
    }

    /// The `when` expression as written, if any.
    pub fn condition_text(&self) -> Option<&str> {
        self.when_text.as_deref()
    }

    /// True if the policy has `setenv` actions. Such a policy (phase
    /// pre-init, checked at load time) names no variables and writes no
    /// CVARs, so the runtime runs it before MPI_T is initialised.
    pub fn sets_environment(&self) -> bool {
        self.then
            .iter()
            .chain(&self.otherwise)
            .any(|a| matches!(a.kind, ActionKind::SetEnv { .. }))
    }

    /// The `ranks` selector.
    pub fn ranks(&self) -> &RankSelector {
        &self.ranks
    }

    /// True if this policy runs on rank `rank` of `size`.
    pub fn applies_to(&self, rank: u32, size: u32) -> bool {
        self.ranks.applies_to(rank, size)
    }

    /// The `hosts` selector, if the policy has one.
    pub fn hosts(&self) -> Option<&HostSelector> {
        self.hosts.as_ref()
    }

    /// True if this policy runs on the node named `host` (always, without
    /// `hosts`). A rank's host does not change, so [`evaluate`] does not
    /// check it: the runtime leaves out the policies of other hosts once.
    ///
    /// [`evaluate`]: CompiledPolicy::evaluate
    pub fn applies_to_host(&self, host: &str) -> bool {
        self.hosts.as_ref().is_none_or(|h| h.matches(host))
    }

    /// Every variable this policy names, in slot order. If one of them is
    /// missing from the MPI library, the runtime disables this policy.
    pub fn slots(&self) -> &[VarSlot] {
        &self.slots
    }

    /// The evaluation state.
    pub fn state(&self) -> &PolicyState {
        &self.state
    }

    /// Forgets the last firing, so the next evaluation fires again even if
    /// nothing changed (cooldown and `max_writes` still apply). For the
    /// runtime when the writes of a firing could not be applied.
    pub fn rearm(&mut self) {
        self.state.last_fired = None;
    }

    /// Evaluates the policy once, at `env.elapsed`, and says what to do.
    ///
    /// Order of the checks: rank selection, schedule (`every`), condition
    /// (missing values, warm-up, errors), hysteresis, computed values,
    /// steady state, `max_writes`, `cooldown`. Never allocates once its
    /// buffers have grown to the sizes of the arrays involved.
    pub fn evaluate(&mut self, values: &dyn Values, env: &Env) -> Decision {
        use Decision::Skipped;
        if !self.applies_to(env.rank, env.size) {
            return Skipped(Skip::NotSelected);
        }
        let now = env.elapsed;
        if self.phase == Phase::Periodic {
            if let Some(last) = self.state.last_evaluation {
                if now < last.saturating_add(self.every - self.every / 10) {
                    return Skipped(Skip::NotDue);
                }
            }
        }
        self.state.last_evaluation = Some(now);
        self.state.evaluations += 1;
        self.state.last_condition = None;

        let holds = match &mut self.when {
            None => true,
            Some(p) => {
                if let Err(e) = p.run(values, env) {
                    return Skipped(Skip::Error(e));
                }
                match p.truth() {
                    Ok(Truth::True) => true,
                    Ok(Truth::False) => false,
                    Ok(Truth::Undef(Undef::Missing(s))) => return Skipped(Skip::Missing(s)),
                    Ok(Truth::Undef(Undef::Warmup)) => return Skipped(Skip::Warmup),
                    Err(e) => return Skipped(Skip::Error(e)),
                }
            }
        };
        self.state.last_condition = Some(holds);
        let branch = if holds {
            Branch::Then
        } else {
            Branch::Otherwise
        };
        let streak = match self.state.streak {
            Some((b, n)) if b == branch => n.saturating_add(1),
            _ => 1,
        };
        self.state.streak = Some((branch, streak));
        let switching = self.state.last_fired != Some(branch);
        if switching && streak < self.hysteresis {
            return Skipped(Skip::Hysteresis {
                streak,
                needed: self.hysteresis,
            });
        }

        let actions = match branch {
            Branch::Then => &mut self.then,
            Branch::Otherwise => &mut self.otherwise,
        };
        let mut changed = false;
        for a in actions.iter_mut() {
            match a.compute(values, env) {
                Ok(c) => changed |= c,
                Err(skip) => return Skipped(skip),
            }
        }
        if !switching && !changed {
            return Skipped(Skip::Steady);
        }
        let writes = actions.iter().any(Action::writes);
        if writes {
            if let Some(limit) = self.max_writes {
                if self.state.write_firings >= limit {
                    return Skipped(Skip::MaxWrites { limit });
                }
            }
            if let (Some(cooldown), Some(last)) = (self.cooldown, self.state.last_write_time) {
                let end = last.saturating_add(cooldown);
                if now < end {
                    return Skipped(Skip::Cooldown {
                        remaining: end - now,
                    });
                }
            }
        }
        for a in actions.iter_mut() {
            a.remember();
        }
        self.state.firings += 1;
        self.state.last_fired = Some(branch);
        if writes {
            self.state.write_firings += 1;
            self.state.last_write_time = Some(now);
        }
        Decision::Fired {
            branch,
            write: writes && !self.dry_run,
        }
    }

    /// The actions of `branch`, with values computed by the last evaluation
    /// that fired (or tried to fire) it.
    pub fn actions(&self, branch: Branch) -> impl Iterator<Item = ActionView<'_>> + '_ {
        let list = match branch {
            Branch::Then => &self.then,
            Branch::Otherwise => &self.otherwise,
        };
        list.iter().map(Action::view)
    }

    /// The value of the `when` expression at the last evaluation, for the
    /// audit log (`None` without condition or when it was undefined).
    pub fn condition_value(&self) -> Option<Value<'_>> {
        self.when.as_ref().and_then(|p| p.result().ok())
    }

    /// Each variable (or `delta(x)`-style derived metric) the condition
    /// reads, with its value at the last evaluation, for the audit log.
    pub fn condition_inputs(&self) -> impl Iterator<Item = (&str, Option<Value<'_>>)> + '_ {
        self.when.iter().flat_map(Program::inputs)
    }
}

/// A validated, compiled policy file.
#[derive(Debug, Clone)]
pub struct PolicySet {
    file: String,
    policies: Vec<CompiledPolicy>,
    variables: Vec<Variable>,
}

impl PolicySet {
    /// Parses, validates and compiles a policy file. `file_name` is only
    /// used in error messages.
    ///
    /// All syntax errors are reported together; then, if the TOML is
    /// well-formed, every policy is checked and all their errors reported.
    pub fn parse(source: &str, file_name: &str) -> Result<PolicySet, PolicyErrors> {
        let map = SourceMap::new(file_name, source);
        let (root, syntax) = DeTable::parse_recoverable(source);
        if !syntax.is_empty() {
            let errors = syntax
                .iter()
                .map(|e| map.error(e.span().map_or(0, |s| s.start), e.message().trim()))
                .collect();
            return Err(PolicyErrors::new(errors));
        }
        let mut c = Compiler {
            map: &map,
            errors: Vec::new(),
            vars: Vec::new(),
            index: HashMap::new(),
        };
        let mut policies = Vec::new();
        for (key, value) in root.get_ref().iter() {
            if key.get_ref().as_ref() != "policy" {
                c.err(
                    &key.span(),
                    format!(
                        "unknown top-level key `{}`; a policy file holds only [[policy]] tables",
                        key.get_ref()
                    ),
                );
                continue;
            }
            let DeValue::Array(items) = value.get_ref() else {
                c.err(
                    &key.span(),
                    "`policy` must be an array of tables: write each policy as [[policy]], not [policy]",
                );
                continue;
            };
            for item in items.iter() {
                let span = item.span();
                if !matches!(item.get_ref(), DeValue::Table(_)) {
                    c.err(&span, "expected a policy table");
                    continue;
                }
                match RawPolicy::deserialize(ValueDeserializer::from(item.clone())) {
                    Ok(raw) => {
                        let index = policies.len();
                        if let Some(p) = c.policy(raw, span, index) {
                            policies.push(p);
                        }
                    }
                    Err(e) => {
                        let at = e.span().unwrap_or(span);
                        c.err(&at, serde_message(source, at.start, e.message()));
                    }
                }
            }
        }
        let mut seen: HashMap<&str, &Location> = HashMap::new();
        for p in &policies {
            if let Some(first) = seen.insert(&p.name, &p.location) {
                c.errors.push(PolicyError {
                    location: p.location.clone(),
                    message: format!(
                        "two policies are named {:?} (the other one is at {first}); names must be unique, they identify policies in the logs",
                        p.name
                    ),
                    source_line: String::new(),
                });
            }
        }
        if !c.errors.is_empty() {
            return Err(PolicyErrors::new(c.errors));
        }
        Ok(PolicySet {
            file: file_name.to_string(),
            policies,
            variables: c.vars,
        })
    }

    /// The file name given to [`PolicySet::parse`].
    pub fn file_name(&self) -> &str {
        &self.file
    }

    /// The policies, in file order.
    pub fn policies(&self) -> &[CompiledPolicy] {
        &self.policies
    }

    /// The policies, for evaluation.
    pub fn policies_mut(&mut self) -> &mut [CompiledPolicy] {
        &mut self.policies
    }

    /// Takes the policies out (variables stay valid for their slots: keep a
    /// clone of [`PolicySet::variables`] if needed).
    pub fn into_policies(self) -> Vec<CompiledPolicy> {
        self.policies
    }

    /// Every variable named in the file; [`VarSlot::index`] indexes this slice.
    pub fn variables(&self) -> &[Variable] {
        &self.variables
    }

    /// The variable bound to `slot`.
    pub fn variable(&self, slot: VarSlot) -> Option<&Variable> {
        self.variables.get(slot.index())
    }

    /// The slot of the first variable called `name` (any kind).
    pub fn slot_of(&self, name: &str) -> Option<VarSlot> {
        self.variables
            .iter()
            .position(|v| v.name == name)
            .map(|i| VarSlot(i as u32))
    }
}

/// Adds to a serde error the key it is about (found before `at` on its
/// line) and a hint for the usual mistakes.
fn serde_message(source: &str, at: usize, message: &str) -> String {
    let message = message.trim();
    if let Some(rest) = message.strip_prefix("unknown field `") {
        // "unknown field `whne`, expected one of `name`, `ranks`, ..."
        let (field, expected) = rest.split_once('`').unwrap_or((rest, ""));
        let known: Vec<&str> = expected.split('`').skip(1).step_by(2).collect();
        let close = crate::catalogue::closest(field, known.iter().copied());
        if let Some(best) = close.first() {
            return format!("unknown field `{field}` (did you mean `{best}`?){expected}");
        }
        return message.to_string();
    }
    let before = source.get(..at).unwrap_or("");
    let line = before.rsplit('\n').next().unwrap_or("").trim_end();
    let Some(lhs) = line.strip_suffix('=') else {
        return message.to_string();
    };
    let key: String = lhs
        .trim_end()
        .chars()
        .rev()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-')
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    if key.is_empty() {
        return message.to_string();
    }
    let hint = match key.as_str() {
        "then" | "otherwise" if message.contains("expected a sequence") => {
            format!(" (`{key}` is an array of actions: write {key} = [ {{ ... }}, {{ ... }} ])")
        }
        "hysteresis" | "max_writes" | "index" => " (expected a whole number)".to_string(),
        "dry_run" => " (expected true or false)".to_string(),
        "every" | "cooldown" => " (expected a duration string such as \"1s\")".to_string(),
        _ => String::new(),
    };
    format!("in `{key}`: {message}{hint}")
}

/// Builds a [`PolicySet`], collecting errors.
struct Compiler<'m, 's> {
    map: &'m SourceMap<'s>,
    errors: Vec<PolicyError>,
    vars: Vec<Variable>,
    index: HashMap<(VarKind, String), usize>,
}

enum Use {
    Read(Option<Derived>),
    Write,
}

impl Compiler<'_, '_> {
    fn err(&mut self, span: &Range<usize>, message: impl Into<String>) {
        self.errors.push(self.map.error_at(span, message));
    }

    /// Offset of an expression string's first character in the file, if
    /// the string is written without escapes (so offsets inside map 1:1).
    fn string_base(&self, span: &Range<usize>, text: &str) -> Option<usize> {
        let raw = self.map.text().get(span.clone())?;
        let quoted = |q: &str| {
            raw.len() == text.len() + 2 * q.len()
                && raw.starts_with(q)
                && raw.ends_with(q)
                && &raw[q.len()..raw.len() - q.len()] == text
        };
        if quoted("\"") || quoted("'") {
            Some(span.start + 1)
        } else if quoted("\"\"\"") || quoted("'''") {
            Some(span.start + 3)
        } else {
            None
        }
    }

    fn expr_err(&mut self, span: &Range<usize>, text: &str, e: &ExprError, context: &str) {
        let at = self
            .string_base(span, text)
            .map_or(span.start, |b| b + e.at);
        self.errors
            .push(self.map.error(at, format!("in {context}: {}", e.message)));
    }

    fn intern(&mut self, kind: VarKind, name: &str, at: usize, policy: usize, how: Use) -> VarSlot {
        let location = self.map.location(at);
        let i = *self
            .index
            .entry((kind, name.to_string()))
            .or_insert_with(|| {
                self.vars.push(Variable {
                    name: name.to_string(),
                    kind,
                    uses: Uses::default(),
                    first_use: location.clone(),
                    used_by: Vec::new(),
                });
                self.vars.len() - 1
            });
        let v = &mut self.vars[i];
        match how {
            Use::Write => v.uses.written = true,
            Use::Read(None) => v.uses.read = true,
            Use::Read(Some(Derived::Delta)) => v.uses.delta = true,
            Use::Read(Some(Derived::Rate)) => v.uses.rate = true,
            Use::Read(Some(Derived::Changes)) => v.uses.changes = true,
        }
        if !v.used_by.iter().any(|(p, _)| *p == policy) {
            v.used_by.push((policy, location));
        }
        VarSlot(i as u32)
    }

    /// Parses and compiles an expression string; `None` after reporting errors.
    fn expression(
        &mut self,
        text: &Spanned<String>,
        policy: usize,
        context: &str,
    ) -> Option<(Program, bool)> {
        let span = text.span();
        let src = text.get_ref();
        let expr = match parse(src) {
            Ok(e) => e,
            Err(e) => {
                self.expr_err(&span, src, &e, context);
                return None;
            }
        };
        Some(self.compile(&expr, src, &span, policy))
    }

    fn compile(
        &mut self,
        expr: &Expr,
        src: &str,
        span: &Range<usize>,
        policy: usize,
    ) -> (Program, bool) {
        let base = self.string_base(span, src);
        let mut reads = false;
        let program = Program::compile(expr, src, &mut |v: &VarRef, d| {
            reads = true;
            let at = base.map_or(span.start, |b| b + v.at);
            self.intern(v.kind, &v.name, at, policy, Use::Read(d))
        });
        (program, reads)
    }

    fn policy(
        &mut self,
        raw: RawPolicy,
        span: Range<usize>,
        index: usize,
    ) -> Option<CompiledPolicy> {
        let before = self.errors.len();
        let name = match &raw.name {
            Some(n) if !n.get_ref().trim().is_empty() => n.get_ref().clone(),
            Some(n) => {
                self.err(&n.span(), "a policy name must not be empty");
                String::new()
            }
            None => {
                self.err(
                    &span,
                    "this [[policy]] has no `name`; add name = \"...\" (names identify policies in the logs)",
                );
                String::new()
            }
        };
        let location = self.map.location(span.start);

        let phase = match &raw.phase {
            None => Phase::Periodic,
            Some(p) => Phase::parse(p.get_ref()).unwrap_or_else(|| {
                self.err(
                    &p.span(),
                    format!(
                        "unknown phase {:?}; expected \"pre-init\", \"init\", \"periodic\" or \"finalize\"",
                        p.get_ref()
                    ),
                );
                Phase::Periodic
            }),
        };

        let mut every = DEFAULT_EVERY;
        if let Some(e) = &raw.every {
            if phase != Phase::Periodic {
                self.err(
                    &e.span(),
                    format!("`every` only applies to phase \"periodic\"; a policy in phase \"{phase}\" runs once"),
                );
            }
            match parse_duration(e.get_ref()) {
                Ok(d) if d < MIN_EVERY => self.err(&e.span(), "`every` must be at least 1ms"),
                Ok(d) => every = d,
                Err(m) => self.err(&e.span(), format!("in `every`: {m}")),
            }
        }
        let cooldown = raw
            .cooldown
            .as_ref()
            .and_then(|c| match parse_duration(c.get_ref()) {
                Ok(d) => Some(d),
                Err(m) => {
                    self.err(&c.span(), format!("in `cooldown`: {m}"));
                    None
                }
            });

        let mut hysteresis = 1;
        if let Some(h) = &raw.hysteresis {
            match u32::try_from(*h.get_ref()) {
                Ok(n) if (1..=1_000_000).contains(&n) => hysteresis = n,
                _ => self.err(
                    &h.span(),
                    "`hysteresis` must be a whole number of evaluations from 1 to 1000000",
                ),
            }
            if hysteresis > 1 && phase != Phase::Periodic {
                self.err(
                    &h.span(),
                    format!("`hysteresis` needs repeated evaluations, but a policy in phase \"{phase}\" is evaluated once"),
                );
            }
        }
        let max_writes = raw.max_writes.as_ref().and_then(|m| match u32::try_from(*m.get_ref()) {
            Ok(n) if n >= 1 => Some(n),
            _ => {
                self.err(
                    &m.span(),
                    "`max_writes` must be a whole number of at least 1 (to never write, use dry_run = true)",
                );
                None
            }
        });
        let dry_run = raw.dry_run.as_ref().is_some_and(|d| *d.get_ref());

        let ranks = match &raw.ranks {
            None => RankSelector::all(),
            Some(r) => self.ranks(r),
        };
        let hosts = raw.hosts.as_ref().and_then(|h| self.hosts(h));

        let mut when_reads = false;
        let when = raw.when.as_ref().and_then(|w| {
            self.expression(w, index, "`when`").map(|(p, reads)| {
                when_reads = reads;
                p
            })
        });

        let then = self.actions(raw.then.as_ref(), phase, index, "then");
        let otherwise = self.actions(raw.otherwise.as_ref(), phase, index, "otherwise");
        if phase == Phase::PreInit {
            self.environment_rules(&raw, when_reads);
        }
        if let (Some(o), None) = (&raw.otherwise, &raw.when) {
            self.err(
                &o.span(),
                "`otherwise` can never run: this policy has no `when` condition",
            );
        }
        if then.is_empty() && otherwise.is_empty() && self.errors.len() == before {
            self.err(
                &span,
                format!("policy {name:?} has no actions: add then = [ ... ] with set, setenv, note or recommend actions"),
            );
        }
        if self.errors.len() != before {
            return None;
        }
        let mut slots: Vec<VarSlot> = self
            .vars
            .iter()
            .enumerate()
            .filter(|(_, v)| v.used_by.iter().any(|(p, _)| *p == index))
            .map(|(i, _)| VarSlot(i as u32))
            .collect();
        slots.sort();
        Some(CompiledPolicy {
            name,
            location,
            ranks,
            hosts,
            phase,
            every,
            cooldown,
            hysteresis,
            max_writes,
            dry_run,
            when_text: raw.when.map(Spanned::into_inner),
            when,
            then,
            otherwise,
            slots,
            state: PolicyState::default(),
        })
    }

    /// A pre-init policy with `setenv` runs before MPI_T is initialised:
    /// Open MPI reads its `OMPI_MCA_*` variables when MPI_T initialises, not
    /// later in MPI_Init. Before that point there is no CVAR to write and no
    /// variable to read, so such a policy may neither `set` CVARs nor read
    /// variables in `when`.
    fn environment_rules(&mut self, raw: &RawPolicy, when_reads: bool) {
        let actions = || {
            raw.then
                .iter()
                .chain(raw.otherwise.iter())
                .flat_map(|list| list.get_ref().iter())
                .map(Spanned::get_ref)
        };
        if !actions().any(|a| a.setenv.is_some()) {
            return;
        }
        let sets: Vec<Range<usize>> = actions()
            .filter_map(|a| a.set.as_ref().map(Spanned::span))
            .collect();
        for span in sets {
            self.err(
                &span,
                "a policy with `setenv` may not also `set` CVARs: it runs before MPI_T is initialised (Open MPI reads its environment at that point), when no CVAR can be written yet; put the CVAR writes in a separate pre-init policy",
            );
        }
        if let (true, Some(w)) = (when_reads, &raw.when) {
            self.err(
                &w.span(),
                "the `when` of a policy with `setenv` may use only `rank`, `size` and `time`: the policy runs before MPI_T is initialised (Open MPI reads its environment at that point), when no variable can be read yet",
            );
        }
    }

    fn hosts(&mut self, h: &Spanned<toml::Value>) -> Option<HostSelector> {
        const EXPECTED: &str =
            "expected a host name or pattern such as \"node01\" or \"gpu-*\", or an array of them";
        let span = h.span();
        let patterns: Vec<String> = match h.get_ref() {
            toml::Value::String(s) => vec![s.clone()],
            toml::Value::Array(items) => {
                let names: Option<Vec<String>> = items
                    .iter()
                    .map(|v| v.as_str().map(str::to_string))
                    .collect();
                match names {
                    Some(n) => n,
                    None => {
                        self.err(&span, format!("in `hosts`: {EXPECTED}"));
                        return None;
                    }
                }
            }
            _ => {
                self.err(&span, format!("in `hosts`: {EXPECTED}"));
                return None;
            }
        };
        match HostSelector::new(&patterns) {
            Ok(sel) => Some(sel),
            Err((_, why)) => {
                self.err(&span, format!("in `hosts`: {why}"));
                None
            }
        }
    }

    fn ranks(&mut self, r: &Spanned<toml::Value>) -> RankSelector {
        const EXPECTED: &str = "expected \"all\", a list of ranks such as [0, 2] or \"0-3,8\", or a predicate such as \"rank % 2 == 0\"";
        let span = r.span();
        match r.get_ref() {
            toml::Value::String(s) => match RankSelector::parse(s) {
                Ok(sel) => sel,
                Err(e) => {
                    self.expr_err(&span, s, &e, "`ranks`");
                    RankSelector::all()
                }
            },
            toml::Value::Integer(n) => match u32::try_from(*n) {
                Ok(n) => RankSelector::list(&[n]),
                Err(_) => {
                    self.err(&span, format!("in `ranks`: {EXPECTED}"));
                    RankSelector::all()
                }
            },
            toml::Value::Array(items) => {
                let parts: Option<Vec<String>> = items
                    .iter()
                    .map(|v| match v {
                        toml::Value::Integer(n) if *n >= 0 => Some(n.to_string()),
                        toml::Value::String(s) => Some(s.clone()),
                        _ => None,
                    })
                    .collect();
                match parts.filter(|p| !p.is_empty()) {
                    Some(p) => match RankSelector::parse(&p.join(",")) {
                        Ok(sel) => sel,
                        Err(e) => {
                            self.err(&span, format!("in `ranks`: {}", e.message));
                            RankSelector::all()
                        }
                    },
                    None => {
                        self.err(&span, format!("in `ranks`: {EXPECTED}"));
                        RankSelector::all()
                    }
                }
            }
            _ => {
                self.err(&span, format!("in `ranks`: {EXPECTED}"));
                RankSelector::all()
            }
        }
    }

    fn actions(
        &mut self,
        raw: Option<&Spanned<Vec<Spanned<RawAction>>>>,
        phase: Phase,
        policy: usize,
        list: &str,
    ) -> Vec<Action> {
        let Some(raw) = raw else {
            return Vec::new();
        };
        raw.get_ref()
            .iter()
            .filter_map(|a| self.action(a, phase, policy, list))
            .collect()
    }

    fn action(
        &mut self,
        a: &Spanned<RawAction>,
        phase: Phase,
        policy: usize,
        list: &str,
    ) -> Option<Action> {
        let span = a.span();
        let r = a.get_ref();
        let location = self.map.location(span.start);
        let keys: Vec<&str> = [
            ("set", r.set.is_some()),
            ("setenv", r.setenv.is_some()),
            ("note", r.note.is_some()),
            ("recommend", r.recommend.is_some()),
        ]
        .iter()
        .filter(|(_, present)| *present)
        .map(|(k, _)| *k)
        .collect();
        if keys.len() != 1 {
            let found = if keys.is_empty() {
                "none".to_string()
            } else {
                keys.join(" and ")
            };
            self.err(
                &span,
                format!("an action in `{list}` must have exactly one of `set`, `setenv`, `note`, `recommend`; found {found}"),
            );
            return None;
        }
        let forbid = |c: &mut Self, key: &str, present: Option<Range<usize>>, what: &str| {
            if let Some(s) = present {
                c.err(&s, format!("`{key}` is not allowed in a `{what}` action"));
            }
        };
        let kind = if let Some(cvar) = &r.set {
            self.set_action(cvar, r, policy)?
        } else if let Some(name) = &r.setenv {
            if phase != Phase::PreInit {
                self.err(
                    &name.span(),
                    format!(
                        "`setenv` is only allowed in phase \"pre-init\" (this policy is \"{phase}\"): the MPI library reads its environment during MPI_Init, so a variable set later can not take effect"
                    ),
                );
                return None;
            }
            forbid(self, "text", r.text.as_ref().map(Spanned::span), "setenv");
            forbid(self, "index", r.index.as_ref().map(Spanned::span), "setenv");
            let value = match r.value.as_ref().map(|v| (v.span(), v.get_ref())) {
                Some((_, toml::Value::String(s))) => s.clone(),
                Some((_, toml::Value::Integer(n))) => n.to_string(),
                Some((_, toml::Value::Float(x))) => x.to_string(),
                Some((s, _)) => {
                    self.err(&s, "the value of an environment variable must be a string");
                    return None;
                }
                None => {
                    self.err(&name.span(), "`setenv` needs a `value`, e.g. { setenv = \"MV2_USE_SHARP\", value = \"1\" }");
                    return None;
                }
            };
            if name.get_ref().is_empty() || name.get_ref().contains(['=', '\0']) {
                self.err(
                    &name.span(),
                    "an environment variable name must be non-empty and contain no `=`",
                );
                return None;
            }
            // Checked against the library's grammar here, so that `check`
            // and the runtime refuse it alike, before any library sees it.
            if let Err(why) = crate::envvalues::check(name.get_ref(), &value) {
                let span = r.value.as_ref().map_or_else(|| name.span(), Spanned::span);
                self.err(&span, why.to_string());
                return None;
            }
            ActionKind::SetEnv {
                name: name.get_ref().clone(),
                value,
            }
        } else {
            let (key, text) = match (&r.note, &r.recommend) {
                (Some(n), _) => ("note", n),
                (_, Some(n)) => ("recommend", n),
                _ => return None,
            };
            forbid(self, "value", r.value.as_ref().map(Spanned::span), key);
            forbid(self, "text", r.text.as_ref().map(Spanned::span), key);
            forbid(self, "index", r.index.as_ref().map(Spanned::span), key);
            if key == "note" {
                ActionKind::Note(text.get_ref().clone())
            } else {
                ActionKind::Recommend(text.get_ref().clone())
            }
        };
        Some(Action {
            kind,
            location,
            last: Vec::new(),
        })
    }

    fn set_action(
        &mut self,
        cvar: &Spanned<String>,
        r: &RawAction,
        policy: usize,
    ) -> Option<ActionKind> {
        let name = cvar.get_ref();
        let valid_name = name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.');
        if !valid_name {
            self.err(
                &cvar.span(),
                format!("`set` expects a CVAR name (letters, digits, underscores), found {name:?}"),
            );
            return None;
        }
        let index = match &r.index {
            None => None,
            Some(i) => match u32::try_from(*i.get_ref()) {
                Ok(n) => Some(n),
                Err(_) => {
                    self.err(&i.span(), "`index` must be a whole number of at least 0");
                    return None;
                }
            },
        };
        let at = self
            .string_base(&cvar.span(), name)
            .unwrap_or(cvar.span().start);
        let slot = self.intern(VarKind::Cvar, name, at, policy, Use::Write);
        let (value, source, reads_vars) = match (&r.value, &r.text) {
            (Some(_), Some(t)) => {
                self.err(&t.span(), "give either `value` (a number, array or expression) or `text` (a string), not both");
                return None;
            }
            (None, None) => {
                self.err(
                    &cvar.span(),
                    format!("`set = {name:?}` needs a `value` (a number, an array of numbers or an expression) or a `text`"),
                );
                return None;
            }
            (None, Some(t)) => (
                SetSource::Text(t.get_ref().clone()),
                t.get_ref().clone(),
                false,
            ),
            (Some(v), None) => {
                let span = v.span();
                match v.get_ref() {
                    toml::Value::Integer(n) => (SetSource::Number(*n as f64), n.to_string(), false),
                    toml::Value::Float(x) => (SetSource::Number(*x), x.to_string(), false),
                    toml::Value::Boolean(b) => (
                        SetSource::Number(f64::from(u8::from(*b))),
                        b.to_string(),
                        false,
                    ),
                    toml::Value::Array(items) => {
                        if index.is_some() {
                            self.err(
                                &span,
                                "with `index`, `value` must be a single number, not an array",
                            );
                            return None;
                        }
                        let nums: Option<Vec<f64>> = items
                            .iter()
                            .map(|x| match x {
                                toml::Value::Integer(n) => Some(*n as f64),
                                toml::Value::Float(f) if f.is_finite() => Some(*f),
                                _ => None,
                            })
                            .collect();
                        match nums.filter(|n| !n.is_empty()) {
                            Some(n) => {
                                let src = format!("{:?}", n);
                                (SetSource::Numbers(n), src, false)
                            }
                            None => {
                                self.err(
                                    &span,
                                    "an array `value` must be a non-empty list of finite numbers",
                                );
                                return None;
                            }
                        }
                    }
                    toml::Value::String(s) => {
                        let context = format!("the value of {name}");
                        let (program, reads) = match parse(s) {
                            Ok(e) => self.compile(&e, s, &span, policy),
                            Err(e) => {
                                let mut e = e;
                                if !e.message.contains("text =") {
                                    e.message.push_str(" (a `value` string is an expression; for a text value write `text = \"...\"`)");
                                }
                                self.expr_err(&span, s, &e, &context);
                                return None;
                            }
                        };
                        (SetSource::Expr(program), s.clone(), reads)
                    }
                    _ => {
                        self.err(&span, "`value` must be a number, a boolean, an array of numbers or an expression string");
                        return None;
                    }
                }
            }
        };
        if let SetSource::Number(x) = value {
            if !x.is_finite() {
                self.err(&cvar.span(), "the value must be a finite number");
                return None;
            }
        }
        Some(ActionKind::Set {
            cvar: name.clone(),
            slot,
            index,
            value,
            source,
            reads_vars,
        })
    }
}
