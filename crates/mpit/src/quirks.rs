//! Work-arounds for MPI library bugs that would otherwise crash the
//! application, keyed by library and version range.
//!
//! [`WORKAROUNDS`] is the table: each entry names the [`Quirk`], the
//! library family and the range of versions it applies to, and the bug it
//! avoids (the upstream issue where there is one, or what was seen here).
//! The rest of the crate asks [`applies`] with the version of the library
//! in the process ([`LibraryVersion::of_process`]); nothing is decided on
//! a library name alone where the version matters. A version the table
//! cannot place (a library that would not say its version) gets every
//! workaround of its family: the conservative choice.
//!
//! ```
//! use mpit::quirks::{applies, LibraryVersion, Quirk};
//! let v = LibraryVersion::parse("MPICH Version:\t5.0.1\nMPICH Release date: ...");
//! assert!(applies(Quirk::MpiTFinalizeBeforeMpiFinalizeCrashes, &v));
//! let v = LibraryVersion::parse("MPICH Version:\t5.0.2\nMPICH Release date: ...");
//! assert!(!applies(Quirk::MpiTFinalizeBeforeMpiFinalizeCrashes, &v));
//! ```
//!
//! Unloaded components: Open MPI 4.1 keeps some control variables
//! registered after MPI_Init
//! unloaded the shared object that holds their storage: reading or writing
//! `opal_common_ucx_verbose` (and its synonyms `pml_ucx_*`, `osc_ucx_*`)
//! after `MPI_Init` on a shared-memory-only run segfaults inside
//! `MPI_T_cvar_read`/`MPI_T_cvar_write`, although `get_info` and
//! `handle_alloc` succeed. Open MPI ships components as `mca_<framework>_
//! <component>.so` and common code as `libmca_common_<name>.so`, and names
//! their variables `<framework>_<component>_...` and `opal_common_<name>_...`:
//! a variable whose object exists on disk but is not mapped in this process
//! is not touched.
//!
//! The same holds for PVARs: Open MPI 4.1 registers the PVARs of its PSM2
//! MTL (`mtl_psm2_*`) and keeps them after closing the MTL when the job
//! runs over ob1; `MPI_T_pvar_handle_alloc` on one then fails
//! (`MPI_T_ERR_INVALID`) in a multi-rank job and segfaults inside libpsm2
//! (`psm2_mq_get_stats`) in a singleton. Where the job names its messaging
//! layer (`OMPI_MCA_pml=ob1`), the MTLs are never opened or closed and stay
//! mapped, and `MPI_T_pvar_handle_alloc` on `mtl_psm2_*` segfaults in every
//! rank: an MTL's variables are treated as unloaded unless the cm layer,
//! the MTLs' one user, is mapped. The sampler skips them.

use crate::session::Library;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// A library version: `major.minor.patch` (missing parts are 0; a suffix
/// such as `rc1` is ignored).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Version(pub u32, pub u32, pub u32);

impl Version {
    /// The first version number in `text` (`"v5.0.11, package"` ->
    /// 5.0.11), or `None` when it holds none.
    pub fn find_in(text: &str) -> Option<Version> {
        let start = text.find(|c: char| c.is_ascii_digit())?;
        let mut parts = [0u32; 3];
        for (slot, part) in parts.iter_mut().zip(text[start..].split('.')) {
            let digits: String = part.chars().take_while(char::is_ascii_digit).collect();
            if digits.is_empty() {
                break;
            }
            *slot = digits.parse().ok()?;
            // "0rc1": the suffix ends the number.
            if digits.len() != part.len() {
                break;
            }
        }
        Some(Version(parts[0], parts[1], parts[2]))
    }
}

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.0, self.1, self.2)
    }
}

/// The library in a process: its family and, when it said, its version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LibraryVersion {
    /// The family.
    pub library: Library,
    /// The version, or `None` when the version string had none.
    pub version: Option<Version>,
}

