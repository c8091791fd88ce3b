//! Ownership of MPI_T initialisation ([`MpiT`]) and, for programs that are
//! not intercepted, of MPI itself ([`MpiProcess`]).

use crate::error::Result;
use crate::ffi::{self, Comm, ThreadLevel};
use crate::quirks::{self, LibraryVersion, Quirk};
use std::sync::atomic::{AtomicUsize, Ordering};

/// [`MpiT`] guards alive in this process ([`MpiT::in_use`]).
static LIVE: AtomicUsize = AtomicUsize::new(0);

/// A guard on `MPI_T_init_thread`: MPI_T stays initialised while it lives.
///
/// MPI_T initialisation is reference-counted by the library, so several
/// guards may coexist. It works before `MPI_Init` and after it. Whether drop
/// calls `MPI_T_finalize` is chosen by [`MpiT::set_finalize_on_drop`], and
/// even then it is skipped where [`MpiT::finalize_is_safe_now`] says the
/// library would crash (Open MPI 4.1 after `MPI_Finalize`, MPICH 4.1 to 5.0.1
/// before it).
#[derive(Debug)]
pub struct MpiT {
    provided: ThreadLevel,
    provided_raw: i32,
    finalize_on_drop: bool,
}

impl MpiT {
    /// Initialises MPI_T asking for `MPI_THREAD_MULTIPLE`, so that the
    /// helper thread may call MPI_T routines while the application calls MPI.
    pub fn init() -> Result<MpiT> {
        Self::init_with(ThreadLevel::Multiple)
    }

    /// Initialises MPI_T asking for `required`.
    pub fn init_with(required: ThreadLevel) -> Result<MpiT> {
        let api = ffi::api()?;
        let provided_raw = ffi::t_init_thread(api, required)?;
        LIVE.fetch_add(1, Ordering::AcqRel);
        Ok(MpiT {
            provided: ThreadLevel::from_raw(provided_raw).unwrap_or(ThreadLevel::Single),
            provided_raw,
            finalize_on_drop: true,
        })
    }

    /// Whether a guard lives in this process: the tool holds MPI_T (one
    /// of its threads may call MPI_T routines at any time), and the
    /// library's MPI_T is initialised at least once on its behalf.
    pub fn in_use() -> bool {
        LIVE.load(Ordering::Acquire) > 0
    }

    /// The thread level MPI_T provided.
    pub fn provided(&self) -> ThreadLevel {
        self.provided
    }

    /// The provided level as the library numbers it.
    pub fn provided_raw(&self) -> i32 {
        self.provided_raw
    }

    /// Chooses whether dropping the guard calls `MPI_T_finalize`.
    pub fn set_finalize_on_drop(&mut self, finalize: bool) {
        self.finalize_on_drop = finalize;
    }

    /// Calls `MPI_T_finalize` now, whatever the [`quirks`](crate::quirks)
    /// table says, and consumes the guard. For probes that check the table
    /// against a real library (a crash here is what the table predicts);
    /// the tuner itself lets [`Drop`] decide.
    pub fn finalize_now(mut self) -> Result<()> {
        self.finalize_on_drop = false;
        ffi::t_finalize(ffi::api()?)
    }

    /// Whether `MPI_Init` has been called.
    pub fn mpi_initialized(&self) -> bool {
        ffi::api().and_then(ffi::initialized).unwrap_or(false)
    }

    /// Whether `MPI_Finalize` has been called.
    pub fn mpi_finalized(&self) -> bool {
        ffi::api().and_then(ffi::finalized).unwrap_or(false)
    }

    /// Asks the library for the index of a control variable by name
    /// (`MPI_T_cvar_get_index`); `None` when it has none of that name.
    pub fn cvar_index(&self, name: &str) -> Result<Option<i32>> {
        ffi::cvar_get_index(ffi::api()?, name)
    }

    /// Asks the library for the index of a performance variable by name and
    /// class (`MPI_T_pvar_get_index`; names are unique only within a class).
    pub fn pvar_index(&self, name: &str, class: crate::meta::PvarClass) -> Result<Option<i32>> {
        ffi::pvar_get_index(ffi::api()?, name, class)
    }

    /// `MPI_Get_library_version`, trimmed.
    pub fn library_version(&self) -> Result<String> {
        ffi::library_version(ffi::api()?)
    }

    /// The path of the MPI library loaded in this process (the object that
    /// defines `MPI_Get_library_version`, as the dynamic loader names it),
    /// or `None` when the loader cannot say.
    pub fn library_file(&self) -> Option<std::path::PathBuf> {
        ffi::library_file(ffi::api().ok()?)
    }

