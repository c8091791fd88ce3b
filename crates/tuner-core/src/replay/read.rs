//! Reading recorded runs: run directories, rank logs (the records of
//! [`vocab::record`]) and the files of either kind.

use super::*;

/// Reads logs and traces: files, and run directories (every
/// `rank-*.jsonl` and `node-*.jsonl` inside; a node's log is one trace a
/// rank). Catalogue-only trace files apply to every rank.
/// The result is sorted by rank (then by file).
pub fn read_paths(paths: &[PathBuf]) -> Result<Vec<RankTrace>, ReplayError> {
    let mut traces = Vec::new();
    let mut shared = Declarations::default();
    for path in paths {
        let files = if path.is_dir() {
            rank_logs_in(path)?
        } else {
            vec![path.clone()]
        };
        for file in files {
            let name = file.display().to_string();
            let text = std::fs::read_to_string(&file).map_err(|source| ReplayError::Io {
                path: file.clone(),
                source,
            })?;
            let (ranks, declared) = parse_any(&text, &name)?;
            if ranks.is_empty() {
                shared.fill_from(&declared);
            }
            traces.extend(ranks);
        }
    }
    if traces.is_empty() {
        return Err(ReplayError::Empty {
            source_name: paths
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
            message: "no samples to replay (give per-rank logs, a run directory or a trace)".into(),
        });
    }
    for t in &mut traces {
        t.declared.fill_from(&shared);
    }
    traces.sort_by(|a, b| (a.rank, &a.source).cmp(&(b.rank, &b.source)));
    Ok(traces)
}

/// The logs of a run directory (each rank's, each node's), by name.
pub(super) fn rank_logs_in(dir: &Path) -> Result<Vec<PathBuf>, ReplayError> {
    let io = |source| ReplayError::Io {
        path: dir.to_path_buf(),
        source,
    };
    let files: Vec<PathBuf> = vocab::log_paths(dir)
        .map_err(io)?
        .into_iter()
        .map(|(path, _)| path)
        .collect();
    if files.is_empty() {
        return Err(ReplayError::Empty {
            source_name: dir.display().to_string(),
            message: "this directory holds no logs (rank-*.jsonl, node-*.jsonl)".into(),
        });
    }
    Ok(files)
}

/// Parses one file, a log or a trace. Returns its ranks, and its
/// declarations when it has no samples (a catalogue-only trace).
pub(super) fn parse_any(
    text: &str,
    source: &str,
) -> Result<(Vec<RankTrace>, Declarations), ReplayError> {
    if lines(text).next().is_none() {
        return Err(ReplayError::Empty {
            source_name: source.into(),
            message: "the file is empty".into(),
        });
    }
    if is_log(text, source) {
        let ranks = node_log_ranks(text);
        if ranks.is_empty() {
            return Ok((vec![parse_log(text, source)?], Declarations::default()));
        }
        // A node's log: one trace a rank that wrote in it.
        let traces = ranks
            .into_iter()
            .map(|rank| parse_log_of(text, &format!("{source} (rank {rank})"), Some(rank)))
            .collect::<Result<Vec<_>, _>>()?;
        return Ok((traces, Declarations::default()));
    }
    let (ranks, declared) = parse_trace_parts(text, source)?;
    Ok((ranks, declared))
}

/// The ranks whose lines a node's log holds (none: a rank's own log).
fn node_log_ranks(text: &str) -> std::collections::BTreeSet<u32> {
    text.lines()
        .filter_map(|l| vocab::record::rank_of_line(l.trim().as_bytes()))
        .collect()
}

/// Whether `text` is a log: its first line is a record, or names a record
/// type (a damaged or newer one); a trace's lines have no `"type"` (or
/// are not JSON: its comments).
fn is_log(text: &str, source: &str) -> bool {
    match vocab::records_from(text.as_bytes(), Path::new(source)).next() {
        Some(Ok(_)) => true,
        Some(Err(d)) => !matches!(d.kind, DamageKind::NotJson | DamageKind::Untyped),
        None => false,
    }
}

/// Non-blank, non-comment lines with their 1-based numbers.
pub(super) fn lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim()))
        .filter(|(_, l)| !l.is_empty() && !l.starts_with('#'))
}

pub(super) fn format_error(source: &str, line: usize, message: impl Into<String>) -> ReplayError {
    ReplayError::Format {
        source_name: source.to_string(),
        line,
        message: message.into(),
    }
}

