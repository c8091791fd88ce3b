//! The services the runtime hosts: what a rank's tuner does, each behind
//! one trait, [`Service`].
//!
//! The runtime ([`crate::runtime`]) knows the moments of a rank's life
//! (before MPI_T starts, before `MPI_Init`, right after it, every tick of
//! the helper thread, inside `MPI_Finalize`) and what every service shares
//! there (MPI_T, the catalogue, the log, the tool's collectives, the latest
//! snapshot); it names no service. [`all`] lists them, in the order they
//! run at each moment:
//!
//! | service | module | what it does |
//! |---|---|---|
//! | sampling | [`sampling`] | reads the PVARs into the snapshot every tick |
//! | policies | [`policies`] | runs the policy file's rules on the snapshot |
//! | steering | [`steering`] | answers `mpit-tuner set`, `pause`, `resume`, `reload` |
//! | collective tuning | [`collectives`] | starts online collective tuning, logs its events |
//!
//! Adding a service is adding a module here and one line to [`all`] (and
//! its [`COUNT`]).
//!
//! A service that cannot start is off, with one record saying why; the
//! others go on. Only a service's [`Service::open`] can stop the tuner on
//! every rank (sampling does: without a PVAR session there is nothing to
//! run); what a service agrees across ranks it agrees in
//! [`Service::start`], on the tool's collectives, and a failure there
//! turns off that service alone.

pub mod collectives;
pub mod policies;
pub mod sampling;
pub mod steering;

use crate::run::log::LogWriter;
use crate::run::{Config, LaunchEnv, RunInfo};
use crate::sample::{ObjectTable, Snapshot};
use mpit::collective::{Collectives, Mixed};
use mpit::{Catalogue, MpiT};
use std::path::Path;
use std::sync::Arc;
use vocab::record;
use vocab::steering::Action;
use vocab::summary::SummaryFile;

/// One part of a rank's tuner, driven by the runtime at the moments of the
/// rank's life. Every method has a default that does nothing.
pub trait Service: Send {
    /// The service's name in messages.
    fn name(&self) -> &'static str;

    /// Before `MPI_T_init_thread` (environment variables: Open MPI reads
    /// its `OMPI_MCA_*` variables when MPI_T initialises, not later).
    fn before_mpit(&mut self, _launch: &LaunchEnv) {}

    /// Before `PMPI_Init` (settings read during init). `rank`/`size` come
    /// from the launcher's environment when it sets them.
    fn pre_init(&mut self, _mpit: &MpiT, _catalogue: &Catalogue, _launch: &LaunchEnv) {}

    /// What identifies this service's collective behaviour at start (a
    /// hash of what it runs; 0 for nothing). The runtime checks it is the
    /// same on every rank, in the start agreement, before any service
    /// starts: where it differs, the service is off on every rank, with
    /// [`Service::differs`] as the reason.
    fn identity(&self) -> u64 {
        0
    }

    /// Turns the service off on this rank because its
    /// [`Service::identity`] differs across ranks (it is off on all ranks),
    /// and says so for the log and rank 0's terminal. Only services with an
    /// identity get here.
    fn differs(&mut self) -> String {
        format!(
            "{} is set up differently across ranks: it is off on all ranks",
            self.name()
        )
    }

    /// Right after `PMPI_Init`, before the tuner is known to run on every
    /// rank: what the service cannot go without. An error is this rank's
    /// vote against starting the tuner on any rank (say it only when
    /// nothing else can run without this service). Messages for the log
    /// header's warnings go to `open.warnings`.
    fn open(&mut self, _open: &mut Open<'_>) -> Result<(), String> {
        Ok(())
    }

    /// What the service adds to the start agreement, once every service
    /// opened: elements reduced over every rank in the agreement's own
    /// call (one collective for the job's start, whatever the number of
    /// services). The same call checks the services' identities, so their
    /// number cannot follow from them: at most the service's entry in
    /// [`AGREEMENT_LENS`], a constant (the runtime pads the rest with
    /// [`Mixed::min`]`(i64::MAX)`), and their operations fixed by their
    /// place. [`Start::agreed`] gives them back reduced (the padded
    /// length).
    fn agreement(&self) -> Vec<Mixed> {
        Vec::new()
    }