impl LibraryVersion {
    /// Reads a `MPI_Get_library_version` string: `MPICH Version: 5.0.2`,
    /// `Open MPI v5.0.11, package: ...`, `MVAPICH2 Version : 2.3.7`,
    /// `Intel(R) MPI Library 2021.6 ...`.
    pub fn parse(text: &str) -> LibraryVersion {
        let library = Library::from_version(text);
        let lower = text.to_ascii_lowercase();
        let keyword = match library {
            Library::Mvapich2 => "mvapich2",
            Library::IntelMpi => "mpi library",
            Library::OpenMpi => "open mpi",
            Library::Mpich => "mpich",
            Library::Unknown => "",
        };
        // The version follows the family's name (MVAPICH2's own "2" is
        // part of the name, and its string names MPICH too, later).
        let version = lower
            .find(keyword)
            .and_then(|at| Version::find_in(&text[at + keyword.len()..]));
        LibraryVersion { library, version }
    }

    /// `(major, minor)` of the version, when it said.
    pub fn major_minor(&self) -> Option<(u32, u32)> {
        self.version.map(|v| (v.0, v.1))
    }

    /// The library of this process (asked once; [`Library::Unknown`] when
    /// `MPI_Get_library_version` failed).
    pub fn of_process() -> LibraryVersion {
        crate::session::library_version_of_process()
    }
}

impl std::fmt::Display for LibraryVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.version {
            Some(v) => write!(f, "{} {v}", self.library.name()),
            None => write!(f, "{} (version unknown)", self.library.name()),
        }
    }
}

/// A library bug the tuner works around.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Quirk {
    /// `MPI_T_finalize` between `MPI_Init` and `MPI_Finalize` crashes the
    /// library (or its `MPI_Finalize`): MPI_T is finalised after
    /// `MPI_Finalize` instead.
    MpiTFinalizeBeforeMpiFinalizeCrashes,
    /// `MPI_T_finalize` after `MPI_Finalize` crashes: MPI_T is finalised
    /// before `MPI_Finalize`.
    MpiTFinalizeAfterMpiFinalizeCrashes,
    /// `MPI_T_finalize` before `MPI_Init` breaks a later `MPI_Init`: a
    /// guard dropped before `MPI_Init` leaves MPI_T initialised.
    MpiTFinalizeBeforeMpiInitBreaksInit,
    /// `MPI_T_pvar_get_num` counts indices that `MPI_T_pvar_get_info`
    /// refuses: those holes are expected, skipped, and told as such.
    PvarGetNumOverCounts,
    /// Variables of components that `MPI_Init` unloaded are still
    /// registered, and touching their storage crashes: such variables are
    /// refused ([`openmpi_storage_unloaded`]).
    UnloadedComponentVariables,
}

/// One row of [`WORKAROUNDS`].
#[derive(Debug, Clone, Copy)]
pub struct Workaround {
    /// What goes wrong.
    pub quirk: Quirk,
    /// The family it happens in.
    pub library: Library,
    /// The first version it happens in (inclusive); `None`: every earlier one.
    pub from: Option<Version>,
    /// The last version it happens in (inclusive); `None`: still open.
    pub to: Option<Version>,
    /// The bug: the upstream issue, or where it was seen.
    pub bug: &'static str,
}

const fn v(major: u32, minor: u32, patch: u32) -> Option<Version> {
    Some(Version(major, minor, patch))
}

