//! The tuning store: what online collective tuning learned in earlier runs,
//! one entry per (library and version, job shape, communicator size,
//! collective, message-size bin, mode), so that a later run starts on the
//! stored choice and only confirms it (docs/tuning-store.md).
//!
//! The file is JSON, versioned ([`FORMAT`], [`VERSION`]), and defined here
//! once: the tuner reads it at start and writes it at finalize (rank 0 of
//! each job), the CLI lists, shows, forgets, merges and exports it.
//!
//! Concurrent jobs share one store safely: every change is a
//! read-merge-write under an exclusive `flock` on `<store>.lock` (bounded
//! wait, [`Error::Busy`] after it), written to a temporary file in the same
//! directory, synced, and renamed over the store, so a reader (which takes
//! no lock) sees the old file or the new one, whole, and two jobs that
//! finish at once both keep their entries. A damaged store (truncated,
//! not JSON, not a store) is an [`Error::Damaged`] naming the file and the
//! place; an update moves it aside (`<store>.damaged`) and starts a new
//! one, so the data is kept for a look and later jobs are not told again.
//! A store written by a newer format is never overwritten.

use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use vocab::collective::Collective;

/// The `format` field of every store file.
pub const FORMAT: &str = "mpit-tuner-store";

/// The version of the format this build reads and writes.
pub const VERSION: u32 = 1;

/// How long an update waits for another job's update of the same store.
pub const LOCK_WAIT: Duration = Duration::from_secs(10);

/// Entries older than this many days are not used to warm-start a run
/// (`MPIT_TUNER_STORE_MAX_AGE`): the run searches again and renews them.
pub const MAX_AGE_DAYS: f64 = 30.0;

/// What makes two jobs the same for the store, besides the communicator:
/// the library, the job's shape and the tuner's mode.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Job {
    /// The library family (`mpich`, `openmpi`, `mvapich2`).
    pub library: String,
    /// Its version (`4.2.0`).
    pub library_version: String,
    /// Ranks in `MPI_COMM_WORLD`.
    pub ranks: i32,
    /// Ranks on each node, when the launcher said so and every node had
    /// the same (`None`: not known).
    pub ranks_per_node: Option<i32>,
    /// The tuner's mode: `all`, or `safe` (only the calls whose result
    /// cannot depend on the algorithm: exact datatypes and operations).
    pub mode: String,
}

impl Job {
    /// Nodes of the job, when known.
    pub fn nodes(&self) -> Option<i32> {
        let per = self.ranks_per_node.filter(|&p| p > 0)?;
        (self.ranks % per == 0).then_some(self.ranks / per)
    }

    /// The shape as a user says it: `2 nodes x 2 ranks` (`4 ranks` when
    /// the nodes are not known).
    pub fn shape(&self) -> String {
        match (self.nodes(), self.ranks_per_node) {
            (Some(n), Some(p)) => format!("{n} node{} x {p} rank{}", plural(n), plural(p)),
            _ => format!("{} rank{}", self.ranks, plural(self.ranks)),
        }
    }
}

fn plural(n: i32) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// Where in a job: the communicator's size, the collective and the
/// message-size bin.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Place {
    /// The communicator's size.
    pub comm_size: i32,
    /// The collective.
    pub collective: Collective,
    /// The message-size bin, `[lo, hi)` bytes (`hi` null for the last).
    pub bin: (u64, Option<u64>),
}

/// One learned choice.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// The job it was learned in.
    #[serde(flatten)]
    pub job: Job,
    /// The communicator, collective and bin.
    #[serde(flatten)]
    pub place: Place,
    /// The algorithm to run (the library's default's name when the
    /// default won, or when the collective was left alone).
    pub algorithm: String,
    /// Its value of the library's variable (MPICH's enumeration, Open
    /// MPI's `coll_tuned_<coll>_algorithm` number), for `mpit-tuner
    /// export --store`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<i64>,
    /// The library's default algorithm's name.
    pub default: String,
    /// The collective was left alone: an agreed point cost more than the
    /// calls could pay for (nothing to search in a later run either).
    #[serde(default)]
    pub left: bool,
    /// The default's agreed time per call (microseconds).
    pub default_us: Option<f64>,
    /// The chosen algorithm's (microseconds).
    pub chosen_us: Option<f64>,
    /// Runs in a row that found or confirmed this choice.
    pub runs: u32,
    /// When it was last found or confirmed (Unix time, whole seconds: an
    /// integer reads back exactly, so a copy compares equal).
    pub updated_unix: i64,
    /// The run directory that did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_dir: Option<String>,
}

impl Entry {
    /// Its age at `now` (days; 0 for an entry from the future).
    pub fn age_days(&self, now: i64) -> f64 {
        (now.saturating_sub(self.updated_unix) as f64 / 86_400.0).max(0.0)
    }

    /// Whether the choice is another algorithm than the default.
    pub fn switches(&self) -> bool {
        self.algorithm != self.default
    }
}

