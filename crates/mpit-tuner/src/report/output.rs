//! The files a report writes besides what it prints: the plots (SVG and
//! PNG), the CSV export and the Markdown file. What goes wrong with a plot
//! or the CSV export is told in the report's last section, not fatal.

use super::analysis::Analysis;
use super::document::Outputs;
use super::reading::Run;
use super::tables::Document;
use super::{csv, plots};
use anyhow::{Context, Result};
use std::path::Path;

/// Exports samples.csv and writes.csv to `csv_dir` and records them (with
/// their row counts), or why the export failed, in `outputs`.
pub(super) fn export_csv(run: &Run, a: &Analysis, csv_dir: &Path, outputs: &mut Outputs) {
    let written = std::fs::create_dir_all(csv_dir)
        .with_context(|| format!("cannot create {}", csv_dir.display()))
        .and_then(|()| {
            let files: Vec<vocab::RankFile> =
                run.ranks.iter().map(|r| r.source(&run.dir)).collect();
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

/// Writes the report as Markdown to `md`, creating its directory.
pub(super) fn write_markdown(md: &Path, doc: &Document) -> Result<()> {
    if let Some(parent) = md.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("cannot create {}", parent.display()))?;
    }
    std::fs::write(md, doc.markdown()).with_context(|| format!("cannot write {}", md.display()))
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

/// Draws the plots (the variables `vars` over time, cross-rank histograms,
/// message sizes, CVAR changes, collective tuning when it ran) into `dir`, each as SVG and PNG, and
/// records them, or why one failed, in `outputs`.
pub(super) fn draw(
    run: &Run,
    a: &Analysis,
    vars: &[crate::report::analysis::OverTime],
    dir: &Path,
    markdown: Option<&Path>,
    outputs: &mut Outputs,
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
        let series: Vec<(u32, Vec<(f64, f64)>)> = a
            .series
            .get(&v.key)
            .map(Vec::as_slice)
            .unwrap_or(&[])
            .iter()
            .map(|(rank, points)| (*rank, v.points(points)))
            .collect();
        let label = v.label();
        jobs.push((
            v.stem(),
            format!("{label} across ranks over time"),
            plots::over_time(&label, &series, run.size),
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
    // A plot with nothing in it is not drawn: a note says why it is not
    // there.
    if a.writes.is_empty() {
        outputs
            .notes
            .push("no CVAR was written in this run: no cvar-changes plot".into());
    } else {
        jobs.push((
            "cvar-changes".into(),
            "CVAR changes over time".into(),
            plots::cvar_changes(&a.writes, run.size, a.facts.duration),
        ));
    }
    let outcomes = super::document::collective_outcomes(run);
    if !outcomes.is_empty() {
        jobs.push((
            "collective-tuning".into(),
            "collective tuning: time per call of each candidate".into(),
            plots::collective_tuning(&outcomes),
        ));
    }
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
