//! One `[[policy]]` table compiled, a step per setting: its name, phase,
//! schedule (`every`, `cooldown`, `hysteresis`, `max_writes`), selectors
//! (`ranks`, `hosts`), condition and actions, then the rules that involve
//! several of them.

use std::ops::Range;
use std::time::Duration;

use toml::Spanned;

use super::Compiler;
use crate::duration::parse_duration;
use crate::expr::program::Program;
use crate::hosts::HostSelector;
use crate::policy::{CompiledPolicy, Phase, PolicyState, DEFAULT_EVERY, MIN_EVERY};
use crate::ranks::RankSelector;
use crate::schema::RawPolicy;
use crate::value::VarSlot;

impl Compiler<'_, '_> {
    /// Compiles the policy at `index` of the file (its table at `span`);
    /// `None` after reporting its errors.
    pub(super) fn policy(
        &mut self,
        raw: RawPolicy,
        span: Range<usize>,
        index: usize,
    ) -> Option<CompiledPolicy> {
        let before = self.errors.len();
        let name = self.name(&raw, &span);
        let location = self.map.location(span.start);
        let phase = self.phase(&raw);
        let every = self.every(&raw, phase);
        let cooldown = self.cooldown(&raw);
        let hysteresis = self.hysteresis(&raw, phase);
        let max_writes = self.max_writes(&raw);
        let dry_run = raw.dry_run.as_ref().is_some_and(|d| *d.get_ref());
        let ranks = match &raw.ranks {
            None => RankSelector::all(),
            Some(r) => self.ranks(r),
        };
        let hosts = raw.hosts.as_ref().and_then(|h| self.hosts(h));
        let (when, when_reads) = self.condition(&raw, index);
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
            slots: self.slots_of(index),
            state: PolicyState::default(),
        })
    }

    /// `name`: required, not blank.
    fn name(&mut self, raw: &RawPolicy, span: &Range<usize>) -> String {
        match &raw.name {
            Some(n) if !n.get_ref().trim().is_empty() => n.get_ref().clone(),
            Some(n) => {
                self.err(&n.span(), "a policy name must not be empty");
                String::new()
            }
            None => {
                self.err(
                    span,
                    "this [[policy]] has no `name`; add name = \"...\" (names identify policies in the logs)",
                );
                String::new()
            }
        }
    }

    /// `phase`: periodic unless given.
    fn phase(&mut self, raw: &RawPolicy) -> Phase {
        match &raw.phase {
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
        }
    }

    /// `every`: for periodic policies only, at least [`MIN_EVERY`].
    fn every(&mut self, raw: &RawPolicy, phase: Phase) -> Duration {
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
        every
    }

    /// `cooldown`: a duration.
    fn cooldown(&mut self, raw: &RawPolicy) -> Option<Duration> {
        raw.cooldown
            .as_ref()
            .and_then(|c| match parse_duration(c.get_ref()) {
                Ok(d) => Some(d),
                Err(m) => {
                    self.err(&c.span(), format!("in `cooldown`: {m}"));
                    None
                }
            })
    }

    /// `hysteresis`: 1 to 1000000 evaluations, more than 1 for periodic
    /// policies only.
    fn hysteresis(&mut self, raw: &RawPolicy, phase: Phase) -> u32 {
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
        hysteresis
    }

    /// `max_writes`: at least 1.
    fn max_writes(&mut self, raw: &RawPolicy) -> Option<u32> {
        raw.max_writes.as_ref().and_then(|m| match u32::try_from(*m.get_ref()) {
            Ok(n) if n >= 1 => Some(n),
            _ => {
                self.err(
                    &m.span(),
                    "`max_writes` must be a whole number of at least 1 (to never write, use dry_run = true)",
                );
                None
            }
        })
    }

    /// `when`, compiled, and whether it reads variables.
    fn condition(&mut self, raw: &RawPolicy, index: usize) -> (Option<Program>, bool) {
        let mut when_reads = false;
        let when = raw.when.as_ref().and_then(|w| {
            self.expression(w, index, "`when`").map(|(p, reads)| {
                when_reads = reads;
                p
            })
        });
        (when, when_reads)
    }

    /// The slots of the variables policy `index` names, in slot order.
    fn slots_of(&self, index: usize) -> Vec<VarSlot> {
        let mut slots: Vec<VarSlot> = self
            .vars
            .iter()
            .enumerate()
            .filter(|(_, v)| v.used_by.iter().any(|(p, _)| *p == index))
            .map(|(i, _)| VarSlot(i as u32))
            .collect();
        slots.sort();
        slots
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
}
