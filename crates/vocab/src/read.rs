//! The one reader of run directories: finds the rank logs and streams
//! their records, telling damaged lines apart from the end of a log.
//!
//! A run directory holds its logs in one of two layouts
//! ([`LogLayout`](crate::record::LogLayout)): one file a rank
//! (`rank-NNNNN.jsonl`) or one file a node (`node-<host>.jsonl`, every
//! line starting with the rank that wrote it). [`rank_files`] lists the
//! ranks of both, and a [`RankFile`]'s [`records`](RankFile::records) and
//! [`follow`](RankFile::follow) read that rank's lines only, so a reader
//! never needs to know which layout it reads.

use crate::record::{
    is_node_file_name, rank_of_file_name, rank_of_line, Record, FORMAT_VERSION, KINDS,
};
use std::collections::BTreeSet;
use std::fs::File;
use std::io::{self, BufRead, BufReader};
use std::path::{Path, PathBuf};

/// A rank's log in a run directory.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct RankFile {
    /// The rank, from the file name or the node log's lines.
    pub rank: u32,
    /// The file.
    pub path: PathBuf,
    /// Whether the file is a node's log that other ranks share (its lines
    /// are told apart by their rank).
    pub shared: bool,
}

impl RankFile {
    /// This rank's records, as [`records`] reads a file of its own.
    pub fn records(&self) -> io::Result<Records> {
        let records = records(&self.path)?;
        Ok(if self.shared {
            records.rank(self.rank)
        } else {
            records
        })
    }

    /// This rank's records from the file's current end, as
    /// [`Follow::from_end`].
    pub fn follow_from_end(&self) -> Follow {
        let follow = Follow::from_end(&self.path);
        if self.shared {
            follow.rank(self.rank)
        } else {
            follow
        }
    }

    /// This rank's records from the file's beginning, as [`Follow::new`].
    pub fn follow(&self) -> Follow {
        let follow = Follow::new(&self.path);
        if self.shared {
            follow.rank(self.rank)
        } else {
            follow
        }
    }

    /// The file name and, for a node's log, the rank in it, for messages
    /// (`rank-00003.jsonl`, `node-n1.jsonl (rank 3)`).
    pub fn describe(&self) -> String {
        let name = self.path.file_name().map_or_else(
            || self.path.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        if self.shared {
            format!("{name} (rank {})", self.rank)
        } else {
            name
        }
    }
}

/// The rank logs of a run directory, by rank: `rank-NNNNN.jsonl` files, and
/// every rank that wrote a line in a `node-<host>.jsonl` (each node log is
/// read once, its lines' starts only). Other files are ignored.
pub fn rank_files(dir: &Path) -> io::Result<Vec<RankFile>> {
    let mut files = Vec::new();
    for (path, rank) in log_paths(dir)? {
        match rank {
            Some(rank) => files.push(RankFile {
                rank,
                path,
                shared: false,
            }),
            None => {
                for rank in ranks_in(&path)? {
                    files.push(RankFile {
                        rank,
                        path: path.clone(),
                        shared: true,
                    });
                }
            }
        }
    }
    files.sort();
    Ok(files)
}

/// The log files of a run directory, without reading them: each rank's
/// (with its rank) and each node's (`None`: its lines say their ranks), by
/// name. Other files are ignored.
pub fn log_paths(dir: &Path) -> io::Result<Vec<(PathBuf, Option<u32>)>> {
    let mut paths = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        if let Some(rank) = rank_of_file_name(name) {
            paths.push((path, Some(rank)));
        } else if is_node_file_name(name) && path.is_file() {
            paths.push((path, None));
        }
    }
    paths.sort();
    Ok(paths)
}

/// `files` grouped by the file they are in, in their order: a rank's own
/// file alone, a node's log with every rank of it among `files` (so that
/// a reader reads each file once: [`Records::line_rank`]).
pub fn by_file(files: &[RankFile]) -> Vec<Vec<&RankFile>> {
    let mut groups: Vec<Vec<&RankFile>> = Vec::new();
    let mut node: std::collections::HashMap<&Path, usize> = Default::default();
    for f in files {
        if f.shared {
            if let Some(&g) = node.get(f.path.as_path()) {
                groups[g].push(f);
                continue;
            }
            node.insert(&f.path, groups.len());
        }
        groups.push(vec![f]);
    }
    groups
}

