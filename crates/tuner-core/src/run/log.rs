//! Per-rank tuning logs: JSON Lines, one file per rank, written by the
//! helper thread through a buffer.
//!
//! The format is a public interface, defined by the types of
//! [`vocab::record`] (versioned by [`FORMAT_VERSION`]; `mpit-tuner schema`
//! prints it): this writer takes nothing else. Lines are only ever written whole: the buffer holds
//! complete lines and is written with a single `write` call, so a file is
//! valid JSON Lines at every moment, even after `MPI_Abort` or a kill.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use vocab::Record;

pub use vocab::record::{rank_file_name, FORMAT_VERSION};

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
}

impl LogWriter {
    /// Creates (truncates) the log file.
    pub fn create(path: &Path, every: Duration) -> io::Result<LogWriter> {
        let file = OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(true)
            .open(path)?;
        Ok(LogWriter {
            path: path.to_path_buf(),
            file: Some(file),
            buf: Vec::with_capacity(64 * 1024),
            last_flush: Instant::now(),
            every,
            failed: false,
        })
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
        }
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one record (one line) to the buffer; flushes when the flush
    /// period has passed or the buffer is large.
    pub fn record(&mut self, record: &Record<'_>) {
        let start = self.buf.len();
        if serde_json::to_writer(&mut self.buf, record).is_err() {
            self.buf.truncate(start);
            return;
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
