//! `mpit-tuner store`: the tuning store (docs/tuning-store.md) from the
//! command line. `list` its jobs, `show` their entries, `forget` some,
//! `merge` other stores into it. Every change goes through
//! [`tuning_store::change`], the same lock, merge and atomic rename as a
//! job's end, so it is safe while jobs run and write the same store.
//!
//! [`Filter`] selects entries for these commands and for `mpit-tuner
//! export --store`.

use crate::table::{terminal_width, Table};
use anyhow::{anyhow, bail, Result};
use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use tuner_core::collectives::bin_text;
use tuning_store::{Entry, Error, Job, Store};
use vocab::collective::Collective;

/// `mpit-tuner store`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// The store's jobs, one line each: library and version, shape, mode,
    /// entries (and how many of them switch from the default), the newest.
    List(Select),
    /// The selected entries, one line each, by job: communicator size,
    /// collective, size bin, algorithm, times, runs, when and where learned.
    ///
    /// With --json, the selected entries as a store file (which `store
    /// merge` reads).
    Show(ShowArgs),
    /// Remove the selected entries from the store (every entry: --all).
    ///
    /// The next job of a forgotten shape searches from nothing.
    Forget(ForgetArgs),
    /// Merge other stores into the store: for each key the newest entry is
    /// kept (how a site collects its users' stores into its own).
    Merge(MergeArgs),
}

/// Which store, and which of its entries.
#[derive(Debug, clap::Args)]
struct Select {
    /// The store (default: MPIT_TUNER_STORE when it names a file, else
    /// $XDG_CACHE_HOME/mpit-tuner/store.json or
    /// ~/.cache/mpit-tuner/store.json, as a job finds it).
    #[arg(long, value_name = "FILE")]
    store: Option<PathBuf>,
    #[command(flatten)]
    filter: Filter,
}

#[derive(Debug, clap::Args)]
struct ShowArgs {
    #[command(flatten)]
    select: Select,
    /// The entries as a store file (JSON), not a table.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, clap::Args)]
struct ForgetArgs {
    #[command(flatten)]
    select: Select,
    /// Every entry (without it, at least one selection is needed).
    #[arg(long)]
    all: bool,
}

#[derive(Debug, clap::Args)]
struct MergeArgs {
    /// The stores to merge in (each read whole, or nothing is merged).
    #[arg(required = true, value_name = "FROM")]
    from: Vec<PathBuf>,
    /// The store they go into (default: as for `store list`; created when
    /// there is none).
    #[arg(long, value_name = "FILE")]
    store: Option<PathBuf>,
}

/// A selection of entries: every option given must match.
#[derive(Debug, Default, clap::Args)]
pub struct Filter {
    /// Entries of this library: mpich, openmpi or mvapich2.
    #[arg(long, value_name = "NAME")]
    pub library: Option<String>,
    /// Of this version of it (`4.0.2`).
    #[arg(long, value_name = "VERSION")]
    pub library_version: Option<String>,
    /// Of jobs of this many ranks.
    #[arg(long, value_name = "N")]
    pub ranks: Option<i32>,
    /// Of jobs with this many ranks on each node.
    #[arg(long, value_name = "N")]
    pub ranks_per_node: Option<i32>,
    /// Of this mode of the tuner: safe or all.
    #[arg(long, value_name = "MODE", value_parser = ["safe", "all"])]
    pub mode: Option<String>,
    /// For communicators of this size.
    #[arg(long, value_name = "N")]
    pub comm_size: Option<i32>,
    /// For this collective (allreduce, bcast, ...).
    #[arg(long, value_name = "NAME", value_parser = parse_collective)]
    pub collective: Option<Collective>,
    /// Learned or confirmed more than this many days ago.
    #[arg(long, value_name = "DAYS", value_parser = parse_days)]
    pub older_than: Option<f64>,
}

fn parse_collective(text: &str) -> Result<Collective, String> {
    Collective::parse(text).ok_or_else(|| {
        let names: Vec<&str> = vocab::collective::COLLECTIVES
            .iter()
            .map(|c| c.name())
            .collect();
        format!("not a collective: use one of {}", names.join(", "))
    })
}

fn parse_days(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(d) if d.is_finite() && d >= 0.0 => Ok(d),
        _ => Err("not a number of days (0 or more)".into()),
    }
}