/// The log of one rank in a run directory, in either layout (a node's
/// log is found by reading the node logs' line starts).
pub fn rank_file(dir: &Path, rank: u32) -> io::Result<RankFile> {
    let own = dir.join(crate::record::rank_file_name(rank as i32));
    if own.is_file() {
        return Ok(RankFile {
            rank,
            path: own,
            shared: false,
        });
    }
    rank_files(dir)?
        .into_iter()
        .find(|f| f.rank == rank)
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("no log of rank {rank} in {}", dir.display()),
            )
        })
}

/// The ranks that wrote lines in a node's log.
pub fn ranks_in(path: &Path) -> io::Result<BTreeSet<u32>> {
    let mut reader = BufReader::with_capacity(1 << 18, File::open(path)?);
    let mut ranks = BTreeSet::new();
    let mut line = Vec::new();
    loop {
        line.clear();
        if reader.read_until(b'\n', &mut line)? == 0 {
            return Ok(ranks);
        }
        if let Some(rank) = rank_of_line(&line) {
            ranks.insert(rank);
        }
    }
}

/// A line that is not a record of this format.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}:{line}: {error}", path.display())]
pub struct Damaged {
    /// The file.
    pub path: PathBuf,
    /// The line number, from 1.
    pub line: usize,
    /// What is wrong with it (JSON syntax, an unknown record type, a missing
    /// field), or the I/O error that ended the reading.
    pub error: String,
    /// What kind of line it is, for readers that treat them apart.
    pub kind: DamageKind,
    /// The line's length in bytes, surrounding whitespace left out (0 for
    /// an I/O error).
    pub bytes: usize,
    /// Whether it is the file's last line without its newline: a log cut
    /// while it was written (a job killed mid-write), not damage inside.
    pub truncated: bool,
}

/// What a [`Damaged`] line is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DamageKind {
    /// Not JSON (or not UTF-8): a cut line, another kind of file.
    NotJson,
    /// A JSON object without a `"type"`: a line of another JSON Lines file
    /// (a replay trace), not a log record.
    Untyped,
    /// A record type this version does not know (a newer writer's).
    UnknownType(String),
    /// A header of a newer format version than [`FORMAT_VERSION`].
    NewerFormat(u64),
    /// A record type this version knows, with fields that do not conform.
    Invalid,
    /// The file could not be read further (the reading ends here).
    Io,
}

/// Parses one line (without its newline) as a record; when it is not one,
/// says what it is instead (the error text and its [`DamageKind`]).
pub fn parse_line(line: &[u8]) -> Result<Record<'static>, (String, DamageKind)> {
    let e = match serde_json::from_slice::<Record<'static>>(line) {
        Ok(record) => return Ok(record),
        Err(e) => e,
    };
    if !e.is_data() {
        return Err((e.to_string(), DamageKind::NotJson));
    }
    // Valid JSON that is not a record: read the two fields that say why.
    #[derive(serde::Deserialize)]
    struct Probe {
        #[serde(rename = "type")]
        kind: Option<String>,
        version: Option<u64>,
    }
    let kind = match serde_json::from_slice::<Probe>(line) {
        Ok(Probe {
            kind: Some(kind),
            version,
        }) => match version {
            Some(v) if kind == "header" && v > u64::from(FORMAT_VERSION) => {
                DamageKind::NewerFormat(v)
            }
            _ if KINDS.contains(&kind.as_str()) => DamageKind::Invalid,
            _ => DamageKind::UnknownType(kind),
        },
        Ok(Probe { kind: None, .. }) => DamageKind::Untyped,
        // JSON, but not an object (or a `type` that is not a string).
        Err(_) => DamageKind::Invalid,
    };
    Err((e.to_string(), kind))
}

/// The records of one log, in order, each with its line number; a line that
/// does not parse is a [`Damaged`] item and the reading goes on.
pub fn records(path: &Path) -> io::Result<Records> {
    Ok(records_from(
        BufReader::with_capacity(1 << 18, File::open(path)?),
        path,
    ))
}

/// The records of a log read from `reader` (a log held in memory, a
/// stream), as [`records`] reads a file; `path` names it in [`Damaged`].
pub fn records_from<R: BufRead>(reader: R, path: &Path) -> Records<R> {
    Records {
        path: path.to_path_buf(),
        reader,
        line: 0,
        buf: Vec::new(),
        done: false,
        only: &[],
        rank: None,
        line_rank: None,
    }
}

