//! The tuning store in a run (docs/tuning-store.md): each rank reads the
//! user's and the site's store before the start agreement and finds the
//! entries of this job (library and version, ranks, ranks per node, mode);
//! the agreement carries a hash of what it found and its ranks per node,
//! so the searches start from stored choices only where every rank read
//! the same ([`Stored::warm`]); at the end rank 0 writes what this run's
//! searches kept ([`Stored::write`]). A store that cannot be read is one
//! warning in every rank's log and one line on rank 0's terminal, and the
//! run goes on as without it; nothing here ends or slows a job but the
//! bounded wait for another job's write at the end.

use crate::collectives::{Collective, Tuner, Warm};
use crate::run::{fnv1a, Config, RunInfo};
use mpit::collective::Mixed;
use std::path::PathBuf;
use tuning_store::{Entry, Job, Place};

/// What a rank found in the stores, and what the ranks agreed of it.
#[derive(Debug)]
pub(crate) struct Stored {
    rank: i32,
    job: Job,
    /// The user's store (written at the end), if on.
    user: Option<PathBuf>,
    /// This job's fresh entries, as found: (entry, from the site's store).
    found: Vec<(Entry, bool)>,
    /// Entries of this job left out for their age.
    stale: usize,
    /// Warnings for this rank's log (a store that could not be read).
    pub(crate) warnings: Vec<String>,
    /// Every rank found the same (set by [`Stored::agreed`]).
    same: bool,
}

/// The length of [`Stored::agreement`].
pub(crate) const STORE_AGREEMENT_LEN: usize = 4;

/// Ranks on this node, as the launcher says (`None`: it did not).
pub(crate) fn local_ranks() -> Option<usize> {
    let var = |v: &str| std::env::var(v).ok();
    [
        "MPI_LOCALNRANKS",
        "OMPI_COMM_WORLD_LOCAL_SIZE",
        "PMIX_LOCAL_SIZE",
    ]
    .iter()
    .find_map(|v| var(v)?.trim().parse().ok())
    .or_else(|| var("SLURM_TASKS_PER_NODE").and_then(|v| slurm_uniform(&v)))
}

/// Slurm's `SLURM_TASKS_PER_NODE` when every node has the same: `2(x3)`
/// or `4` (`3,1` has no one count).
fn slurm_uniform(v: &str) -> Option<usize> {
    let v = v.trim();
    let n = v.split_once("(x").map_or(v, |(n, rest)| {
        if rest.ends_with(')') && !rest.contains(',') {
            n
        } else {
            ""
        }
    });
    n.parse().ok()
}

impl Stored {
    /// Reads the stores `config` names for this job (no MPI call).
    pub(crate) fn open(config: &Config, info: &RunInfo, mode: &str) -> Stored {
        let per_node = local_ranks().and_then(|n| i32::try_from(n).ok());
        let job = crate::run::store_job(&info.version, info.size, per_node, mode);
        let mut warnings = Vec::new();
        let mut read = |path: &Option<PathBuf>, what: &str| {
            let path = path.as_ref()?;
            match tuning_store::read(path) {
                Ok(s) => Some(s),
                Err(e) => {
                    let aside = match (&e, what) {
                        (tuning_store::Error::Damaged { .. }, "it") => format!(
                            ", and it is moved to {} when this run stores its choices",
                            tuning_store::damaged_path(path).display()
                        ),
                        _ => String::new(),
                    };
                    warnings.push(format!(
                        "{e}; {what} is not used: this run searches as without it{aside}"
                    ));
                    None
                }
            }
        };
        let store = &config.store;
        let user = read(&store.user, "it");
        let site = read(&store.site, "the site's store");
        let found = tuning_store::lookup(
            &job,
            user.as_ref(),
            site.as_ref(),
            tuning_store::now_unix(),
            store.max_age_days,
        );
        Stored {
            rank: info.rank,
            user: store.user.clone(),
            found: found
                .entries
                .iter()
                .map(|(e, site)| ((*e).clone(), *site))
                .collect(),
            stale: found.stale,
            job,
            warnings,
            same: false,
        }
    }

    /// The hash of what this rank found (the same on ranks that found the
    /// same entries for the same job).
    fn hash(&self) -> u64 {
        let mut text = format!("{:?}", self.job);
        for (e, _) in &self.found {
            text.push_str(&format!(
                "|{:?}|{}|{}",
                e.place, e.algorithm, e.updated_unix
            ));
        }
        fnv1a(&text) & (u64::MAX >> 1)
    }