/// A store: its entries, at most one per (job, place).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Store {
    /// [`FORMAT`].
    pub format: String,
    /// [`VERSION`].
    pub version: u32,
    /// The entries, sorted by job and place.
    pub entries: Vec<Entry>,
}

/// Why a store could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The file could not be read, written or locked.
    #[error("tuning store {}: {what}: {source}", path.display())]
    Io {
        /// The store.
        path: PathBuf,
        /// What failed.
        what: &'static str,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not a whole store of this format.
    #[error("tuning store {} is damaged ({why})", path.display())]
    Damaged {
        /// The store.
        path: PathBuf,
        /// Where and what (`line 3, column 14: EOF while parsing`).
        why: String,
    },
    /// A newer format: this build neither uses nor overwrites it.
    #[error(
        "tuning store {} has format version {found}, newer than this mpit-tuner's {VERSION}: \
         not used, not overwritten",
        path.display()
    )]
    Newer {
        /// The store.
        path: PathBuf,
        /// Its version.
        found: u32,
    },
    /// Another job held the store's lock for longer than the wait.
    #[error(
        "tuning store {}: another job held its lock ({}) for {waited:?}; this job's entries \
         are not stored",
        path.display(),
        lock.display()
    )]
    Busy {
        /// The store.
        path: PathBuf,
        /// Its lock file.
        lock: PathBuf,
        /// How long this one waited.
        waited: Duration,
    },
}

impl Store {
    /// An empty store.
    pub fn new() -> Store {
        Store {
            format: FORMAT.into(),
            version: VERSION,
            entries: Vec::new(),
        }
    }

    /// The store parsed from `bytes` (read from `path`, for the errors).
    pub fn parse(bytes: &[u8], path: &Path) -> Result<Store, Error> {
        let damaged = |why: String| Error::Damaged {
            path: path.to_path_buf(),
            why,
        };
        let value: serde_json::Value = serde_json::from_slice(bytes).map_err(|e| {
            damaged(if e.is_eof() {
                format!("truncated: line {}, column {}: {e}", e.line(), e.column())
            } else {
                format!("not JSON: {e}")
            })
        })?;
        if value.get("format").and_then(|f| f.as_str()) != Some(FORMAT) {
            return Err(damaged(format!("not a store: no \"format\": \"{FORMAT}\"")));
        }
        let version = value.get("version").and_then(|v| v.as_u64()).unwrap_or(0);
        if version > u64::from(VERSION) {
            return Err(Error::Newer {
                path: path.to_path_buf(),
                found: u32::try_from(version).unwrap_or(u32::MAX),
            });
        }
        if version != u64::from(VERSION) {
            return Err(damaged(format!("version {version}, expected {VERSION}")));
        }
        let mut store: Store =
            serde_json::from_value(value).map_err(|e| damaged(format!("an entry: {e}")))?;
        store.normalize();
        Ok(store)
    }

    /// Sorted by job and place, one entry per key (the newest).
    fn normalize(&mut self) {
        let entries = std::mem::take(&mut self.entries);
        self.merge(entries);
    }

    /// Adds `entries`: an entry replaces the store's entry of the same job
    /// and place unless that one is newer. Returns how many were added or
    /// replaced.
    pub fn merge(&mut self, entries: impl IntoIterator<Item = Entry>) -> usize {
        let mut changed = 0;
        for e in entries {
            let key = (&e.job, &e.place);
            match self
                .entries
                .binary_search_by(|x| (&x.job, &x.place).cmp(&key))
            {
                Ok(i) => {
                    if self.entries[i].updated_unix <= e.updated_unix {
                        self.entries[i] = e;
                        changed += 1;
                    }
                }
                Err(i) => {
                    self.entries.insert(i, e);
                    changed += 1;
                }
            }
        }
        changed
    }

    /// The entry of `job` and `place`, if any.
    pub fn get(&self, job: &Job, place: &Place) -> Option<&Entry> {
        self.entries
            .binary_search_by(|x| (&x.job, &x.place).cmp(&(job, place)))
            .ok()
            .map(|i| &self.entries[i])
    }

    /// The entries of `job`.
    pub fn of<'a>(&'a self, job: &'a Job) -> impl Iterator<Item = &'a Entry> + 'a {
        self.entries.iter().filter(move |e| &e.job == job)
    }

    /// The bytes of the file.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut bytes = serde_json::to_vec_pretty(self).unwrap_or_default();
        bytes.push(b'\n');
        bytes
    }
}

/// The store at `path`; an empty one when there is no file.
pub fn read(path: &Path) -> Result<Store, Error> {
    match std::fs::read(path) {
        Ok(bytes) => Store::parse(&bytes, path),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Store::new()),
        Err(source) => Err(Error::Io {
            path: path.to_path_buf(),
            what: "cannot read it",
            source,
        }),
    }
}

