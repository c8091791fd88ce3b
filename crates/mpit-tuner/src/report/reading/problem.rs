//! What can be wrong with a run directory or one of its files, and how a
//! kind of problem is told when several files have it.

/// What is wrong with a run directory or one of its files.
#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    /// What kind of problem: problems of one kind are told together.
    pub kind: ProblemKind,
    /// The rank whose log it is about, if one.
    pub rank: Option<u32>,
    /// The file (name within the run directory), if one.
    pub file: Option<String>,
    /// The details, for this file.
    pub detail: String,
}

/// The kinds of [`Problem`], in the order they are reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ProblemKind {
    /// Ranks of the job with no log at all.
    MissingRanks,
    /// A log that could not be opened or read.
    Unreadable,
    /// An empty log.
    Empty,
    /// A file that is not a tuner log at all.
    NotALog,
    /// A log in a newer format than this reader knows.
    NewerFormat,
    /// A log whose first record is not its header.
    NoHeader,
    /// A header whose rank is not the file's.
    RankMismatch,
    /// Lines that are not JSON or not a known record.
    BadLines,
    /// A last line cut in the middle.
    Truncated,
    /// A log that ends without its close record.
    NoClose,
    /// `summary.json` missing, unreadable or odd.
    Summary,
}

impl ProblemKind {
    /// What the kind means, for a group of files.
    pub fn headline(self) -> &'static str {
        match self {
            ProblemKind::MissingRanks => "ranks with no log",
            ProblemKind::Unreadable => "logs that cannot be read",
            ProblemKind::Empty => "empty logs (the rank never wrote its header)",
            ProblemKind::NotALog => "files that are not tuner logs (skipped)",
            ProblemKind::NewerFormat => {
                "logs in a newer format than this mpit-tuner reads (skipped; upgrade mpit-tuner)"
            }
            ProblemKind::NoHeader => "logs that do not start with their header",
            ProblemKind::RankMismatch => "logs whose header names another rank",
            ProblemKind::BadLines => "logs with lines that are not valid records (skipped)",
            ProblemKind::Truncated => {
                "logs whose last line is cut short (job killed while writing?)"
            }
            ProblemKind::NoClose => {
                "ranks that started and never finished: the log has its header but no close record (job killed or aborted before MPI_Finalize?)"
            }
            ProblemKind::Summary => "summary.json",
        }
    }
}