    /// This rank's part of the start agreement: the hash and its
    /// complement, its ranks per node (-1: unknown) and its complement
    /// (by minimum: equal only where every rank has the same).
    pub(crate) fn agreement(&self) -> [Mixed; STORE_AGREEMENT_LEN] {
        let h = self.hash() as i64;
        let p = i64::from(self.job.ranks_per_node.unwrap_or(-1));
        [Mixed::min(h), Mixed::min(!h), Mixed::min(p), Mixed::min(!p)]
    }

    /// What the ranks agreed (`words`: the reduced [`Stored::agreement`]):
    /// whether every rank found the same, and the job's ranks per node if
    /// every rank has the same. Returns a note for the log when the ranks
    /// found different entries (a job wrote the store meanwhile, or the
    /// nodes see different files).
    pub(crate) fn agreed(&mut self, words: &[Mixed]) -> Option<String> {
        let [h, not_h, p, not_p] = words else {
            self.same = false;
            return None;
        };
        if p.a != !not_p.a {
            self.job.ranks_per_node = None;
        }
        self.same = h.a == !not_h.a;
        (!self.same && !self.found.is_empty()).then(|| {
            "the ranks found different entries in the tuning store (a job wrote it while this one \
             started, or the nodes see different files): no search starts from it"
                .to_string()
        })
    }

    /// The searches' starting points: every entry the ranks agree on whose
    /// collective, bin and algorithm `tuner` has (the same on every rank).
    /// Returns them, with notes for the log on what is not used.
    pub(crate) fn warm(&self, tuner: &Tuner) -> (Vec<Warm>, Vec<String>) {
        let mut warm = Vec::new();
        let mut notes = Vec::new();
        if !self.same {
            return (warm, notes);
        }
        let bins = tuner.bins();
        for (e, site) in &self.found {
            let c = e.place.collective;
            let Some(bin) = (0..bins.len()).find(|&b| bins.range(b) == e.place.bin) else {
                notes.push(format!(
                    "tuning store: {} {:?} is not one of this run's size bins: searched",
                    c.name(),
                    e.place.bin
                ));
                continue;
            };
            let candidate = (0..crate::collectives::search::MAX_CANDIDATES)
                .find(|&i| tuner.candidate_name(c, i) == Some(e.algorithm.as_str()));
            let Some(candidate) = candidate else {
                if tuner.candidate_name(c, 0).is_some() {
                    notes.push(format!(
                        "tuning store: {} has no candidate `{}` in this run: searched",
                        c.name(),
                        e.algorithm
                    ));
                }
                continue;
            };
            let learned = jiff::Timestamp::from_second(e.updated_unix)
                .map(|t| t.strftime("%Y-%m-%d %H:%M UTC").to_string())
                .unwrap_or_default();
            let from = if *site {
                "the site's store"
            } else {
                "the store"
            };
            let what = if e.left {
                "left alone there".to_string()
            } else if e.switches() {
                format!("{} kept over {}", e.algorithm, e.default)
            } else {
                format!("the default {} kept", e.algorithm)
            };
            warm.push(Warm {
                collective: c,
                bin,
                comm_size: e.place.comm_size,
                candidate,
                note: format!(
                    "starts from {from}: {what} on {} (learned {learned}, {} run{}{}); confirmed \
                     against the default before it is kept, or kept unconfirmed where an agreed \
                     point costs more than a window can pay for",
                    self.job.shape(),
                    e.runs,
                    if e.runs == 1 { "" } else { "s" },
                    e.run_dir
                        .as_deref()
                        .map_or_else(String::new, |d| format!(", {d}"))
                ),
            });
        }
        if self.stale > 0 {
            notes.push(format!(
                "tuning store: {} entr{} of this job older than the maximum age searched again",
                self.stale,
                if self.stale == 1 { "y" } else { "ies" }
            ));
        }
        (warm, notes)
    }

