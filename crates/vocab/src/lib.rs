//! The vocabulary of an mpit-tuner run, with no MPI in it: what the MPI_T
//! metadata means ([`meta`]), the values variables hold ([`value`]), and
//! (in the modules that follow) every record of a rank's log and the
//! summary file, with the one reader of run directories.
//!
//! Everything that writes or reads a run goes through these types: the
//! runtime in every rank, `replay`, `report` and its CSV export. One
//! definition, one format.
#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod collective;
pub mod meta;
pub mod nan;
pub mod read;
pub mod record;
pub mod steering;
pub mod summary;
pub mod value;

pub use meta::{Binding, Datatype, PvarClass, Scope, Verbosity};
pub use read::{
    log_paths, rank_files, records, records_from, DamageKind, Damaged, Follow, RankFile,
};
pub use record::{Record, FORMAT_VERSION};
pub use value::{Value, ValueError};
