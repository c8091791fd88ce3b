//! `mpit-tuner probe`: what the linked MPI library supports, measured, not
//! assumed (the README's support matrix is made from it).
//!
//! Run under a launcher (`mpiexec -n 2 mpit-tuner probe --json`), every rank
//! takes part and rank 0 prints. In order: an environment setting is made
//! inside the process (as a `pre-init` policy's `setenv` does), MPI_T is
//! initialised and the catalogue counted, every unbound CVAR of a writable
//! scope is written with its own value (pre-init settings), MPI is
//! initialised, the catalogue counted again, the environment setting read
//! back, every such CVAR written again (runtime writes), every unbound PVAR
//! opened, started when needed and read (sampling), every PVAR bound to a
//! communicator opened on `MPI_COMM_WORLD` and read (bound handles). Writing
//! a variable's own value changes nothing but says whether the library
//! accepts the write then.
//!
//! `mpit-tuner probe --matrix A.json B.json ...` reads such outputs (one per
//! library) and prints the Markdown table of the README.

use anyhow::{Context, Result};
use mpit::quirks::LibraryVersion;
use mpit::{Binding, Catalogue, Cvar, Library, MpiProcess, MpiT, Object, PvarSession, Value};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::process::ExitCode;
use tuner_core::collectives::support;

/// `mpit-tuner probe` options.
#[derive(Debug, clap::Args)]
pub struct ProbeArgs {
    /// Print the facts as JSON (one object).
    #[arg(long, conflicts_with = "matrix")]
    json: bool,
    /// Read these JSON outputs of `probe --json` and print the Markdown
    /// support matrix (one row per file, in the order given).
    #[arg(long, num_args = 1.., value_name = "FILE")]
    matrix: Vec<PathBuf>,
    /// With --matrix: compare the support matrix in this file (README.md,
    /// or a file holding just the table) with the measured rows. Exit 1 when a fact
    /// of a library differs (its version, ABI, environment settings,
    /// collective tuning, or whether CVAR writes work at all); differences
    /// in what varies with the machine (variable counts, which depend on
    /// network interfaces and installed components; which PVARs can be
    /// read, which depends on the components selected) are only reported.
    #[arg(long, requires = "matrix", value_name = "TABLE")]
    check: Option<PathBuf>,
}

/// What one library supports, as measured by `probe` (the `--json` output).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeFacts {
    /// `MPI_Get_library_version`, first line.
    pub library_version: String,
    /// Family and version as the quirks table reads them (`mpich 5.0.2`).
    pub library: String,
    /// The ABI of this build (`mpich`, `openmpi`, `standard`).
    pub abi: String,
    /// Ranks of the probe job.
    pub ranks: i32,
    /// CVARs described before and after `MPI_Init`.
    pub cvars_before_init: usize,
    /// See `cvars_before_init`.
    pub cvars_after_init: usize,
    /// PVARs described after `MPI_Init`.
    pub pvars: usize,
    /// PVAR indices the library counted but would not describe
    /// (open-mpi/ompi#11492).
    pub holes: usize,
    /// Unbound PVARs read, of those described.
    pub sampled: (usize, usize),
    /// PVARs bound to a communicator read on `MPI_COMM_WORLD`, of those.
    pub bound: (usize, usize),
    /// Unbound scalar CVARs of a writable scope that took their own value
    /// before `MPI_Init`, of those tried.
    pub pre_init_writes: (usize, usize),
    /// The same after `MPI_Init`.
    pub runtime_writes: (usize, usize),
    /// The environment variable set in the process before MPI_T and MPI
    /// started, and whether the library's CVAR read it back.
    pub env_setting: String,
    /// Whether the value came back.
    pub env_setting_works: bool,
    /// When an algorithm written after `MPI_Init` takes effect, from the
    /// version-keyed table ([`Support::when`](tuner_core::collectives::Support::when)):
    /// `next call` (tuned online), `next communicator`, `start only` or
    /// `unknown`.
    pub collective_tuning: String,
}

