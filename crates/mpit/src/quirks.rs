//! Work-arounds for MPI library bugs that would otherwise crash the
//! application.
//!
//! Open MPI 4.1 keeps some control variables registered after MPI_Init
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
//! (`psm2_mq_get_stats`) in a singleton. The sampler skips them.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

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
    let mapped: HashSet<String> = mapped_objects()
        .iter()
        .filter_map(|p| object_stem(p))
        .collect();
    candidates
        .iter()
        .any(|c| installed.contains(c) && !mapped.contains(c))
}

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

    #[test]
    fn nothing_is_flagged_without_open_mpi() {
        // This test process maps no Open MPI component.
        assert!(!openmpi_storage_unloaded("opal_common_ucx_verbose"));
    }
}