/// The user's store when none is named: `$XDG_CACHE_HOME/mpit-tuner/store.json`,
/// else `$HOME/.cache/mpit-tuner/store.json` (`None` without either).
pub fn default_path() -> Option<PathBuf> {
    let nonempty = |v: &str| std::env::var_os(v).filter(|s| !s.is_empty());
    let cache = nonempty("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| nonempty("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(cache.join("mpit-tuner").join("store.json"))
}

/// The lock file of the store at `path`.
pub fn lock_path(path: &Path) -> PathBuf {
    sibling(path, "lock")
}

/// Where an update moves a damaged store.
pub fn damaged_path(path: &Path) -> PathBuf {
    sibling(path, "damaged")
}

fn sibling(path: &Path, ext: &str) -> PathBuf {
    let mut s = path.as_os_str().to_os_string();
    s.push(".");
    s.push(ext);
    PathBuf::from(s)
}

/// What a [`change`] did.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Changed<T> {
    /// What the change returned.
    pub value: T,
    /// Where the damaged store found was moved (`None`: it was whole).
    pub moved_aside: Option<(PathBuf, String)>,
}

/// Changes the store at `path` under its lock: reads it (a missing file
/// is empty; a damaged one is moved aside and the change starts from an
/// empty store), applies `f`, and writes the result atomically (a
/// temporary file renamed over it, with the old file's permissions).
/// Waits at most `wait` for another job's change.
pub fn change<T>(
    path: &Path,
    wait: Duration,
    f: impl FnOnce(&mut Store) -> T,
) -> Result<Changed<T>, Error> {
    let io = |what: &'static str| {
        move |source| Error::Io {
            path: path.to_path_buf(),
            what,
            source,
        }
    };
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&dir).map_err(io("cannot create its directory"))?;
    let _lock = lock(path, wait)?;
    let mut moved_aside = None;
    let mut store = match read(path) {
        Ok(s) => s,
        Err(Error::Damaged { why, .. }) => {
            let aside = damaged_path(path);
            std::fs::rename(path, &aside).map_err(io("cannot move the damaged store aside"))?;
            moved_aside = Some((aside, why));
            Store::new()
        }
        Err(e) => return Err(e),
    };
    let value = f(&mut store);
    store.format = FORMAT.into();
    store.version = VERSION;
    let mut tmp = tempfile::Builder::new()
        .prefix(".store-")
        .tempfile_in(&dir)
        .map_err(io("cannot create a temporary file beside it"))?;
    if let Ok(meta) = std::fs::metadata(path) {
        // A site's store stays readable by its users.
        std::fs::set_permissions(tmp.path(), meta.permissions())
            .map_err(io("cannot give the new file the store's permissions"))?;
    }
    tmp.write_all(&store.to_bytes())
        .and_then(|()| tmp.as_file().sync_all())
        .map_err(io("cannot write the new file"))?;
    tmp.persist(path)
        .map_err(|e| e.error)
        .map_err(io("cannot rename the new file over it"))?;
    Ok(Changed { value, moved_aside })
}

/// The store's lock, held until dropped (the kernel releases it when the
/// process dies, however it dies).
fn lock(path: &Path, wait: Duration) -> Result<File, Error> {
    use rustix::fs::{flock, FlockOperation};
    let lock = lock_path(path);
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock)
        .map_err(|source| Error::Io {
            path: path.to_path_buf(),
            what: "cannot open its lock file",
            source,
        })?;
    let start = Instant::now();
    loop {
        match flock(&file, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => return Ok(file),
            Err(e) if e == rustix::io::Errno::WOULDBLOCK || e == rustix::io::Errno::INTR => {
                if start.elapsed() >= wait {
                    return Err(Error::Busy {
                        path: path.to_path_buf(),
                        lock,
                        waited: start.elapsed(),
                    });
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => {
                return Err(Error::Io {
                    path: path.to_path_buf(),
                    what: "cannot lock it",
                    source: e.into(),
                })
            }
        }
    }
}

/// Now, as Unix time in whole seconds.
pub fn now_unix() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// The entries of `job` in the user's store and the site's, for a run's
/// warm start: the user's entry wins over the site's for the same place;
/// entries older than `max_age_days` are left out and counted.
pub fn lookup<'a>(
    job: &'a Job,
    user: Option<&'a Store>,
    site: Option<&'a Store>,
    now: i64,
    max_age_days: f64,
) -> Found<'a> {
    let mut found = Found::default();
    for (store, from_site) in [(user, false), (site, true)] {
        for e in store.into_iter().flat_map(|s| s.of(job)) {
            if found.entries.iter().any(|(x, _)| x.place == e.place) {
                continue;
            }
            if e.age_days(now) > max_age_days {
                found.stale += 1;
                continue;
            }
            found.entries.push((e, from_site));
        }
    }
    found.entries.sort_by_key(|(e, _)| e.place);
    found
}

/// What [`lookup`] found.
#[derive(Debug, Default)]
pub struct Found<'a> {
    /// The fresh entries, sorted by place, each with whether it came from
    /// the site's store.
    pub entries: Vec<(&'a Entry, bool)>,
    /// Entries left out for their age.
    pub stale: usize,
}

#[cfg(test)]
mod tests;
