//! The tool's own communicator, owned.

use crate::error::Result;
use crate::ffi::{self, Comm};

/// The tool's private communicator over all processes of a parent (made
/// with `PMPI_Comm_create_group`, see [`crate::collective::create_private`]).
///
/// Free it with [`PrivateComm::free`], which returns the library's error
/// for the caller to log. If it is dropped instead, it is freed there (not
/// after `MPI_Finalize`, when no MPI call is allowed) and a failure is said
/// on this rank's standard error.
#[derive(Debug)]
pub struct PrivateComm {
    comm: Option<Comm>,
}

impl PrivateComm {
    /// Creates it, collectively over `parent` (see
    /// [`ffi::comm_private`]).
    pub(crate) fn create(parent: Comm) -> Result<PrivateComm> {
        Ok(PrivateComm {
            comm: Some(ffi::comm_private(parent)?),
        })
    }

    /// The communicator, for the tool's collectives on it.
    ///
    /// # Panics
    ///
    /// After [`PrivateComm::free`].
    pub fn comm(&self) -> Comm {
        self.comm
            .expect("a PrivateComm holds its communicator until freed")
    }

    /// Frees the communicator now (`PMPI_Comm_free`); afterwards it holds
    /// none ([`PrivateComm::comm`] panics) and freeing again does nothing.
    pub fn free(&mut self) -> Result<()> {
        match self.comm.take() {
            Some(comm) => ffi::comm_free(comm),
            None => Ok(()),
        }
    }
}

impl Drop for PrivateComm {
    fn drop(&mut self) {
        let Some(comm) = self.comm.take() else {
            return;
        };
        let finalized = ffi::api().and_then(ffi::finalized).unwrap_or(true);
        if finalized {
            // Freed with everything else by MPI_Finalize.
            return;
        }
        if let Err(e) = ffi::comm_free(comm) {
            crate::say_always!("mpit-tuner: freeing the tool's communicator: {e}");
        }
    }
}
