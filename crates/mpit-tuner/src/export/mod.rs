//! `mpit-tuner export`: what a run's online collective tuning learned,
//! written for reuse without the tool: an Open MPI `coll/tuned` dynamic
//! rules file ([`openmpi`]), an MPICH collective selection JSON ([`mpich`])
//! and a pre-init policy with the settings a user can also make by hand
//! ([`settings`]).
//!
//! The input is the `collective` records of a run directory (decisions are
//! identical on every rank of a communicator): [`Learned`] keeps, per
//! (collective, communicator size), the algorithm kept for each message-size
//! bin. Which formats apply depends on the library the run was made with:
//! an algorithm name of one library means nothing to another, and nothing
//! is guessed.

pub mod mpich;
pub mod openmpi;
pub mod settings;
mod stored;

use crate::report::reading::{read_run, ProblemKind, Run};
use anyhow::{bail, Context, Result};
use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use tuner_core::collectives::bin_text;
use vocab::collective::Collective;
use vocab::record::{CollectiveEvent, LibraryFamily};

/// `mpit-tuner export`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Formats (default: all that apply to the run's library):
  openmpi-rules  Open MPI coll/tuned dynamic rules (coll-tuned-rules.conf); use with
                 OMPI_MCA_coll_tuned_use_dynamic_rules=1
                 OMPI_MCA_coll_tuned_dynamic_rules_filename=FILE. Runs made on Open MPI only.
  mpich-json     MPICH collective selection table (mpich-coll-selection.json); use with
                 MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE=FILE. Runs made on MPICH 4.0,
                 4.1 and 5.0 only. The file replaces MPICH's whole table: the collectives
                 and sizes not tuned keep the library's own choices, read from the MPICH
                 library the run loaded (or --mpich-lib; one of the run's series).
  policy         A pre-init policy (collectives-pre-init.toml) setting one algorithm per
                 collective before MPI_Init, with the same settings as environment
                 variables in its comments. One setting holds for every size: where the
                 run chose differently per size, the file says so; use the other formats.
  all            Every format that applies; those that do not are named with the reason.

Exit status: 0 when the files were written; 2 when the run directory cannot be read, has
missing ranks, holds no decisions, or the format does not fit the run's library.")]
pub struct Args {
    /// The run directory (every rank's log: `rank-NNNNN.jsonl`, or its
    /// lines in `node-<host>.jsonl`).
    #[arg(required_unless_present = "store")]
    pub run_dir: Option<PathBuf>,
    /// Export from the tuning store instead of a run (FILE: the store;
    /// without it, the one a job run from here would use): its entries of
    /// one library and version, selected with the options below; where
    /// entries of several job shapes disagree for a communicator size,
    /// collective and bin, the newest wins.
    #[arg(long, value_name = "FILE", num_args = 0..=1, default_missing_value = "",
          conflicts_with = "run_dir")]
    pub store: Option<PathBuf>,
    /// Which of the store's entries (with --store only).
    #[command(flatten)]
    pub filter: crate::store::Filter,
    /// What to write: openmpi-rules, mpich-json, policy or all.
    #[arg(long, value_enum, default_value_t = Format::All)]
    pub format: Format,
    /// Where: a file for one format, a directory for `all` (default:
    /// RUN_DIR/export/; with --store, ./export/).
    #[arg(short = 'o', long = "output", value_name = "PATH")]
    pub output: Option<PathBuf>,
    /// The MPICH library whose default selection table the MPICH JSON keeps
    /// for what was not tuned, of the run's MPICH series; a linker script
    /// such as MPICH 5's lib/libmpi.so is followed to the library it names
    /// (default: the library the run loaded, as its logs name it, when this
    /// machine has that file; else libmpich.so.12 as ldconfig knows it, else
    /// the usual library directories).
    #[arg(long, value_name = "FILE")]
    pub mpich_lib: Option<PathBuf>,
}

