//! Tuning logs: JSON Lines written by the helper thread through a buffer,
//! one file per rank (`rank-NNNNN.jsonl`) or one per node
//! (`node-<host>.jsonl`, [`vocab::record::LogLayout`]).
//!
//! The format is a public interface, defined by the types of
//! [`vocab::record`] (versioned by [`FORMAT_VERSION`]; `mpit-tuner schema`
//! prints it): this writer takes nothing else. Lines are only ever written
//! whole: the buffer holds complete lines and is written with a single
//! `write` call, so a file is valid JSON Lines at every moment, also after
//! `MPI_Abort` (the aborting rank writes its last lines and then
//! [`LogWriter::seal`]s its log). Only a process killed in the middle of a
//! `write` (the other ranks of an aborted job, which the launcher kills)
//! can have that write cut short: Linux stops a write to a regular file at
//! a page boundary when a fatal signal is pending, so the file's last line
//! is then incomplete. Readers tell that line apart
//! ([`vocab::Damaged::truncated`]) and keep every line before it.
//!
//! A node's log is opened with `O_APPEND` by every rank of the node: each
//! flush is one `write` at the file's end, which the kernel does not
//! interleave with another process's on a local file system (and a
//! parallel file system's client serialises on its node). Each line starts
//! with the rank that wrote it ([`vocab::record::rank_tag`]) and each flush
//! starts with a newline, so that a write cut short by a killed rank
//! leaves one damaged line of that rank, never a damaged line of another.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use vocab::Record;

pub use vocab::record::{node_file_name, rank_file_name, FORMAT_VERSION};

/// A buffered JSON Lines writer.
#[derive(Debug)]
pub struct LogWriter {
    path: PathBuf,
    /// `None` for a writer that discards (a rank whose log could not be
    /// opened still takes part in the tool's collectives).
    file: Option<File>,
    buf: Vec<u8>,
    last_flush: Instant,
    every: Duration,
    failed: bool,
    /// In a node's log: the start of each line (`{"writer":N,`).
    tag: Option<Vec<u8>>,
}

impl LogWriter {
    /// Creates (truncates) the log file.
    pub fn create(path: &Path, every: Duration) -> io::Result<LogWriter> {
        let file = OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(true)
            .open(path)?;
        Ok(Self::on(path, file, every, None))
    }

    /// Opens (creates if need be) a node's log shared with the other ranks
    /// of the node, to append this rank's lines to.
    pub fn append_shared(path: &Path, rank: u32, every: Duration) -> io::Result<LogWriter> {
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        let tag = vocab::record::rank_tag(rank).into_bytes();
        Ok(Self::on(path, file, every, Some(tag)))
    }

    /// A writer of `file`, opened at `path`.
    fn on(path: &Path, file: File, every: Duration, tag: Option<Vec<u8>>) -> LogWriter {
        LogWriter {
            path: path.to_path_buf(),
            file: Some(file),
            buf: Vec::with_capacity(64 * 1024),
            last_flush: Instant::now(),
            every,
            failed: false,
            tag,
        }
    }

    /// A writer that keeps nothing, for a rank without a log file.
    pub fn discard() -> LogWriter {
        LogWriter {
            path: PathBuf::new(),
            file: None,
            buf: Vec::new(),
            last_flush: Instant::now(),
            every: Duration::MAX,
            failed: false,
            tag: None,
        }
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one record (one line) to the buffer; flushes when the flush
    /// period has passed or the buffer is large.
    pub fn record(&mut self, record: &Record<'_>) {
        if self.file.is_none() || self.failed {
            return;
        }
        let start = self.buf.len();
        if let Some(tag) = &self.tag {
            // Each write to a shared file starts on a new line.
            if start == 0 {
                self.buf.push(b'\n');
            }
            self.buf.extend_from_slice(tag);
        }
        let body = self.buf.len();
        if serde_json::to_writer(&mut self.buf, record).is_err() {
            self.buf.truncate(start);
            return;
        }
        if self.tag.is_some() {
            // The tag opened the object: the record's own `{` goes.
            self.buf.remove(body);
        }
        self.buf.push(b'\n');
        if self.last_flush.elapsed() >= self.every || self.buf.len() > 1 << 20 {
            self.flush();
        }
    }

    /// Writes the buffer out now (whole lines, one `write` call where the
    /// kernel allows).
    pub fn flush(&mut self) {
        self.last_flush = Instant::now();
        if self.buf.is_empty() || self.failed {
            self.buf.clear();
            return;
        }
        if let Some(file) = &mut self.file {
            if file.write_all(&self.buf).is_err() {
                // A full disk: stop writing rather than leave torn lines.
                self.failed = true;
            }
        }
        self.buf.clear();
    }

    /// Writes the buffer out and closes the log: later records are
    /// dropped. After `MPI_Abort` the process is about to be killed, and a
    /// kill during a write would cut the file's last line; a sealed log
    /// stays whole.
    pub fn seal(&mut self) {
        self.flush();
        self.file = None;
    }

    /// Whether a write failed (the log stopped there).
    pub fn failed(&self) -> bool {
        self.failed
    }
}

impl Drop for LogWriter {
    fn drop(&mut self) {
        self.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sealed log holds what was recorded before the seal, whole, and
    /// nothing after it.
    #[test]
    fn a_sealed_log_keeps_its_lines_and_drops_later_ones() {
        let dir = std::env::temp_dir().join(format!("tuner-seal-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(rank_file_name(0));
        let warning = |m: &str| {
            Record::Warning(vocab::record::Warning {
                t: 1.0,
                message: m.into(),
                abort: false,
            })
        };
        let mut log = LogWriter::create(&path, Duration::MAX).unwrap();
        log.record(&warning("before"));
        log.seal();
        log.record(&warning("after"));
        log.flush();
        drop(log);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.ends_with('\n'), "{text:?}");
        assert_eq!(text.lines().count(), 1, "{text:?}");
        assert!(
            text.contains("before") && !text.contains("after"),
            "{text:?}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Two ranks appending to one node log: each reads back its own
    /// records whole, through the one reader.
    #[test]
    fn shared_log_lines_carry_their_rank() {
        let dir = std::env::temp_dir().join(format!("tuner-log-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(node_file_name("n1"));
        let warning = |m: &str| {
            Record::Warning(vocab::record::Warning {
                t: 1.0,
                message: m.into(),
                abort: false,
            })
        };
        let mut a = LogWriter::append_shared(&path, 0, Duration::MAX).unwrap();
        let mut b = LogWriter::append_shared(&path, 1, Duration::MAX).unwrap();
        a.record(&warning("a1"));
        b.record(&warning("b1"));
        b.flush();
        a.record(&warning("a2"));
        a.flush();
        b.record(&warning("b2"));
        drop(b);
        let files = vocab::rank_files(&dir).unwrap();
        let got: Vec<(u32, Vec<String>)> = files
            .iter()
            .map(|f| {
                let messages = f
                    .records()
                    .unwrap()
                    .map(|r| match r.unwrap().1 {
                        Record::Warning(w) => w.message,
                        other => panic!("{other:?}"),
                    })
                    .collect();
                (f.rank, messages)
            })
            .collect();
        assert_eq!(
            got,
            [
                (0, vec!["a1".into(), "a2".into()]),
                (1, vec!["b1".into(), "b2".into()])
            ]
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
