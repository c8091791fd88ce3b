//! `mpit-tuner check`: validates policy files before a job uses them.
//!
//! Without `--against-mpi` it checks what a file says on its own: TOML
//! syntax, keys and their types, durations, rank selections, every
//! expression, and the rules that need no MPI library (`setenv` only in
//! phase pre-init, `every` only for periodic policies, unique names, ...):
//! everything `PolicySet::parse` checks, which is also what the runtime
//! checks when it loads the file. Variable names are not checked then: which
//! variables exist depends on the MPI library, and checking against an
//! empty or made-up catalogue would report every name or none.
//!
//! With `--against-mpi` it also initialises MPI_T and MPI (variables appear
//! during `MPI_Init`), and checks every variable and every write against the
//! linked library: existence (with the closest known names), scope (no
//! CONSTANT/READONLY writes, no per-rank writes of ALL_EQ/GROUP_EQ CVARs
//! while the job runs), type, enumeration items, array lengths; and the
//! `[collectives]` table: every collective listed for this library has an
//! algorithm variable here, every algorithm name is one of its algorithms
//! (the names and values the runtime uses, from
//! `tuner_core::collectives::algorithms`).

use anyhow::{Context, Result};
use clap::Args;
use mpit::{Catalogue, Error, MpiProcess, MpiT};
use policies::{Diagnostic, PolicySet, Severity};
use std::fmt::Write as _;
use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use tuner_core::collectives::LibraryAlgorithms;
use tuner_core::decide::CatalogueView;

const AFTER_HELP: &str = "\
Output: every problem as `FILE:LINE:COLUMN: SEVERITY: message`, with the \
line of the file and a caret under the column, then one line per file: \
`FILE: ok (N policies)` or `FILE: failed (...)`.

Without --against-mpi: syntax and semantics only (TOML syntax, keys, types, \
durations, ranks, expressions, phase rules such as `setenv` only in \
pre-init). Variable names are not checked: they depend on the MPI library.

With --against-mpi: also every variable the files name and every write, \
against the MPI library mpit-tuner is linked to (MPI_T and MPI are \
initialised, as variables appear during MPI_Init): `missing` for variables \
the library does not export (with the closest known names; the runtime \
would disable that policy), `error` for writes that cannot work or are \
unsafe (CONSTANT/READONLY CVARs, ALL_EQ/GROUP_EQ CVARs written per rank \
while the job runs, wrong types, unknown enumeration items, array lengths), \
`warning` for legal but doubtful uses. The [collectives] table too: each \
collective of this library's table (`algorithms.mpich` on MPICH, \
`algorithms.openmpi` on Open MPI) must have an algorithm variable here \
(`missing` otherwise), each name must be one of its algorithms (`error`, \
with the closest names and the full list: MPICH's from the variable's \
description in value order, Open MPI's from its MPI_T enumeration); MPICH's \
table is also checked on other libraries against the names known for \
MPICH 4.0, 4.1 and 5.0, and on an MPICH a name of another series only is \
a `warning` (it is left out there); the table of another library is \
otherwise not checked (`warning`). Under a launcher, rank 0 prints.

Exit status: 0 if every file is fine (warnings allowed), 1 if a file has \
an error or (with --against-mpi) a missing variable, 2 if a file cannot be \
read or MPI cannot be initialised.";

/// Options of `mpit-tuner check`.
#[derive(Debug, Args)]
#[command(after_long_help = AFTER_HELP)]
pub struct CheckArgs {
    /// Policy files (TOML) to check.
    #[arg(value_name = "FILE", required = true)]
    files: Vec<PathBuf>,

    /// Also check every variable and write against the MPI library
    /// mpit-tuner is linked to (existence, scope, type).
    #[arg(long)]
    against_mpi: bool,
}

/// One file, read and parsed.
struct Checked {
    name: String,
    source: String,
    outcome: Outcome,
}

enum Outcome {
    Unreadable(String),
    Broken(policies::PolicyErrors),
    Parsed(Box<PolicySet>, Vec<Diagnostic>),
}

