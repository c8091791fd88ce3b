//! `mpit-tuner schema`: the JSON Schema of the log records and of
//! `summary.json`, generated from the vocabulary's types (`vocab`), and
//! `--check RUN_DIR` to test a run directory against them.

use anyhow::{bail, Context, Result};
use clap::{Args as ClapArgs, ValueEnum};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// Which file's schema.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Which {
    /// One line of a rank's log (`rank-NNNNN.jsonl`; in `node-<host>.jsonl`
    /// after the writer's `{"writer":N,`).
    Log,
    /// `summary.json`.
    Summary,
}

/// Arguments of `mpit-tuner schema`.
#[derive(Debug, ClapArgs)]
pub struct Args {
    /// The file whose schema to print.
    #[arg(value_enum, default_value = "log")]
    which: Which,
    /// Instead of printing, read every log line (and summary.json) of this
    /// run directory as the format defines it; exits 1 listing each line
    /// that does not conform.
    #[arg(long, value_name = "RUN_DIR")]
    check: Option<PathBuf>,
}

/// The JSON Schema of `which`, as pretty JSON.
pub fn schema_text(which: Which) -> String {
    let schema = match which {
        Which::Log => schemars::schema_for!(vocab::Record<'static>),
        Which::Summary => schemars::schema_for!(vocab::summary::SummaryFile),
    };
    serde_json::to_string_pretty(&schema).unwrap_or_default()
}

/// The numbers of the non-blank lines of a node's log that do not start
/// with their writer's rank.
fn untagged_lines(path: &std::path::Path) -> Result<Vec<usize>> {
    use std::io::BufRead;
    let file =
        std::fs::File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut out = Vec::new();
    for (i, line) in std::io::BufReader::new(file).split(b'\n').enumerate() {
        let line = line.with_context(|| format!("cannot read {}", path.display()))?;
        let line = line.trim_ascii();
        if !line.is_empty() && vocab::record::rank_of_line(line).is_none() {
            out.push(i + 1);
        }
    }
    Ok(out)
}

pub fn run(args: &Args) -> Result<ExitCode> {
    let mut out = std::io::stdout().lock();
    let Some(dir) = &args.check else {
        writeln!(out, "{}", schema_text(args.which))?;
        return Ok(ExitCode::SUCCESS);
    };
    let files = vocab::log_paths(dir).with_context(|| format!("cannot read {}", dir.display()))?;
    if files.is_empty() {
        bail!(
            "{}: no logs (rank-NNNNN.jsonl or node-<host>.jsonl)",
            dir.display()
        );
    }
    let (mut records, mut bad) = (0u64, 0u64);
    for (path, rank) in &files {
        // Every line of a node's log is checked, whichever rank wrote it.
        let lines =
            vocab::records(path).with_context(|| format!("cannot read {}", path.display()))?;
        for item in lines {
            match item {
                Ok(_) => records += 1,
                Err(damaged) => {
                    bad += 1;
                    writeln!(out, "{damaged}")?;
                }
            }
        }
        if rank.is_none() {
            for line in untagged_lines(path)? {
                bad += 1;
                writeln!(
                    out,
                    "{}:{line}: a line of a node's log without the rank that wrote it ({{\"writer\":N, first)",
                    path.display()
                )?;
            }
        }
    }
    let summary = dir.join("summary.json");
    if summary.exists() {
        let text = std::fs::read_to_string(&summary)
            .with_context(|| format!("cannot read {}", summary.display()))?;
        if let Err(e) = serde_json::from_str::<vocab::summary::SummaryFile>(&text) {
            bad += 1;
            writeln!(out, "{}: {e}", summary.display())?;
        }
    }
    writeln!(
        out,
        "{}: {records} records in {} log{}{}, {bad} not conforming",
        dir.display(),
        files.len(),
        if files.len() == 1 { "" } else { "s" },
        if summary.exists() {
            " and summary.json"
        } else {
            ""
        }
    )?;
    Ok(if bad == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
