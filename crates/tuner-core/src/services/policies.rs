//! The policies as a service: the policy file's rules run at each phase
//! ([`PolicyHooks`]), and the steering requests meant for them
//! (`mpit-tuner pause`, `resume`, `reload`). Without a file (`none`, or
//! one that did not parse) the service monitors only, and a `reload` can
//! still start policies.

use super::{Open, Peers, Service, Start, Tick};
use crate::decide::PolicyHooks;
use crate::run::{Config, LaunchEnv};
use mpit::collective::Mixed;
use mpit::{Catalogue, MpiT};
use policies::{CollectiveSpec, PolicySet};
use vocab::steering::Action;

/// The answer to a request for policies in a job that runs none.
const NO_POLICIES: &str =
    "no policies run in this job (monitor mode); `mpit-tuner reload` starts some";

/// The policies of one rank, if it runs any.
pub struct Policies {
    hooks: Option<PolicyHooks>,
    rank: u32,
    size: u32,
}

impl Policies {
    /// The policies the configuration names (`None` = the embedded
    /// default, `none` = monitor only). A file that does not parse is
    /// reported in `problems` (with `file:line:column`, for rank 0 to
    /// print) and the service monitors only.
    pub fn new(config: &Config, problems: &mut Vec<String>) -> Policies {
        let (hooks, problem) = PolicyHooks::from_config(config);
        problems.extend(problem);
        Policies {
            hooks,
            rank: 0,
            size: 1,
        }
    }

    /// The policy file's `[collectives]` table, if it has one.
    pub fn collective_spec(&self) -> Option<CollectiveSpec> {
        self.hooks.as_ref().and_then(PolicyHooks::collective_spec)
    }
}

impl Service for Policies {
    fn name(&self) -> &'static str {
        "policies"
    }

    fn before_mpit(&mut self, launch: &LaunchEnv) {
        if let Some(h) = &mut self.hooks {
            h.before_mpit(launch);
        }
    }

    fn pre_init(&mut self, mpit: &MpiT, catalogue: &Catalogue, launch: &LaunchEnv) {
        if let Some(h) = &mut self.hooks {
            h.pre_init(mpit, catalogue, launch);
        }
    }

    fn identity(&self) -> u64 {
        self.hooks.as_ref().map_or(0, PolicyHooks::identity)
    }

    fn differs(&mut self) -> String {
        self.hooks = None;
        "the policy files differ across ranks (MPIT_TUNER_POLICY, or a file that did not parse \
         everywhere): policies are off on all ranks, monitoring goes on"
            .into()
    }

    fn open(&mut self, open: &mut Open<'_>) -> Result<(), String> {
        self.rank = open.rank.max(0) as u32;
        if let Some(h) = &mut self.hooks {
            h.bind(open.mpit, open.catalogue, open.rank == 0);
        }
        Ok(())
    }

    /// Which policies this rank disabled, for rank 0's one message a policy.
    fn agreement(&self) -> Vec<Mixed> {
        self.hooks
            .as_ref()
            .map_or_else(Vec::new, |h| h.disabled_votes(self.rank as i32))
    }

    fn start(&mut self, start: &mut Start<'_>) {
        self.rank = start.info.rank.max(0) as u32;
        self.size = start.info.size.max(1) as u32;
        if let Some(h) = &mut self.hooks {
            h.init(
                start.mpit,
                start.catalogue,
                start.info,
                start.log,
                start.agreed,
            );
        }
    }

    fn tick(&mut self, tick: &mut Tick<'_>, _peers: &mut Peers<'_>) {
        if let Some(h) = &mut self.hooks {
            h.tick(tick.mpit, tick.catalogue, &tick.snapshot, tick.log);
        }
    }

    fn steer(&mut self, action: &Action, tick: &mut Tick<'_>) -> Option<Result<String, String>> {
        let answer = match (action, &mut self.hooks) {
            (Action::Pause { policy }, Some(h)) => h.pause(policy.as_deref(), true),
            (Action::Resume { policy }, Some(h)) => h.pause(policy.as_deref(), false),
            (Action::Pause { .. } | Action::Resume { .. }, None) => Err(NO_POLICIES.into()),
            (Action::Reload { file, source }, hooks) => {
                let set = match PolicySet::parse(source, file) {
                    Ok(set) => set,
                    Err(e) => {
                        return Some(Err(format!(
                            "{file} not loaded, the running policies are unchanged:\n{e:#}"
                        )))
                    }
                };
                match hooks {
                    Some(h) => h.reload(set, tick.mpit, tick.catalogue, tick.log, tick.t),
                    None => PolicyHooks::reloaded(
                        set,
                        self.rank,
                        self.size,
                        tick.mpit,
                        tick.catalogue,
                        tick.log,
                        tick.t,
                    )
                    .map(|(h, said)| {
                        self.hooks = Some(h);
                        said
                    }),
                }
            }
            _ => return None,
        };
        Some(answer)
    }

    fn finalize(&mut self, tick: &mut Tick<'_>) {
        if let Some(h) = &mut self.hooks {
            h.finalize(tick.mpit, tick.catalogue, &tick.snapshot, tick.log);
        }
    }

    fn report(&mut self) -> Vec<(&'static str, String)> {
        self.hooks
            .as_mut()
            .map(PolicyHooks::report)
            .unwrap_or_default()
    }

    fn quantities(&self) -> Vec<(String, &'static str, f64)> {
        self.hooks
            .as_ref()
            .map(PolicyHooks::quantities)
            .unwrap_or_default()
    }
}