/// Runs `mpit-tuner check`.
pub fn run(args: &CheckArgs) -> Result<ExitCode> {
    let mut files: Vec<Checked> = args
        .files
        .iter()
        .map(|path| {
            let name = path.display().to_string();
            match std::fs::read_to_string(path) {
                Err(e) => Checked {
                    name,
                    source: String::new(),
                    outcome: Outcome::Unreadable(e.to_string()),
                },
                Ok(source) => {
                    let outcome = match PolicySet::parse(&source, &name) {
                        Ok(set) => Outcome::Parsed(Box::new(set), Vec::new()),
                        Err(e) => Outcome::Broken(e),
                    };
                    Checked {
                        name,
                        source,
                        outcome,
                    }
                }
            }
        })
        .collect();

    let mut header = String::new();
    if args.against_mpi {
        let Some(library) = check_against_mpi(&mut files)? else {
            return Ok(status(&files));
        };
        writeln!(header, "checking against: {library}")?;
    }
    let text = report(&files, args.against_mpi);
    let stdout = io::stdout();
    let mut out = stdout.lock();
    out.write_all(header.as_bytes())?;
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(status(&files))
}

/// Checks every parsed file against the MPI library; returns a description
/// of the library on rank 0, `None` on other ranks (which print nothing).
fn check_against_mpi(files: &mut [Checked]) -> Result<Option<String>> {
    let mpit = MpiT::init().map_err(|e| match e {
        Error::NoMpi => anyhow::anyhow!(
            "{e}: this mpit-tuner was built without an MPI library to link, so \
             --against-mpi cannot work (choose MPI with MPICC: docs/libraries.md#choosing-the-mpi-library)"
        ),
        e => anyhow::Error::new(e).context("cannot initialise MPI_T"),
    })?;
    let mut catalogue =
        Catalogue::load(&mpit).context("cannot list the variables of the MPI library")?;
    let mpi = MpiProcess::init().context("cannot initialise MPI")?;
    catalogue
        .refresh(&mpit)
        .context("cannot list the variables MPI_Init added")?;
    let library = mpit
        .library_version()
        .context("MPI_Get_library_version failed")?;
    let view = CatalogueView::new(&mpit, &catalogue);
    let algorithms = LibraryAlgorithms {
        version: mpit::quirks::LibraryVersion::parse(&library),
        catalogue: &catalogue,
    };
    for file in files.iter_mut() {
        if let Outcome::Parsed(set, diagnostics) = &mut file.outcome {
            *diagnostics = set.check(&view);
            if let Some(spec) = set.collectives() {
                diagnostics.extend(spec.check(&algorithms));
                diagnostics.sort_by_key(|d| (d.location.line, d.location.column, d.severity));
            }
        }
    }
    if mpi.rank() != 0 {
        return Ok(None);
    }
    Ok(Some(format!(
        "{} ({} CVARs, {} PVARs)",
        library
            .lines()
            .next()
            .unwrap_or_default()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" "),
        catalogue.cvars().len(),
        catalogue.pvars().len()
    )))
}

/// Whether a diagnostic fails the check.
fn fails(d: &Diagnostic) -> bool {
    matches!(d.severity, Severity::Error | Severity::Missing)
}