/// An export format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Open MPI coll/tuned dynamic rules.
    OpenmpiRules,
    /// MPICH collective selection JSON.
    MpichJson,
    /// A pre-init policy.
    Policy,
    /// Every format that applies.
    All,
}

impl Format {
    fn file_name(self) -> &'static str {
        match self {
            Format::OpenmpiRules => "coll-tuned-rules.conf",
            Format::MpichJson => "mpich-coll-selection.json",
            Format::Policy => "collectives-pre-init.toml",
            Format::All => "",
        }
    }
}

/// The library family of a run, as its headers say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// MPICH (its `MPIR_CVAR_<COLL>_INTRA_ALGORITHM` names).
    Mpich,
    /// Open MPI (its `coll_tuned_<coll>_algorithm` enumerations).
    OpenMpi,
    /// MVAPICH2 (its `MPIR_CVAR_<COLL>_COLLECTIVE_ALGORITHM` values, named
    /// as `tuner_core::collectives::mvapich2_algorithms` knows them; only
    /// the pre-init policy applies: MVAPICH2 has no selection file that
    /// these formats write).
    Mvapich2,
}

impl Family {
    /// The family of runs made with `library`, if export knows it.
    pub fn of(library: &LibraryFamily) -> Option<Family> {
        match library {
            LibraryFamily::Mpich => Some(Family::Mpich),
            LibraryFamily::OpenMpi => Some(Family::OpenMpi),
            LibraryFamily::Mvapich2 => Some(Family::Mvapich2),
            _ => None,
        }
    }

    /// Whether `value` (or, without it, `name`) is the library's default
    /// choice: MPICH's `auto` (0), Open MPI's `ignore` (0), MVAPICH2's
    /// `default` (-1).
    pub fn is_default(self, value: Option<i64>, name: &str) -> bool {
        match self {
            Family::Mpich => value == Some(0) || name == "auto",
            Family::OpenMpi => value == Some(0) || name == "ignore",
            Family::Mvapich2 => {
                value == Some(tuner_core::collectives::MVAPICH2_DEFAULT)
                    || name == tuner_core::collectives::MVAPICH2_DEFAULT_NAME
            }
        }
    }

    /// Whose algorithms a run of this family chose, for the formats of
    /// another library, which have no equivalent for them.
    pub fn algorithms_text(self) -> &'static str {
        match self {
            Family::Mpich => "MPICH's (MPIR_CVAR_<COLL>_INTRA_ALGORITHM)",
            Family::OpenMpi => "Open MPI's coll/tuned ones",
            Family::Mvapich2 => "MVAPICH2's (MPIR_CVAR_<COLL>_COLLECTIVE_ALGORITHM)",
        }
    }
}

/// The algorithm kept for one message-size bin.
#[derive(Debug, Clone, PartialEq)]
pub struct Choice {
    /// The bin's smallest size, bytes (as the tuner measures the call:
    /// count times the datatype's size; per block for allgather, alltoall
    /// and reduce_scatter_block).
    pub lo: u64,
    /// The first size of the next bin (`None`: no upper bound).
    pub hi: Option<u64>,
    /// The library's name of the algorithm.
    pub algorithm: String,
    /// Its value of the library's variable, as the run recorded it.
    pub value: Option<i64>,
    /// Whether it is the library's default (MPICH `auto`, Open MPI 0).
    pub default: bool,
    /// Time per call of the default and of the algorithm, microseconds.
    pub default_us: f64,
    /// Time per call of the algorithm kept.
    pub time_us: f64,
    /// The communicator it was learned on.
    pub comm: String,
}

/// What a run learned: per (collective, communicator size), the choices
/// by bin, in size order.
#[derive(Debug, Clone, PartialEq)]
pub struct Learned {
    /// The library family.
    pub family: Family,
    /// `MPI_Get_library_version`, first line.
    pub version: String,
    /// The run directory.
    pub source: String,
    /// The MPI library's file the run's rank 0 named (its header's
    /// `library_file`), if any.
    pub library_file: Option<PathBuf>,
    /// The choices.
    pub choices: BTreeMap<(Collective, i32), Vec<Choice>>,
    /// Decisions left out, and why (told on standard error and in the
    /// files).
    pub notes: Vec<String>,
}

