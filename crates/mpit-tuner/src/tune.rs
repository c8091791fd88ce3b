//! `mpit-tuner tune`: collective tuning across runs, for libraries that
//! read the algorithm only at start (Open MPI 4.1, MVAPICH2 2.3.7).
//!
//! It reruns the job: once with the library's defaults, then once per
//! (collective, algorithm) with that algorithm chosen in the environment
//! before start, each run under the tuner in measure mode
//! (`MPIT_TUNER_COLLECTIVES=measure`), which times the application's own
//! calls per communicator size, collective and message-size bin, agreed
//! across ranks. The best algorithm per (collective, bin) is kept when it
//! beats the default by the margin; the results go to `tune.json`, and the
//! one setting per collective that minimises its total measured time to
//! `tune.env`, ready to be sourced before the job.

use crate::run::Launch;
use anyhow::{bail, Context, Result};
use clap::Args;
use serde::Serialize;
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use tuner_core::collectives::{self, Collective, COLLECTIVES};
use vocab::record::{CollectiveEvent, LibraryFamily, Record};

const AFTER_HELP: &str = "\
Example: mpit-tuner tune --collectives allreduce,bcast -- mpiexec -n 4 ./app

Runs the job once with the library's defaults, then once per algorithm of \
every collective the first run saw (or of --collectives), with that \
algorithm set in the environment before start: MPICH \
MPIR_CVAR_<COLL>_INTRA_ALGORITHM=<name>, Open MPI \
OMPI_MCA_coll_tuned_use_dynamic_rules=1 and \
OMPI_MCA_coll_tuned_<coll>_algorithm=<value>, MVAPICH2 \
MPIR_CVAR_<COLL>_COLLECTIVE_ALGORITHM=<value>. Every run is measured by the \
tuner on the application's own calls (MPIT_TUNER_COLLECTIVES=measure, \
policies off): the time per call of each collective per communicator size \
and message-size bin, the maximum over ranks of each rank's mean.

Writes into --dir: run-NNN-* (each run's logs), tune.json (every \
measurement and the choice per collective and bin) and tune.env (one \
`export` line per collective whose best single algorithm beats the default \
by the margin over all its calls; a variable holds one algorithm for all \
sizes). The choices also go into the tuning store (--store FILE, else the \
one a job run from here would use; --no-store: none), under the job's \
library, ranks and ranks per node, where later runs with the tuner start \
from them. A run that fails (an algorithm the library refuses for this job) \
is reported and its algorithm left out. Algorithms that give wrong data \
on some calls are not tried: Open MPI's allgather sparbit and 4.1's \
alltoall modified_bruck, MVAPICH2's alltoall inplace_alltoall. MVAPICH2's \
algorithms are the numbers of MVAPICH2 2.3.7's own enums, named as its \
source names them (-1, its own choice: `default`). The exit status is 0 \
when the default run worked, else the launcher's.

Use a command that makes the same collective calls as the real job, \
shorter if it can: the choices hold for what was measured.";

/// Options of `mpit-tuner tune`.
#[derive(Debug, Args)]
#[command(after_long_help = AFTER_HELP)]
pub struct TuneArgs {
    /// Where the runs and results go (default: a new mpit-tune-<time>
    /// directory in the working directory).
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,

    /// The collectives to tune, such as `allreduce,bcast` (default: every
    /// one the default run called).
    #[arg(long, value_name = "LIST")]
    collectives: Option<String>,

    /// An algorithm must be this much faster than the default to be kept
    /// (0.05: 5%).
    #[arg(long, value_name = "FRACTION", default_value_t = 0.05)]
    margin: f64,

    /// Runs per setting (the default's included), in interleaved rounds;
    /// the median time per call of a setting's runs is what is compared.
    #[arg(long, value_name = "N", default_value_t = 1)]
    reps: u32,

    /// Also store the choices in this tuning store, where later runs with
    /// the tuner start from them (default: the store those runs would use,
    /// `MPIT_TUNER_STORE` or the user's cache; docs/tuning-store.md).
    #[arg(long, value_name = "FILE", conflicts_with = "no_store")]
    store: Option<PathBuf>,

    /// Do not store the choices.
    #[arg(long)]
    no_store: bool,

    #[command(flatten)]
    launch: Launch,
}

/// One measured (communicator size, collective, bin).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
struct Key {
    comm_size: i32,
    collective: &'static str,
    bin: (u64, Option<u64>),
}

/// What one run measured: per key, (time per call in us, calls).
type Measured = BTreeMap<Key, (f64, u64)>;

/// A collective's variable and algorithms, from the default run.
#[derive(Debug, Clone)]
struct Variable {
    cvar: String,
    start: (String, i64),
    algorithms: Vec<(String, i64)>,
}

/// One run.
#[derive(Debug, Clone, Serialize)]
struct RunResult {
    dir: PathBuf,
    /// `None` for the default run.
    collective: Option<&'static str>,
    algorithm: Option<String>,
    /// The round (1 to --reps).
    round: u32,
    setting: Option<(String, String)>,
    exit_status: Option<i32>,
    ok: bool,
    #[serde(skip)]
    measured: Measured,
}

/// The outcome per key, in tune.json.
#[derive(Debug, Serialize)]
struct Choice {
    comm_size: i32,
    collective: &'static str,
    bin: (u64, Option<u64>),
    calls: u64,
    default: String,
    default_us: f64,
    /// (algorithm, time per call in us) of every run that measured it.
    measured: Vec<(String, f64)>,
    chosen: String,
    chosen_us: f64,
    gain: f64,
}

#[derive(Debug, Serialize)]
struct TuneJson<'a> {
    library: LibraryFamily,
    command: Vec<String>,
    margin: f64,
    runs: &'a [RunResult],
    choices: Vec<Choice>,
    /// The settings written to tune.env.
    settings: Vec<(String, String)>,
}

