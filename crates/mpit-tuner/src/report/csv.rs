//! CSV export: `samples.csv` (every sampled value: rank, t, variable,
//! object, element, value), streamed from the logs a few files at a time,
//! and `writes.csv` (every CVAR write).

use super::reading::{progress_bar, Ranked, Write};
use anyhow::{Context, Result};
use rayon::prelude::*;
use std::fs::File;
use std::io::{BufWriter, Write as _};
use std::path::{Path, PathBuf};

/// Files converted together in parallel (bounds the memory held).
const CHUNK: usize = 32;

/// A CSV writer: fields quoted only when they need to be (RFC 4180), lines
/// ended by `\n`.
fn writer<W: std::io::Write>(w: W) -> csv::Writer<W> {
    csv::WriterBuilder::new()
        .quote_style(csv::QuoteStyle::Necessary)
        .terminator(csv::Terminator::Any(b'\n'))
        .from_writer(w)
}

/// The CSV rows of the ranks' logs in one file (a rank's own, or a node's
/// read once for its ranks), rank after rank, and how many there are.
fn rows_of(files: &[&vocab::RankFile]) -> (Vec<u8>, u64) {
    let Some(first) = files.first() else {
        return (Vec::new(), 0);
    };
    // Damaged lines are left out here: the report's reading of the same
    // files already lists them.
    let Ok(mut records) = vocab::records(&first.path).map(|r| r.only(&["sample"])) else {
        return (Vec::new(), 0);
    };
    let mut per_rank: std::collections::BTreeMap<u32, (csv::Writer<Vec<u8>>, String)> = files
        .iter()
        .map(|f| (f.rank, (writer(Vec::new()), f.rank.to_string())))
        .collect();
    let mut rows = 0u64;
    while let Some(item) = records.next() {
        let Ok((_, vocab::Record::Sample(sample))) = item else {
            continue;
        };
        let key = if first.shared {
            records.line_rank()
        } else {
            Some(first.rank)
        };
        let Some((out, rank)) = key.and_then(|r| per_rank.get_mut(&r)) else {
            continue;
        };
        let t = sample.t.to_string();
        for v in sample.vars.iter() {
            let object = v.object.as_deref().unwrap_or_default();
            for (i, x) in v.value.iter().enumerate() {
                let x = if x.is_nan() {
                    String::new()
                } else {
                    x.to_string()
                };
                let record = [&**rank, &t, &*v.name, object, &i.to_string(), &x];
                // Writing to memory cannot fail.
                if out.write_record(record).is_ok() {
                    rows += 1;
                }
            }
        }
    }
    let mut bytes = Vec::new();
    for (w, _) in per_rank.into_values() {
        bytes.extend(w.into_inner().unwrap_or_default());
    }
    (bytes, rows)
}

/// Writes `dir/samples.csv` from the logs (file after file, rank after rank
/// within a node's log); returns its path and the rows.
pub fn samples(files: &[vocab::RankFile], dir: &Path) -> Result<(PathBuf, u64)> {
    let path = dir.join("samples.csv");
    let file = File::create(&path).with_context(|| format!("cannot write {}", path.display()))?;
    let mut w = BufWriter::new(file);
    let mut header = writer(&mut w);
    header.write_record(["rank", "t", "variable", "object", "element", "value"])?;
    header.flush()?;
    drop(header);
    let bar = progress_bar(files.len() as u64, true);
    let mut rows = 0u64;
    for chunk in vocab::read::by_file(files).chunks(CHUNK) {
        let parts: Vec<(Vec<u8>, u64)> = chunk.par_iter().map(|g| rows_of(g)).collect();
        for (p, n) in parts {
            rows += n;
            w.write_all(&p)?;
        }
        bar.inc(chunk.iter().map(Vec::len).sum::<usize>() as u64);
    }
    bar.finish_and_clear();
    w.flush()?;
    Ok((path, rows))
}

/// Writes `dir/writes.csv`.
pub fn writes(list: &[Write], dir: &Path) -> Result<PathBuf> {
    let path = dir.join("writes.csv");
    let file = File::create(&path).with_context(|| format!("cannot write {}", path.display()))?;
    let mut w = writer(BufWriter::new(file));
    w.write_record([
        "rank",
        "t",
        "policy",
        "phase",
        "cvar",
        "index",
        "old",
        "requested",
        "readback",
        "outcome",
        "error",
        "dry_run",
    ])?;
    for Ranked { rank, record: x } in list {
        let v = |value: Option<&vocab::Value>| super::document::cvar_value_text(value);
        let a = &x.attempt;
        w.write_record([
            rank.to_string(),
            x.t.to_string(),
            x.policy.clone(),
            x.phase.to_string(),
            a.cvar.clone(),
            a.index.map(|i| i.to_string()).unwrap_or_default(),
            v(a.old.as_ref()),
            v(a.requested.as_ref()),
            v(a.readback.as_ref()),
            a.outcome.as_str().to_string(),
            a.error.clone().unwrap_or_default(),
            x.dry_run.to_string(),
        ])?;
    }
    w.flush()?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_quoted_when_needed() {
        let mut w = writer(Vec::new());
        w.write_record(["plain", "a,b", "say \"x\"", "two\nlines", ""])
            .unwrap();
        let text = String::from_utf8(w.into_inner().unwrap()).unwrap();
        assert_eq!(text, "plain,\"a,b\",\"say \"\"x\"\"\",\"two\nlines\",\n");
    }
}