impl Filter {
    /// Whether any option was given.
    pub fn any(&self) -> bool {
        self.library.is_some()
            || self.library_version.is_some()
            || self.ranks.is_some()
            || self.ranks_per_node.is_some()
            || self.mode.is_some()
            || self.comm_size.is_some()
            || self.collective.is_some()
            || self.older_than.is_some()
    }

    /// Whether `e` is selected, at `now` (Unix seconds).
    pub fn matches(&self, e: &Entry, now: i64) -> bool {
        let eq = |want: &Option<String>, have: &str| {
            want.as_deref()
                .is_none_or(|w| w.eq_ignore_ascii_case(have.trim()))
        };
        eq(&self.library, &e.job.library)
            && eq(&self.library_version, &e.job.library_version)
            && self.ranks.is_none_or(|r| r == e.job.ranks)
            && self
                .ranks_per_node
                .is_none_or(|p| Some(p) == e.job.ranks_per_node)
            && eq(&self.mode, &e.job.mode)
            && self.comm_size.is_none_or(|s| s == e.place.comm_size)
            && self.collective.is_none_or(|c| c == e.place.collective)
            && self.older_than.is_none_or(|d| e.age_days(now) > d)
    }
}

/// Runs `mpit-tuner store`.
pub fn run(args: &Args) -> Result<ExitCode> {
    match &args.command {
        Command::List(s) => list(s),
        Command::Show(s) => show(s),
        Command::Forget(f) => forget(f),
        Command::Merge(m) => merge(m),
    }
    .map(|()| ExitCode::SUCCESS)
}

/// The store named, else the one a job run from here would use.
pub fn store_path(explicit: Option<&Path>) -> Result<PathBuf> {
    if let Some(p) = explicit.filter(|p| !p.as_os_str().is_empty()) {
        return Ok(p.to_path_buf());
    }
    let (config, _) = tuner_core::run::store_from_env();
    config.user.ok_or_else(|| {
        anyhow!(
            "no tuning store here: MPIT_TUNER_STORE is off, or neither XDG_CACHE_HOME nor HOME \
             is set; name one with --store FILE"
        )
    })
}

/// The store at `path`, or an error that says what to do about it.
pub fn read(path: &Path) -> Result<Store> {
    tuning_store::read(path).map_err(|e| match e {
        Error::Damaged { .. } => anyhow!(
            "{e}; jobs run as without it, and the next job's end moves it to {} and starts a \
             new one",
            tuning_store::damaged_path(path).display()
        ),
        e => anyhow!("{e}"),
    })
}

/// The selected entries of the store at `path`.
pub fn selected(path: &Path, filter: &Filter) -> Result<Vec<Entry>> {
    let now = tuning_store::now_unix();
    Ok(read(path)?
        .entries
        .into_iter()
        .filter(|e| filter.matches(e, now))
        .collect())
}

fn nothing(path: &Path, filter: &Filter) -> String {
    if !path.exists() {
        format!(
            "{}: no store yet (a job writes it at its end)",
            path.display()
        )
    } else if filter.any() {
        format!("{}: no entry matches", path.display())
    } else {
        format!("{}: no entries", path.display())
    }
}

/// When, as a user reads it.
pub fn date(unix: i64) -> String {
    jiff::Timestamp::from_second(unix)
        .map(|t| t.strftime("%Y-%m-%d %H:%M UTC").to_string())
        .unwrap_or_else(|_| unix.to_string())
}

fn by_job(entries: &[Entry]) -> BTreeMap<&Job, Vec<&Entry>> {
    let mut jobs: BTreeMap<&Job, Vec<&Entry>> = BTreeMap::new();
    for e in entries {
        jobs.entry(&e.job).or_default().push(e);
    }
    jobs
}

fn list(s: &Select) -> Result<()> {
    let path = store_path(s.store.as_deref())?;
    let entries = selected(&path, &s.filter)?;
    let mut out = std::io::stdout().lock();
    if entries.is_empty() {
        writeln!(out, "{}", nothing(&path, &s.filter))?;
        return Ok(());
    }
    let mut table = Table::new([
        "library", "version", "shape", "mode", "entries", "switched", "newest",
    ]);
    let jobs = by_job(&entries);
    for (job, list) in &jobs {
        let newest = list.iter().map(|e| e.updated_unix).max().unwrap_or(0);
        table.push(vec![
            job.library.clone(),
            job.library_version.clone(),
            job.shape(),
            job.mode.clone(),
            list.len().to_string(),
            list.iter().filter(|e| e.switches()).count().to_string(),
            date(newest),
        ]);
    }
    writeln!(
        out,
        "{}: {} entr{} of {} job shape{}",
        path.display(),
        entries.len(),
        if entries.len() == 1 { "y" } else { "ies" },
        jobs.len(),
        if jobs.len() == 1 { "" } else { "s" }
    )?;
    table.write(&mut out, terminal_width())?;
    Ok(())
}

