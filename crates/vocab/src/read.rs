//! The one reader of run directories: finds the rank logs and streams
//! their records, telling damaged lines apart from the end of a log.

use crate::record::{rank_of_file_name, Record};
use std::fs::File;
use std::io::{self, BufRead, BufReader};
use std::path::{Path, PathBuf};

/// A rank's log in a run directory.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct RankFile {
    /// The rank, from the file name.
    pub rank: u32,
    /// The file.
    pub path: PathBuf,
}

/// The rank logs of a run directory (`rank-NNNNN.jsonl`), by rank. Other
/// files are ignored.
pub fn rank_files(dir: &Path) -> io::Result<Vec<RankFile>> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let rank = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(rank_of_file_name);
        if let Some(rank) = rank {
            files.push(RankFile { rank, path });
        }
    }
    files.sort();
    Ok(files)
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
    /// Whether it is the file's last line without its newline: a log cut
    /// while it was written (a job killed mid-write), not damage inside.
    pub truncated: bool,
}

/// The records of one log, in order, each with its line number; a line that
/// does not parse is a [`Damaged`] item and the reading goes on.
pub fn records(path: &Path) -> io::Result<Records> {
    Ok(Records {
        path: path.to_path_buf(),
        reader: BufReader::with_capacity(1 << 16, File::open(path)?),
        line: 0,
        buf: String::new(),
        done: false,
        only: &[],
    })
}

/// The iterator of [`records`].
#[derive(Debug)]
pub struct Records {
    path: PathBuf,
    reader: BufReader<File>,
    line: usize,
    buf: String,
    done: bool,
    only: &'static [&'static str],
}

impl Records {
    /// Only records of these types; the other lines are skipped without
    /// being parsed (a report over thousands of logs reads samples only).
    pub fn only(mut self, kinds: &'static [&'static str]) -> Records {
        self.only = kinds;
        self
    }

    fn wanted(&self, text: &str) -> bool {
        self.only.is_empty()
            || self
                .only
                .iter()
                .any(|k| text.contains(&format!("\"type\":\"{k}\"")))
    }
}

impl Iterator for Records {
    type Item = Result<(usize, Record<'static>), Damaged>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if self.done {
                return None;
            }
            self.buf.clear();
            self.line += 1;
            let damaged = |s: &Self, error: String, truncated: bool| Damaged {
                path: s.path.clone(),
                line: s.line,
                error,
                truncated,
            };
            match self.reader.read_line(&mut self.buf) {
                Ok(0) => return None,
                Ok(_) => {}
                Err(e) => {
                    self.done = true;
                    return Some(Err(damaged(self, e.to_string(), false)));
                }
            }
            let complete = self.buf.ends_with('\n');
            let text = self.buf.trim();
            if text.is_empty() || !self.wanted(text) {
                continue;
            }
            return Some(match serde_json::from_str::<Record<'static>>(text) {
                Ok(record) if !self.only.is_empty() && !self.only.contains(&record.kind()) => {
                    continue
                }
                Ok(record) => Ok((self.line, record)),
                Err(e) => Err(damaged(self, e.to_string(), !complete)),
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
        }
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
        use std::io::{Read, Seek, SeekFrom};
        let mut out = Vec::new();
        let mut file = match File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return out,
            Err(e) => {
                out.push(Err(self.damaged(e.to_string(), false)));
                return out;
            }
        };
        let mut bytes = Vec::new();
        let read = file
            .seek(SeekFrom::Start(self.offset))
            .and_then(|_| file.read_to_end(&mut bytes));
        if let Err(e) = read {
            out.push(Err(self.damaged(e.to_string(), false)));
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
            if text.is_empty() {
                continue;
            }
            out.push(match serde_json::from_str::<Record<'static>>(text) {
                Ok(r) => Ok((self.line, r)),
                Err(e) => Err(self.damaged(e.to_string(), false)),
            });
        }
        out
    }

    fn damaged(&self, error: String, truncated: bool) -> Damaged {
        Damaged {
            path: self.path.clone(),
            line: self.line,
            error,
            truncated,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

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
