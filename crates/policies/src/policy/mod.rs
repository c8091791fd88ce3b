//! Stage two: validated, compiled policies, their variables, and their
//! per-tick evaluation.
//!
//! Modules: [`compile`] (the raw schema of [`crate::schema`] to compiled
//! policies, every error collected with its place in the file),
//! [`action`] (the actions of a branch, and their values), [`compiled`]
//! ([`CompiledPolicy`]: settings and state), [`evaluate`] (one evaluation,
//! to a [`Decision`]). This file holds the [`PolicySet`] and the small
//! types they share ([`Phase`], [`Branch`], [`Variable`]).

mod action;
mod compile;
mod compiled;
mod evaluate;

pub(crate) use action::{ActionKind, SetSource};
pub use action::{ActionView, SetValue};
pub use compiled::{CompiledPolicy, PolicyState};
pub use evaluate::{Decision, Skip};

use std::fmt;
use std::time::Duration;

use crate::error::{Location, PolicyErrors};
use crate::expr::VarKind;
use crate::value::VarSlot;

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

impl From<Phase> for vocab::record::Phase {
    /// The phase as the log records it.
    fn from(phase: Phase) -> vocab::record::Phase {
        match phase {
            Phase::PreInit => vocab::record::Phase::PreInit,
            Phase::Init => vocab::record::Phase::Init,
            Phase::Periodic => vocab::record::Phase::Periodic,
            Phase::Finalize => vocab::record::Phase::Finalize,
        }
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

impl From<Branch> for vocab::record::Branch {
    /// The branch as the log records it.
    fn from(branch: Branch) -> vocab::record::Branch {
        match branch {
            Branch::Then => vocab::record::Branch::Then,
            Branch::Otherwise => vocab::record::Branch::Otherwise,
        }
    }
}

impl fmt::Display for Branch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Branch::Then => "then",
            Branch::Otherwise => "otherwise",
        })
    }
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

/// A validated, compiled policy file.
#[derive(Debug, Clone)]
pub struct PolicySet {
    file: String,
    policies: Vec<CompiledPolicy>,
    variables: Vec<Variable>,
    collectives: Option<crate::collectives::CollectiveSpec>,
}

impl PolicySet {
    /// Parses, validates and compiles a policy file. `file_name` is only
    /// used in error messages.
    ///
    /// All syntax errors are reported together; then, if the TOML is
    /// well-formed, every policy is checked and all their errors reported.
    pub fn parse(source: &str, file_name: &str) -> Result<PolicySet, PolicyErrors> {
        compile::compile_file(source, file_name)
    }

    /// The `[collectives]` table, if the file has one.
    pub fn collectives(&self) -> Option<&crate::collectives::CollectiveSpec> {
        self.collectives.as_ref()
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
