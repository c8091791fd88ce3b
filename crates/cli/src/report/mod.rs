//! `mpit-tuner report RUN_DIR`: what a run did, from its run directory.
//!
//! Reads every `rank-NNNNN.jsonl` (in parallel, line by line, keeping only
//! running numbers per variable and the time series of the plotted
//! variables) and `summary.json`, then prints a report to the terminal and,
//! on request, writes it as Markdown, exports CSV and draws plots (SVG and
//! PNG). A damaged or partial run directory is reported as such (which
//! file, which line, which ranks), and the rest is still reported.
//!
//! Modules: [`reading`] (files to [`reading::Run`]), [`analysis`] (what to
//! tell), [`document`] (the sections), [`tables`] (terminal and Markdown
//! rendering), [`plots`] (SVG/PNG), [`csv`].

pub mod analysis;
pub mod csv;
pub mod document;
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
What it prints: run facts (library, ranks, hosts, duration, sampling, \
configuration), the variables that differ most across ranks and change most \
during the run, cross-rank statistics (summary.json's, or recomputed from the \
logs' last samples when it is missing), message sizes per MPI call family, \
classes of ranks, every CVAR change with its time and rank, policies (totals, \
disabled ones), recommendations with their evidence and setting, warnings \
counted.

Plots (SVG and PNG, in RUN_DIR/report/ unless --plots says otherwise): \
over-time-VAR (a variable across ranks over time, one line per rank; by \
default the one with the largest spread across ranks), rank-histograms, \
message-sizes, cvar-changes. PNG text uses DejaVu Sans or another system \
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
    /// The run directory (MPIT_TUNER_DIR of the job): rank-NNNNN.jsonl files
    /// and summary.json.
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
    /// to MPI_COMM_WORLD) or `name@object`. Repeat for several. Default: the
    /// variable with the largest spread across ranks.
    #[arg(long = "var", value_name = "NAME")]
    pub vars: Vec<String>,

    /// Rows shown per table in the terminal (0: all); --markdown has all.
    #[arg(long, value_name = "N", default_value_t = 25)]
    pub limit: usize,
}