    /// Which family the library in this process belongs to, from its version
    /// string (an MPICH-ABI build also runs MVAPICH2 and Intel MPI).
    pub fn library(&self) -> Library {
        library_of_process()
    }
}

impl MpiT {
    /// Whether `MPI_T_finalize` can be called now without crashing this
    /// library, by the version-keyed [`quirks`](crate::quirks) table:
    /// Open MPI 4.1 segfaults when it comes after `MPI_Finalize`
    /// (open-mpi/ompi#11485), MPICH 4.1 to 5.0.1 when it comes between
    /// `MPI_Init` and `MPI_Finalize` (pmodels/mpich#7954), and MPICH 4.0.2
    /// and Open MPI 5.0.11 in a later `MPI_Init` when MPI_T was initialised
    /// and finalised before it. A library of no known family is never finalised.
    pub fn finalize_is_safe_now(&self) -> bool {
        let library = LibraryVersion::of_process();
        finalize_is_safe(&library, self.mpi_initialized(), self.mpi_finalized())
    }
}

/// Whether `MPI_T_finalize` is safe for `library` at the point given by
/// whether MPI was initialised and finalised.
pub(crate) fn finalize_is_safe(
    library: &LibraryVersion,
    initialized: bool,
    finalized: bool,
) -> bool {
    if library.library == Library::Unknown {
        // Which crash to avoid depends on the library: skip the call.
        return false;
    }
    let crashes = |quirk| quirks::applies(quirk, library);
    if finalized {
        !crashes(Quirk::MpiTFinalizeAfterMpiFinalizeCrashes)
    } else if initialized {
        !crashes(Quirk::MpiTFinalizeBeforeMpiFinalizeCrashes)
    } else {
        !crashes(Quirk::MpiTFinalizeBeforeMpiInitBreaksInit)
    }
}

impl Drop for MpiT {
    fn drop(&mut self) {
        LIVE.fetch_sub(1, Ordering::AcqRel);
        if self.finalize_on_drop && self.finalize_is_safe_now() {
            if let Ok(api) = ffi::api() {
                // The log is closed by now: the rank's standard error is
                // the one place left to say it (it changes nothing else).
                if let Err(e) = ffi::t_finalize(api) {
                    crate::say_always!("mpit-tuner: {e}");
                }
            }
        }
    }
}

/// The library family of this process (asked once).
pub(crate) fn library_of_process() -> Library {
    library_version_of_process().library
}

/// The library of this process with its version (asked once).
pub(crate) fn library_version_of_process() -> LibraryVersion {
    static LIBRARY: std::sync::OnceLock<LibraryVersion> = std::sync::OnceLock::new();
    *LIBRARY.get_or_init(|| {
        ffi::api()
            .and_then(ffi::library_version)
            .map(|v| LibraryVersion::parse(&v))
            .unwrap_or_else(|_| LibraryVersion {
                // A build against Open MPI's header runs only under Open MPI.
                library: if mpit_sys::BUILD_FLAVOR == "openmpi" {
                    Library::OpenMpi
                } else {
                    Library::Unknown
                },
                version: None,
            })
    })
}

/// The MPI library family, told from `MPI_Get_library_version`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Library {
    /// MPICH and derivatives not listed below.
    Mpich,
    /// MVAPICH2 (MPICH ABI).
    Mvapich2,
    /// Intel MPI (MPICH ABI).
    IntelMpi,
    /// Open MPI.
    OpenMpi,
    /// Anything else.
    Unknown,
}

impl Library {
    /// Classifies a version string.
    pub fn from_version(version: &str) -> Library {
        let v = version.to_ascii_lowercase();
        if v.contains("mvapich") {
            Library::Mvapich2
        } else if v.contains("intel") {
            Library::IntelMpi
        } else if v.contains("open mpi") {
            Library::OpenMpi
        } else if v.contains("mpich") {
            Library::Mpich
        } else {
            Library::Unknown
        }
    }

    /// A short lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            Library::Mpich => "mpich",
            Library::Mvapich2 => "mvapich2",
            Library::IntelMpi => "intelmpi",
            Library::OpenMpi => "openmpi",
            Library::Unknown => "unknown",
        }
    }
}