/// The work-arounds, by library and version range. Ranges are what was
/// seen (here or upstream), widened only where the bug is still open.
pub const WORKAROUNDS: &[Workaround] = &[
    Workaround {
        quirk: Quirk::MpiTFinalizeBeforeMpiFinalizeCrashes,
        library: Library::Mpich,
        // 4.0.2 survives it (measured here); 4.1-4.3.1 are not measured and
        // get the work-around, which costs nothing (finalizing after
        // MPI_Finalize is safe in every MPICH measured).
        from: v(4, 1, 0),
        to: v(5, 0, 1),
        bug: "pmodels/mpich#7954 (MPICH 4.3.2 and 5.0.1; fixed by #7955 in 5.0.2)",
    },
    // MVAPICH2 (MPICH 3.2 inside) and Intel MPI (MPICH inside) number
    // their releases their own way: every release, until one is seen to
    // survive it.
    Workaround {
        quirk: Quirk::MpiTFinalizeBeforeMpiFinalizeCrashes,
        library: Library::Mvapich2,
        from: None,
        to: None,
        bug: "seen here on MVAPICH2 2.3.7: MPI_T_finalize itself returns, then the next call \
              that sends segfaults (MPID_Send, MPID_Recv; a 2-rank MPI_Allreduce too), as in a \
              job whose tuner stopped after MPI_Init (found by the mvapich2 test flavour)",
    },
    Workaround {
        quirk: Quirk::MpiTFinalizeBeforeMpiFinalizeCrashes,
        library: Library::IntelMpi,
        from: None,
        to: None,
        bug: "pmodels/mpich#7954, inherited from MPICH",
    },
    Workaround {
        quirk: Quirk::MpiTFinalizeAfterMpiFinalizeCrashes,
        library: Library::OpenMpi,
        from: v(4, 1, 0),
        to: v(4, 1, u32::MAX),
        bug: "open-mpi/ompi#11485 (Open MPI 4.1.x, open)",
    },
    Workaround {
        quirk: Quirk::MpiTFinalizeBeforeMpiInitBreaksInit,
        library: Library::Mpich,
        // 4.0.2 crashes, 5.0.2 survives (measured here, 1 and 2 ranks);
        // the releases between are not measured.
        from: None,
        to: v(5, 0, 1),
        bug: "seen here on MPICH 4.0.2: MPI_Init segfaults after MPI_T_init_thread and \
              MPI_T_finalize (found by the fault-injection tests); 5.0.2 survives it",
    },
    Workaround {
        quirk: Quirk::MpiTFinalizeBeforeMpiInitBreaksInit,
        library: Library::OpenMpi,
        // 4.1.4 survives it (measured here).
        from: v(5, 0, 0),
        to: None,
        bug: "seen here on Open MPI 5.0.11: MPI_Init segfaults in opal_common_ucx_support_level \
              after MPI_T_init_thread and MPI_T_finalize (found by the fault-injection tests)",
    },
    Workaround {
        quirk: Quirk::MpiTFinalizeBeforeMpiInitBreaksInit,
        library: Library::Mvapich2,
        from: None,
        to: None,
        bug: "seen here on MVAPICH2 2.3.7 (MPI_Init segfaults after MPI_T_init_thread and \
              MPI_T_finalize, 1 and 2 ranks), as on MPICH 4.0.2",
    },
    Workaround {
        quirk: Quirk::MpiTFinalizeBeforeMpiInitBreaksInit,
        library: Library::IntelMpi,
        from: None,
        to: None,
        bug: "as MPICH 4.0.2 (seen here), assumed for Intel MPI",
    },
    Workaround {
        quirk: Quirk::PvarGetNumOverCounts,
        library: Library::OpenMpi,
        from: None,
        to: None,
        bug: "open-mpi/ompi#11492 (4.1.4: 33 indices with holes; 5.0.11: 20 counted, \
              5 described after MPI_Init; open)",
    },
    Workaround {
        quirk: Quirk::UnloadedComponentVariables,
        library: Library::OpenMpi,
        from: None,
        to: None,
        bug:
            "seen here on Open MPI 4.1.4 (opal_common_ucx_verbose, mtl_psm2_*); open-mpi/ompi#9260 \
              for the PVARs of unloaded components; the check finds unloaded objects itself, so it \
              stays on for every release",
    },
];

/// Whether `quirk` applies to `library`: a row of [`WORKAROUNDS`] for its
/// family whose range holds its version. A family without a version gets
/// every row of the family.
pub fn applies(quirk: Quirk, library: &LibraryVersion) -> bool {
    workaround_for(quirk, library).is_some()
}

/// The row of [`WORKAROUNDS`] that makes `quirk` apply to `library`.
pub fn workaround_for(quirk: Quirk, library: &LibraryVersion) -> Option<&'static Workaround> {
    WORKAROUNDS.iter().find(|w| {
        w.quirk == quirk
            && w.library == library.library
            && match library.version {
                None => true,
                Some(version) => {
                    w.from.is_none_or(|from| version >= from) && w.to.is_none_or(|to| version <= to)
                }
            }
    })
}

