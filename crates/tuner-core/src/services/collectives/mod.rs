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
use vocab::summary::SummaryFile;

/// Collective tuning of one rank: whether it is asked for, and the policy
/// file's `[collectives]` table.
pub struct CollectiveTuning {
    wanted: bool,
    spec: Option<CollectiveSpec>,
    /// What `open` found and tried, for the start agreement and `start`.
    pending: Option<setup::Pending>,
}

impl CollectiveTuning {
    /// Tuning as `config` and the policy file's table ask for it:
    /// `MPIT_TUNER_COLLECTIVES`, or the file's `tune = true` unless the
    /// environment says `off`.
    pub fn new(config: &Config, spec: Option<CollectiveSpec>) -> CollectiveTuning {
        let wanted = config.collectives.is_some()
            || (!config.collectives_off && spec.as_ref().is_some_and(|s| s.tune));
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

impl Service for CollectiveTuning {
    fn name(&self) -> &'static str {
        "collective tuning"
    }

    /// Whether tuning is wanted: it makes collectives of its own at start.
    fn identity(&self) -> u64 {
        u64::from(self.wanted)
    }

    fn differs(&mut self) -> String {
        self.wanted = false;
        let held = self.pending.take().map(|p| p.held()).unwrap_or_default();
        let mut why = String::from(
            "online collective tuning is asked for on some ranks only (MPIT_TUNER_COLLECTIVES, or \
             the policy file's [collectives] table): it is off on all ranks",
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
        if self.wanted {
            self.pending = Some(setup::open(
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
    }
}
