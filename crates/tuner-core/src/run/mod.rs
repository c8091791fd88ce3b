//! What every part of a rank's tuner shares about its run: the
//! configuration (`MPIT_TUNER_*`), the launcher's environment, the facts
//! of the run every log header holds, and the log itself. The runtime and
//! the services build on it; it names neither.

mod config;
pub mod log;

pub use config::{store_from_env, CollectiveConfig, Config, StoreConfig, MIN_INTERVAL, VARIABLES};

use mpit::quirks::LibraryVersion;
use std::path::PathBuf;
use vocab::record::{self, Record};

/// Rank and size as the launcher announces them in the environment, known
/// before MPI_Init.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaunchEnv {
    /// This process's rank, if the launcher said.
    pub rank: Option<u32>,
    /// The job size, if the launcher said.
    pub size: Option<u32>,
}

impl LaunchEnv {
    /// Reads the variables MPICH's Hydra (`PMI_RANK`, `PMI_SIZE`), Open MPI
    /// (`OMPI_COMM_WORLD_RANK`, `OMPI_COMM_WORLD_SIZE`), Slurm and PMIx set.
    pub fn from_env() -> LaunchEnv {
        let get = |names: &[&str]| {
            names
                .iter()
                .find_map(|n| std::env::var(n).ok().and_then(|v| v.parse().ok()))
        };
        LaunchEnv {
            rank: get(&[
                "PMI_RANK",
                "OMPI_COMM_WORLD_RANK",
                "PMIX_RANK",
                "SLURM_PROCID",
            ]),
            size: get(&["PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS"]),
        }
    }
}

/// Facts about this rank and run, in every log header.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RunInfo {
    /// Rank in `MPI_COMM_WORLD`.
    pub rank: i32,
    /// Size of `MPI_COMM_WORLD`.
    pub size: i32,
    /// Host name.
    pub host: String,
    /// Process id.
    pub pid: u32,
    /// `MPI_Get_library_version`.
    pub library_version: String,
    /// The library family and version, parsed once from `library_version`.
    #[serde(skip)]
    pub version: LibraryVersion,
    /// The run directory.
    pub dir: PathBuf,
    /// Unix time the tuner started, in seconds.
    pub start_unix: f64,
}

/// The name serde gives a unit variant (`openmpi`, `MULTIPLE`).
/// FNV-1a of `s`: stable across processes and builds, unlike the std
/// hasher, so every rank hashes the same string alike.
pub(crate) fn fnv1a(s: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

pub(crate) fn serde_name(value: impl serde::Serialize) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(s)) => s,
        Ok(other) => other.to_string(),
        Err(_) => String::new(),
    }
}

/// The tuning store's key of a job (docs/tuning-store.md): its library
/// and version as `MPI_Get_library_version` names them, its ranks, ranks
/// on each node (`None`: not known) and the tuner's mode (`safe`, `all`).
/// What a run looks its entries up by, and what `mpit-tuner tune` stores
/// its choices under.
pub fn store_job(
    version: &mpit::quirks::LibraryVersion,
    ranks: i32,
    ranks_per_node: Option<i32>,
    mode: &str,
) -> tuning_store::Job {
    tuning_store::Job {
        library: serde_name(version.library),
        library_version: version
            .version
            .map_or_else(|| "unknown".to_string(), |v| v.to_string()),
        ranks,
        ranks_per_node,
        mode: mode.to_string(),
    }
}

/// A `warning` record.
pub(crate) fn warning(t: f64, message: &str) -> Record<'static> {
    Record::Warning(record::Warning::new(t, message))
}