/// Runs `mpit-tuner probe`.
pub fn run(args: &ProbeArgs) -> Result<ExitCode> {
    if !args.matrix.is_empty() {
        let mut rows = Vec::new();
        for file in &args.matrix {
            let text = std::fs::read_to_string(file)
                .with_context(|| format!("cannot read {}", file.display()))?;
            let facts: ProbeFacts = serde_json::from_str(&text).with_context(|| {
                format!("{} is not the output of `probe --json`", file.display())
            })?;
            rows.push(facts);
        }
        let Some(table) = &args.check else {
            print!("{}", matrix(&rows));
            return Ok(ExitCode::SUCCESS);
        };
        let documented = std::fs::read_to_string(table)
            .with_context(|| format!("cannot read {}", table.display()))?;
        let found = check_matrix(&documented, &rows);
        for note in &found.notes {
            eprintln!("mpit-tuner: note: {note}");
        }
        for error in &found.errors {
            eprintln!("mpit-tuner: differs: {error}");
        }
        return Ok(if found.errors.is_empty() {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        });
    }
    let Some(facts) = probe()? else {
        return Ok(ExitCode::SUCCESS);
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&facts)?);
    } else {
        print!("{}", matrix(std::slice::from_ref(&facts)));
    }
    Ok(ExitCode::SUCCESS)
}

/// The environment setting tried for a family: (variable, value, CVAR,
/// the CVAR's value when the setting was read).
fn env_probe(library: Library) -> Option<(&'static str, &'static str, &'static str, i64)> {
    match library {
        // MVAPICH2 selects its algorithms with its own variables, numbered
        // (MPICH's INTRA_ALGORITHM names are not read there: measured on
        // 2.3.7, a setting of them leaves the algorithm alone).
        Library::Mvapich2 => Some((
            "MPIR_CVAR_ALLREDUCE_COLLECTIVE_ALGORITHM",
            "3",
            "MPIR_CVAR_ALLREDUCE_COLLECTIVE_ALGORITHM",
            3,
        )),
        // `recursive_doubling` is the fourth name in MPICH 4.0-5.0's list.
        Library::Mpich | Library::IntelMpi => Some((
            "MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM",
            "recursive_doubling",
            "MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM",
            3,
        )),
        Library::OpenMpi => Some((
            "OMPI_MCA_coll_tuned_allreduce_algorithm",
            "4",
            "coll_tuned_allreduce_algorithm",
            4,
        )),
        Library::Unknown => None,
    }
}

/// Writes every unbound scalar numeric CVAR of a writable scope with its
/// own value: (accepted, tried).
fn own_value_writes(mpit: &MpiT, catalogue: &Catalogue) -> (usize, usize) {
    let mut tried = 0;
    let mut accepted = 0;
    for info in catalogue.cvars() {
        if info.binding != Binding::NoObject || !info.scope.is_writable() {
            continue;
        }
        let Ok(cvar) = Cvar::open(mpit, info, Object::None) else {
            continue;
        };
        let Ok(value) = cvar.read() else { continue };
        if cvar.count() != 1 || matches!(value, Value::Str(_)) {
            continue;
        }
        tried += 1;
        if cvar.write(&value).is_ok() {
            accepted += 1;
        }
    }
    (accepted, tried)
}

/// Measures the facts; `None` on ranks other than 0.
fn probe() -> Result<Option<ProbeFacts>> {
    // The family is known before MPI_T starts (MPI_Get_library_version may
    // be called any time), so the environment setting comes first: Open MPI
    // reads OMPI_MCA_* when MPI_T starts.
    let family = LibraryVersion::of_process().library;
    let env = env_probe(family);
    if let Some((var, value, _, _)) = env {
        // One thread so far: nothing reads the environment concurrently.
        std::env::set_var(var, value);
    }
    let mpit = MpiT::init().context("cannot initialise MPI_T")?;
    let mut catalogue = Catalogue::load(&mpit).context("cannot list the variables")?;
    let cvars_before_init = catalogue.cvars().len();
    let pre_init_writes = own_value_writes(&mpit, &catalogue);
    let mpi = MpiProcess::init().context("cannot initialise MPI")?;
    catalogue
        .refresh(&mpit)
        .context("cannot list the variables MPI_Init added")?;
    let env_setting_works = env.is_some_and(|(_, _, cvar, expected)| {
        catalogue
            .cvar(cvar)
            .and_then(|info| Cvar::open(&mpit, info, Object::None).ok())
            .and_then(|c| c.read().ok())
            .and_then(|v| v.as_i64())
            == Some(expected)
    });
    let runtime_writes = own_value_writes(&mpit, &catalogue);
    let session = PvarSession::new(&mpit).context("cannot create a PVAR session")?;
    let (mut sampled, mut bound) = ((0, 0), (0, 0));
    for info in catalogue.pvars() {
        let (object, tally) = match info.binding {
            Binding::NoObject => (Object::None, &mut sampled),
            Binding::Comm => (Object::Comm(mpi.world()), &mut bound),
            _ => continue,
        };
        tally.1 += 1;
        let read = session.open(info, object).and_then(|mut pvar| {
            if !pvar.is_continuous() {
                pvar.start()?;
            }
            pvar.read()
        });
        if read.is_ok() {
            tally.0 += 1;
        }
    }
    drop(session);
    if mpi.rank() != 0 {
        return Ok(None);
    }
    let version = mpit
        .library_version()
        .context("MPI_Get_library_version failed")?;
    let parsed = LibraryVersion::parse(&version);
    let collective_tuning = support(parsed).when();
    Ok(Some(ProbeFacts {
        library_version: version.lines().next().unwrap_or("").trim().to_string(),
        library: parsed.to_string(),
        abi: mpit_sys::BUILD_ABI.to_string(),
        ranks: mpi.size(),
        cvars_before_init,
        cvars_after_init: catalogue.cvars().len(),
        pvars: catalogue.pvars().len(),
        holes: catalogue
            .skipped()
            .iter()
            .filter(|s| s.kind == "pvar")
            .count(),
        sampled,
        bound,
        pre_init_writes,
        runtime_writes,
        env_setting: env.map_or_else(String::new, |(var, value, _, _)| format!("{var}={value}")),
        env_setting_works,
        collective_tuning: collective_tuning.to_string(),
    }))
}

