//! Online collective tuning as a service: started after `MPI_Init` when it
//! is asked for (`setup.rs`: the library's collectives and candidates,
//! the variables proved writable, every rank agreeing on the same tuner), its events logged on each
//! tick, the library's defaults written back first thing inside
//! `MPI_Finalize`, and its outcomes in summary.json. The tuning itself runs
//! on the application's calls ([`crate::collectives`]), not here.

mod setup;

pub(crate) use setup::AGREEMENT_LEN;

use super::{Open, Peers, Service, Start, Tick};
use crate::run::log::LogWriter;
use crate::run::Config;
use policies::CollectiveSpec;
use vocab::record::CollectiveMode;
use vocab::summary::SummaryFile;

/// Collective tuning of one rank: whether it is asked for, and the policy
/// file's `[collectives]` table.
pub struct CollectiveTuning {
    /// The mode asked for; `None`: off.
    wanted: Option<CollectiveMode>,
    spec: Option<CollectiveSpec>,
    /// What `open` found and tried, for the start agreement and `start`.
    pending: Option<setup::Pending>,
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
/// off if the environment says `off`, else the policy file's (`mode`, or
/// `all` for `tune = true` alone, as before modes existed).
pub(crate) fn mode(config: &Config, spec: Option<&CollectiveSpec>) -> Option<CollectiveMode> {
    if let Some(c) = &config.collectives {
        return Some(c.mode);
    }
    if config.collectives_off {
        return None;
    }
    spec?.mode_asked()
}

impl Service for CollectiveTuning {
    fn name(&self) -> &'static str {
        "collective tuning"
    }

    /// Whether tuning is wanted (it makes collectives of its own at
    /// start), and in which mode: 0 off, 1 `all`, 2 `safe`.
    fn identity(&self) -> u64 {
        match self.wanted {
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
        if let Some(mode) = self.wanted {
            self.pending = Some(setup::open(
                mode,
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
            setup::start(pending, start.agreed, start.log, start.seq);
        }
    }

    fn tick(&mut self, tick: &mut Tick<'_>, _peers: &mut Peers<'_>) {
        Self::log_events(tick.log);
    }

    fn stopper(&self) -> Option<fn() -> Vec<String>> {
        Some(crate::collectives::stop)
    }

    fn close(&mut self, log: &mut LogWriter, _t: f64) -> Vec<String> {
        Self::log_events(log);
        Vec::new()
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
    /// (`mode`, or `all` for `tune = true` alone).
    #[test]
    fn the_mode_asked_for() {
        let env = |v: Option<&str>| {
            let v = v.map(str::to_string);
            Config::from_lookup(|k| (k == "MPIT_TUNER_COLLECTIVES").then(|| v.clone()).flatten()).0
        };
        let spec = |tune: bool, mode: Option<CollectiveMode>| CollectiveSpec {
            tune,
            mode,
            ..CollectiveSpec::default()
        };
        let safe = Some(CollectiveMode::Safe);
        let all = Some(CollectiveMode::All);
        assert_eq!(mode(&env(None), None), None);
        assert_eq!(mode(&env(Some("safe")), None), safe);
        assert_eq!(mode(&env(Some("tune")), Some(&spec(false, safe))), all);
        assert_eq!(mode(&env(Some("off")), Some(&spec(true, safe))), None);
        assert_eq!(mode(&env(None), Some(&spec(true, None))), all);
        assert_eq!(mode(&env(None), Some(&spec(false, safe))), safe);
        assert_eq!(mode(&env(None), Some(&spec(true, safe))), safe);
        assert_eq!(mode(&env(None), Some(&spec(false, None))), None);
    }
}
