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
use tuner_core::decide::collectives::support;

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
    /// version-keyed table ([`Support::when`](tuner_core::decide::collectives::Support::when)):
    /// `next call` (tuned online), `next communicator`, `start only` or
    /// `unknown`.
    pub collective_tuning: String,
}

/// Runs `mpit-tuner probe`.
pub fn run(args: &ProbeArgs) -> Result<()> {
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
        print!("{}", matrix(&rows));
        return Ok(());
    }
    let Some(facts) = probe()? else {
        return Ok(());
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&facts)?);
    } else {
        print!("{}", matrix(std::slice::from_ref(&facts)));
    }
    Ok(())
}

/// The environment setting tried for a family: (variable, value, CVAR,
/// the CVAR's value when the setting was read).
fn env_probe(library: Library) -> Option<(&'static str, &'static str, &'static str, i64)> {
    match library {
        // `recursive_doubling` is the fourth name in MPICH 4.0-5.0's list.
        Library::Mpich | Library::Mvapich2 | Library::IntelMpi => Some((
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
    let collective_tuning = support(family, &version).when();
    Ok(Some(ProbeFacts {
        library_version: version.lines().next().unwrap_or("").trim().to_string(),
        library: LibraryVersion::parse(&version).to_string(),
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

/// The Markdown table of the README: one row per library.
pub fn matrix(rows: &[ProbeFacts]) -> String {
    let mut out = String::from(
        "| library (ABI) | CVARs before / after MPI_Init | PVARs (holes) | sampling | bound handles | \
         pre-init CVAR writes | runtime CVAR writes | environment settings | collective tuning |\n\
         |---|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        out.push_str(&format!(
            "| {} ({}) | {} / {} | {} ({}) | {} | {} | {} | {} | {} | {} |\n",
            r.library,
            r.abi,
            r.cvars_before_init,
            r.cvars_after_init,
            r.pvars,
            r.holes,
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
            r.collective_tuning,
        ));
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
}
