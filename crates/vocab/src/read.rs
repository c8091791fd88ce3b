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
