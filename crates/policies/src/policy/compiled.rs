//! A compiled policy: its settings as the file gives them, its actions,
//! and the state it keeps between evaluations.

use std::time::Duration;

use super::action::{Action, ActionKind};
use super::{Branch, Phase};
use crate::error::Location;
use crate::expr::program::Program;
use crate::hosts::HostSelector;
use crate::ranks::RankSelector;
use crate::value::VarSlot;

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
    pub(super) name: String,
    pub(super) location: Location,
    pub(super) ranks: RankSelector,
    pub(super) hosts: Option<HostSelector>,
    pub(super) phase: Phase,
    pub(super) every: Duration,
    pub(super) cooldown: Option<Duration>,
    pub(super) hysteresis: u32,
    pub(super) max_writes: Option<u32>,
    pub(super) dry_run: bool,
    pub(super) when_text: Option<String>,
    pub(super) when: Option<Program>,
    pub(crate) then: Vec<Action>,
    pub(crate) otherwise: Vec<Action>,
    pub(super) slots: Vec<VarSlot>,
    pub(super) state: PolicyState,
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
}