impl Learned {
    /// The last decision of every (communicator, collective, bin) in
    /// `records` (`(rank, record)`; every rank of a communicator logs the
    /// same, so one rank's are used per communicator). Communicators of one
    /// size that chose differently for a bin: the larger saving per call
    /// wins, and a note says so.
    pub fn from_records<'a>(
        family: Family,
        version: &str,
        source: &str,
        records: impl IntoIterator<Item = (u32, &'a vocab::record::CollectiveTuning)>,
    ) -> Result<Learned, String> {
        // (comm, collective, lo) -> (rank that logged it, last decision).
        let mut last: BTreeMap<(String, String, u64), (u32, &vocab::record::CollectiveTuning)> =
            BTreeMap::new();
        for (rank, r) in records {
            if r.event != CollectiveEvent::Decision {
                continue;
            }
            let (Some(coll), Some(bin)) = (&r.collective, r.bin) else {
                continue;
            };
            let key = (r.comm.clone(), coll.clone(), bin.0);
            let entry = last.entry(key).or_insert((rank, r));
            if entry.0 == rank {
                entry.1 = r;
            }
        }
        let mut notes = Vec::new();
        let mut choices: BTreeMap<(Collective, i32), Vec<Choice>> = BTreeMap::new();
        for ((comm, coll, _), (rank, r)) in last {
            let Some(collective) = Collective::parse(&coll) else {
                notes.push(format!(
                    "rank {rank}: a decision for `{coll}`, which is not a collective this mpit-tuner knows: left out"
                ));
                continue;
            };
            let (Some(size), Some(algorithm), Some(bin)) = (r.comm_size, &r.algorithm, r.bin)
            else {
                notes.push(format!(
                    "rank {rank}: a {coll} decision on {comm} without its communicator size, algorithm or bin: left out"
                ));
                continue;
            };
            let default = family.is_default(r.value, algorithm);
            let choice = Choice {
                lo: bin.0,
                hi: bin.1,
                algorithm: algorithm.clone(),
                value: r.value,
                default,
                default_us: r.default_us.unwrap_or(f64::NAN),
                time_us: r.time_us.unwrap_or(f64::NAN),
                comm: comm.clone(),
            };
            let list = choices.entry((collective, size)).or_default();
            match list.iter_mut().find(|c| c.lo == choice.lo) {
                Some(other) if other.algorithm == choice.algorithm => {}
                Some(other) => {
                    let saving = |c: &Choice| {
                        let s = c.default_us - c.time_us;
                        if s.is_nan() {
                            f64::NEG_INFINITY
                        } else {
                            s
                        }
                    };
                    let (kept, dropped) = if saving(&choice) > saving(other) {
                        (choice.clone(), other.clone())
                    } else {
                        (other.clone(), choice.clone())
                    };
                    notes.push(format!(
                        "{coll}, communicators of {size} ranks, {}: {} kept {} and {} kept {}; exported {} (the larger saving per call)",
                        bin_text(kept.lo, kept.hi),
                        kept.comm,
                        kept.algorithm,
                        dropped.comm,
                        dropped.algorithm,
                        kept.algorithm
                    ));
                    *other = kept;
                }
                None => list.push(choice),
            }
        }
        for list in choices.values_mut() {
            list.sort_by_key(|c| c.lo);
        }
        if family == Family::OpenMpi {
            notes.extend(commutative_only(&choices));
        }
        Ok(Learned {
            family,
            version: version.to_string(),
            source: source.to_string(),
            library_file: None,
            choices,
            notes,
        })
    }
}