    /// What the service adds to this rank's log header.
    fn header(&self, _header: &mut record::Header) {}

    /// Once every rank opened every service: the service's own start,
    /// with the tool's collectives in `start.seq` (every rank calls this
    /// at the same point, and must make the same calls whatever fails).
    fn start(&mut self, _start: &mut Start<'_>) {}

    /// Every tick of the helper thread, in the order of [`all`]; `peers`
    /// are the other services, for a request meant for one of them.
    fn tick(&mut self, _tick: &mut Tick<'_>, _peers: &mut Peers<'_>) {}

    /// The library's catalogue grew by `added` PVARs (a refresh on the
    /// helper thread); `tick.catalogue` is the new one.
    fn catalogue_grew(&mut self, _tick: &mut Tick<'_>, _added: usize) {}

    /// A steering request another service received: `Some` with what was
    /// done (or why not) when this service is the one it is for.
    fn steer(&mut self, _action: &Action, _tick: &mut Tick<'_>) -> Option<Result<String, String>> {
        None
    }

    /// What must run first inside `MPI_Finalize`, on the application's
    /// thread, even when the helper thread holding the service did not
    /// stop in time (taken once, at start). Returns notes for the log.
    fn stopper(&self) -> Option<fn() -> Vec<String>> {
        None
    }

    /// At finalize, after the last tick; `tick.snapshot` is the last one.
    fn finalize(&mut self, _tick: &mut Tick<'_>) {}

    /// Lines for the end-of-run report, each with its kind
    /// (`"disabled"`, `"recommendation"`): rank 0's are written to
    /// summary.json, and its recommendations printed.
    fn report(&mut self) -> Vec<(&'static str, String)> {
        Vec::new()
    }

    /// Per-rank numbers for the cross-rank summary (such as
    /// `policy.<name>.writes`).
    fn quantities(&self) -> Vec<(String, &'static str, f64)> {
        Vec::new()
    }

    /// The last records of the log, once the communicators' and windows'
    /// handles are gone: what the service releases. Returns notes (what
    /// the library refused) for the log's end.
    fn close(&mut self, _log: &mut LogWriter, _t: f64) -> Vec<String> {
        Vec::new()
    }

    /// What the service adds to rank 0's summary.json.
    fn summary(&self, _doc: &mut SummaryFile) {}
}

/// What [`Service::open`] gets.
pub struct Open<'a> {
    /// This rank's MPI_T.
    pub mpit: &'a MpiT,
    /// The catalogue as `MPI_Init` left it.
    pub catalogue: &'a Catalogue,
    /// The configuration.
    pub config: &'a Config,
    /// This rank.
    pub rank: i32,
    /// Facts about this rank and run.
    pub info: &'a RunInfo,
    /// Messages for the log (and rank 0's terminal when they are the
    /// configuration's); the service's own go here.
    pub warnings: &'a mut Vec<String>,
}

/// What [`Service::start`] gets.
pub struct Start<'a> {
    /// This rank's MPI_T.
    pub mpit: &'a MpiT,
    /// The catalogue as `MPI_Init` left it.
    pub catalogue: &'a Catalogue,
    /// The configuration.
    pub config: &'a Config,
    /// Facts about this rank and run.
    pub info: &'a RunInfo,
    /// The run directory, when the tuner has one.
    pub dir: Option<&'a Path>,
    /// This rank's log (its header is written).
    pub log: &'a mut LogWriter,
    /// The tool's collectives (on `MPI_COMM_WORLD`, inside `MPI_Init`).
    pub seq: &'a mut Collectives,
    /// This service's [`Service::agreement`], reduced over every rank.
    pub agreed: &'a [Mixed],
}

/// What the services share on a tick of the helper thread (and at
/// finalize).
pub struct Tick<'a> {
    /// Seconds since the tuner started.
    pub t: f64,
    /// The helper thread's MPI_T.
    pub mpit: &'a MpiT,
    /// The library's variables (grown by refreshes).
    pub catalogue: &'a Catalogue,
    /// The configuration.
    pub config: &'a Config,
    /// The live communicators and windows.
    pub objects: &'a ObjectTable,
    /// The latest snapshot: sampling puts this tick's here, the services
    /// after it read it, and the runtime publishes it.
    pub snapshot: Arc<Snapshot>,
    /// This rank's log.
    pub log: &'a mut LogWriter,
}