/// The iterator of [`records`] and [`records_from`].
#[derive(Debug)]
pub struct Records<R = BufReader<File>> {
    path: PathBuf,
    reader: R,
    /// Lines read so far, blank ones included.
    line: usize,
    buf: Vec<u8>,
    done: bool,
    only: &'static [&'static str],
    /// In a node's log: the rank whose lines are read.
    rank: Option<u32>,
    /// The rank the last line returned starts with.
    line_rank: Option<u32>,
}

impl<R> Records<R> {
    /// The rank the line of the last item starts with (a node's log,
    /// [`rank_of_line`]; `None` in a rank's own log): one pass over a
    /// node's log serves all its ranks.
    pub fn line_rank(&self) -> Option<u32> {
        self.line_rank
    }

    /// Only the lines of `rank` in a node's log (lines of other ranks, and
    /// lines without a rank, are skipped; line numbers stay the file's).
    /// A line of that rank that is not JSON is a write cut short by the
    /// rank's end (the next write of another rank starts on a new line):
    /// it reads as truncated.
    pub fn rank(mut self, rank: u32) -> Records<R> {
        self.rank = Some(rank);
        self
    }

    /// Only records of these types; the other lines are skipped without
    /// being parsed (a report over thousands of logs reads samples only).
    pub fn only(mut self, kinds: &'static [&'static str]) -> Records<R> {
        self.only = kinds;
        self
    }

    /// Lines read so far, blank and skipped ones included (after the
    /// last item: the lines of the file).
    pub fn lines(&self) -> usize {
        self.line
    }

    /// Whether a line may be a record of the types asked for (a line that
    /// is not UTF-8 is parsed, to be told as damaged).
    fn wanted(&self, text: &[u8]) -> bool {
        let Ok(text) = std::str::from_utf8(text) else {
            return true;
        };
        self.only.is_empty()
            || self
                .only
                .iter()
                .any(|k| text.contains(&format!("\"type\":\"{k}\"")))
    }
}

impl<R: BufRead> Iterator for Records<R> {
    type Item = Result<(usize, Record<'static>), Damaged>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if self.done {
                return None;
            }
            self.buf.clear();
            let damaged = |s: &Self, error: String, kind: DamageKind, truncated: bool| Damaged {
                path: s.path.clone(),
                line: s.line,
                error,
                kind,
                bytes: s.buf.trim_ascii().len(),
                truncated,
            };
            // Bytes, not a String: a line that is not UTF-8 is one damaged
            // line, and the reading goes on.
            match self.reader.read_until(b'\n', &mut self.buf) {
                Ok(0) => return None,
                Ok(_) => self.line += 1,
                Err(e) => {
                    // The line that could not be read is not counted.
                    self.done = true;
                    let mut d = damaged(self, e.to_string(), DamageKind::Io, false);
                    d.line += 1;
                    d.bytes = 0;
                    return Some(Err(d));
                }
            }
            let complete = self.buf.ends_with(b"\n");
            let text = self.buf.trim_ascii();
            let tag = rank_of_line(text);
            if text.is_empty() || self.rank.is_some_and(|r| tag != Some(r)) || !self.wanted(text) {
                continue;
            }
            self.line_rank = tag;
            return Some(match parse_line(text) {
                Ok(record) if !self.only.is_empty() && !self.only.contains(&record.kind()) => {
                    continue
                }
                Ok(record) => Ok((self.line, record)),
                Err((error, kind)) => {
                    let cut = !complete || (tag.is_some() && kind == DamageKind::NotJson);
                    Err(damaged(self, error, kind, cut))
                }
            });
        }
    }
}

/// A log that is still growing (a running job's), read incrementally: each
/// [`Follow::poll`] returns the records of the whole lines written since the
/// last one. A last line without its newline is left for the next poll (the
/// writer may be in the middle of it); a file that does not exist yet reads
/// as empty.
#[derive(Debug)]
pub struct Follow {
    path: PathBuf,
    offset: u64,
    line: usize,
    partial: Vec<u8>,
    /// Started in the middle of a line: its rest is skipped.
    skip_line: bool,
    /// In a node's log: the rank whose lines are read.
    rank: Option<u32>,
}

impl Follow {
    /// Follows `path` from its beginning.
    pub fn new(path: &Path) -> Follow {
        Follow {
            path: path.to_path_buf(),
            offset: 0,
            line: 0,
            partial: Vec::new(),
            skip_line: false,
            rank: None,
        }
    }

    /// Only the lines of `rank` in a node's log, as [`Records::rank`].
    pub fn rank(mut self, rank: u32) -> Follow {
        self.rank = Some(rank);
        self
    }