/// Parses one rank's log (the records of [`vocab::record`], read by
/// [`vocab::read`]).
pub fn parse_log(text: &str, source: &str) -> Result<RankTrace, ReplayError> {
    parse_log_of(text, source, None)
}

/// Parses one rank's log, or one rank's lines of a node's log (`rank`).
fn parse_log_of(text: &str, source: &str, rank: Option<u32>) -> Result<RankTrace, ReplayError> {
    let mut trace = RankTrace {
        source: source.to_string(),
        ..RankTrace::default()
    };
    let mut header = false;
    let records = vocab::records_from(text.as_bytes(), Path::new(source));
    let records = match rank {
        Some(rank) => records.rank(rank),
        None => records,
    };
    for item in records {
        let (n, record) = item.map_err(|d| {
            let message = match d.kind {
                DamageKind::NewerFormat(v) => format!(
                    "log format version {v}; this mpit-tuner reads version {}",
                    log::FORMAT_VERSION
                ),
                _ => format!("not a record of the log format: {}", d.error),
            };
            format_error(source, d.line, message)
        })?;
        if !header {
            let Record::Header(h) = &record else {
                return Err(format_error(
                    source,
                    n,
                    "a tuning log starts with its header record",
                ));
            };
            read_header(h, &mut trace).map_err(|m| format_error(source, n, m))?;
            header = true;
            continue;
        }
        match record {
            Record::Sample(sample) => trace.samples.push(read_sample(&sample)),
            // The recorded run's own writes: the value before its first
            // write of a CVAR is that CVAR's starting value.
            Record::Write(w) => {
                if let Some(old) = w.attempt.old {
                    trace.initial_cvars.entry(w.attempt.cvar).or_insert(old);
                }
            }
            Record::Close(c) => trace.end = Some(c.t),
            _ => {}
        }
    }
    Ok(trace)
}

pub(super) fn read_header(header: &record::Header, trace: &mut RankTrace) -> Result<(), String> {
    if header.version != log::FORMAT_VERSION {
        return Err(format!(
            "log format version {}; this mpit-tuner reads version {}",
            header.version,
            log::FORMAT_VERSION
        ));
    }
    let number =
        |key: &str, v: i32| u32::try_from(v).map_err(|_| format!("the header's `{key}` is {v}"));
    trace.rank = number("rank", header.rank)?;
    trace.size = number("size", header.size)?.max(trace.rank + 1);
    trace.library = Some(header.library.clone());
    for v in &header.variables {
        let class = convert_class(v.class);
        let count = v.count.filter(|c| *c > 0);
        trace
            .declared
            .pvars
            .insert(v.name.clone(), PvarDecl { class, count });
    }
    Ok(())
}

pub(super) fn read_sample(record: &record::Sample<'_>) -> Sample {
    let mut sample = Sample {
        t: record.t,
        ..Sample::default()
    };
    for v in record.vars.iter() {
        // As the live engine reads them: unbound, or bound to MPI_COMM_WORLD.
        if v.object.as_deref().is_some_and(|o| o != "world") {
            continue;
        }
        sample.pvars.push((v.name.to_string(), v.value.to_vec()));
    }
    sample
}

/// A CVAR value from JSON: a number, an array of numbers, or text.
pub(super) fn json_value(v: &Json) -> Result<Value, String> {
    let numbers: Vec<f64> = match v {
        Json::Number(n) => vec![n.as_f64().unwrap_or(f64::NAN)],
        Json::Array(a) => a
            .iter()
            .map(|x| x.as_f64().ok_or("an array of numbers"))
            .collect::<Result<_, _>>()?,
        Json::String(s) => return Ok(Value::Str(s.clone())),
        Json::Bool(b) => vec![f64::from(u8::from(*b))],
        _ => return Err("expected a number, an array of numbers or a text".into()),
    };
    Ok(numbers_value(numbers))
}

/// Whole numbers as integers, others as doubles.
pub(super) fn numbers_value(numbers: Vec<f64>) -> Value {
    if numbers.iter().all(|x| x.fract() == 0.0 && x.abs() < 9.0e15) {
        Value::Int(numbers.iter().map(|x| *x as i64).collect())
    } else {
        Value::Double(numbers)
    }
}