/// The services other than the one a method runs on.
pub struct Peers<'s> {
    before: &'s mut [Box<dyn Service>],
    after: &'s mut [Box<dyn Service>],
}

impl Peers<'_> {
    /// Hands a steering request to the service it is for: `None` when no
    /// service takes it.
    pub fn steer(
        &mut self,
        action: &Action,
        tick: &mut Tick<'_>,
    ) -> Option<Result<String, String>> {
        self.before
            .iter_mut()
            .chain(self.after.iter_mut())
            .find_map(|s| s.steer(action, tick))
    }
}

/// Calls `f` on each service in order, with the others as its peers.
pub fn each_with_peers(
    services: &mut [Box<dyn Service>],
    mut f: impl FnMut(&mut dyn Service, &mut Peers<'_>),
) {
    for i in 0..services.len() {
        let (before, rest) = services.split_at_mut(i);
        if let Some((this, after)) = rest.split_first_mut() {
            f(this.as_mut(), &mut Peers { before, after });
        }
    }
}

/// Every service of a rank, in the order they run, for `config`; and the
/// messages for rank 0 about what could not be set up (a policy file that
/// does not parse).
pub fn all(config: &Config) -> (Vec<Box<dyn Service>>, Vec<String>) {
    let mut problems = Vec::new();
    let policies = policies::Policies::new(config, &mut problems);
    let spec = policies.collective_spec();
    let services: [Box<dyn Service>; COUNT] = [
        Box::new(sampling::Sampling::default()),
        Box::new(policies),
        Box::new(steering::Steering::default()),
        Box::new(collectives::CollectiveTuning::new(config, spec)),
    ];
    (Vec::from(services), problems)
}

/// How many services [`all`] lists: the same on every rank, whatever the
/// configuration (the start agreement reduces one identity per service).
pub const COUNT: usize = 4;

/// Per service of [`all`], in order, the length of its part of the start
/// agreement ([`Service::agreement`], padded): the same on every rank,
/// whatever the configuration.
pub const AGREEMENT_LENS: [usize; COUNT] = [
    0,
    crate::decide::POLICY_AGREEMENT_LEN,
    0,
    collectives::AGREEMENT_LEN,
];

/// The services' parts of the start agreement, each padded to its
/// [`AGREEMENT_LENS`] (a rank without services, or a service that says
/// more, still sends that many: a longer part is cut, which cannot happen
/// for the services of [`all`]).
pub fn agreement(services: &[Box<dyn Service>]) -> Vec<Mixed> {
    let mut out = Vec::with_capacity(AGREEMENT_LENS.iter().sum());
    for (i, len) in AGREEMENT_LENS.iter().enumerate() {
        let part = services.get(i).map(|s| s.agreement()).unwrap_or_default();
        out.extend(part.into_iter().take(*len));
        out.resize(
            out.len().max(AGREEMENT_LENS[..=i].iter().sum()),
            Mixed::min(i64::MAX),
        );
    }
    out
}

/// Splits the reduced [`agreement`] into the services' parts (empty parts
/// when `agreed` is short: a failed call).
pub fn agreed_parts(agreed: &[Mixed]) -> [&[Mixed]; COUNT] {
    let mut at = 0;
    AGREEMENT_LENS.map(|len| {
        let part = agreed.get(at..at + len).unwrap_or_default();
        at += len;
        part
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The start agreement is one `MPI_MIN`: the services' parts are
    /// minimums, of the same length whatever the configuration.
    #[test]
    fn the_services_agreement_is_minimums_of_a_fixed_length() {
        let total: usize = AGREEMENT_LENS.iter().sum();
        let none = agreement(&[]);
        assert_eq!(none.len(), total);
        let (services, _) = all(&Config::default());
        let default = agreement(&services);
        for part in [&none, &default] {
            assert_eq!(part.len(), total);
            assert!(part.iter().all(|m| m.op == Mixed::MIN));
        }
        let parts = agreed_parts(&default);
        for (p, len) in parts.iter().zip(AGREEMENT_LENS) {
            assert_eq!(p.len(), len);
        }
        assert!(agreed_parts(&[]).iter().all(|p| p.is_empty()));
    }
}
