//! `mpit-tuner report RUN_DIR`: what a run did, from its run directory.
//!
//! Reads every `rank-NNNNN.jsonl` (in parallel, line by line, keeping only
//! running numbers per variable and the time series of the plotted
//! variables) and `summary.json`, then prints a report to the terminal and,
//! on request, writes it as Markdown, exports CSV and draws plots (SVG and
//! PNG). A damaged or partial run directory is reported as such (which
//! file, which line, which ranks), and the rest is still reported.
//!
//! Modules, in the order of the flow: [`reading`] (files to
//! [`reading::Run`]), [`analysis`] (what to tell), [`document`] (the
//! sections), [`tables`] (terminal and Markdown rendering), [`output`] (the
//! files written besides the terminal: [`plots`] as SVG/PNG, [`csv`],
//! Markdown). This file holds the command's arguments and the order of the
//! steps.

pub mod analysis;
pub mod csv;
pub mod document;
mod output;
pub mod plots;
pub mod reading;
pub mod tables;

use anyhow::{bail, Context, Result};
use std::collections::HashSet;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Arguments of `mpit-tuner report`.
#[derive(Debug, clap::Args)]
#[command(after_long_help = "\
What it prints: first what the tool changed (the collectives online tuning \
switched, per communicator, collective and size bin: the default, the \
algorithm that ran instead, its measured gain and what the searches cost; \
the CVAR writes applied; or that nothing changed and why), then run facts \
(library, ranks, hosts, duration, sampling, configuration), the variables that differ most across ranks and change most \
during the run, cross-rank statistics (summary.json's, or recomputed from the \
logs' last samples when it is missing), message sizes per MPI call family, \
classes of ranks, on several hosts each host's ranks and what differs most \
between hosts, every CVAR change with its time and rank, policies (totals of \
those that ran somewhere; the ones for variables this library does not \
export named in one line), recommendations with their evidence and setting, warnings \
counted.

Plots (SVG and PNG, in RUN_DIR/report/ unless --plots says otherwise): \
over-time-VAR (a variable across ranks over time, one line per rank; by \
default what moves: the call rate of the busiest MPI call family, the \
time each rank spends in MPI per second, and the MPI queue length that \
changed most, if any did; else the variable with the largest spread \
across ranks), rank-histograms, \
message-sizes, cvar-changes when a CVAR was written, and collective-tuning \
(the time per call of each candidate algorithm per tuned communicator, \
collective and size) when a search measured one. PNG text uses DejaVu Sans or another system \
font (MPIT_TUNER_FONT=file.ttf to choose); without any font the PNGs have \
no text.

Damaged runs: missing ranks, empty logs, files that are not JSON, cut last \
lines, logs without their close record (job killed), a newer log format, a \
missing summary.json are listed under \"Problems with this run directory\", \
and everything readable is still reported.

Exit status: 0 when something could be reported (even with problems), 2 \
when nothing could (not a run directory, no readable log and no \
summary.json).

Examples:
  mpit-tuner report ./mpit-tuner-20260101-120000-4242
  mpit-tuner report RUN --markdown RUN/report.md --csv RUN/csv
  mpit-tuner report RUN --var pml_ob1_unexpected_msgq_length@world --var tool.send.calls")]
pub struct Args {
    /// The run directory (MPIT_TUNER_DIR of the job): rank-NNNNN.jsonl or
    /// node-<host>.jsonl files and summary.json.
    #[arg(value_name = "RUN_DIR")]
    pub dir: PathBuf,

    /// Also write the report as Markdown to FILE (every row of every table,
    /// with the plots as images).
    #[arg(long, value_name = "FILE")]
    pub markdown: Option<PathBuf>,

    /// Export samples.csv (rank, t, variable, object, element, value) and
    /// writes.csv (every CVAR write) to DIR.
    #[arg(long, value_name = "DIR")]
    pub csv: Option<PathBuf>,

    /// Where to write the plots (SVG and PNG) [default: RUN_DIR/report].
    #[arg(long, value_name = "DIR")]
    pub plots: Option<PathBuf>,

    /// Draw no plots.
    #[arg(long, conflicts_with = "plots")]
    pub no_plots: bool,

    /// A variable to plot across ranks over time: `name` (unbound, or bound
    /// to MPI_COMM_WORLD) or `name@object`. Repeat for several. Default:
    /// what moves (the busiest call family's rate, the time in MPI per
    /// second, the most active queue length; see above).
    #[arg(long = "var", value_name = "NAME")]
    pub vars: Vec<String>,

    /// Rows shown per table in the terminal (0: all); --markdown has all.
    #[arg(long, value_name = "N", default_value_t = 25)]
    pub limit: usize,
}

