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
        if mpit::quiet() {
            return;
        }
        // By default one line, when something changed; verbose
        // (`mpit-tuner run`), the table and recommendations too.
        let changed = what_changed(&doc, &self.info.dir);
        let mut text = changed.map(|l| format!("{l}\n")).unwrap_or_default();
        if mpit::verbose() {
            text.push_str(&format!(
                "mpit-tuner: {} ranks, {} samples over {:.1}s, {} variables; logs in {}\n",
                self.info.size,
                snapshot.seq,
                snapshot.t,
                summary.variables.len(),
                self.info.dir.display()
            ));
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
        }
        if !text.is_empty() {
            let _ = std::io::Write::write_all(&mut std::io::stderr().lock(), text.as_bytes());
        }
    }
}

/// Rank 0's line at finalize when the tool changed something: the
/// collectives it switched (per collective, size bin and algorithm, over
/// how many communicators, at what measured gain) and the variables the
/// policies wrote. `None` when nothing changed.
pub fn what_changed(doc: &vocab::summary::SummaryFile, dir: &std::path::Path) -> Option<String> {
    use std::collections::BTreeMap;
    type Switch = (String, Option<(u64, Option<u64>)>, String);
    // (collective, bin, algorithm) -> (communicators, best gain).
    let mut switched: BTreeMap<Switch, (u32, f64)> = BTreeMap::new();
    for o in &doc.collectives {
        let Some(algorithm) = o.switched_to() else {
            continue;
        };
        let e = switched
            .entry((o.collective.clone(), o.bin, algorithm.to_string()))
            .or_insert((0, f64::NAN));
        e.0 += 1;
        if let Some(g) = o.gain.filter(|g| g.is_finite()) {
            e.1 = if e.1.is_nan() { g } else { e.1.max(g) };
        }
    }
    let writes: f64 = doc
        .variables
        .iter()
        .filter(|v| v.name.starts_with("policy.") && v.name.ends_with(".writes"))
        .map(|v| v.mean * f64::from(v.ranks))
        .sum();
    let writes = writes.round() as u64;
    if switched.is_empty() && writes == 0 {
        return None;
    }
    let mut parts = Vec::new();
    const SHOWN: usize = 3;
    let items: Vec<String> = switched
        .iter()
        .map(|((collective, bin, algorithm), (comms, gain))| {
            let bin = bin.map_or_else(String::new, |(lo, hi)| {
                format!(" {}", crate::collectives::bin_text(lo, hi))
            });
            let gain = if gain.is_nan() {
                String::new()
            } else {
                format!(", {gain:.2}x")
            };
            let comms = if *comms > 1 {
                format!(" on {comms} communicators")
            } else {
                String::new()
            };
            format!("{collective}{bin} -> {algorithm}{gain}{comms}")
        })
        .collect();
    if !items.is_empty() {
        let more = items.len().saturating_sub(SHOWN);
        let mut list = items[..items.len().min(SHOWN)].join("; ");
        if more > 0 {
            list.push_str(&format!("; {more} more"));
        }
        parts.push(format!("tuned {list}"));
    }
    if writes > 0 {
        parts.push(format!(
            "policies wrote {writes} variable value{}",
            if writes == 1 { "" } else { "s" }
        ));
    }
    Some(format!(
        "mpit-tuner: {} (mpit-tuner report {})",
        parts.join("; "),
        dir.display()
    ))
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

#[cfg(test)]
mod tests {
    use super::what_changed;
    use vocab::summary::{CollectiveOutcome, SummaryFile, VariableStats};

    fn doc() -> SummaryFile {
        serde_json::from_value(serde_json::json!({
            "version": 1, "size": 4, "library": "mpich", "library_version": "MPICH 4.0.2",
            "samples_rank0": 3, "duration_s": 1.0, "variables": [], "classes": [],
            "size_histograms": {}, "recommendations": [], "messages": []
        }))
        .unwrap()
    }

    fn outcome(comm: &str, chosen: Option<&str>, gain: Option<f64>) -> CollectiveOutcome {
        CollectiveOutcome {
            comm: comm.into(),
            comm_size: Some(4),
            collective: "allreduce".into(),
            bin: Some((65536, Some(1 << 20))),
            default: Some("auto".into()),
            chosen: chosen.map(str::to_string),
            default_us: None,
            chosen_us: None,
            chosen_value: None,
            gain,
            cost_us: 0.0,
            searches: 1,
            candidates: Vec::new(),
            pinned: None,
            pinned_by: None,
            from_store: false,
        }
    }

    /// One line, only when something changed: the algorithms that ran
    /// instead of the default (per collective, bin and algorithm, the best
    /// gain and how many communicators), the policies' writes.
    #[test]
    fn the_line_at_finalize_says_what_changed() {
        let dir = std::path::Path::new("/runs/r1");
        let mut d = doc();
        assert_eq!(what_changed(&d, dir), None);
        // Searches that kept the default change nothing.
        d.collectives.push(outcome("c0.0", Some("auto"), Some(1.0)));
        d.collectives.push(outcome("c0.1", None, None));
        assert_eq!(what_changed(&d, dir), None);
        d.collectives.push(outcome("c0.2", Some("smp"), Some(1.25)));
        d.collectives.push(outcome("c0.3", Some("smp"), Some(1.5)));
        assert_eq!(
            what_changed(&d, dir).unwrap(),
            "mpit-tuner: tuned allreduce [64 KiB, 1 MiB) -> smp, 1.50x on 2 communicators \
             (mpit-tuner report /runs/r1)"
        );
        let mut pinned = outcome("c0.4", Some("auto"), None);
        pinned.collective = "bcast".into();
        pinned.bin = Some((0, Some(256)));
        pinned.pinned = Some("binomial".into());
        d.collectives.push(pinned);
        d.variables.push(VariableStats {
            name: "policy.eager.writes".into(),
            kind: "total".into(),
            ranks: 4,
            min: 0.0,
            min_rank: 0,
            max: 2.0,
            max_rank: 1,
            mean: 0.5,
            stddev: 0.0,
            histogram: Vec::new(),
        });
        assert_eq!(
            what_changed(&d, dir).unwrap(),
            "mpit-tuner: tuned allreduce [64 KiB, 1 MiB) -> smp, 1.50x on 2 communicators; \
             bcast [0 B, 256 B) -> binomial; policies wrote 2 variable values \
             (mpit-tuner report /runs/r1)"
        );
    }
}