/// Open MPI runs a forced algorithm (a rules file's or an MCA setting's)
/// for every call it matches, whatever the operation, where its own choice
/// avoids the algorithms that combine operands out of rank order for a
/// non-commutative one; online tuning runs such calls on Open MPI's own
/// choice ([`tuner_core::collectives::open_mpi_needs_commutative`]). Neither
/// format can test the operation, so each such choice is written with a
/// note, one per collective and algorithm.
fn commutative_only(choices: &BTreeMap<(Collective, i32), Vec<Choice>>) -> Vec<String> {
    let mut out: Vec<(Collective, &str, Vec<String>)> = Vec::new();
    for ((c, size), list) in choices {
        for ch in list.iter().filter(|ch| {
            !ch.default && tuner_core::collectives::open_mpi_needs_commutative(*c, &ch.algorithm)
        }) {
            let at = format!("{size} ranks {}", bin_text(ch.lo, ch.hi));
            match out
                .iter_mut()
                .find(|(oc, a, _)| oc == c && *a == ch.algorithm)
            {
                Some((_, _, places)) => places.push(at),
                None => out.push((*c, &ch.algorithm, vec![at])),
            }
        }
    }
    out.into_iter()
        .map(|(c, algorithm, places)| {
            format!(
                "{} {algorithm} ({}) combines operands out of rank order, and Open MPI runs a \
                 forced algorithm for every call it matches: a user-defined non-commutative \
                 operation would get another result than without this setting; use it only if \
                 the application's user-defined operations are commutative (MPI's predefined \
                 ones are)",
                c.name(),
                places.join(", ")
            )
        })
        .collect()
}

impl Learned {
    /// The communicator sizes at which the run kept something other than
    /// the library's default for `c`, with their choices by bin.
    pub fn tuned(&self, c: Collective) -> Vec<(i32, &Vec<Choice>)> {
        self.choices
            .iter()
            .filter(|((coll, _), list)| *coll == c && list.iter().any(|ch| !ch.default))
            .map(|((_, size), list)| (*size, list))
            .collect()
    }
}

/// The bins of `choices` laid over all sizes from 0: `(lo, hi, choice)`,
/// `None` where the run decided nothing (the default holds there).
pub fn segments(choices: &[Choice]) -> Vec<(u64, Option<u64>, Option<&Choice>)> {
    let mut out = Vec::new();
    let mut at = 0u64;
    for c in choices {
        if c.lo > at {
            out.push((at, Some(c.lo), None));
        }
        out.push((c.lo, c.hi, Some(c)));
        match c.hi {
            Some(hi) => at = hi,
            None => return out,
        }
    }
    out.push((at, None, None));
    out
}

/// Runs `mpit-tuner export`.
pub fn run(args: &Args) -> Result<()> {
    let (learned, default_dir) = match (&args.run_dir, &args.store) {
        (Some(dir), None) => {
            if args.filter.any() {
                bail!("--library, --ranks and the other selections are for --store: a run directory is one job");
            }
            (read(dir)?, dir.join("export"))
        }
        (_, Some(store)) => (
            stored::learned(store, &args.filter)?,
            PathBuf::from("export"),
        ),
        (None, None) => bail!("name a run directory, or --store"),
    };
    for note in &learned.notes {
        eprintln!("mpit-tuner: export: {note}");
    }
    let (written, skipped) = write(
        &learned,
        args.format,
        args.output.as_deref(),
        &default_dir,
        args.mpich_lib.as_deref(),
    )?;
    for path in &written {
        println!("wrote {}", path.display());
    }
    for s in &skipped {
        println!("not written: {s}");
    }
    Ok(())
}

