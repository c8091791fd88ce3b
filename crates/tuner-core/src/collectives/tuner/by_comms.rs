//! Open MPI: candidates run on communicators created after their algorithm
//! is written, not by writing the variable around each call.

use super::*;

/// Open MPI: a written algorithm reaches only communicators created after
/// the write ([`crate::collectives::library::Support::NextCommunicator`]), so a tuned
/// call writes nothing. It runs on a communicator the tuner created over
/// the same group right after writing the candidate's algorithm: one per
/// (collective, candidate) and communicator, made on first use
/// (`Tuner::candidate_comm`), at a call every rank makes with the same
/// choice. Only that collective's algorithm is forced there; the others
/// keep the library's own choice, so an algorithm made of other
/// collectives (allreduce `nonoverlapping` is a reduce and a bcast) runs
/// them as the library would. Every rank of the communicator calls the
/// same collectives on the same candidate communicators, in the same
/// order, so matching is that of the application's calls.
pub struct ByComms<V: AlgorithmVar = Cvar<'static>> {
    /// `coll_tuned_use_dynamic_rules` when it is off at start and
    /// writable (Open MPI 5.0): on while a candidate communicator is
    /// created, off again right after. `None`: on from the start.
    pub(super) rules: Option<Written<V>>,
    /// Open MPI's version, `(major, minor)`.
    pub(super) version: (u32, u32),
    /// A hash of this process's host name: from 5.0, a communicator that
    /// spans several nodes is not tuned (`coll/han` runs its collectives
    /// and snapshots the forced algorithms on its own schedule).
    pub(super) host: i64,
}

impl<V: AlgorithmVar> std::fmt::Debug for ByComms<V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ByComms")
            .field("rules", &self.rules.as_ref().map(Written::name))
            .finish()
    }
}

impl ByComms {
    /// Opens Open MPI's `coll_tuned_use_dynamic_rules` (`info`): a forced
    /// algorithm is read only while it is on. On at start: nothing to do.
    /// Off: it must take 1 and 0 back now (Open MPI 5.0 does; 4.1 reads it
    /// only at start). An error says why and what to do.
    pub fn open(
        mpit: &'static MpiT,
        info: &CvarInfo,
        version: LibraryVersion,
    ) -> Result<ByComms, String> {
        let name = &info.name;
        let version = version
            .major_minor()
            .ok_or_else(|| "the Open MPI version could not be read".to_string())?;
        let host = fnv1a(&mpit::host_name()) as i64;
        let (cvar, value) = open_int(mpit, info)?;
        if value != 0 {
            return Ok(ByComms {
                rules: None,
                version,
                host,
            });
        }
        try_write(&cvar, 1)
            .and_then(|()| try_write(&cvar, 0))
            .map_err(|why| {
                format!(
                    "{name} is off, and turning it on after start {why}: Open MPI reads a forced \
                     algorithm only when it is on, and this version reads it only at start; run \
                     with OMPI_MCA_coll_tuned_use_dynamic_rules=1 (`mpit-tuner run \
                     --tune-collectives` sets it)"
                )
            })?;
        Ok(ByComms {
            rules: Some(Written::new(cvar, 0)),
            version,
            host,
        })
    }
}

impl<V: AlgorithmVar> ByComms<V> {
    /// Open MPI's version, `(major, minor)`.
    pub fn version(&self) -> (u32, u32) {
        self.version
    }
}
