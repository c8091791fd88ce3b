//! One evaluation of a compiled policy: the checks in their order, each a
//! reason to skip ([`Skip`]), and the firing ([`Decision::Fired`]).

use std::fmt;
use std::time::Duration;

use super::action::{Action, ActionView};
use super::{Branch, CompiledPolicy, Phase};
use crate::expr::program::{EvalError, Program, Truth, Undef};
use crate::value::{Env, Value, Values, VarSlot};

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

impl CompiledPolicy {
    /// Evaluates the policy once, at `env.elapsed`, and says what to do.
    ///
    /// Order of the checks: rank selection, schedule (`every`), condition
    /// (missing values, warm-up, errors), hysteresis, computed values,
    /// steady state, `max_writes`, `cooldown`. Never allocates once its
    /// buffers have grown to the sizes of the arrays involved.
    pub fn evaluate(&mut self, values: &dyn Values, env: &Env) -> Decision {
        self.decide(values, env).unwrap_or_else(Decision::Skipped)
    }

    /// [`CompiledPolicy::evaluate`], each check a step that may skip.
    fn decide(&mut self, values: &dyn Values, env: &Env) -> Result<Decision, Skip> {
        if !self.applies_to(env.rank, env.size) {
            return Err(Skip::NotSelected);
        }
        let now = env.elapsed;
        self.check_due(now)?;
        self.state.last_evaluation = Some(now);
        self.state.evaluations += 1;
        self.state.last_condition = None;

        let holds = self.condition(values, env)?;
        self.state.last_condition = Some(holds);
        let branch = if holds {
            Branch::Then
        } else {
            Branch::Otherwise
        };
        let switching = self.state.last_fired != Some(branch);
        self.check_hysteresis(branch, switching)?;

        let changed = self.compute_values(branch, values, env)?;
        if !switching && !changed {
            return Err(Skip::Steady);
        }
        let writes = self.branch_mut(branch).iter().any(Action::writes);
        if writes {
            self.check_write_limits(now)?;
        }
        Ok(self.fire(branch, writes, now))
    }

    /// A periodic policy is due `every` (less 10% tolerance) after its last
    /// evaluation.
    fn check_due(&self, now: Duration) -> Result<(), Skip> {
        if self.phase == Phase::Periodic {
            if let Some(last) = self.state.last_evaluation {
                if now < last.saturating_add(self.every - self.every / 10) {
                    return Err(Skip::NotDue);
                }
            }
        }
        Ok(())
    }

    /// Whether the condition holds (true without one).
    fn condition(&mut self, values: &dyn Values, env: &Env) -> Result<bool, Skip> {
        let Some(p) = &mut self.when else {
            return Ok(true);
        };
        p.run(values, env).map_err(Skip::Error)?;
        match p.truth() {
            Ok(Truth::True) => Ok(true),
            Ok(Truth::False) => Ok(false),
            Ok(Truth::Undef(Undef::Missing(s))) => Err(Skip::Missing(s)),
            Ok(Truth::Undef(Undef::Warmup)) => Err(Skip::Warmup),
            Err(e) => Err(Skip::Error(e)),
        }
    }

    /// Counts the evaluations in a row pointing to `branch`; switching to
    /// it needs `hysteresis` of them.
    fn check_hysteresis(&mut self, branch: Branch, switching: bool) -> Result<(), Skip> {
        let streak = match self.state.streak {
            Some((b, n)) if b == branch => n.saturating_add(1),
            _ => 1,
        };
        self.state.streak = Some((branch, streak));
        if switching && streak < self.hysteresis {
            return Err(Skip::Hysteresis {
                streak,
                needed: self.hysteresis,
            });
        }
        Ok(())
    }

    /// Computes the values of the branch's actions; `Ok(true)` if one
    /// differs from the last firing.
    fn compute_values(
        &mut self,
        branch: Branch,
        values: &dyn Values,
        env: &Env,
    ) -> Result<bool, Skip> {
        let mut changed = false;
        for a in self.branch_mut(branch).iter_mut() {
            changed |= a.compute(values, env)?;
        }
        Ok(changed)
    }

    /// A branch that writes is held back by `max_writes` and `cooldown`.
    fn check_write_limits(&self, now: Duration) -> Result<(), Skip> {
        if let Some(limit) = self.max_writes {
            if self.state.write_firings >= limit {
                return Err(Skip::MaxWrites { limit });
            }
        }
        if let (Some(cooldown), Some(last)) = (self.cooldown, self.state.last_write_time) {
            let end = last.saturating_add(cooldown);
            if now < end {
                return Err(Skip::Cooldown {
                    remaining: end - now,
                });
            }
        }
        Ok(())
    }

    /// Fires `branch`: remembers its values and counts the firing.
    fn fire(&mut self, branch: Branch, writes: bool, now: Duration) -> Decision {
        for a in self.branch_mut(branch).iter_mut() {
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

    fn branch_mut(&mut self, branch: Branch) -> &mut Vec<Action> {
        match branch {
            Branch::Then => &mut self.then,
            Branch::Otherwise => &mut self.otherwise,
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