/// The shared objects of Open MPI components on disk: (directory of the
/// components, file stems such as `mca_pml_ucx` and `libmca_common_ucx`).
fn installed() -> &'static (Vec<PathBuf>, HashSet<String>) {
    static INSTALLED: OnceLock<(Vec<PathBuf>, HashSet<String>)> = OnceLock::new();
    INSTALLED.get_or_init(|| {
        // Component directories: where mapped components live, and the
        // usual places beside libopen-pal (`<prefix>/lib/openmpi`, Debian's
        // `<libdir>/openmpi/lib/openmpi3`).
        let mut dirs: HashSet<PathBuf> = HashSet::new();
        for path in mapped_objects() {
            let file = path.file_name().and_then(|f| f.to_str()).unwrap_or("");
            let Some(dir) = path.parent() else { continue };
            if file.starts_with("mca_") || file.starts_with("libmca_common_") {
                dirs.insert(dir.to_path_buf());
            } else if file.starts_with("libopen-pal") {
                dirs.insert(dir.to_path_buf());
                dirs.insert(dir.join("openmpi"));
                let debian = dir.join("openmpi").join("lib");
                dirs.insert(debian.clone());
                if let Ok(entries) = std::fs::read_dir(&debian) {
                    for e in entries.flatten() {
                        let p = e.path();
                        let is_component_dir = p.is_dir()
                            && p.file_name()
                                .and_then(|f| f.to_str())
                                .is_some_and(|f| f.starts_with("openmpi"));
                        if is_component_dir {
                            dirs.insert(p);
                        }
                    }
                }
            }
        }
        let mut stems = HashSet::new();
        for dir in &dirs {
            if let Ok(entries) = std::fs::read_dir(dir) {
                for e in entries.flatten() {
                    if let Some(stem) = object_stem(&e.path()) {
                        stems.insert(stem);
                    }
                }
            }
        }
        (dirs.into_iter().collect(), stems)
    })
}

/// `mca_pml_ucx` from `.../mca_pml_ucx.so`, `libmca_common_ucx` from
/// `.../libmca_common_ucx.so.40.30.2`.
fn object_stem(path: &Path) -> Option<String> {
    let file = path.file_name()?.to_str()?;
    let stem = file.split(".so").next()?;
    (stem.starts_with("mca_") || stem.starts_with("libmca_common_")).then(|| stem.to_string())
}

/// Every shared object mapped in this process, from `/proc/self/maps`.
fn mapped_objects() -> Vec<PathBuf> {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
    let mut seen = HashSet::new();
    maps.lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .filter(|p| p.starts_with('/') && p.contains(".so"))
        .filter(|p| seen.insert(p.to_string()))
        .map(PathBuf::from)
        .collect()
}

/// How long a reading of `/proc/self/maps` answers [`mapped_stems`]: the
/// checks come in bursts (every variable a rank opens at start, every PVAR
/// of a catalogue refresh), and reading the file costs the kernel a
/// rendering of every mapping (with Open MPI's hundred-odd components, 34
/// readings took a quarter of the tool's CPU time at a rank's start,
/// measured with perf). Components are unloaded inside `MPI_Init` and
/// `MPI_Finalize`, not while the tool checks; a component unloaded between
/// a check and the read it guards would crash the read either way.
const MAPPED_FOR: std::time::Duration = std::time::Duration::from_secs(1);

/// The stems of the component objects mapped now (see [`MAPPED_FOR`]).
/// Never waits: a caller that finds the cache busy reads the file itself.
fn mapped_stems() -> std::sync::Arc<HashSet<String>> {
    use std::sync::{Arc, Mutex};
    use std::time::Instant;
    static CACHE: Mutex<Option<(Instant, Arc<HashSet<String>>)>> = Mutex::new(None);
    let read = || -> Arc<HashSet<String>> {
        Arc::new(
            mapped_objects()
                .iter()
                .filter_map(|p| object_stem(p))
                .collect(),
        )
    };
    let Ok(mut cache) = CACHE.try_lock() else {
        return read();
    };
    if let Some((at, stems)) = cache.as_ref() {
        if at.elapsed() < MAPPED_FOR {
            return Arc::clone(stems);
        }
    }
    let stems = read();
    *cache = Some((Instant::now(), Arc::clone(&stems)));
    stems
}