    /// At the end, on rank 0: what this run's searches kept goes into the
    /// user's store (merged under its lock). Returns what to say in the
    /// log, each with whether rank 0's terminal hears it too (a damaged
    /// store moved aside was said at start).
    pub(crate) fn write(&self, run_dir: Option<String>) -> Vec<(String, bool)> {
        let (Some(path), 0) = (&self.user, self.rank) else {
            return Vec::new();
        };
        let Some(tuner) = crate::collectives::started() else {
            return Vec::new();
        };
        if tuner.measuring() {
            return Vec::new();
        }
        let now = tuning_store::now_unix();
        let entries: Vec<Entry> = crate::collectives::logged()
            .into_iter()
            .filter_map(|o| {
                if o.pinned.is_some() {
                    return None;
                }
                let place = Place {
                    comm_size: o.comm_size?,
                    collective: Collective::parse(&o.collective)?,
                    bin: o.bin?,
                };
                let algorithm = o.chosen?;
                let before = self
                    .found
                    .iter()
                    .find(|(e, _)| e.place == place && e.algorithm == algorithm);
                // A store's choice kept unconfirmed has neither the
                // default's name (when no window of it was logged) nor a
                // time of its own here: the entry's stay.
                let default = o
                    .default
                    .or_else(|| before.map(|(e, _)| e.default.clone()))
                    .unwrap_or_else(|| algorithm.clone());
                let chosen_us = o
                    .chosen_us
                    .or_else(|| before.and_then(|(e, _)| e.chosen_us));
                let runs = match before {
                    Some((e, _)) if o.from_store || o.searches == 0 => e.runs.saturating_add(1),
                    _ => 1,
                };
                Some(Entry {
                    job: self.job.clone(),
                    place,
                    left: o.searches == 0,
                    algorithm,
                    value: o.chosen_value,
                    default,
                    default_us: o.default_us,
                    chosen_us,
                    runs,
                    updated_unix: now,
                    run_dir: run_dir.clone(),
                })
            })
            .collect();
        let entries = one_per_place(entries);
        if entries.is_empty() {
            return Vec::new();
        }
        let n = entries.len();
        let mut said = Vec::new();
        match tuning_store::change(path, tuning_store::LOCK_WAIT, |s| s.merge(entries)) {
            Ok(done) => {
                if let Some((aside, why)) = done.moved_aside {
                    said.push((
                        format!(
                            "tuning store {} was damaged ({why}): moved to {} and a new one \
                             started with this run's {n} entr{}",
                            path.display(),
                            aside.display(),
                            if n == 1 { "y" } else { "ies" }
                        ),
                        false,
                    ));
                }
            }
            Err(e) => said.push((format!("{e}; this run's choices are not stored"), true)),
        }
        said
    }
}

/// One entry per place (an entry is found by the communicator's size):
/// where communicators of one size kept different algorithms, the one
/// that saved more per call against the default, as `mpit-tuner export`
/// chooses; the first of equals.
fn one_per_place(entries: Vec<Entry>) -> Vec<Entry> {
    let saving = |e: &Entry| match (e.default_us, e.chosen_us) {
        (Some(d), Some(c)) if (d - c).is_finite() => d - c,
        _ => f64::NEG_INFINITY,
    };
    let mut out: Vec<Entry> = Vec::new();
    for e in entries {
        match out.iter_mut().find(|x| x.place == e.place) {
            Some(x) if saving(&e) > saving(x) => *x = e,
            Some(_) => {}
            None => out.push(e),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn communicators_of_one_size_store_the_choice_that_saved_more() {
        let entry = |algorithm: &str, default_us: f64, chosen_us: f64, lo: u64| Entry {
            job: Job {
                library: "mpich".into(),
                library_version: "4.0.2".into(),
                ranks: 2,
                ranks_per_node: Some(2),
                mode: "all".into(),
            },
            place: Place {
                comm_size: 2,
                collective: Collective::Reduce,
                bin: (lo, Some(256)),
            },
            algorithm: algorithm.into(),
            value: None,
            default: "auto".into(),
            left: false,
            default_us: Some(default_us),
            chosen_us: Some(chosen_us),
            runs: 1,
            updated_unix: 0,
            run_dir: None,
        };
        let kept = one_per_place(vec![
            entry("binomial", 0.3, 0.2, 0),
            entry("auto", 0.3, 0.3, 0),
            entry("auto", 1.0, 1.0, 8),
            entry("binomial", 1.0, 1.2, 8),
        ]);
        let algorithms: Vec<(u64, &str)> = kept
            .iter()
            .map(|e| (e.place.bin.0, e.algorithm.as_str()))
            .collect();
        assert_eq!(algorithms, vec![(0, "binomial"), (8, "auto")]);
    }

    #[test]
    fn slurm_s_tasks_per_node_count_only_when_every_node_has_the_same() {
        assert_eq!(slurm_uniform("2(x3)"), Some(2));
        assert_eq!(slurm_uniform("4"), Some(4));
        assert_eq!(slurm_uniform("3,1"), None);
        assert_eq!(slurm_uniform("2(x3),1"), None);
        assert_eq!(slurm_uniform(""), None);
    }
}