/// `n of m`, or `none` when there was nothing to try.
fn of(pair: (usize, usize)) -> String {
    match pair {
        (_, 0) => "none".to_string(),
        (n, m) => format!("{n} of {m}"),
    }
}

/// What `probe --matrix --check` holds a cell of a column to.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Gate {
    /// A fact of the library version and its ABI: must match exactly.
    Exact,
    /// An `n of m` (or `none`) tally: the counts vary with the machine, so
    /// only whether anything worked (`n > 0`) is gated.
    Works,
    /// A count that varies with the machine: reported, never gated.
    Count,
}

/// The matrix's columns: heading and gate, in order. The counts are facts
/// of the machine as much as of the library: Open MPI registers variables
/// per network interface after `MPI_Init` and per installed component
/// (plugins such as UCX or libfabric add theirs), so a second bridge or an
/// InfiniBand port changes them. Which PVARs can be read depends on the
/// components the library selects on the machine (Open MPI's ob1 queues
/// exist only where ob1, not UCX, carries the messages), so sampling and
/// bound handles are reported, not gated. Whether CVAR writes work at all,
/// environment settings and collective tuning belong to the library.
const COLUMNS: [(&str, Gate); 9] = [
    ("library (ABI)", Gate::Exact),
    ("CVARs before / after MPI_Init", Gate::Count),
    ("PVARs (holes)", Gate::Count),
    ("sampling", Gate::Count),
    ("bound handles", Gate::Count),
    ("pre-init CVAR writes", Gate::Works),
    ("runtime CVAR writes", Gate::Works),
    ("environment settings", Gate::Exact),
    ("collective tuning", Gate::Exact),
];

/// One row's cells, in the order of [`COLUMNS`].
fn cells(r: &ProbeFacts) -> [String; 9] {
    [
        format!("{} ({})", r.library, r.abi),
        format!("{} / {}", r.cvars_before_init, r.cvars_after_init),
        format!("{} ({})", r.pvars, r.holes),
        of(r.sampled),
        of(r.bound),
        of(r.pre_init_writes),
        of(r.runtime_writes),
        if r.env_setting.is_empty() {
            "not tried".to_string()
        } else if r.env_setting_works {
            format!("yes (`{}`)", r.env_setting)
        } else {
            format!("no (`{}`)", r.env_setting)
        },
        r.collective_tuning.clone(),
    ]
}

/// A Markdown table row from its cells.
fn row(cells: &[String]) -> String {
    format!("| {} |\n", cells.join(" | "))
}

/// The Markdown table of the README: one row per library.
pub fn matrix(rows: &[ProbeFacts]) -> String {
    let headings: Vec<String> = COLUMNS.iter().map(|(h, _)| h.to_string()).collect();
    let mut out = row(&headings);
    out.push('|');
    out.push_str(&"---|".repeat(COLUMNS.len()));
    out.push('\n');
    for r in rows {
        out.push_str(&row(&cells(r)));
    }
    out
}

/// The lines that open and close the support matrix in README.md
/// (`scripts/support-matrix.sh --update` writes between them).
const MARKERS: (&str, &str) = ("<!-- support-matrix:begin", "<!-- support-matrix:end -->");

