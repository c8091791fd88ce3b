//! MPICH's fallback variable, kept `silent` around switched calls.

use super::*;

/// MPICH's fallback variable ([`crate::collectives::library::MPICH_FALLBACK_CVAR`])
/// when the application runs with a value other than `silent`: each call
/// the tuner switches to another algorithm runs with `silent`, so that a
/// candidate MPICH cannot use for that call's arguments falls back to
/// MPICH's own choice instead of failing the call (`error`) or printing a
/// message on the rank (`print`); every other call keeps the application's
/// value. Prepared with [`Fallback::open`].
pub struct Fallback<V: AlgorithmVar = Cvar<'static>> {
    pub(super) var: Written<V>,
    /// The application's value.
    pub(super) user: i64,
    /// The value that falls back silently.
    pub(super) silent: i64,
    /// What one write costs (ns), measured at start ([`write_cost`]).
    pub(super) write_ns: u64,
}

impl<V: AlgorithmVar> std::fmt::Debug for Fallback<V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fallback")
            .field("user", &self.user)
            .field("silent", &self.silent)
            .finish_non_exhaustive()
    }
}

impl Fallback {
    /// Opens `info` (the fallback variable, whose value `silent` falls
    /// back silently) and reads the application's value: `Ok(None)` when
    /// it already is `silent`. Otherwise it proves here that the library
    /// takes `silent` and the application's value back: refused here, the
    /// start turns tuning off on every rank; refused on a call, that call
    /// would run its candidate without the fallback. An error says why the
    /// variable cannot be kept `silent` around switched calls.
    pub fn open(
        mpit: &'static MpiT,
        info: &CvarInfo,
        silent: i64,
    ) -> Result<Option<Fallback>, String> {
        let name = &info.name;
        let (cvar, user) = open_int(mpit, info)?;
        if user == silent {
            return Ok(None);
        }
        try_write(&cvar, silent).map_err(|why| format!("{name}: `silent` ({silent}) {why}"))?;
        try_write(&cvar, user).map_err(|why| {
            format!("{name}: the application's value ({user}) {why}; it may stay `silent`")
        })?;
        let write_ns = write_cost(&cvar, user)
            .map_err(|e| format!("{name}: writing its value back fails: {e}"))?;
        Ok(Some(Fallback {
            var: Written::new(cvar, user),
            user,
            silent,
            write_ns,
        }))
    }
}

impl<V: AlgorithmVar> Fallback<V> {
    /// The application's value.
    pub fn user(&self) -> i64 {
        self.user
    }
}