/// The exit status for these results.
fn status(files: &[Checked]) -> ExitCode {
    let unreadable = files
        .iter()
        .any(|f| matches!(f.outcome, Outcome::Unreadable(_)));
    let failed = files.iter().any(|f| match &f.outcome {
        Outcome::Broken(_) => true,
        Outcome::Parsed(_, d) => d.iter().any(fails),
        Outcome::Unreadable(_) => false,
    });
    if unreadable {
        ExitCode::from(2)
    } else if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The report of every file, in order.
fn report(files: &[Checked], against_mpi: bool) -> String {
    let mut out = String::new();
    for file in files {
        match &file.outcome {
            Outcome::Unreadable(e) => {
                let _ = writeln!(out, "{}: error: cannot read the file: {e}", file.name);
            }
            Outcome::Broken(errors) => {
                let _ = writeln!(out, "{errors:#}");
                let _ = writeln!(
                    out,
                    "{}: failed ({})",
                    file.name,
                    plural(errors.len(), "error", "errors")
                );
            }
            Outcome::Parsed(set, diagnostics) => {
                for d in diagnostics {
                    let _ = writeln!(out, "{}", with_source(d, &file.source));
                }
                let count = |s: Severity| diagnostics.iter().filter(|d| d.severity == s).count();
                let (errors, missing, warnings) = (
                    count(Severity::Error),
                    count(Severity::Missing),
                    count(Severity::Warning),
                );
                let mut what = Vec::new();
                if errors > 0 {
                    what.push(plural(errors, "error", "errors"));
                }
                if missing > 0 {
                    what.push(format!("{missing} missing from this MPI library"));
                }
                if warnings > 0 {
                    what.push(plural(warnings, "warning", "warnings"));
                }
                let policies = plural(set.policies().len(), "policy", "policies");
                if errors + missing > 0 {
                    let _ = writeln!(out, "{}: failed ({})", file.name, what.join(", "));
                } else {
                    let names = if against_mpi {
                        ", every variable exported"
                    } else {
                        ""
                    };
                    let warned = if warnings > 0 {
                        format!(", {}", what.join(", "))
                    } else {
                        String::new()
                    };
                    let tuning = set
                        .collectives()
                        .and_then(|s| s.mode_asked())
                        .map(|m| match m {
                            Some(m) => format!(", collective tuning in mode {}", m.name()),
                            None => ", collective tuning off".to_string(),
                        })
                        .unwrap_or_default();
                    let _ = writeln!(out, "{}: ok ({policies}{names}{tuning}{warned})", file.name);
                }
            }
        }
    }
    out
}

/// A diagnostic with the line of the file it points into and a caret, as
/// parse errors print with `{:#}`.
fn with_source(d: &Diagnostic, source: &str) -> String {
    let mut text = d.to_string();
    let line = source
        .lines()
        .nth((d.location.line as usize).saturating_sub(1))
        .unwrap_or_default();
    if !line.is_empty() {
        let pad: String = line
            .chars()
            .take(d.location.column.saturating_sub(1) as usize)
            .map(|c| if c == '\t' { '\t' } else { ' ' })
            .collect();
        let _ = write!(text, "\n  | {line}\n  | {pad}^");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use policies::{CvarInfo, CvarType, MemoryCatalogue, PvarClass, PvarInfo, Scope};

    fn checked(name: &str, source: &str) -> Checked {
        Checked {
            name: name.into(),
            source: source.into(),
            outcome: match PolicySet::parse(source, name) {
                Ok(set) => Outcome::Parsed(Box::new(set), Vec::new()),
                Err(e) => Outcome::Broken(e),
            },
        }
    }

    const GOOD: &str =
        "[[policy]]\nname = \"a\"\nwhen = \"q > 1\"\nthen = [ { set = \"POLL\", value = 1 } ]\n";

    #[test]
    fn good_and_broken_files() {
        let files = vec![
            checked("good.toml", GOOD),
            checked("bad.toml", "[[policy]]\nname = \"a\"\nwhne = \"x\"\n"),
        ];
        let text = report(&files, false);
        assert!(text.contains("good.toml: ok (1 policy)\n"), "{text}");
        assert!(
            text.contains("bad.toml:3:1: error: unknown field `whne`"),
            "{text}"
        );
        assert!(text.contains("  | whne = \"x\"\n  | ^\n"), "{text}");
        assert!(text.contains("bad.toml: failed (1 error)"), "{text}");
        assert_eq!(status(&files), ExitCode::from(1));
        assert_eq!(status(&files[..1]), ExitCode::SUCCESS);
    }

    #[test]
    fn diagnostics_point_into_the_source() {
        let mut file = checked("p.toml", GOOD);
        let mut catalogue = MemoryCatalogue::default();
        catalogue.add_pvar(
            "qq",
            PvarInfo {
                class: PvarClass::Level,
                count: 1,
            },
        );
        catalogue.add_cvar(
            "POLL",
            CvarInfo {
                scope: Scope::AllEq,
                count: 1,
                ty: CvarType::Int,
            },
        );
        if let Outcome::Parsed(set, d) = &mut file.outcome {
            *d = set.check(&catalogue);
        }
        let files = vec![file];
        let text = report(&files, true);
        assert!(text.contains("p.toml:3:9: missing: policy \"a\": the MPI library does not export a variable named `q`; closest known names: qq\n  | when = \"q > 1\"\n  |         ^"), "{text}");
        assert!(
            text.contains("p.toml:4:10: error: policy \"a\": `POLL` has scope ALL_EQ"),
            "{text}"
        );
        assert!(
            text.contains("p.toml: failed (1 error, 1 missing from this MPI library)"),
            "{text}"
        );
        assert_eq!(status(&files), ExitCode::from(1));
    }
}
