//! Finalizing: inside `MPI_Finalize`, the helper stops, the ranks reduce
//! their quantities into one cross-rank [`Summary`] (`summary.rs`), rank 0
//! derives [`recommend`]ations (one function per rule) and writes
//! `summary.json`; every rank closes its log.

pub mod recommend;
mod summary;

pub use summary::{
    local_quantities, reduce, signature, table, Signature, Summary, VariableStats, HISTOGRAM_BINS,
};

use crate::run::warning;
use crate::runtime::{HelperDone, Runtime};
use crate::sample::Snapshot;
use crate::services::{Service, Tick};
use mpit::collective::{Collectives, ErrorsReturn, Verdict};
use mpit::{Catalogue, MpiT, Object};
use std::sync::atomic::Ordering::SeqCst;
use std::sync::Arc;
use std::time::Duration;
use vocab::record::{self, Record};

impl Runtime {
    /// Stops the tuner inside `MPI_Finalize`, before `PMPI_Finalize`:
    /// collective over `MPI_COMM_WORLD`. Returns the `MpiT` guard,
    /// which the caller drops after `PMPI_Finalize` (it calls
    /// `MPI_T_finalize` only where that is safe for this library).
    pub fn finalize(mut self) -> MpiT {
        let (mut done, wait) = self.stop_helper();
        // Back to the library's defaults before anything else of the
        // finalization runs collectives.
        let mut stop_notes = Vec::new();
        for stop in &self.stoppers {
            stop_notes.extend(stop());
        }
        let snapshot = match &done {
            Some(d) => Arc::clone(&d.last),
            None => self.shared.snapshot(),
        };
        let mut report = Vec::new();
        if let Some(d) = &mut done {
            let mut tick = Tick {
                t: snapshot.t,
                mpit: &self.mpit,
                catalogue: &d.catalogue,
                config: &self.config,
                objects: &self.shared.objects,
                snapshot: Arc::clone(&snapshot),
                log: &mut d.log,
            };
            for s in &mut d.services {
                s.finalize(&mut tick);
            }
            for s in &mut d.services {
                report.extend(s.report());
            }
            // Handles die before their objects and before MPI does.
            self.shared.objects.retire_all();
        }
        let snapshot = (*snapshot).clone();
        let mut quantities = local_quantities(&snapshot);
        if let Some(d) = &done {
            quantities.extend(d.services.iter().flat_map(|s| s.quantities()));
        }
        let signature = signature(&snapshot);
        // The summary's collectives; rank 0 decides from every rank's vote
        // whether it writes summary.json.
        let rank = self.info.rank;
        // On MPI_COMM_WORLD, with MPI_ERRORS_RETURN swapped in: inside
        // MPI_Finalize the application has no operation pending there.
        let mut seq = Collectives::resume(self.world, rank, self.failure.take())
            .with_mixed(self.mixed.take());
        let (guard, swap_error) = ErrorsReturn::swap_in(self.world);
        if let Some(e) = swap_error {
            seq.fail("MPI_Comm_set_errhandler", &e);
        }
        let (stats, verdict) = reduce(
            &mut seq,
            0,
            usize::try_from(self.info.size).unwrap_or(1),
            &quantities,
            &signature,
            &self.info.host,
        );
        let (stats, differing) = match stats {
            Some((summary, differing)) => (Some(summary), differing),
            None => (None, 0),
        };
        let catalogue = done.as_ref().map(|d| d.catalogue.clone());
        let mut notes = Vec::new();
        if rank == 0 && quantities.len() > summary::MAX_QUANTITIES {
            notes.push(format!(
                "{} of this run's {} quantities are left out of summary.json (at most {})",
                quantities.len() - summary::MAX_QUANTITIES,
                quantities.len(),
                summary::MAX_QUANTITIES
            ));
        }
        if differing > 0 {
            notes.push(format!(
                "{} quantities beyond the first {} are not the same on every rank (variables or \
                 policies of some ranks only): left out of summary.json; every rank's log has its own",
                differing,
                summary::NAMED
            ));
        }
        if let Verdict::Failed(why) = &verdict {
            let message = if rank == 0 {
                format!(
                    "cross-rank summary not written: {why}; the logs of every rank are complete"
                )
            } else {
                format!(
                    "this rank's part of the cross-rank summary failed: {why}; rank 0 writes \
                     summary.json only if every rank's part reached it (its log says)"
                )
            };
            if rank == 0 {
                mpit::say!("mpit-tuner: {message}");
            }
            notes.push(message);
        }
        if let Err(e) = seq.release_mixed() {
            notes.push(format!("freeing the tool's reduction operation: {e}"));
        }
        if let Err(e) = guard.restore() {
            notes.push(format!(
                "putting the application's error handler back on MPI_COMM_WORLD: {e}"
            ));
        }
        notes.extend(counted_failures());
        notes.extend(stop_notes);
        let mut services = Vec::new();
        match done {
            Some(d) => services = self.close_log(d, &snapshot, notes),
            None => {
                mpit::say_always!(
                    "mpit-tuner[rank {rank}]: the helper thread did not stop within {wait:?}; its log may end early"
                );
                for message in &notes {
                    mpit::say_always!("mpit-tuner[rank {rank}]: {message}");
                }
            }
        }
        if let Some(summary) = stats {
            let advice = recommend::recommend(&summary, &self.advice_context(catalogue.as_ref()));
            self.write_summary(&summary, &snapshot, &report, &advice, &services)
        }
        self.mpit
    }