/// Runs `mpit-tuner report`.
pub fn run(args: &Args) -> Result<ExitCode> {
    let dir = &args.dir;
    if !dir.is_dir() {
        bail!(
            "{} is not a directory (give the run directory the job wrote: MPIT_TUNER_DIR)",
            dir.display()
        );
    }
    let files =
        reading::rank_files(dir).with_context(|| format!("cannot list {}", dir.display()))?;
    if files.is_empty() && !dir.join("summary.json").exists() {
        bail!(
            "{} is not a run directory: it has no rank-NNNNN.jsonl and no summary.json",
            dir.display()
        );
    }

    // The variables to keep time series of: the ones asked for, else the
    // one summary.json says differs most (else decided after reading).
    let mut wanted: HashSet<String> = HashSet::new();
    for v in &args.vars {
        wanted.insert(v.clone());
        if !v.contains('@') {
            wanted.insert(format!("{v}@world"));
        }
    }
    if args.vars.is_empty() && !args.no_plots {
        if let Some(s) = reading::read_summary(dir, &mut Vec::new()) {
            let size = s.size;
            if let Some(v) = analysis::default_plot_variable(&s.variables, size) {
                wanted.insert(v);
            }
        }
    }

    let run = reading::read_run(dir, &wanted, true)
        .with_context(|| format!("cannot read {}", dir.display()))?;
    if run.is_empty() {
        let mut err = std::io::stderr().lock();
        let _ = writeln!(err, "mpit-tuner: nothing to report in {}:", dir.display());
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
        return Ok(ExitCode::from(2));
    }
    let mut a = analysis::analyse(&run);

    // Which variables to plot over time.
    let mut plot_vars: Vec<String> = Vec::new();
    let mut outputs = document::Outputs::default();
    if !args.no_plots {
        if args.vars.is_empty() {
            if let Some(v) = analysis::default_plot_variable(&a.stats, run.size) {
                if !a.series.contains_key(&v) {
                    // summary.json was missing: read the series now.
                    let more = reading::read_series(&run, &v);
                    if !more.is_empty() {
                        a.series.insert(v.clone(), more);
                    }
                }
                plot_vars.push(v);
            }
        } else {
            for v in &args.vars {
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
                    outputs.notes.push(format!(
                        "--var {v}: no such variable in the logs{}",
                        if known.is_empty() {
                            String::new()
                        } else {
                            format!(" (similar: {})", known.join(", "))
                        }
                    ));
                }
            }
        }
    }

    if !args.no_plots {
        let plot_dir = args.plots.clone().unwrap_or_else(|| dir.join("report"));
        draw(
            &run,
            &a,
            &plot_vars,
            &plot_dir,
            args.markdown.as_deref(),
            &mut outputs,
        );
    }
    if let Some(csv_dir) = &args.csv {
        let written = std::fs::create_dir_all(csv_dir)
            .with_context(|| format!("cannot create {}", csv_dir.display()))
            .and_then(|()| {
                let files: Vec<(u32, PathBuf)> = run
                    .ranks
                    .iter()
                    .map(|r| (r.rank, dir.join(&r.file)))
                    .collect();
                let (samples, rows) = csv::samples(&files, csv_dir)?;
                let writes = csv::writes(&a.writes, csv_dir)?;
                Ok((samples, rows, writes))
            });
        match written {
            Ok((samples, rows, writes)) => {
                outputs
                    .csv
                    .push(format!("{} ({rows} rows)", samples.display()));
                outputs
                    .csv
                    .push(format!("{} ({} rows)", writes.display(), a.writes.len()));
            }
            Err(e) => outputs.notes.push(format!("CSV export failed: {e:#}")),
        }
    }
    if let Some(md) = &args.markdown {
        outputs.markdown = Some(md.display().to_string());
    }
    let doc = document::build(&run, &a, &outputs);
    if let Some(md) = &args.markdown {
        if let Some(parent) = md.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("cannot create {}", parent.display()))?;
        }
        std::fs::write(md, doc.markdown())
            .with_context(|| format!("cannot write {}", md.display()))?;
    }
    let mut out = std::io::stdout().lock();
    out.write_all(doc.terminal(args.limit).as_bytes())?;
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// `path` as seen from the directory of `from` (a file), when it is below
/// it; else absolute.
fn link(path: &Path, from: Option<&Path>) -> String {
    let abs = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let target = abs(path);
    if let Some(base) = from.and_then(|f| f.parent()) {
        let base = if base.as_os_str().is_empty() {
            Path::new(".")
        } else {
            base
        };
        if let Ok(rel) = target.strip_prefix(abs(base)) {
            return rel.display().to_string();
        }
    }
    target.display().to_string()
}

fn draw(
    run: &reading::Run,
    a: &analysis::Analysis,
    vars: &[String],
    dir: &Path,
    markdown: Option<&Path>,
    outputs: &mut document::Outputs,
) {
    if let Err(e) = std::fs::create_dir_all(dir) {
        outputs.notes.push(format!(
            "cannot create the plots directory {}: {e} (use --plots DIR or --no-plots)",
            dir.display()
        ));
        return;
    }
    let painter = plots::Painter::new();
    if let Some(n) = &painter.font_note {
        outputs.notes.push(n.clone());
    }
    let mut jobs: Vec<(String, String, Result<String>)> = Vec::new();
    for v in vars {
        let series = a.series.get(v).map(Vec::as_slice).unwrap_or(&[]);
        jobs.push((
            format!("over-time-{}", plots::slug(v)),
            format!("{v} across ranks over time"),
            plots::over_time(v, series, run.size),
        ));
    }
    if vars.is_empty() {
        outputs
            .notes
            .push("no sampled variable to plot over time".into());
    }
    jobs.push((
        "rank-histograms".into(),
        "cross-rank histograms".into(),
        plots::rank_histograms(&a.stats, run.size),
    ));
    jobs.push((
        "message-sizes".into(),
        "message sizes per MPI call family".into(),
        plots::message_sizes(&a.size_histograms),
    ));
    jobs.push((
        "cvar-changes".into(),
        "CVAR changes over time".into(),
        plots::cvar_changes(&a.writes, run.size, a.facts.duration),
    ));
    for (stem, title, svg) in jobs {
        match svg.and_then(|svg| painter.save(dir, &stem, &title, &svg)) {
            Ok(p) => outputs.plots.push((
                p.title.clone(),
                (link(&p.png, markdown), p.png.display().to_string()),
                (link(&p.svg, markdown), p.svg.display().to_string()),
            )),
            Err(e) => outputs.notes.push(format!("plot {stem} failed: {e:#}")),
        }
    }
}