/// Runs `mpit-tuner tune`.
pub fn run(args: &TuneArgs) -> Result<ExitCode> {
    if !(0.0..1.0).contains(&args.margin) {
        bail!("--margin {}: a fraction from 0 to 1", args.margin);
    }
    if args.reps == 0 {
        bail!("--reps 0: at least one run per setting");
    }
    let wanted = match &args.collectives {
        Some(list) => parse_list(list)?,
        None => Vec::new(),
    };
    let dir = match &args.dir {
        Some(d) => d.clone(),
        None => PathBuf::from(format!(
            "mpit-tune-{}",
            jiff::Timestamp::now().strftime("%Y%m%d-%H%M%S")
        )),
    };
    let dir = std::path::absolute(&dir).with_context(|| format!("{}", dir.display()))?;
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let preload = crate::run::preload(args.launch.lib.as_deref())?;
    let open_mpi = crate::run::is_open_mpi(&args.launch.command[0]);

    let mut runs = Vec::new();
    eprintln!("mpit-tuner tune: run 0, the library's defaults");
    let first = measure(args, &dir, 0, 1, &preload, None)?;
    if !first.ok {
        eprintln!(
            "mpit-tuner tune: the run with the library's defaults failed (status {:?}; logs in {}): nothing to tune",
            first.exit_status,
            first.dir.display()
        );
        return Ok(ExitCode::from(
            first.exit_status.map_or(1, |c| (c & 0xff) as u8).max(1),
        ));
    }
    let (library, version, library_file, variables) = read_variables(&first.dir)?;
    if first.measured.is_empty() {
        eprintln!(
            "mpit-tuner tune: the run with the library's defaults measured no collective: a collective is measured in windows of 8 calls after 2 warm-up calls, on communicators of 2 ranks or more; nothing to tune (logs in {})",
            first.dir.display()
        );
        return Ok(ExitCode::from(1));
    }
    let seen: Vec<&'static str> = {
        let mut v: Vec<_> = first.measured.keys().map(|k| k.collective).collect();
        v.dedup();
        v
    };
    let todo: Vec<Collective> = COLLECTIVES
        .iter()
        .copied()
        .filter(|c| {
            if wanted.is_empty() {
                seen.contains(&c.name())
            } else {
                wanted.contains(c)
            }
        })
        .collect();
    for c in &wanted {
        if !seen.contains(&c.name()) {
            eprintln!(
                "mpit-tuner tune: {}: the default run made no such call on a communicator of 2 ranks or more; its runs will measure nothing",
                c.name()
            );
        }
    }
    runs.push(first);
    // Every setting: (collective, algorithm, environment setting).
    let mut plan: Vec<(Collective, String, (String, String))> = Vec::new();
    // Open MPI and MVAPICH2: what this version never runs right on every
    // call is not tried (a job whose types differ would get wrong data).
    let library_version = mpit::quirks::LibraryVersion::parse(&version);
    for c in &todo {
        let Some(var) = variables.get(c.name()) else {
            eprintln!(
                "mpit-tuner tune: {}: this library has no algorithm variable the tuner knows; skipped",
                c.name()
            );
            continue;
        };
        if var.algorithms.is_empty() {
            eprintln!(
                "mpit-tuner tune: {}: {} lists no algorithms (no names, no enumeration); skipped",
                c.name(),
                var.cvar
            );
            continue;
        }
        for (name, value) in &var.algorithms {
            if *value == var.start.1 {
                continue;
            }
            if let Some(why) = collectives::left_out(library_version, *c, name) {
                eprintln!("mpit-tuner tune: {}: `{name}` {why}: not tried", var.cvar);
                continue;
            }
            plan.push((
                *c,
                name.clone(),
                setting(&library, open_mpi, var, name, *value),
            ));
        }
    }
    // Interleaved rounds: a slow phase of the machine hits every setting
    // alike rather than one.
    for round in 1..=args.reps {
        if round > 1 {
            eprintln!(
                "mpit-tuner tune: round {round} of {}, the library's defaults",
                args.reps
            );
            let r = measure(args, &dir, 0, round, &preload, None)?;
            report_failure(&r, 0);
            runs.push(r);
        }
        for (i, (c, name, setting)) in plan.iter().enumerate() {
            let n = i + 1;
            eprintln!(
                "mpit-tuner tune: run {n}{}, {} = {name} ({}={})",
                if args.reps > 1 {
                    format!(" round {round}")
                } else {
                    String::new()
                },
                c.name(),
                setting.0,
                setting.1
            );
            let r = measure(
                args,
                &dir,
                n,
                round,
                &preload,
                Some((*c, name.clone(), setting.clone())),
            )?;
            report_failure(&r, n);
            runs.push(r);
        }
    }
    let combined = combine(&runs);
    let choices = choose(&combined, &variables, args.margin);
    let settings = single_settings(&combined, &variables, &library, open_mpi, args.margin);
    print_table(&choices, &settings);
    let json = TuneJson {
        library: library.clone(),
        command: args
            .launch
            .command
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect(),
        margin: args.margin,
        runs: &runs,
        choices,
        settings: settings.clone(),
    };
    let path = dir.join("tune.json");
    std::fs::write(&path, serde_json::to_string_pretty(&json)? + "\n")
        .with_context(|| format!("cannot write {}", path.display()))?;
    let mut env = format!(
        "# mpit-tuner tune: the algorithm per collective that minimised its measured time\n\
         # over all the calls of `{}` ({library}); source it before the job.\n\
         # One variable holds one algorithm for every message size: tune.json has the\n\
         # best algorithm per size bin.\n",
        json.command.join(" ")
    );
    if settings.is_empty() {
        env.push_str("# No algorithm beat the default by the margin: nothing to set.\n");
    }
    for (k, v) in &settings {
        let _ = writeln!(env, "export {k}={v}");
    }
    let path = dir.join("tune.env");
    std::fs::write(&path, env).with_context(|| format!("cannot write {}", path.display()))?;
    println!("results: {}", dir.join("tune.json").display());
    println!("settings: {}", path.display());
    export_choices(
        &json.choices,
        &variables,
        (&library, &version, &library_file),
        &dir,
    );
    if !args.no_store {
        match store_choices(
            args.store.as_deref(),
            &json.choices,
            &variables,
            &runs[0].dir,
        ) {
            Ok(said) => println!("{said}"),
            Err(e) => eprintln!("mpit-tuner tune: {e:#}; the choices are not stored"),
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `ch`'s collective and the value of its chosen algorithm (`None` for a
/// collective whose variable the default run did not list).
fn chosen_of(
    ch: &Choice,
    variables: &BTreeMap<&'static str, Variable>,
) -> Option<(Collective, Option<i64>)> {
    let c = Collective::parse(ch.collective)?;
    let var = variables.get(ch.collective)?;
    let value = var
        .algorithms
        .iter()
        .find(|(n, _)| *n == ch.chosen)
        .map(|(_, v)| *v);
    Some((c, value))
}

/// The modes a stored choice is written for: an algorithm measured on
/// every call holds for the calls `safe` switches as for `all`'s.
const STORE_MODES: [&str; 2] = ["safe", "all"];

/// Writes `choices` into the tuning store (`explicit`, else the one a job
/// run from here would use), under the job's key as a run of it would
/// look it up: the library and version, ranks and ranks per node of the
/// default run in `default_dir`. Returns what to say.
fn store_choices(
    explicit: Option<&Path>,
    choices: &[Choice],
    variables: &BTreeMap<&'static str, Variable>,
    default_dir: &Path,
) -> Result<String> {
    if explicit.is_none() && tuner_core::run::store_from_env().0.user.is_none() {
        return Ok(
            "tuning store: off (MPIT_TUNER_STORE, or no cache directory): the choices are not \
             stored; name one with --store FILE"
                .to_string(),
        );
    }
    let path = crate::store::store_path(explicit)?;
    let (version, ranks, per_node) = job_of(default_dir)?;
    let now = tuning_store::now_unix();
    let mut entries = Vec::new();
    for mode in STORE_MODES {
        let job = tuner_core::run::store_job(&version, ranks, per_node, mode);
        for ch in choices {
            let Some((collective, value)) = chosen_of(ch, variables) else {
                continue;
            };
            entries.push(tuning_store::Entry {
                job: job.clone(),
                place: tuning_store::Place {
                    comm_size: ch.comm_size,
                    collective,
                    bin: ch.bin,
                },
                algorithm: ch.chosen.clone(),
                value,
                default: ch.default.clone(),
                left: false,
                default_us: Some(ch.default_us),
                chosen_us: Some(ch.chosen_us),
                runs: 1,
                updated_unix: now,
                run_dir: Some(default_dir.display().to_string()),
            });
        }
    }
    if entries.is_empty() {
        return Ok("tuning store: nothing measured to store".to_string());
    }
    let n = entries.len() / STORE_MODES.len();
    let shape = entries[0].job.shape();
    let done = tuning_store::change(&path, tuning_store::LOCK_WAIT, |s| s.merge(entries))
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut said = format!(
        "tuning store: {n} choice{} for {shape} stored in {} (modes safe and all)",
        if n == 1 { "" } else { "s" },
        path.display()
    );
    if let Some((aside, why)) = done.moved_aside {
        said.push_str(&format!(
            "; it was damaged ({why}) and is moved to {}",
            aside.display()
        ));
    }
    Ok(said)
}

/// The tuned job's library version, ranks, and ranks per node (counted
/// by host from the ranks' headers; `None` when the nodes differ), from
/// the default run's logs.
fn job_of(dir: &Path) -> Result<(mpit::quirks::LibraryVersion, i32, Option<i32>)> {
    let files = vocab::read::rank_files(dir).with_context(|| format!("{}", dir.display()))?;
    let mut per_host: BTreeMap<String, i32> = BTreeMap::new();
    let mut first = None;
    for f in &files {
        let header = f.records()?.flatten().find_map(|(_, r)| match r {
            Record::Header(h) => Some(h),
            _ => None,
        });
        let Some(h) = header else { continue };
        *per_host.entry(h.host.clone()).or_default() += 1;
        first.get_or_insert((h.library_version.clone(), h.size));
    }
    let Some((version, ranks)) = first else {
        bail!("{}: no rank log with a header", dir.display());
    };
    let counted: i32 = per_host.values().sum();
    let mut counts = per_host.values();
    let per_node = match counts.next() {
        Some(&n) if counted == ranks && counts.all(|&m| m == n) => Some(n),
        _ => None,
    };
    Ok((
        mpit::quirks::LibraryVersion::parse(&version),
        ranks,
        per_node,
    ))
}

/// Says so when run `n` failed (it is left out).
fn report_failure(r: &RunResult, n: usize) {
    if !r.ok {
        eprintln!(
            "mpit-tuner tune: run {n}{} ({}) failed (status {:?}): left out; its logs are in {}",
            if r.round > 1 {
                format!(" round {}", r.round)
            } else {
                String::new()
            },
            match (&r.collective, &r.algorithm) {
                (Some(c), Some(a)) => format!("{c} = {a}"),
                _ => "the library's defaults".to_string(),
            },
            r.exit_status,
            r.dir.display()
        );
    }
}

/// One result per setting (the default first, then in run order): per
/// key, the median time per call over the setting's runs that worked and
/// measured it (the mean of the middle two for an even count).
fn combine(runs: &[RunResult]) -> Vec<RunResult> {
    let mut out: Vec<RunResult> = Vec::new();
    let mut times: Vec<BTreeMap<Key, Vec<(f64, u64)>>> = Vec::new();
    for r in runs {
        let i = match out
            .iter()
            .position(|o| o.collective == r.collective && o.algorithm == r.algorithm)
        {
            Some(i) => i,
            None => {
                let mut first = r.clone();
                first.ok = false;
                first.measured = Measured::new();
                out.push(first);
                times.push(BTreeMap::new());
                out.len() - 1
            }
        };
        if !r.ok {
            continue;
        }
        out[i].ok = true;
        for (key, &m) in &r.measured {
            times[i].entry(*key).or_default().push(m);
        }
    }
    for (o, t) in out.iter_mut().zip(times) {
        for (key, mut list) in t {
            list.sort_by(|a, b| a.0.total_cmp(&b.0));
            let n = list.len();
            let median = if n % 2 == 1 {
                list[n / 2].0
            } else {
                (list[n / 2 - 1].0 + list[n / 2].0) / 2.0
            };
            o.measured.insert(key, (median, list[0].1));
        }
    }
    out
}

/// Writes what `choices` found as the files of `mpit-tuner export`
/// (DIR/export/: an Open MPI rules file, an MPICH selection JSON, a
/// pre-init policy, those that apply to the library: MVAPICH2 gets the
/// policy only); says why not where none applies.
fn export_choices(
    choices: &[Choice],
    variables: &BTreeMap<&'static str, Variable>,
    (library, version, library_file): (&LibraryFamily, &str, &str),
    dir: &Path,
) {
    let Some(family) = crate::export::Family::of(library) else {
        println!(
            "export: not written: the export formats know MPICH, Open MPI and MVAPICH2, not {library}"
        );
        return;
    };
    let mut learned = crate::export::Learned {
        family,
        version: version.lines().next().unwrap_or("").trim().to_string(),
        source: dir.display().to_string(),
        library_file: (!library_file.is_empty()).then(|| PathBuf::from(library_file)),
        choices: BTreeMap::new(),
        notes: Vec::new(),
    };
    for ch in choices {
        let Some((c, value)) = chosen_of(ch, variables) else {
            continue;
        };
        learned
            .choices
            .entry((c, ch.comm_size))
            .or_default()
            .push(crate::export::Choice {
                lo: ch.bin.0,
                hi: ch.bin.1,
                algorithm: ch.chosen.clone(),
                value,
                default: family.is_default(value, &ch.chosen),
                default_us: ch.default_us,
                time_us: ch.chosen_us,
                comm: format!("communicators of {} ranks", ch.comm_size),
            });
    }
    for list in learned.choices.values_mut() {
        list.sort_by_key(|c| c.lo);
    }
    match crate::export::write(
        &learned,
        crate::export::Format::All,
        None,
        &dir.join("export"),
        None,
    ) {
        Ok((written, skipped)) => {
            for p in written {
                println!("export: {}", p.display());
            }
            for s in skipped {
                println!("export: not written: {s}");
            }
        }
        Err(e) => println!("export: nothing written: {e:#}"),
    }
}

fn parse_list(list: &str) -> Result<Vec<Collective>> {
    let mut out = Vec::new();
    for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        match Collective::parse(item) {
            Some(c) if !out.contains(&c) => out.push(c),
            Some(_) => {}
            None => bail!(
                "--collectives: `{item}` is not a collective the tuner knows ({})",
                COLLECTIVES.map(|c| c.name()).join(", ")
            ),
        }
    }
    if out.is_empty() {
        bail!("--collectives names no collective");
    }
    Ok(out)
}

/// The environment variable and value that choose `name` before start.
fn setting(
    library: &LibraryFamily,
    open_mpi: bool,
    var: &Variable,
    name: &str,
    value: i64,
) -> (String, String) {
    if open_mpi || *library == LibraryFamily::OpenMpi {
        (format!("OMPI_MCA_{}", var.cvar), value.to_string())
    } else if *library == LibraryFamily::Mpich {
        (var.cvar.clone(), name.to_string())
    } else {
        (var.cvar.clone(), value.to_string())
    }
}

/// `settings` with what makes them count: Open MPI's coll/tuned reads a
/// forced algorithm only with dynamic rules on.
fn with_dynamic_rules(mut settings: Vec<(String, String)>) -> Vec<(String, String)> {
    const SWITCH: &str = "OMPI_MCA_coll_tuned_use_dynamic_rules";
    let forced = settings
        .iter()
        .any(|(k, _)| k.starts_with("OMPI_MCA_coll_tuned_") && k != SWITCH);
    if forced && !settings.iter().any(|(k, _)| k == SWITCH) {
        settings.insert(0, (SWITCH.into(), "1".into()));
    }
    settings
}

/// One measured run: the job under the tuner in measure mode, with
/// `choice` (collective, algorithm, environment setting) set.
fn measure(
    args: &TuneArgs,
    dir: &Path,
    n: usize,
    round: u32,
    preload: &(OsString, OsString),
    choice: Option<(Collective, String, (String, String))>,
) -> Result<RunResult> {
    let mut label = match &choice {
        Some((c, name, _)) => format!("run-{n:03}-{}-{name}", c.name()),
        None => format!("run-{n:03}-default"),
    };
    if args.reps > 1 {
        label.push_str(&format!("-r{round}"));
    }
    let run_dir = dir.join(&label);
    if run_dir.exists() {
        std::fs::remove_dir_all(&run_dir)
            .with_context(|| format!("cannot clear {}", run_dir.display()))?;
    }
    std::fs::create_dir_all(&run_dir)
        .with_context(|| format!("cannot create {}", run_dir.display()))?;
    let mut env: Vec<(OsString, OsString)> = vec![
        preload.clone(),
        ("MPIT_TUNER_DIR".into(), run_dir.clone().into()),
        ("MPIT_TUNER_COLLECTIVES".into(), "measure".into()),
        ("MPIT_TUNER_POLICY".into(), "none".into()),
        ("MPIT_TUNER_QUIET".into(), "1".into()),
    ];
    if let Some((_, _, s)) = &choice {
        for (k, v) in with_dynamic_rules(vec![s.clone()]) {
            env.push((k.into(), v.into()));
        }
    }
    let status = crate::run::launch(&args.launch.command, &env)?;
    let measured = read_measured(&run_dir).unwrap_or_else(|e| {
        eprintln!("mpit-tuner tune: {label}: {e:#}");
        Measured::new()
    });
    Ok(RunResult {
        dir: run_dir,
        collective: choice.as_ref().map(|(c, _, _)| c.name()),
        algorithm: choice.as_ref().map(|(_, a, _)| a.clone()),
        round,
        setting: choice.map(|(_, _, s)| s),
        exit_status: status.code(),
        ok: status.success(),
        measured,
    })
}

/// The `measured` records of a run, once per communicator (its ranks
/// log the same numbers), combined per key: calls-weighted mean.
fn read_measured(dir: &Path) -> Result<Measured> {
    let mut per_comm: BTreeMap<(String, Key), (f64, u64)> = BTreeMap::new();
    let files = vocab::read::rank_files(dir).with_context(|| format!("{}", dir.display()))?;
    for f in files {
        for item in f.records()?.only(&["collective"]) {
            let Ok((_, Record::Collective(r))) = item else {
                continue;
            };
            if r.event != CollectiveEvent::Measured {
                continue;
            }
            let (Some(size), Some(coll), Some(bin), Some(us), Some(calls)) = (
                r.comm_size,
                r.collective.as_deref().and_then(Collective::parse),
                r.bin,
                r.time_us,
                r.calls,
            ) else {
                continue;
            };
            let key = Key {
                comm_size: size,
                collective: coll.name(),
                bin,
            };
            per_comm.entry((r.comm.clone(), key)).or_insert((us, calls));
        }
    }
    let mut out = Measured::new();
    for ((_, key), (us, calls)) in per_comm {
        let e = out.entry(key).or_insert((0.0, 0));
        let total = e.0 * e.1 as f64 + us * calls as f64;
        e.1 += calls;
        e.0 = if e.1 == 0 { 0.0 } else { total / e.1 as f64 };
    }
    Ok(out)
}

/// The library (family, version, file) and each collective's variable,
/// from rank 0 of the default run.
type LibraryAndVariables = (
    LibraryFamily,
    String,
    String,
    BTreeMap<&'static str, Variable>,
);

fn read_variables(dir: &Path) -> Result<LibraryAndVariables> {
    let files = vocab::read::rank_files(dir).with_context(|| format!("{}", dir.display()))?;
    let Some(first) = files.first() else {
        bail!("{}: no rank log: did the tuner start?", dir.display());
    };
    // Nameless until the header says.
    let mut library = LibraryFamily::Other(String::new());
    let mut version = String::new();
    let mut library_file = String::new();
    let mut vars = BTreeMap::new();
    let mut why_off = None;
    for (_, record) in first.records()?.flatten() {
        match record {
            Record::Header(h) => {
                library = h.library.clone();
                version = h.library_version.clone();
                library_file = h.library_file.clone();
            }
            Record::Collective(r) if r.event == CollectiveEvent::Algorithms => {
                let Some(c) = r.collective.as_deref().and_then(Collective::parse) else {
                    continue;
                };
                vars.insert(
                    c.name(),
                    Variable {
                        cvar: r.message.clone().unwrap_or_default(),
                        start: (
                            r.algorithm.clone().unwrap_or_default(),
                            r.value.unwrap_or(0),
                        ),
                        algorithms: r
                            .algorithms
                            .iter()
                            .map(|a| (a.name.clone(), a.value))
                            .collect(),
                    },
                );
            }
            Record::Collective(r) if r.event == CollectiveEvent::Off => why_off = r.message.clone(),
            _ => {}
        }
    }
    if vars.is_empty() {
        bail!(
            "{}: the tuner measured no collective{}",
            first.path.display(),
            why_off.map_or_else(String::new, |w| format!(": {w}"))
        );
    }
    Ok((library, version, library_file, vars))
}

/// The best algorithm per key.
fn choose(runs: &[RunResult], vars: &BTreeMap<&'static str, Variable>, margin: f64) -> Vec<Choice> {
    let Some(default) = runs.first() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (key, &(default_us, calls)) in &default.measured {
        let Some(var) = vars.get(key.collective) else {
            continue;
        };
        let mut measured = vec![(var.start.0.clone(), default_us)];
        for r in runs.iter().skip(1).filter(|r| r.ok) {
            if r.collective != Some(key.collective) {
                continue;
            }
            if let (Some(a), Some(&(us, _))) = (&r.algorithm, r.measured.get(key)) {
                measured.push((a.clone(), us));
            }
        }
        let best = measured
            .iter()
            .skip(1)
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .filter(|b| b.1 < default_us * (1.0 - margin));
        let (chosen, chosen_us) = best.cloned().unwrap_or_else(|| measured[0].clone());
        out.push(Choice {
            comm_size: key.comm_size,
            collective: key.collective,
            bin: key.bin,
            calls,
            default: var.start.0.clone(),
            default_us,
            measured,
            chosen,
            chosen_us,
            gain: if chosen_us > 0.0 {
                default_us / chosen_us
            } else {
                1.0
            },
        });
    }
    out
}

/// Per collective, the one algorithm whose measured time over all its
/// calls (every key of the collective) is lowest, if it beats the default
/// by the margin: what a single environment variable can say.
fn single_settings(
    runs: &[RunResult],
    vars: &BTreeMap<&'static str, Variable>,
    library: &LibraryFamily,
    open_mpi: bool,
    margin: f64,
) -> Vec<(String, String)> {
    let Some(default) = runs.first() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (coll, var) in vars {
        let keys: Vec<&Key> = default
            .measured
            .keys()
            .filter(|k| k.collective == *coll)
            .collect();
        if keys.is_empty() {
            continue;
        }
        let total = |m: &Measured| -> Option<f64> {
            keys.iter()
                .map(|k| {
                    let calls = default.measured[*k].1 as f64;
                    m.get(*k).map(|&(us, _)| us * calls)
                })
                .sum()
        };
        let Some(default_total) = total(&default.measured) else {
            continue;
        };
        let best = runs
            .iter()
            .skip(1)
            .filter(|r| r.ok && r.collective == Some(*coll))
            .filter_map(|r| Some((r, total(&r.measured)?)))
            .min_by(|a, b| a.1.total_cmp(&b.1));
        if let Some((r, t)) = best {
            if t < default_total * (1.0 - margin) {
                if let Some(algorithm) = &r.algorithm {
                    let value = var
                        .algorithms
                        .iter()
                        .find(|(n, _)| n == algorithm)
                        .map_or(0, |(_, v)| *v);
                    out.push(setting(library, open_mpi, var, algorithm, value));
                }
            }
        }
    }
    with_dynamic_rules(out)
}

fn print_table(choices: &[Choice], settings: &[(String, String)]) {
    println!(
        "{:<6} {:<22} {:<24} {:>8} {:<26} {:>12} {:<26} {:>12} {:>6}",
        "ranks", "collective", "bin", "calls", "default", "us/call", "best", "us/call", "gain"
    );
    for c in choices {
        let bin = collectives::bin_text(c.bin.0, c.bin.1);
        println!(
            "{:<6} {:<22} {:<24} {:>8} {:<26} {:>12.3} {:<26} {:>12.3} {:>6.2}",
            c.comm_size,
            c.collective,
            bin,
            c.calls,
            c.default,
            c.default_us,
            c.chosen,
            c.chosen_us,
            c.gain
        );
    }
    if settings.is_empty() {
        println!("no single algorithm per collective beat the default by the margin");
    }
    for (k, v) in settings {
        println!("set before start: {k}={v}");
    }
}