/// Writes `learned` in `format` (`All`: every format that applies) to
/// `output` (a file for one format, a directory for `All`; default: the
/// format's file name in `default_dir`). Returns the files written and,
/// for `All`, the formats left out with the reason; an error when nothing
/// could be written.
pub fn write(
    learned: &Learned,
    format: Format,
    output: Option<&Path>,
    default_dir: &Path,
    mpich_lib: Option<&Path>,
) -> Result<(Vec<PathBuf>, Vec<String>)> {
    let formats: Vec<Format> = match format {
        Format::All => vec![Format::OpenmpiRules, Format::MpichJson, Format::Policy],
        f => vec![f],
    };
    let mut written = Vec::new();
    let mut skipped = Vec::new();
    for one in formats {
        let text = match one {
            Format::OpenmpiRules => openmpi::rules(learned),
            Format::MpichJson => mpich::selection(learned, mpich_lib).map_err(|e| e.to_string()),
            Format::Policy => Ok(settings::policy(learned)),
            Format::All => unreachable!("expanded above"),
        };
        let text = match text {
            Ok(t) => t,
            Err(why) if format == Format::All => {
                skipped.push(format!("{}: {why}", one.file_name()));
                continue;
            }
            Err(why) => bail!("{why}"),
        };
        let path = match (output, format) {
            (Some(p), Format::All) => p.join(one.file_name()),
            (Some(p), _) => p.to_path_buf(),
            (None, _) => default_dir.join(one.file_name()),
        };
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("cannot create {}", parent.display()))?;
        }
        std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
        written.push(path);
    }
    if written.is_empty() {
        bail!("nothing written: {}", skipped.join("; "));
    }
    Ok((written, skipped))
}

/// Reads what `dir` learned. Errors name the directory and say what is
/// missing: no logs, missing ranks, no collective records, no decisions,
/// logs of different libraries.
pub fn read(dir: &Path) -> Result<Learned> {
    if !dir.is_dir() {
        bail!("{} is not a directory", dir.display());
    }
    let run = read_run(dir, &HashSet::new(), false)
        .with_context(|| format!("cannot read {}", dir.display()))?;
    learned_from_run(&run)
}

