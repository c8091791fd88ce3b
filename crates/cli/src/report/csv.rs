//! CSV export: `samples.csv` (every sampled value: rank, t, variable,
//! object, element, value), streamed from the logs a few files at a time,
//! and `writes.csv` (every CVAR write).

use super::reading::{progress_bar, Write};
use anyhow::{Context, Result};
use rayon::prelude::*;
use std::fs::File;
use std::io::{BufWriter, Write as _};
use std::path::{Path, PathBuf};

/// Files converted together in parallel (bounds the memory held).
const CHUNK: usize = 32;

/// A CSV field, quoted when it needs to be.
pub fn field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// The rows of one log's samples. Damaged lines are left out here: the
/// report's reading of the same files already lists them.
fn rows_of(rank: u32, path: &Path) -> Vec<u8> {
    let mut out = Vec::new();
    let Ok(records) = vocab::records(path) else {
        return out;
    };
    for item in records.only(&["sample"]) {
        let Ok((_, vocab::Record::Sample(sample))) = item else {
            continue;
        };
        let t = sample.t;
        for v in sample.vars.iter() {
            let name = field(&v.name);
            let object = v.object.as_deref().map(field).unwrap_or_default();
            for (i, x) in v.value.iter().enumerate() {
                // Writing into a Vec cannot fail.
                let _ = if x.is_nan() {
                    writeln!(out, "{rank},{t},{name},{object},{i},")
                } else {
                    writeln!(out, "{rank},{t},{name},{object},{i},{x}")
                };
            }
        }
    }
    out
}

/// Writes `dir/samples.csv` from the logs; returns its path and the rows.
pub fn samples(files: &[(u32, PathBuf)], dir: &Path) -> Result<(PathBuf, u64)> {
    let path = dir.join("samples.csv");
    let file = File::create(&path).with_context(|| format!("cannot write {}", path.display()))?;
    let mut w = BufWriter::new(file);
    writeln!(w, "rank,t,variable,object,element,value")?;
    let bar = progress_bar(files.len() as u64, true);
    let mut rows = 0u64;
    for chunk in files.chunks(CHUNK) {
        let parts: Vec<Vec<u8>> = chunk
            .par_iter()
            .map(|(rank, p)| rows_of(*rank, p))
            .collect();
        for p in parts {
            rows += p.iter().filter(|&&b| b == b'\n').count() as u64;
            w.write_all(&p)?;
        }
        bar.inc(chunk.len() as u64);
    }
    bar.finish_and_clear();
    w.flush()?;
    Ok((path, rows))
}

/// Writes `dir/writes.csv`.
pub fn writes(list: &[Write], dir: &Path) -> Result<PathBuf> {
    let path = dir.join("writes.csv");
    let file = File::create(&path).with_context(|| format!("cannot write {}", path.display()))?;
    let mut w = BufWriter::new(file);
    writeln!(
        w,
        "rank,t,policy,phase,cvar,index,old,requested,readback,outcome,error,dry_run"
    )?;
    for x in list {
        let v = |j: Option<&serde_json::Value>| field(&super::document::value_text(j));
        writeln!(
            w,
            "{},{},{},{},{},{},{},{},{},{},{},{}",
            x.rank,
            x.t,
            field(&x.policy),
            field(&x.phase),
            field(&x.cvar),
            x.index.map(|i| i.to_string()).unwrap_or_default(),
            v(x.old.as_ref()),
            v(x.requested.as_ref()),
            v(x.readback.as_ref()),
            field(&x.outcome),
            field(x.error.as_deref().unwrap_or("")),
            x.dry_run
        )?;
    }
    w.flush()?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_quoted_when_needed() {
        assert_eq!(field("plain"), "plain");
        assert_eq!(field("a,b"), "\"a,b\"");
        assert_eq!(field("say \"x\""), "\"say \"\"x\"\"\"");
    }
}