impl From<Library> for vocab::record::LibraryFamily {
    /// The family as logs and `summary.json` name it.
    fn from(library: Library) -> vocab::record::LibraryFamily {
        use vocab::record::LibraryFamily as F;
        match library {
            Library::Mpich => F::Mpich,
            Library::Mvapich2 => F::Mvapich2,
            Library::IntelMpi => F::IntelMpi,
            Library::OpenMpi => F::OpenMpi,
            Library::Unknown => F::Unknown,
        }
    }
}

impl From<&vocab::record::LibraryFamily> for Library {
    /// The library a log names (one this version does not know is
    /// [`Library::Unknown`]).
    fn from(family: &vocab::record::LibraryFamily) -> Library {
        use vocab::record::LibraryFamily as F;
        match family {
            F::Mpich => Library::Mpich,
            F::Mvapich2 => Library::Mvapich2,
            F::IntelMpi => Library::IntelMpi,
            F::OpenMpi => Library::OpenMpi,
            F::Unknown | F::Other(_) => Library::Unknown,
        }
    }
}

/// MPI itself, for programs that are not an intercepted application: the
/// CLI and the tests. Initialises MPI (asking for `MPI_THREAD_MULTIPLE`)
/// unless it already is, and finalises it on drop if it initialised it.
#[derive(Debug)]
pub struct MpiProcess {
    rank: i32,
    size: i32,
    provided: ThreadLevel,
    owns_init: bool,
}

impl MpiProcess {
    /// Initialises MPI if needed.
    pub fn init() -> Result<MpiProcess> {
        Self::init_with(ThreadLevel::Multiple)
    }

    /// Initialises MPI at `required` if needed.
    pub fn init_with(required: ThreadLevel) -> Result<MpiProcess> {
        let api = ffi::api()?;
        let (provided, owns_init) = if ffi::initialized(api)? {
            (ThreadLevel::Multiple, false)
        } else {
            let raw = ffi::init_thread(api, required)?;
            (
                ThreadLevel::from_raw(raw).unwrap_or(ThreadLevel::Single),
                true,
            )
        };
        let (rank, size) = ffi::comm_rank_size(api, api.c.comm_world)?;
        Ok(MpiProcess {
            rank,
            size,
            provided,
            owns_init,
        })
    }

    /// This process's rank in `MPI_COMM_WORLD`.
    pub fn rank(&self) -> i32 {
        self.rank
    }

    /// The size of `MPI_COMM_WORLD`.
    pub fn size(&self) -> i32 {
        self.size
    }

    /// The thread level MPI provided.
    pub fn provided(&self) -> ThreadLevel {
        self.provided
    }

    /// `MPI_COMM_WORLD`.
    pub fn world(&self) -> Comm {
        ffi::comm_world().expect("MPI is loaded while an MpiProcess exists")
    }
}

impl Drop for MpiProcess {
    fn drop(&mut self) {
        if self.owns_init {
            if let Ok(api) = ffi::api() {
                if let Err(e) = ffi::finalize(api) {
                    // Nowhere else to tell it from a drop.
                    crate::say_always!("mpit-tuner: {e}");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn library_families_from_version_strings() {
        assert_eq!(
            Library::from_version("MPICH Version:\t4.0.2\nMPICH Release date: ..."),
            Library::Mpich
        );
        assert_eq!(
            Library::from_version("Open MPI v4.1.4, package: Debian OpenMPI"),
            Library::OpenMpi
        );
        assert_eq!(
            Library::from_version("MVAPICH2 Version      :\t2.3.7\nMPICH ..."),
            Library::Mvapich2
        );
        assert_eq!(
            Library::from_version("Intel(R) MPI Library 2021.6"),
            Library::IntelMpi
        );
    }

    #[test]
    fn finalize_points_by_library_and_version() {
        let at = |text: &str| {
            let l = LibraryVersion::parse(text);
            // (before MPI_Init, between Init and Finalize, after Finalize)
            (
                finalize_is_safe(&l, false, false),
                finalize_is_safe(&l, true, false),
                finalize_is_safe(&l, true, true),
            )
        };
        assert_eq!(at("MPICH Version: 4.0.2"), (false, true, true));
        assert_eq!(at("MPICH Version: 5.0.1"), (false, false, true));
        assert_eq!(at("MPICH Version: 5.0.2"), (true, true, true));
        assert_eq!(at("Open MPI v4.1.4, package"), (true, true, false));
        assert_eq!(at("Open MPI v5.0.11, package"), (false, true, true));
        assert_eq!(at("MVAPICH2 Version : 2.3.7"), (false, false, true));
        assert_eq!(at("Some other MPI 1.0"), (false, false, false));
    }
}