/// Whether the storage of Open MPI's variable (CVAR or PVAR) `name` may lie in a shared object
/// that was unloaded: true when the variable belongs to a component or
/// common library installed as a shared object that is not mapped now.
pub fn openmpi_storage_unloaded(name: &str) -> bool {
    let (_, installed) = installed();
    if installed.is_empty() {
        return false;
    }
    let candidates = owner_candidates(name);
    if candidates.is_empty() {
        return false;
    }
    let mapped = mapped_stems();
    // An MTL serves only the cm messaging layer: where another layer runs
    // the job (`OMPI_MCA_pml=ob1`), the MTLs registered for MPI_T stay
    // mapped but never start, and their PVARs crash as unloaded ones do.
    let unused_mtl =
        name.starts_with("mtl_") && installed.contains(PML_CM) && !mapped.contains(PML_CM);
    unused_mtl
        || candidates
            .iter()
            .any(|c| installed.contains(c) && !mapped.contains(c))
}

/// Refuses a variable (CVAR or PVAR) whose storage Open MPI may have
/// unloaded ([`openmpi_storage_unloaded`]), once MPI is initialised:
/// opening a handle on it, reading or writing it would crash the library.
pub(crate) fn refuse_unloaded(api: &crate::ffi::Api, name: &str) -> crate::Result<()> {
    let library = LibraryVersion::of_process();
    if applies(Quirk::UnloadedComponentVariables, &library)
        && crate::ffi::initialized(api).unwrap_or(false)
        && openmpi_storage_unloaded(name)
    {
        return Err(crate::Error::Unavailable {
            variable: name.to_string(),
            message: "Open MPI unloaded (or never started) the component that holds this \
                      variable; opening, reading or writing it now would crash the library"
                .into(),
        });
    }
    Ok(())
}

/// Open MPI's cm messaging layer, the one user of MTLs.
const PML_CM: &str = "mca_pml_cm";