    /// Tells the helper to stop and waits for it (bounded: at least 10 s,
    /// two intervals for slow ones). `None` when it did not stop in time
    /// or never ran.
    fn stop_helper(&self) -> (Option<HelperDone>, Duration) {
        self.shared.stop.store(true, SeqCst);
        if let Some(helper) = &self.helper {
            helper.unpark();
        }
        let wait = Duration::from_secs(10).max(self.config.interval * 2);
        let done = match self.helper {
            Some(_) => self.done.recv_timeout(wait).ok(),
            None => None,
        };
        (done, wait)
    }

    /// The last records of this rank's log: what went wrong along the way,
    /// then the close record.
    /// Returns the services, for summary.json.
    fn close_log(
        &self,
        mut done: HelperDone,
        snapshot: &Snapshot,
        notes: Vec<String>,
    ) -> Vec<Box<dyn Service>> {
        let mut closing = Vec::new();
        for s in &mut done.services {
            closing.extend(s.close(&mut done.log, snapshot.t));
        }
        for message in notes.iter().chain(&closing) {
            done.log.record(&warning(snapshot.t, message));
        }
        let control_listings = done
            .services
            .iter()
            .flat_map(|s| s.quantities())
            .find(|(name, _, _)| name == crate::services::steering::LISTINGS)
            .map(|(_, _, n)| n as u64);
        done.log.record(&Record::Close(record::Close {
            t: snapshot.t,
            reason: record::CloseReason::Finalize,
            samples: snapshot.seq,
            objects_untracked: self.shared.objects.dropped(),
            objects_short_lived: self.shared.objects.short_lived(),
            control_listings,
        }));
        done.log.flush();
        done.services
    }

    /// What the recommendation rules know besides the summary.
    fn advice_context(&self, catalogue: Option<&Catalogue>) -> recommend::Context {
        recommend::Context {
            library: Some(self.info.version.library),
            eager_limit: eager_limit(&self.mpit, catalogue),
            has_hcoll: catalogue.is_some_and(|c| {
                c.cvars()
                    .iter()
                    .any(|v| v.name.starts_with("coll_hcoll") || v.name == "MPIR_CVAR_ENABLE_HCOLL")
            }),
        }
    }