    /// Follows `path` from its current end: only what is written from now
    /// on (line numbers then count from there). A line being written at
    /// this moment is skipped.
    pub fn from_end(path: &Path) -> Follow {
        use std::io::{Read, Seek, SeekFrom};
        let mut follow = Follow::new(path);
        let Ok(mut file) = File::open(path) else {
            return follow;
        };
        let Ok(len) = file.seek(SeekFrom::End(0)) else {
            return follow;
        };
        let mut last = [0u8; 1];
        if len > 0
            && file.seek(SeekFrom::Start(len - 1)).is_ok()
            && file.read_exact(&mut last).is_ok()
        {
            follow.offset = len;
            follow.skip_line = last[0] != b'\n';
        }
        follow
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes read so far (whole lines and a partial one).
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The records of the lines completed since the last call, with their
    /// line numbers; a line that does not parse is a [`Damaged`] item.
    pub fn poll(&mut self) -> Vec<Result<(usize, Record<'static>), Damaged>> {
        self.poll_tagged()
            .into_iter()
            .map(|(_, item)| item)
            .collect()
    }

    /// As [`Follow::poll`], each item with the rank its line starts with
    /// (a node's log, [`rank_of_line`]; `None` in a rank's own log): one
    /// reader follows every rank of a node.
    #[allow(clippy::type_complexity)]
    pub fn poll_tagged(&mut self) -> Vec<(Option<u32>, Result<(usize, Record<'static>), Damaged>)> {
        use std::io::{Read, Seek, SeekFrom};
        let mut out = Vec::new();
        let mut file = match File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return out,
            Err(e) => {
                out.push((
                    None,
                    Err(self.damaged(e.to_string(), DamageKind::Io, false)),
                ));
                return out;
            }
        };
        let mut bytes = Vec::new();
        let read = file
            .seek(SeekFrom::Start(self.offset))
            .and_then(|_| file.read_to_end(&mut bytes));
        if let Err(e) = read {
            out.push((
                None,
                Err(self.damaged(e.to_string(), DamageKind::Io, false)),
            ));
            return out;
        }
        self.offset += bytes.len() as u64;
        self.partial.extend_from_slice(&bytes);
        let Some(end) = self.partial.iter().rposition(|&b| b == b'\n') else {
            return out;
        };
        let complete: Vec<u8> = self.partial.drain(..=end).collect();
        for line in complete.split(|&b| b == b'\n') {
            if std::mem::take(&mut self.skip_line) || line.is_empty() {
                continue;
            }
            self.line += 1;
            let text = String::from_utf8_lossy(line);
            let text = text.trim();
            let tag = rank_of_line(text.as_bytes());
            if text.is_empty() || self.rank.is_some_and(|r| tag != Some(r)) {
                continue;
            }
            out.push((
                tag,
                match parse_line(text.as_bytes()) {
                    Ok(r) => Ok((self.line, r)),
                    Err((error, kind)) => {
                        let cut = tag.is_some() && kind == DamageKind::NotJson;
                        Err(Damaged {
                            bytes: text.len(),
                            ..self.damaged(error, kind, cut)
                        })
                    }
                },
            ));
        }
        out
    }

    fn damaged(&self, error: String, kind: DamageKind, truncated: bool) -> Damaged {
        Damaged {
            path: self.path.clone(),
            line: self.line,
            error,
            kind,
            bytes: 0,
            truncated,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// Each kind of damaged line is told apart, a line that is not UTF-8
    /// does not end the reading, and blank lines count as lines.
    #[test]
    fn damaged_lines_are_told_apart() {
        let mut log = Vec::new();
        log.extend_from_slice(b"{\"type\":\"header\",\"version\":99}\n");
        log.extend_from_slice(b"{\"type\":\"hologram\",\"t\":1}\n");
        log.extend_from_slice(b"{\"t\":1,\"pvars\":{}}\n");
        log.extend_from_slice(b"{\"type\":\"warning\",\"t\":1}\n");
        log.extend_from_slice(b"\xff\xfe not utf-8\n\n");
        log.extend_from_slice(b"{\"type\":\"warning\",\"t\":1,\"message\":\"m\"}\n");
        log.extend_from_slice(b"{\"type\":\"warn");
        let mut records = records_from(log.as_slice(), Path::new("x.jsonl"));
        let got: Vec<_> = records
            .by_ref()
            .map(|r| {
                r.map(|(n, r)| (n, r.kind()))
                    .map_err(|d| (d.line, d.kind, d.truncated))
            })
            .collect();
        assert_eq!(
            got,
            [
                Err((1, DamageKind::NewerFormat(99), false)),
                Err((2, DamageKind::UnknownType("hologram".into()), false)),
                Err((3, DamageKind::Untyped, false)),
                Err((4, DamageKind::Invalid, false)),
                Err((5, DamageKind::NotJson, false)),
                Ok((7, "warning")),
                Err((8, DamageKind::NotJson, true)),
            ]
        );
        assert_eq!(records.lines(), 8);
    }

    /// A node's log: each rank reads its own lines only, with the file's
    /// line numbers; a write cut short reads as truncated, and the lines
    /// after it (another rank's next write starts on a new line) read whole.
    #[test]
    fn node_logs_are_read_rank_by_rank() {
        let dir = std::env::temp_dir().join(format!("vocab-node-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let w = |rank: u32, t: u32| {
            format!(
                "{}\"type\":\"warning\",\"t\":{t},\"message\":\"m\"}}",
                crate::record::rank_tag(rank)
            )
        };
        let cut = &w(3, 9)[..20];
        let text = format!(
            "\n{}\n{}\n\n{}\n{cut}\n{}\n\n{}\n",
            w(2, 1),
            w(3, 1),
            w(2, 2),
            w(2, 3),
            w(3, 2)
        );
        std::fs::write(dir.join("node-n1.jsonl"), &text).unwrap();
        std::fs::write(
            dir.join("rank-00000.jsonl"),
            "{\"type\":\"warning\",\"t\":1,\"message\":\"m\"}\n",
        )
        .unwrap();
        std::fs::write(dir.join("node-.jsonl"), "not a node log\n").unwrap();
        let files = rank_files(&dir).unwrap();
        let ranks: Vec<_> = files.iter().map(|f| (f.rank, f.shared)).collect();
        assert_eq!(ranks, [(0, false), (2, true), (3, true)]);
        assert_eq!(files[2].describe(), "node-n1.jsonl (rank 3)");
        let read = |f: &RankFile| -> Vec<_> {
            f.records()
                .unwrap()
                .map(|r| r.map(|(n, _)| n).map_err(|d| (d.line, d.truncated)))
                .collect()
        };
        assert_eq!(read(&files[1]), [Ok(2), Ok(5), Ok(7)]);
        assert_eq!(read(&files[2]), [Ok(3), Err((6, true)), Ok(9)]);
        // One pass over the whole file serves every rank.
        let mut all = records(&files[1].path).unwrap();
        let mut got = Vec::new();
        while let Some(item) = all.next() {
            got.push((
                all.line_rank(),
                item.map(|(n, _)| n).map_err(|d| d.truncated),
            ));
        }
        assert_eq!(
            got,
            [
                (Some(2), Ok(2)),
                (Some(3), Ok(3)),
                (Some(2), Ok(5)),
                (Some(3), Err(true)),
                (Some(2), Ok(7)),
                (Some(3), Ok(9)),
            ]
        );
        let mut follow = files[2].follow();
        let got: Vec<_> = follow.poll().into_iter().map(|r| r.is_ok()).collect();
        assert_eq!(got, [true, false, true]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn follow_reads_whole_lines_as_they_come() {
        let dir = std::env::temp_dir().join(format!("vocab-follow-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("rank-00000.jsonl");
        let _ = std::fs::remove_file(&path);
        let mut follow = Follow::new(&path);
        assert!(follow.poll().is_empty(), "a missing file reads as empty");
        let warning = r#"{"type":"warning","t":1.0,"message":"m"}"#;
        let mut f = File::create(&path).unwrap();
        write!(f, "{warning}\n{}", &warning[..10]).unwrap();
        let got = follow.poll();
        assert_eq!(got.len(), 1, "the partial line waits: {got:?}");
        assert!(follow.poll().is_empty());
        writeln!(f, "{}", &warning[10..]).unwrap();
        let got = follow.poll();
        assert_eq!(got.len(), 1);
        let (line, record) = got.into_iter().next().unwrap().unwrap();
        assert_eq!((line, record.kind()), (2, "warning"));
        writeln!(f, "not json").unwrap();
        assert!(follow.poll()[0].is_err());
        // From the end, in the middle of a line: that line is skipped.
        write!(f, "{}", &warning[..10]).unwrap();
        let mut tail = Follow::from_end(&path);
        writeln!(f, "{}\n{warning}", &warning[10..]).unwrap();
        let got = tail.poll();
        assert_eq!(got.len(), 1, "{got:?}");
        assert!(got[0].is_ok());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