/// The cells of a Markdown table's rows (heading and separator included):
/// of the support matrix between [`MARKERS`] when `text` has them (the
/// README), else of every table row in `text`.
fn parse_table(text: &str) -> Vec<Vec<String>> {
    let text = match text.find(MARKERS.0) {
        Some(begin) => {
            let rest = &text[begin..];
            let rest = rest.split_once('\n').map_or("", |(_, r)| r);
            rest.split(MARKERS.1).next().unwrap_or(rest)
        }
        None => text,
    };
    text.lines()
        .map(str::trim)
        .filter(|l| l.starts_with('|'))
        .map(|l| {
            l.trim_matches('|')
                .split('|')
                .map(|c| c.trim().to_string())
                .collect()
        })
        .collect()
}

/// What a cell says under its column's gate: the cell itself for facts of
/// the library, `works`/`does not work`/`nothing to try` for tallies,
/// nothing for counts.
fn gated(gate: Gate, cell: &str) -> Option<String> {
    match gate {
        Gate::Exact => Some(cell.to_string()),
        Gate::Count => None,
        Gate::Works if cell == "none" => Some("nothing to try".to_string()),
        Gate::Works => Some(
            match cell
                .split_once(" of ")
                .map(|(n, _)| n.trim().parse::<u64>())
            {
                Some(Ok(0)) => "does not work".to_string(),
                Some(Ok(_)) => "works".to_string(),
                _ => format!("unreadable `{cell}`"),
            },
        ),
    }
}

/// How a documented table compares with the measured rows.
#[derive(Debug, Default, PartialEq)]
pub struct MatrixCheck {
    /// Differences in facts of the library (or in the table's shape): the
    /// documentation is wrong.
    pub errors: Vec<String>,
    /// Differences in figures that vary with the machine: reported only.
    pub notes: Vec<String>,
}

