//! Online collective tuning as a service: started after `MPI_Init` when it
//! is asked for (`setup.rs`: the library's collectives and candidates,
//! the variables proved writable, every rank agreeing on the same tuner), its events logged on each
//! tick, the library's defaults written back first thing inside
//! `MPI_Finalize`, and its outcomes in summary.json. The tuning itself runs
//! on the application's calls ([`crate::collectives`]), not here.

mod setup;
mod store;

pub(crate) use setup::AGREEMENT_LEN;

use super::{Open, Peers, Service, Start, Tick};
use crate::run::log::LogWriter;
use crate::run::{Config, LaunchEnv};
use policies::CollectiveSpec;
use vocab::record::CollectiveMode;
use vocab::summary::SummaryFile;

/// Open MPI's `coll_tuned_use_dynamic_rules` in the environment.
pub const OPENMPI_DYNAMIC_RULES_ENV: &str = "OMPI_MCA_coll_tuned_use_dynamic_rules";

/// Collective tuning of one rank: whether it is asked for, and the policy
/// file's `[collectives]` table.
pub struct CollectiveTuning {
    /// The mode wanted; `None`: off.
    wanted: Option<Wanted>,
    spec: Option<CollectiveSpec>,
    /// What `open` found and tried, for the start agreement and `start`.
    pending: Option<setup::Pending>,
    /// What this rank found in the tuning store, once tuning started.
    stored: Option<store::Stored>,
    /// The run directory (for the store's entries).
    run_dir: Option<String>,
}

impl CollectiveTuning {
    /// Tuning as `config` and the policy file's table ask for it:
    /// `MPIT_TUNER_COLLECTIVES`, or the file's `tune = true` unless the
    /// environment says `off`.
    pub fn new(config: &Config, spec: Option<CollectiveSpec>) -> CollectiveTuning {
        let wanted = mode(config, spec.as_ref());
        CollectiveTuning {
            wanted,
            spec,
            pending: None,
            stored: None,
            run_dir: None,
        }
    }

    fn log_events(log: &mut LogWriter) {
        for event in crate::collectives::events() {
            log.record(&crate::collectives::record(&event));
        }
    }
}

/// The mode collective tuning runs in, `None` for off: the environment's
/// (`MPIT_TUNER_COLLECTIVES`: a mode, `tune` or a list for `all`), else
/// off if the environment says `off`, else the policy file's (`mode`, `all`
/// for `tune = true` alone as before modes existed, off for `tune =
/// false`), else the default, `safe`.
pub(crate) fn mode(config: &Config, spec: Option<&CollectiveSpec>) -> Option<Wanted> {
    let asked = |mode| Wanted { mode, asked: true };
    if let Some(c) = &config.collectives {
        return Some(asked(c.mode));
    }
    if config.collectives_off {
        return None;
    }
    match spec.and_then(CollectiveSpec::mode_asked) {
        Some(from_file) => from_file.map(asked),
        None => Some(Wanted {
            mode: CollectiveMode::Safe,
            asked: false,
        }),
    }
}

/// The mode tuning runs in, and whether someone asked for it (the
/// environment or the policy file) or it is the default. Asked for, it
/// says on rank 0's terminal that it started or why not; by default only
/// the logs do (and `MPIT_TUNER_VERBOSE`), and it leaves alone a
/// collective whose algorithm was set before the job started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Wanted {
    pub(crate) mode: CollectiveMode,
    pub(crate) asked: bool,
}