fn us(t: Option<f64>) -> String {
    t.map_or_else(|| "-".into(), |t| format!("{t:.1}"))
}

fn show(args: &ShowArgs) -> Result<()> {
    let s = &args.select;
    let path = store_path(s.store.as_deref())?;
    let entries = selected(&path, &s.filter)?;
    let mut out = std::io::stdout().lock();
    if args.json {
        let mut store = Store::new();
        store.merge(entries);
        out.write_all(&store.to_bytes())?;
        return Ok(());
    }
    if entries.is_empty() {
        writeln!(out, "{}", nothing(&path, &s.filter))?;
        return Ok(());
    }
    for (i, (job, list)) in by_job(&entries).into_iter().enumerate() {
        if i > 0 {
            writeln!(out)?;
        }
        writeln!(
            out,
            "{} {}, {}, mode {}:",
            job.library,
            job.library_version,
            job.shape(),
            job.mode
        )?;
        let mut table = Table::new([
            "comm",
            "collective",
            "bin",
            "algorithm",
            "default",
            "default us",
            "chosen us",
            "runs",
            "learned",
            "run",
        ]);
        for e in list {
            let algorithm = if e.left {
                format!("{} (left alone)", e.algorithm)
            } else {
                e.algorithm.clone()
            };
            table.push(vec![
                e.place.comm_size.to_string(),
                e.place.collective.name().into(),
                bin_text(e.place.bin.0, e.place.bin.1),
                algorithm,
                e.default.clone(),
                us(e.default_us),
                us(e.chosen_us),
                e.runs.to_string(),
                date(e.updated_unix),
                e.run_dir.clone().unwrap_or_else(|| "-".into()),
            ]);
        }
        table.write(&mut out, terminal_width())?;
    }
    Ok(())
}

fn forget(args: &ForgetArgs) -> Result<()> {
    let s = &args.select;
    if args.all == s.filter.any() {
        bail!(if args.all {
            "--all forgets every entry: give it without a selection"
        } else {
            "say which entries to forget (--library, --ranks, --collective, --older-than, ...) or --all"
        });
    }
    let path = store_path(s.store.as_deref())?;
    if !path.exists() {
        println!("{}", nothing(&path, &s.filter));
        return Ok(());
    }
    // Read first: a damaged store is an error here, not moved aside.
    read(&path)?;
    let now = tuning_store::now_unix();
    let changed = tuning_store::change(&path, tuning_store::LOCK_WAIT, |store| {
        let before = store.entries.len();
        store.entries.retain(|e| !s.filter.matches(e, now));
        (before - store.entries.len(), store.entries.len())
    })
    .map_err(|e| anyhow!("{e}"))?;
    let (gone, left) = changed.value;
    println!(
        "{}: forgot {gone} entr{}, {left} left",
        path.display(),
        if gone == 1 { "y" } else { "ies" }
    );
    Ok(())
}

fn merge(args: &MergeArgs) -> Result<()> {
    let path = store_path(args.store.as_deref())?;
    let mut incoming = Vec::new();
    for from in &args.from {
        if !from.is_file() {
            bail!("{}: no such store file: nothing merged", from.display());
        }
        let store = read(from).map_err(|e| e.context("nothing merged"))?;
        incoming.push((from, store.entries));
    }
    // The target is read first too: a damaged one is said, not replaced.
    read(&path).map_err(|e| e.context("nothing merged"))?;
    let changed = tuning_store::change(&path, tuning_store::LOCK_WAIT, |store| {
        let took: Vec<(&PathBuf, usize, usize)> = incoming
            .into_iter()
            .map(|(from, entries)| (from, entries.len(), store.merge(entries)))
            .collect();
        (took, store.entries.len())
    })
    .map_err(|e| anyhow!("{e}"))?;
    let (took, total) = changed.value;
    for (from, n, added) in took {
        println!(
            "{}: {n} entr{}, {added} added or newer than the store's",
            from.display(),
            if n == 1 { "y" } else { "ies" }
        );
    }
    println!("{}: {total} entries", path.display());
    Ok(())
}