/// The objects that may hold the variable `name`: for
/// `opal_common_ucx_verbose`, `libmca_common_ucx`; for `pml_ucx_verbose`,
/// `mca_pml_ucx` and `libmca_common_ucx` (component variables are often
/// synonyms of common ones).
fn owner_candidates(name: &str) -> Vec<String> {
    let parts: Vec<&str> = name.split('_').collect();
    if parts.len() >= 3 && parts[0] == "opal" && parts[1] == "common" {
        return vec![format!("libmca_common_{}", parts[2])];
    }
    if parts.len() >= 3 {
        return vec![
            format!("mca_{}_{}", parts[0], parts[1]),
            format!("libmca_common_{}", parts[1]),
        ];
    }
    Vec::new()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owners() {
        assert_eq!(
            owner_candidates("opal_common_ucx_verbose"),
            vec!["libmca_common_ucx"]
        );
        assert_eq!(
            owner_candidates("pml_ucx_verbose"),
            vec!["mca_pml_ucx", "libmca_common_ucx"]
        );
        assert!(owner_candidates("mpi_yield").is_empty());
        assert_eq!(
            owner_candidates("mtl_psm2_rx_user_bytes"),
            vec!["mca_mtl_psm2", "libmca_common_psm2"]
        );
        assert_eq!(
            object_stem(Path::new("/x/libmca_common_ucx.so.40.30.2")).as_deref(),
            Some("libmca_common_ucx")
        );
        assert_eq!(
            object_stem(Path::new("/x/mca_btl_vader.so")).as_deref(),
            Some("mca_btl_vader")
        );
        assert_eq!(object_stem(Path::new("/x/libc.so.6")), None);
    }

    fn lib(text: &str) -> LibraryVersion {
        LibraryVersion::parse(text)
    }

    #[test]
    fn versions_from_version_strings() {
        let cases = [
            (
                "MPICH Version:\t4.0.2\nMPICH Release date: Thu Apr  7 2022",
                Library::Mpich,
                v(4, 0, 2),
            ),
            (
                "MPICH Version:      5.0.2\nMPICH Release date: ...",
                Library::Mpich,
                v(5, 0, 2),
            ),
            ("MPICH Version:\t4.3.0rc1\n", Library::Mpich, v(4, 3, 0)),
            (
                "Open MPI v4.1.4, package: Debian OpenMPI, ident: 4.1.4",
                Library::OpenMpi,
                v(4, 1, 4),
            ),
            (
                "Open MPI v5.0.11, package: Open MPI runner@x Distribution",
                Library::OpenMpi,
                v(5, 0, 11),
            ),
            (
                "MVAPICH2 Version      :\t2.3.7\nMPICH ...",
                Library::Mvapich2,
                v(2, 3, 7),
            ),
            (
                "Intel(R) MPI Library 2021.6 for Linux* OS",
                Library::IntelMpi,
                v(2021, 6, 0),
            ),
            ("Open MPI, package: no number", Library::OpenMpi, None),
        ];
        for (text, library, version) in cases {
            assert_eq!(lib(text), LibraryVersion { library, version }, "{text}");
        }
        assert_eq!(Version::find_in("no digits"), None);
        assert!(Version(4, 1, 4) < Version(4, 1, 10));
        assert!(Version(5, 0, 1) < Version(5, 0, 2));
    }

    #[test]
    fn finalize_order_by_version() {
        let before = Quirk::MpiTFinalizeBeforeMpiFinalizeCrashes;
        let after = Quirk::MpiTFinalizeAfterMpiFinalizeCrashes;
        for (text, crashes_before, crashes_after) in [
            ("MPICH Version: 4.0.2", false, false),
            ("MPICH Version: 4.1.0", true, false),
            ("MPICH Version: 4.3.2", true, false),
            ("MPICH Version: 5.0.1", true, false),
            ("MPICH Version: 5.0.2", false, false),
            ("MPICH Version: 5.1.0", false, false),
            ("Open MPI v4.0.7, package", false, false),
            ("Open MPI v4.1.0, package", false, true),
            ("Open MPI v4.1.8, package", false, true),
            ("Open MPI v5.0.11, package", false, false),
            ("MVAPICH2 Version : 2.3.7", true, false),
            ("Intel(R) MPI Library 2021.6", true, false),
            ("MPICH (no version)", true, false),
            ("Open MPI (no version)", false, true),
        ] {
            assert_eq!(applies(before, &lib(text)), crashes_before, "{text}");
            assert_eq!(applies(after, &lib(text)), crashes_after, "{text}");
        }
        // A library of no known family gets no row: the caller decides
        // (session.rs skips MPI_T_finalize altogether).
        assert!(!applies(before, &lib("Some MPI 1.0")));
    }

    #[test]
    fn every_row_names_its_bug_and_a_sane_range() {
        for w in WORKAROUNDS {
            assert!(!w.bug.is_empty(), "{w:?}");
            if let (Some(from), Some(to)) = (w.from, w.to) {
                assert!(from <= to, "{w:?}");
            }
            assert_ne!(w.library, Library::Unknown, "{w:?}");
        }
        let ompi = lib("Open MPI v5.0.11, package");
        assert!(applies(Quirk::PvarGetNumOverCounts, &ompi));
        assert!(applies(Quirk::UnloadedComponentVariables, &ompi));
        assert!(!applies(
            Quirk::PvarGetNumOverCounts,
            &lib("MPICH Version: 5.0.2")
        ));
        assert!(!applies(
            Quirk::UnloadedComponentVariables,
            &lib("MPICH Version: 4.0.2")
        ));
        let early = Quirk::MpiTFinalizeBeforeMpiInitBreaksInit;
        assert!(applies(early, &lib("MPICH Version: 4.0.2")));
        assert!(!applies(early, &lib("MPICH Version: 5.0.2")));
        assert!(applies(early, &ompi));
        assert!(!applies(early, &lib("Open MPI v4.1.4, package")));
        assert!(workaround_for(
            Quirk::MpiTFinalizeAfterMpiFinalizeCrashes,
            &lib("Open MPI v4.1.4")
        )
        .is_some_and(|w| w.bug.contains("11485")));
    }

    #[test]
    fn nothing_is_flagged_without_open_mpi() {
        // This test process maps no Open MPI component.
        assert!(!openmpi_storage_unloaded("opal_common_ucx_verbose"));
    }
}