/// Runs `mpit-tuner report`.
pub fn run(args: &Args) -> Result<ExitCode> {
    let dir = &args.dir;
    check_run_dir(dir)?;
    let wanted = series_wanted(args);
    let run = reading::read_run(dir, &wanted, true)
        .with_context(|| format!("cannot read {}", dir.display()))?;
    if run.is_empty() {
        nothing_to_report(&run);
        return Ok(ExitCode::from(2));
    }
    let mut a = analysis::analyse(&run);
    let mut outputs = document::Outputs::default();
    if !args.no_plots {
        let plot_vars = plot_variables(args, &run, &mut a, &mut outputs.notes);
        let plot_dir = args.plots.clone().unwrap_or_else(|| dir.join("report"));
        output::draw(
            &run,
            &a,
            &plot_vars,
            &plot_dir,
            args.markdown.as_deref(),
            &mut outputs,
        );
    }
    if let Some(csv_dir) = &args.csv {
        output::export_csv(&run, &a, csv_dir, &mut outputs);
    }
    if let Some(md) = &args.markdown {
        outputs.markdown = Some(md.display().to_string());
    }
    let doc = document::build(&run, &a, &outputs);
    if let Some(md) = &args.markdown {
        output::write_markdown(md, &doc)?;
    }
    let mut out = std::io::stdout().lock();
    out.write_all(doc.terminal(args.limit).as_bytes())?;
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// Fails unless `dir` is a directory with rank files or a summary.json.
fn check_run_dir(dir: &Path) -> Result<()> {
    if !dir.is_dir() {
        bail!(
            "{} is not a directory (give the run directory the job wrote: MPIT_TUNER_DIR)",
            dir.display()
        );
    }
    let files = vocab::rank_files(dir).with_context(|| format!("cannot list {}", dir.display()))?;
    if files.is_empty() && !dir.join("summary.json").exists() {
        bail!(
            "{} is not a run directory: it has no rank-NNNNN.jsonl, no node-<host>.jsonl and no summary.json",
            dir.display()
        );
    }
    Ok(())
}

/// The variables to keep time series of: the ones asked for, else the
/// default plots' that summary.json tells (the others are read after, see
/// [`plot_variables`]).
fn series_wanted(args: &Args) -> HashSet<String> {
    let mut wanted: HashSet<String> = HashSet::new();
    for v in &args.vars {
        wanted.insert(v.clone());
        if !v.contains('@') {
            wanted.insert(format!("{v}@world"));
        }
    }
    if args.vars.is_empty() && !args.no_plots {
        if let Some(s) = reading::read_summary(&args.dir, &mut Vec::new()) {
            for p in analysis::default_plots(&s.variables, &[], s.size) {
                wanted.insert(p.key);
            }
        }
    }
    wanted
}

/// Tells on standard error why there is nothing to report.
fn nothing_to_report(run: &reading::Run) {
    let mut err = std::io::stderr().lock();
    let _ = writeln!(
        err,
        "mpit-tuner: nothing to report in {}:",
        run.dir.display()
    );
    for p in &run.problems {
        let _ = writeln!(
            err,
            "  {}{}",
            p.file
                .as_deref()
                .map(|f| format!("{f}: "))
                .unwrap_or_default(),
            p.detail
        );
    }
}

/// What to plot over time: the variables asked for that the logs have (a
/// note for the others), else what moves (see
/// [`analysis::default_plots`]), each series read now if it was not kept
/// on the first pass.
fn plot_variables(
    args: &Args,
    run: &reading::Run,
    a: &mut analysis::Analysis,
    notes: &mut Vec<String>,
) -> Vec<analysis::OverTime> {
    if !args.vars.is_empty() {
        return asked_variables(&args.vars, a, notes)
            .into_iter()
            .map(|key| analysis::OverTime { key, rate: false })
            .collect();
    }
    let plots = analysis::default_plots(&a.stats, &a.activity, run.size);
    for p in &plots {
        if !a.series.contains_key(&p.key) {
            let more = reading::read_series(run, &p.key);
            if !more.is_empty() {
                a.series.insert(p.key.clone(), more);
            }
        }
    }
    plots
}

/// The `--var` variables with a series (`name` also as `name@world`); a
/// note, with similar names, for each one the logs do not have.
fn asked_variables(
    vars: &[String],
    a: &analysis::Analysis,
    notes: &mut Vec<String>,
) -> Vec<String> {
    let mut plot_vars: Vec<String> = Vec::new();
    for v in vars {
        let key = if a.series.contains_key(v) {
            v.clone()
        } else {
            format!("{v}@world")
        };
        if a.series.contains_key(&key) {
            plot_vars.push(key);
        } else {
            let known: Vec<&str> = a
                .activity
                .iter()
                .map(|x| x.key.as_str())
                .filter(|k| k.contains(v.as_str()) || v.contains(*k))
                .take(5)
                .collect();
            notes.push(format!(
                "--var {v}: no such variable in the logs{}",
                if known.is_empty() {
                    String::new()
                } else {
                    format!(" (similar: {})", known.join(", "))
                }
            ));
        }
    }
    plot_vars
}