/// Compares the documented table `documented` (Markdown, as in the README)
/// with the measured rows: facts of the library must agree, figures that
/// vary with the machine are noted.
pub fn check_matrix(documented: &str, rows: &[ProbeFacts]) -> MatrixCheck {
    let mut out = MatrixCheck::default();
    let table = parse_table(documented);
    let headings: Vec<String> = COLUMNS.iter().map(|(h, _)| h.to_string()).collect();
    if table.first() != Some(&headings) {
        out.errors.push(format!(
            "the documented table's columns are not the measured ones ({})",
            headings.join(", ")
        ));
        return out;
    }
    let documented: Vec<&Vec<String>> = table.iter().skip(2).collect();
    if documented.len() != rows.len() {
        out.errors.push(format!(
            "the documented table has {} libraries, {} were measured",
            documented.len(),
            rows.len()
        ));
    }
    for (doc, facts) in documented.iter().zip(rows) {
        let measured = cells(facts);
        let library = &measured[0];
        if doc.len() != COLUMNS.len() {
            out.errors.push(format!(
                "row `{}`: {} cells, the table has {} columns",
                doc.join(" | "),
                doc.len(),
                COLUMNS.len()
            ));
            continue;
        }
        for ((heading, gate), (said, got)) in COLUMNS.iter().zip(doc.iter().zip(&measured)) {
            if said == got {
                continue;
            }
            let line = format!("{library}, {heading}: documented `{said}`, measured `{got}`");
            match (gated(*gate, said), gated(*gate, got)) {
                (Some(a), Some(b)) if a != b => out.errors.push(line),
                (Some(_), Some(_)) => out.notes.push(format!(
                    "{line} (the counts vary with the machine; it works in both)"
                )),
                _ => out.notes.push(format!("{line} (varies with the machine)")),
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matrix_rows_say_what_was_measured() {
        let facts = ProbeFacts {
            library_version: "MPICH Version: 5.0.2".into(),
            library: "mpich 5.0.2".into(),
            abi: "mpich".into(),
            ranks: 2,
            cvars_before_init: 466,
            cvars_after_init: 466,
            pvars: 0,
            holes: 0,
            sampled: (0, 0),
            bound: (0, 0),
            pre_init_writes: (300, 310),
            runtime_writes: (310, 310),
            env_setting: "MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM=recursive_doubling".into(),
            env_setting_works: true,
            collective_tuning: "next call".into(),
        };
        let text = matrix(std::slice::from_ref(&facts));
        let row = text.lines().nth(2).unwrap();
        assert_eq!(
            row,
            "| mpich 5.0.2 (mpich) | 466 / 466 | 0 (0) | none | none | 300 of 310 | 310 of 310 | \
             yes (`MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM=recursive_doubling`) | next call |"
        );
        let json = serde_json::to_string(&facts).unwrap();
        assert_eq!(serde_json::from_str::<ProbeFacts>(&json).unwrap(), facts);
    }

    /// Open MPI 4.1.4 as probed on a machine with only loopback and one
    /// Ethernet port up.
    fn open_mpi_plain() -> ProbeFacts {
        ProbeFacts {
            library_version: "Open MPI v4.1.4, package: Debian OpenMPI".into(),
            library: "openmpi 4.1.4".into(),
            abi: "openmpi".into(),
            ranks: 2,
            cvars_before_init: 1259,
            cvars_after_init: 1282,
            pvars: 33,
            holes: 0,
            sampled: (1, 15),
            bound: (2, 16),
            pre_init_writes: (133, 182),
            runtime_writes: (135, 171),
            env_setting: "OMPI_MCA_coll_tuned_allreduce_algorithm=4".into(),
            env_setting_works: true,
            collective_tuning: "next communicator".into(),
        }
    }

    #[test]
    fn counts_that_vary_with_the_machine_are_noted_not_gated() {
        let documented = matrix(&[open_mpi_plain()]);
        assert_eq!(
            check_matrix(&documented, &[open_mpi_plain()]),
            MatrixCheck::default()
        );
        // The same library with a bridge and two veth pairs up: Open MPI
        // registers 4 more variables after MPI_Init (1286 instead of
        // 1282), and some of them take writes.
        let bridged = ProbeFacts {
            cvars_after_init: 1286,
            runtime_writes: (137, 175),
            ..open_mpi_plain()
        };
        let found = check_matrix(&documented, &[bridged]);
        assert!(found.errors.is_empty(), "{found:?}");
        assert_eq!(found.notes.len(), 2, "{found:?}");
        assert!(
            found.notes[0].contains("CVARs before / after MPI_Init")
                && found.notes[0].contains("`1259 / 1282`")
                && found.notes[0].contains("`1259 / 1286`"),
            "{found:?}"
        );
        assert!(found.notes[1].contains("works in both"), "{found:?}");
        // A node where Open MPI selects UCX instead of ob1: no ob1 queue to
        // read, bound to communicators or not.
        let ucx = ProbeFacts {
            pvars: 20,
            sampled: (0, 2),
            bound: (0, 0),
            ..open_mpi_plain()
        };
        let found = check_matrix(&documented, &[ucx]);
        assert!(found.errors.is_empty(), "{found:?}");
        assert_eq!(found.notes.len(), 3, "{found:?}");
    }

    #[test]
    fn facts_of_the_library_are_gated() {
        let documented = matrix(&[open_mpi_plain()]);
        let cases: [(&str, ProbeFacts); 5] = [
            (
                "library (ABI)",
                ProbeFacts {
                    library: "openmpi 4.1.5".into(),
                    ..open_mpi_plain()
                },
            ),
            (
                "runtime CVAR writes",
                ProbeFacts {
                    runtime_writes: (0, 171),
                    ..open_mpi_plain()
                },
            ),
            (
                "pre-init CVAR writes",
                ProbeFacts {
                    pre_init_writes: (0, 0),
                    ..open_mpi_plain()
                },
            ),
            (
                "environment settings",
                ProbeFacts {
                    env_setting_works: false,
                    ..open_mpi_plain()
                },
            ),
            (
                "collective tuning",
                ProbeFacts {
                    collective_tuning: "next call".into(),
                    ..open_mpi_plain()
                },
            ),
        ];
        for (column, facts) in cases {
            let found = check_matrix(&documented, &[facts]);
            assert_eq!(found.errors.len(), 1, "{column}: {found:?}");
            assert!(found.errors[0].contains(column), "{column}: {found:?}");
        }
    }

    #[test]
    fn the_readme_s_matrix_is_found_between_its_markers() {
        let readme = format!(
            "# Title\n\n| other | table |\n|---|---|\n\n{}(generated) -->\n{}{}\n\n| x |\n",
            MARKERS.0,
            matrix(&[open_mpi_plain()]),
            MARKERS.1
        );
        assert_eq!(
            check_matrix(&readme, &[open_mpi_plain()]),
            MatrixCheck::default()
        );
    }

    #[test]
    fn a_table_of_another_shape_or_length_is_an_error() {
        let documented = matrix(&[open_mpi_plain()]);
        let found = check_matrix(&documented, &[open_mpi_plain(), open_mpi_plain()]);
        assert_eq!(found.errors.len(), 1, "{found:?}");
        assert!(found.errors[0].contains("has 1 libraries, 2 were measured"));
        let renamed = documented.replacen("sampling", "sampled PVARs", 1);
        let found = check_matrix(&renamed, &[open_mpi_plain()]);
        assert!(found.errors[0].contains("columns"), "{found:?}");
        assert!(!check_matrix("", &[open_mpi_plain()]).errors.is_empty());
    }
}
