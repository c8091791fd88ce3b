//! The engine's backends in a running job: MPI_T after `MPI_Init`
//! ([`MpiBackend`]), the environment before it ([`EnvBackend`]).

use super::actuator::{self, CvarWrite, Outcome, Request, When};
use super::engine::Backend;
use crate::sample::Snapshot;
use mpit::Catalogue;
use mpit::{Cvar, MpiT, Object};

/// The backend of a running job: values from the sampler's snapshot and
/// MPI_T, writes through the [`actuator`].
pub struct MpiBackend<'a> {
    /// The MPI_T guard.
    pub mpit: &'a MpiT,
    /// The library's catalogue.
    pub catalogue: &'a Catalogue,
    /// The latest snapshot (empty before the first sample).
    pub snapshot: &'a Snapshot,
    /// Seconds since start.
    pub now: f64,
}

impl Backend for MpiBackend<'_> {
    fn layout(&self) -> u64 {
        self.snapshot.layout().id()
    }

    fn pvar_position(&self, name: &str) -> Option<usize> {
        self.snapshot.layout().position(name)
    }

    fn pvar_at(&self, position: usize) -> Option<&[f64]> {
        self.snapshot.value(position)
    }

    fn cvar(&mut self, name: &str) -> Option<Vec<f64>> {
        let info = self.catalogue.cvar(name)?;
        let cvar = Cvar::open(self.mpit, info, Object::None).ok()?;
        let v = cvar.read().ok()?.to_f64s();
        (!v.is_empty()).then_some(v)
    }

    fn write(
        &mut self,
        name: &str,
        index: Option<u32>,
        request: &Request,
        when: When,
        dry_run: bool,
    ) -> CvarWrite {
        actuator::write(
            self.mpit,
            self.catalogue,
            name,
            index,
            request,
            when,
            dry_run,
        )
    }

    fn setenv(&mut self, name: &str, value: &str, dry_run: bool) -> Result<(), SetenvError> {
        set_environment(name, value, dry_run)
    }

    fn time(&self) -> f64 {
        self.now
    }
}

/// The backend before MPI_T is initialised: no variable to read, no CVAR
/// to write (policies with `setenv` do neither, a load-time rule), only
/// environment variables to set.
pub struct EnvBackend;

impl Backend for EnvBackend {
    fn layout(&self) -> u64 {
        // The empty layout's id: there is no PVAR before MPI_T.
        0
    }

    fn pvar_position(&self, _name: &str) -> Option<usize> {
        None
    }

    fn pvar_at(&self, _position: usize) -> Option<&[f64]> {
        None
    }

    fn cvar(&mut self, _name: &str) -> Option<Vec<f64>> {
        None
    }

    fn write(
        &mut self,
        name: &str,
        index: Option<u32>,
        _request: &Request,
        _when: When,
        _dry_run: bool,
    ) -> CvarWrite {
        CvarWrite::failed(
            name,
            index,
            Outcome::Refused,
            "no CVAR can be written before MPI_T is initialised".into(),
        )
    }

    fn setenv(&mut self, name: &str, value: &str, dry_run: bool) -> Result<(), SetenvError> {
        set_environment(name, value, dry_run)
    }

    fn time(&self) -> f64 {
        0.0
    }
}

/// Why an environment variable was not set.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SetenvError {
    /// An empty name, or one with `=` or NUL (or NUL in the value).
    #[error("`{0}` is not a valid environment variable name")]
    BadName(String),
    /// An empty value.
    #[error("refusing to set {0} to an empty value")]
    EmptyValue(String),
}

/// Sets an environment variable before the MPI library reads it (pre-init).
/// Refuses empty names and values with `=` or NUL in the name, and empty
/// values (MPICH over UCX aborts MPI_Init on an empty `UCX_*` value).
pub fn set_environment(name: &str, value: &str, dry_run: bool) -> Result<(), SetenvError> {
    if name.is_empty() || name.contains(['=', '\0']) || value.contains('\0') {
        return Err(SetenvError::BadName(name.to_string()));
    }
    if value.trim().is_empty() {
        return Err(SetenvError::EmptyValue(name.to_string()));
    }
    if !dry_run {
        // Runs inside MPI_Init before PMPI_Init, before the tuner starts any
        // thread; the application's own threads do not read the
        // environment of an MPI library that is not initialised yet.
        std::env::set_var(name, value);
    }
    Ok(())
}
