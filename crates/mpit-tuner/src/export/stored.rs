//! `mpit-tuner export --store`: what the tuning store holds, as the same
//! [`Learned`] a run directory gives, so every format is written the same
//! way from either.

use super::{commutative_only, Choice, Family, Learned};
use crate::store::{self, Filter};
use anyhow::{bail, Result};
use std::collections::BTreeMap;
use std::path::Path;
use tuner_core::collectives::bin_text;
use tuning_store::Entry;
use vocab::collective::Collective;
use vocab::record::LibraryFamily;

/// What the selected entries of the store at `path` (empty: the default
/// store) learned. They must be of one library and version; where entries
/// of several jobs disagree for a (collective, communicator size, bin),
/// the newest wins and a note says so.
pub fn learned(path: &Path, filter: &Filter) -> Result<Learned> {
    let path = store::store_path(Some(path))?;
    let entries = store::selected(&path, filter)?;
    if entries.is_empty() {
        if !path.exists() {
            bail!(
                "{}: no store yet (a job writes it at its end): nothing to export",
                path.display()
            );
        }
        bail!(
            "{}: no entry {}: nothing to export",
            path.display(),
            if filter.any() {
                "matches the selection"
            } else {
                "in it"
            }
        );
    }
    let mut libraries: Vec<(String, String)> = entries
        .iter()
        .map(|e| (e.job.library.clone(), e.job.library_version.clone()))
        .collect();
    libraries.sort();
    libraries.dedup();
    if libraries.len() > 1 {
        let names: Vec<String> = libraries.iter().map(|(l, v)| format!("{l} {v}")).collect();
        bail!(
            "{}: entries of {} libraries ({}): an algorithm's name means nothing to another \
             library or version; select one with --library and --library-version",
            path.display(),
            names.len(),
            names.join(", ")
        );
    }
    let (library, version) = libraries.remove(0);
    let family =
        serde_json::from_value::<LibraryFamily>(serde_json::Value::String(library.clone()))
            .ok()
            .and_then(|f| Family::of(&f));
    let Some(family) = family else {
        bail!(
            "{}: the entries are of {library} {version}: export knows the algorithm names of \
             MPICH, Open MPI and MVAPICH2 only",
            path.display()
        );
    };
    // As MPI_Get_library_version says it, for the formats' version checks.
    let version_text = match family {
        Family::Mpich => format!("MPICH Version: {version}"),
        Family::OpenMpi => format!("Open MPI v{version}"),
        Family::Mvapich2 => format!("MVAPICH2 Version {version}"),
    };
    let mut notes = Vec::new();
    // (collective, size) -> bin lo -> the newest entry.
    let mut newest: BTreeMap<(Collective, i32), BTreeMap<u64, &Entry>> = BTreeMap::new();
    for e in &entries {
        let bins = newest
            .entry((e.place.collective, e.place.comm_size))
            .or_default();
        match bins.get(&e.place.bin.0) {
            Some(other) if other.algorithm != e.algorithm => {
                let (kept, dropped) = if e.updated_unix > other.updated_unix {
                    (e, *other)
                } else {
                    (*other, e)
                };
                notes.push(format!(
                    "{}, communicators of {} ranks, {}: {} kept {} and {} kept {}; exported {} (the newest)",
                    e.place.collective.name(),
                    e.place.comm_size,
                    bin_text(e.place.bin.0, e.place.bin.1),
                    kept.job.shape(),
                    kept.algorithm,
                    dropped.job.shape(),
                    dropped.algorithm,
                    kept.algorithm
                ));
                bins.insert(e.place.bin.0, kept);
            }
            Some(other) if other.updated_unix >= e.updated_unix => {}
            _ => {
                bins.insert(e.place.bin.0, e);
            }
        }
    }
    let choices = newest
        .into_iter()
        .map(|(key, bins)| {
            let list = bins
                .into_values()
                .map(|e| Choice {
                    lo: e.place.bin.0,
                    hi: e.place.bin.1,
                    algorithm: e.algorithm.clone(),
                    value: e.value,
                    default: !e.switches() || family.is_default(e.value, &e.algorithm),
                    default_us: e.default_us.unwrap_or(f64::NAN),
                    time_us: e.chosen_us.unwrap_or(f64::NAN),
                    comm: format!("{} ({}, mode {})", e.job.shape(), e.job.library, e.job.mode),
                })
                .collect();
            (key, list)
        })
        .collect();
    if family == Family::OpenMpi {
        notes.extend(commutative_only(&choices));
    }
    Ok(Learned {
        family,
        version: version_text,
        source: format!("the tuning store {}", path.display()),
        library_file: None,
        choices,
        notes,
    })
}