impl Service for CollectiveTuning {
    fn name(&self) -> &'static str {
        "collective tuning"
    }

    /// Open MPI 4.1 lets a forced algorithm through only with its dynamic
    /// rules on, a setting it reads at start: on, without a rules file or
    /// a forced algorithm, it takes the same decisions as off. Set unless
    /// the environment says (`mpirun --mca` passes it there); other
    /// libraries ignore it.
    fn before_mpit(&mut self, _launch: &LaunchEnv) {
        if self.wanted.is_some() && std::env::var_os(OPENMPI_DYNAMIC_RULES_ENV).is_none() {
            if let Err(e) = crate::decide::set_environment(OPENMPI_DYNAMIC_RULES_ENV, "1", false) {
                // Not reached: the name and value are valid.
                mpit::say_always!("mpit-tuner: {e}");
            }
        }
    }

    /// Whether tuning is wanted (it makes collectives of its own at
    /// start), and in which mode: 0 off, 1 `all`, 2 `safe`.
    fn identity(&self) -> u64 {
        match self.wanted.map(|w| w.mode) {
            None => 0,
            Some(CollectiveMode::All) => 1,
            Some(CollectiveMode::Safe) => 2,
        }
    }

    fn differs(&mut self) -> String {
        self.wanted = None;
        let held = self.pending.take().map(|p| p.held()).unwrap_or_default();
        let mut why = String::from(
            "online collective tuning is asked for on some ranks only, or in different modes \
             (MPIT_TUNER_COLLECTIVES, or the policy file's [collectives] table): it is off on all \
             ranks",
        );
        if !held.is_empty() {
            why.push_str(&format!(
                "; this rank could not write back the default of what it tried and keeps {}",
                held.join(", ")
            ));
        }
        why
    }

    /// Finds what can be tuned and tries the candidates this rank can
    /// try before the start agreement (every collective's but allreduce's).
    fn open(&mut self, open: &mut Open<'_>) -> Result<(), String> {
        if let Some(wanted) = self.wanted {
            self.pending = Some(setup::open(
                wanted,
                open.config,
                self.spec.take(),
                open.catalogue,
                open.info,
            ));
        }
        Ok(())
    }

    /// What this rank refused of what it tried, for every rank to drop
    /// ([`AGREEMENT_LEN`] elements, or none when tuning is not wanted).
    fn agreement(&self) -> Vec<mpit::collective::Mixed> {
        self.pending
            .as_ref()
            .map(setup::Pending::agreement)
            .unwrap_or_default()
    }

    fn start(&mut self, start: &mut Start<'_>) {
        if let Some(pending) = self.pending.take() {
            self.stored = setup::start(pending, start.agreed, start.log, start.seq);
            self.run_dir = start.dir.map(|d| d.display().to_string());
        }
    }

    fn tick(&mut self, tick: &mut Tick<'_>, _peers: &mut Peers<'_>) {
        Self::log_events(tick.log);
    }

    fn stopper(&self) -> Option<fn() -> Vec<String>> {
        Some(crate::collectives::stop)
    }

    /// The last events; then, on rank 0, what the searches kept goes into
    /// the tuning store.
    fn close(&mut self, log: &mut LogWriter, _t: f64) -> Vec<String> {
        Self::log_events(log);
        let said = self
            .stored
            .take()
            .map(|s| s.write(self.run_dir.take()))
            .unwrap_or_default();
        said.into_iter()
            .map(|(line, loud)| {
                if loud {
                    mpit::say!("mpit-tuner: {line}");
                }
                line
            })
            .collect()
    }

    fn summary(&self, doc: &mut SummaryFile) {
        doc.collectives = crate::collectives::logged();
        doc.collective_mode = crate::collectives::started().map(|t| t.mode_name().to_string());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The environment wins; then its `off`; then the policy file's table
    /// (`mode`, `all` for `tune = true` alone, off for `tune = false`);
    /// then the default, `safe`, not asked for.
    #[test]
    fn the_mode_asked_for() {
        let env = |v: Option<&str>| {
            let v = v.map(str::to_string);
            Config::from_lookup(|k| (k == "MPIT_TUNER_COLLECTIVES").then(|| v.clone()).flatten()).0
        };
        let spec = |tune: Option<bool>, mode: Option<CollectiveMode>| CollectiveSpec {
            tune,
            mode,
            ..CollectiveSpec::default()
        };
        let on = |mode| Some(Wanted { mode, asked: true });
        let (safe, all) = (CollectiveMode::Safe, CollectiveMode::All);
        let default = Some(Wanted {
            mode: safe,
            asked: false,
        });
        assert_eq!(mode(&env(None), None), default);
        assert_eq!(mode(&env(None), Some(&spec(None, None))), default);
        assert_eq!(mode(&env(Some("off")), None), None);
        assert_eq!(mode(&env(Some("safe")), None), on(safe));
        assert_eq!(
            mode(&env(Some("tune")), Some(&spec(Some(false), Some(safe)))),
            on(all)
        );
        assert_eq!(
            mode(&env(Some("off")), Some(&spec(Some(true), Some(safe)))),
            None
        );
        assert_eq!(mode(&env(None), Some(&spec(Some(true), None))), on(all));
        assert_eq!(mode(&env(None), Some(&spec(None, Some(safe)))), on(safe));
        assert_eq!(mode(&env(None), Some(&spec(None, Some(all)))), on(all));
        assert_eq!(
            mode(&env(None), Some(&spec(Some(true), Some(safe)))),
            on(safe)
        );
        assert_eq!(mode(&env(None), Some(&spec(Some(false), None))), None);
        assert_eq!(mode(&env(None), Some(&spec(Some(false), Some(all)))), None);
    }
}