fn learned_from_run(run: &Run) -> Result<Learned> {
    let dir = run.dir.display();
    if run.ranks.is_empty() {
        bail!(
            "{dir} has no readable log (rank-NNNNN.jsonl or node-<host>.jsonl): nothing to export"
        );
    }
    let missing: Vec<&str> = run
        .problems
        .iter()
        .filter(|p| p.kind == ProblemKind::MissingRanks)
        .map(|p| p.detail.as_str())
        .collect();
    if !missing.is_empty() {
        bail!(
            "{dir}: {}: a communicator's decisions may be missing with them; export needs every rank's log",
            missing.join("; ")
        );
    }
    // By the library's name ("" without a header), with the library, its
    // version and the ranks.
    let mut families = BTreeMap::new();
    for log in &run.ranks {
        let h = log.header.as_ref();
        let lib = h.map(|h| &h.library);
        let version = h.map(|h| h.library_version.clone()).unwrap_or_default();
        families
            .entry(lib.map_or("", LibraryFamily::as_str))
            .or_insert_with(|| (lib, version, Vec::new()))
            .2
            .push(log.rank);
    }
    if families.len() > 1 {
        let list: Vec<String> = families
            .iter()
            .map(|(name, (_, _, ranks))| {
                format!(
                    "{} on ranks {}",
                    if name.is_empty() { "unknown" } else { name },
                    tuner_core::decide::format_ranks(ranks)
                )
            })
            .collect();
        bail!(
            "{dir}: the logs name different MPI libraries ({}): not one run",
            list.join(", ")
        );
    }
    let (name, (lib, version, _)) = families.into_iter().next().expect("at least one rank");
    let first_line = version.lines().next().unwrap_or("").trim().to_string();
    if run.ranks.iter().all(|r| r.collectives.is_empty()) {
        bail!(
            "{dir} has no collective records: the run was made with collective tuning off \
             (MPIT_TUNER_COLLECTIVES=off, the policy file's `tune = false`, or a version of the \
             tool before it; it is on by default): nothing to export"
        );
    }
    let Some(family) = lib.and_then(Family::of) else {
        bail!(
            "{dir} was made with {} ({first_line}): export knows the algorithm names of MPICH, Open MPI and MVAPICH2 only",
            if name.is_empty() { "an unknown library" } else { name }
        );
    };
    let records = run
        .ranks
        .iter()
        .flat_map(|log| log.collectives.iter().map(move |r| (log.rank, r)));
    let mut learned = Learned::from_records(family, &first_line, &dir.to_string(), records)
        .map_err(anyhow::Error::msg)?;
    learned.library_file = run
        .ranks
        .iter()
        .filter_map(|log| log.header.as_ref())
        .map(|h| h.library_file.as_str())
        .find(|f| !f.is_empty())
        .map(PathBuf::from);
    if learned.choices.is_empty() {
        // Why: the records that say tuning was off or stopped or left
        // something out, after the searches that began and did not end; or,
        // where no record explains it, that the run was too short.
        let mut why: Vec<String> = Vec::new();
        let mut unfinished: Vec<String> = Vec::new();
        let mut left: Vec<String> = Vec::new();
        let mut explained = false;
        let push_once = |list: &mut Vec<String>, text: String| {
            if !list.contains(&text) {
                list.push(text);
            }
        };
        for log in &run.ranks {
            for r in &log.collectives {
                use CollectiveEvent::{Left, Off, SetupFailed, Skipped, Stopped, Trial};
                let key = || {
                    format!(
                        "{} {} on {}",
                        r.collective.as_deref().unwrap_or("?"),
                        r.bin
                            .map(|(lo, hi)| tuner_core::collectives::bin_text(lo, hi))
                            .unwrap_or_default(),
                        r.comm
                    )
                };
                if r.event == Trial {
                    push_once(&mut unfinished, key());
                } else if r.event == Left {
                    push_once(&mut left, key());
                } else if matches!(r.event, Off | Stopped | SetupFailed | Skipped) {
                    explained |= r.event != Skipped;
                    let text = match &r.message {
                        Some(m) => format!("{}: {m}", r.event),
                        None => r.event.to_string(),
                    };
                    push_once(&mut why, text);
                }
            }
        }
        let settle_ms = tuner_core::collectives::Params::default().settle_ns / 1e6;
        let too_short = format!(
            "a search first settles, {settle_ms} ms of calls by default, then runs each \
             candidate: run longer"
        );
        if !unfinished.is_empty() {
            why.insert(
                0,
                format!(
                    "the run ended before any search did ({} began: {}; {too_short})",
                    unfinished.len(),
                    unfinished.join(", ")
                ),
            );
        } else if !left.is_empty() {
            why.insert(
                0,
                format!(
                    "{LEFT_AT_DEFAULT} ({}): an agreed point between the ranks cost more than \
                     {:.0} calls of each, so the search did not run and the library's own choice \
                     is what the tuner kept; nothing to export",
                    left.join(", "),
                    tuner_core::collectives::search::LEAVE_CALLS
                ),
            );
        } else if !explained {
            why.insert(
                0,
                format!("the run ended before any search began ({too_short})"),
            );
        }
        let why = why.join("; ");
        bail!("{dir} holds no collective tuning decision: {why}");
    }
    Ok(learned)
}

/// How export says that a run's tuner left every collective at the
/// library's default (`left` records, [`CollectiveEvent::Left`]): not an
/// error of the run, and not one that a longer run cures.
pub const LEFT_AT_DEFAULT: &str = "the tuner left every collective at the library's default";

#[cfg(test)]
mod tests {
    use super::*;
    use vocab::record::CollectiveTuning;

    /// A decision record as the tuner writes it.
    pub(crate) fn decision(
        comm: &str,
        size: i32,
        coll: &str,
        bin: (u64, Option<u64>),
        algorithm: &str,
        value: i64,
        time: f64,
    ) -> CollectiveTuning {
        CollectiveTuning {
            comm: comm.into(),
            comm_size: Some(size),
            collective: Some(coll.into()),
            bin: Some(bin),
            algorithm: Some(algorithm.into()),
            value: Some(value),
            time_us: Some(time),
            default_us: Some(100.0),
            calls: Some(10),
            cost_us: Some(5.0),
            ..CollectiveTuning::new(1.0, CollectiveEvent::Decision)
        }
    }

