//! Sampling as a service: the PVAR session opened after `MPI_Init`, the
//! communicators' and windows' handles kept with the object table, and
//! every tick's [`Snapshot`](crate::sample::Snapshot) with its `sample`
//! record. Without a session the tuner has nothing to run on, so a rank
//! that cannot open one votes against starting the tuner on any rank.

use super::{Open, Peers, Service, Tick};
use crate::run::log::LogWriter;
use crate::run::warning;
use crate::sample::{Sampler, Snapshot};
use std::borrow::Cow;
use std::sync::Arc;
use vocab::record::{self, Record};

/// The sampler of one rank, once opened.
#[derive(Debug, Default)]
pub struct Sampling {
    sampler: Option<Sampler>,
    /// Samples taken.
    seq: u64,
    /// This tick's snapshot, kept to be refilled two ticks on.
    last: Option<Arc<Snapshot>>,
    /// The snapshot before it: the runtime has published a newer one, so
    /// only a reader that still holds it makes refilling it copy.
    spare: Option<Arc<Snapshot>>,
}

impl Service for Sampling {
    fn name(&self) -> &'static str {
        "sampling"
    }

    fn open(&mut self, open: &mut Open<'_>) -> Result<(), String> {
        let mut sampler = Sampler::new(open.mpit, open.catalogue.clone(), open.config)
            .map_err(|e| format!("cannot create a PVAR session: {e}"))?;
        open.warnings.extend(sampler.take_warnings());
        self.sampler = Some(sampler);
        Ok(())
    }

    fn header(&self, header: &mut record::Header) {
        if let Some(s) = &self.sampler {
            header.variables = s.sampled_variables();
        }
    }

    fn tick(&mut self, tick: &mut Tick<'_>, _peers: &mut Peers<'_>) {
        let Some(sampler) = &mut self.sampler else {
            return;
        };
        let t = tick.t;
        for event in sampler.track_objects(tick.objects) {
            tick.log.record(&Record::Object(record::ObjectEvent {
                t,
                event: event.event,
                object: event.object,
                handles: event.handles,
            }));
        }
        sampler.sample(tick.objects, t);
        sampler.sample_tool_metrics(t);
        self.seq += 1;
        // Refilled in place, unless a reader still holds it (then a copy).
        let mut snapshot = self.spare.take().unwrap_or_default();
        sampler.snapshot_into(Arc::make_mut(&mut snapshot), t, self.seq);
        tick.log.record(&Record::Sample(record::Sample {
            t,
            seq: self.seq,
            vars: Cow::Owned(snapshot.vars().map(|v| v.record()).collect()),
        }));
        for w in sampler.take_warnings() {
            tick.log.record(&warning(t, &w));
        }
        self.spare = self.last.replace(Arc::clone(&snapshot));
        tick.snapshot = snapshot;
    }

    fn catalogue_grew(&mut self, tick: &mut Tick<'_>, added: usize) {
        let Some(sampler) = &mut self.sampler else {
            return;
        };
        sampler.adopt(tick.catalogue, tick.config);
        tick.log.record(&Record::Catalogue(record::CatalogueGrowth {
            t: tick.t,
            new_pvars: added,
            variables: sampler.sampled_variables(),
        }));
        for w in sampler.take_warnings() {
            tick.log.record(&warning(tick.t, &w));
        }
    }

    fn close(&mut self, _log: &mut LogWriter, _t: f64) -> Vec<String> {
        self.sampler.take().map(Sampler::close).unwrap_or_default()
    }
}