    fn write_summary(
        &self,
        summary: &summary::Summary,
        snapshot: &Snapshot,
        report: &[(&'static str, String)],
        advice: &[recommend::Recommendation],
        services: &[Box<dyn Service>],
    ) {
        let path = self.info.dir.join("summary.json");
        let mut doc = vocab::summary::SummaryFile {
            version: record::FORMAT_VERSION,
            size: self.info.size,
            library: self.info.version.library.into(),
            library_version: self.info.library_version.clone(),
            samples_rank0: snapshot.seq,
            duration_s: snapshot.t,
            variables: summary.variables.clone(),
            classes: summary.classes.clone(),
            hosts: summary.hosts.clone(),
            size_histograms: summary.size_histograms.clone(),
            recommendations: advice.to_vec(),
            messages: report
                .iter()
                .map(|(kind, text)| vocab::summary::Message {
                    kind: kind.to_string(),
                    text: text.clone(),
                })
                .collect(),
            collectives: Vec::new(),
            collective_mode: None,
        };
        for s in services {
            s.summary(&mut doc);
        }
        let written = serde_json::to_vec_pretty(&doc)
            .map_err(std::io::Error::other)
            .and_then(|bytes| std::fs::write(&path, bytes));
        if let Err(e) = written {
            mpit::say_always!("mpit-tuner: cannot write {}: {e}", path.display());
        }
        if !mpit::quiet() {
            let mut text = format!(
                "mpit-tuner: {} ranks, {} samples over {:.1}s, {} variables; logs in {}\n",
                self.info.size,
                snapshot.seq,
                snapshot.t,
                summary.variables.len(),
                self.info.dir.display()
            );
            if !summary.variables.is_empty() {
                text.push_str(&summary::table(&summary.variables, 12));
            }
            if summary.classes.len() > 1 {
                text.push_str(&format!(
                    "mpit-tuner: {} classes of ranks:\n",
                    summary.classes.len()
                ));
                for c in &summary.classes {
                    text.push_str(&format!("  ranks {}: {}\n", c.ranks, c.signature));
                }
            }
            for (kind, line) in report {
                if *kind == "recommendation" {
                    text.push_str(&format!("mpit-tuner: {line}\n"));
                }
            }
            for r in advice {
                text.push_str(&format!(
                    "mpit-tuner: recommendation [{}]: {}\n    evidence: {}\n    set: {}\n",
                    r.id, r.advice, r.evidence, r.setting
                ));
            }
            let _ = std::io::Write::write_all(&mut std::io::stderr().lock(), text.as_bytes());
        }
    }
}

/// The shared-memory eager limit of the library, where it can be known: an
/// environment setting the library reads at init, or Open MPI's CVAR.
fn eager_limit(mpit: &MpiT, catalogue: Option<&Catalogue>) -> Option<(u64, String)> {
    for var in [
        "OMPI_MCA_btl_vader_eager_limit",
        "UCX_RNDV_THRESH",
        "MV2_SMP_EAGERSIZE",
    ] {
        if let Some(v) = std::env::var(var)
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
        {
            return Some((v, format!("{var}={v}")));
        }
    }
    let info = catalogue?.cvar("btl_vader_eager_limit")?;
    let value = mpit::Cvar::open(mpit, info, Object::None)
        .ok()?
        .read()
        .ok()?;
    let v = value.as_i64()?;
    Some((v.max(0) as u64, "btl_vader_eager_limit".into()))
}

/// Failures counted on the way (never one log line per call): PVAR
/// handles the library refused to free, `MPI_Type_size` failures on the
/// application's calls.
fn counted_failures() -> Vec<String> {
    let mut notes = Vec::new();
    let refused = crate::sample::objects::free_failures();
    if refused > 0 {
        notes.push(format!(
            "the library refused to stop or free {refused} PVAR handles of communicators and windows (MPI_T_pvar_stop/MPI_T_pvar_handle_free)"
        ));
    }
    let unsized_calls = crate::sample::toolmetrics::type_size_failures();
    if unsized_calls > 0 {
        notes.push(format!(
            "MPI_Type_size failed for {unsized_calls} of the application's calls; their bytes are counted as 0"
        ));
    }
    notes
}