    pub(crate) fn learned(family: Family, records: &[CollectiveTuning]) -> Learned {
        Learned::from_records(
            family,
            "MPICH Version: 4.0.2",
            "run",
            records.iter().map(|r| (0, r)),
        )
        .unwrap()
    }

    #[test]
    fn the_last_decision_per_bin_is_kept_and_conflicts_are_told() {
        let records = [
            decision("c0.0", 4, "allreduce", (0, Some(256)), "auto", 0, 100.0),
            decision(
                "c0.0",
                4,
                "allreduce",
                (0, Some(256)),
                "recursive_doubling",
                3,
                50.0,
            ),
            decision("c0.1", 4, "allreduce", (0, Some(256)), "smp", 2, 90.0),
            decision(
                "c0.0",
                4,
                "allreduce",
                (1 << 20, None),
                "reduce_scatter_allgather",
                4,
                10.0,
            ),
            decision("c0.0", 2, "bcast", (0, Some(256)), "auto", 0, 100.0),
        ];
        let l = learned(Family::Mpich, &records);
        let ar = &l.choices[&(Collective::Allreduce, 4)];
        assert_eq!(ar.len(), 2);
        assert_eq!(ar[0].algorithm, "recursive_doubling");
        assert_eq!(ar[1].algorithm, "reduce_scatter_allgather");
        assert_eq!(l.notes.len(), 1, "{:?}", l.notes);
        assert!(l.notes[0].contains("c0.0 kept recursive_doubling and c0.1 kept smp"));
        assert!(l.choices[&(Collective::Bcast, 2)][0].default);
    }

    /// Open MPI choices that need a commutative operation are told, once
    /// per collective and algorithm; the default, other algorithms and
    /// MPICH (whose CVAR path checks the operation itself) are not.
    #[test]
    fn open_mpi_choices_for_commutative_operations_only_are_told() {
        let records = [
            decision("c0.0", 4, "allreduce", (1 << 20, None), "ring", 4, 50.0),
            decision(
                "c0.1",
                2,
                "allreduce",
                (65536, Some(1 << 20)),
                "ring",
                4,
                50.0,
            ),
            decision(
                "c0.0",
                4,
                "allreduce",
                (0, Some(256)),
                "recursive_doubling",
                3,
                50.0,
            ),
            decision("c0.0", 4, "reduce", (0, None), "binomial", 5, 50.0),
            decision("c0.0", 4, "bcast", (0, None), "binomial", 5, 50.0),
        ];
        let l = learned(Family::OpenMpi, &records);
        assert_eq!(l.notes.len(), 2, "{:?}", l.notes);
        assert!(
            l.notes[0].starts_with(
                "allreduce ring (2 ranks [64 KiB, 1 MiB), 4 ranks >= 1 MiB) combines operands \
                 out of rank order"
            ),
            "{:?}",
            l.notes
        );
        assert!(
            l.notes[1].starts_with("reduce binomial (4 ranks >= 0 B) combines"),
            "{:?}",
            l.notes
        );
        assert!(learned(Family::Mpich, &records).notes.is_empty());
    }

    #[test]
    fn segments_cover_every_size() {
        let records = [
            decision("c0.0", 4, "allreduce", (256, Some(4096)), "smp", 2, 50.0),
            decision(
                "c0.0",
                4,
                "allreduce",
                (65536, Some(1 << 20)),
                "nb",
                1,
                50.0,
            ),
        ];
        let l = learned(Family::Mpich, &records);
        let segs: Vec<(u64, Option<u64>, Option<&str>)> =
            segments(&l.choices[&(Collective::Allreduce, 4)])
                .into_iter()
                .map(|(lo, hi, c)| (lo, hi, c.map(|c| c.algorithm.as_str())))
                .collect();
        assert_eq!(
            segs,
            vec![
                (0, Some(256), None),
                (256, Some(4096), Some("smp")),
                (4096, Some(65536), None),
                (65536, Some(1 << 20), Some("nb")),
                (1 << 20, None, None),
            ]
        );
    }
}
