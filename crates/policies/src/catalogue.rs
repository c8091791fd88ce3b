//! What the MPI library exports, as seen by [`PolicySet::check`](crate::PolicySet::check).

use std::collections::BTreeMap;
use std::fmt;

use crate::error::Location;
use crate::value::VarSlot;

pub use vocab::meta::{PvarClass, Scope};

/// Type of a control variable's elements.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CvarType {
    /// Any integer datatype.
    Int,
    /// `MPI_DOUBLE` (or another floating-point datatype).
    Double,
    /// `MPI_CHAR`: a text value.
    String,
    /// An integer with an MPI_T enumeration; the names of its items.
    Enum(Vec<String>),
}

/// Metadata of a control variable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CvarInfo {
    /// Its scope.
    pub scope: Scope,
    /// Number of elements (1 for a scalar; for a string: its maximum length).
    pub count: usize,
    /// Element type.
    pub ty: CvarType,
}

/// Metadata of a performance variable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PvarInfo {
    /// Its class.
    pub class: PvarClass,
    /// Number of elements (1 for a scalar).
    pub count: usize,
}

/// Looks up the variables an MPI library exports, by name: their metadata
/// and every name (for suggestions). Implemented by the runtime over MPI_T
/// and by tests and the CLI over recorded lists ([`MemoryCatalogue`]).
///
/// Not to be confused with `mpit::Catalogue`, the MPI_T catalogue itself,
/// which the runtime wraps into one of these.
pub trait VariableLookup {
    /// The performance variable called `name`, if exported.
    fn pvar(&self, name: &str) -> Option<PvarInfo>;
    /// The control variable called `name`, if exported.
    fn cvar(&self, name: &str) -> Option<CvarInfo>;
    /// Every PVAR and CVAR name, for "did you mean" suggestions.
    /// (A view may give none: then no suggestion is made.)
    fn names(&self) -> Vec<String>;
    /// True if the tuner provides the tool metric `name` (such as
    /// `tool.allreduce.bytes_p50`). The default accepts every name.
    fn has_tool_metric(&self, name: &str) -> bool {
        let _ = name;
        true
    }
}

/// A [`VariableLookup`] held in memory.
///
/// ```
/// use policies::{CvarInfo, CvarType, MemoryCatalogue, PvarClass, PvarInfo, Scope, VariableLookup};
/// let mut cat = MemoryCatalogue::default();
/// cat.add_pvar("mv2_vbuf_allocated_array", PvarInfo { class: PvarClass::Level, count: 4 });
/// cat.add_cvar("MPIR_CVAR_VBUF_POOL_CONTROL", CvarInfo { scope: Scope::Local, count: 1, ty: CvarType::Int });
/// assert_eq!(cat.pvar("mv2_vbuf_allocated_array").map(|p| p.count), Some(4));
/// ```
#[derive(Debug, Clone, Default)]
pub struct MemoryCatalogue {
    pvars: BTreeMap<String, PvarInfo>,
    cvars: BTreeMap<String, CvarInfo>,
    tools: Option<Vec<String>>,
}

impl MemoryCatalogue {
    /// Adds (or replaces) a performance variable.
    pub fn add_pvar(&mut self, name: &str, info: PvarInfo) -> &mut Self {
        self.pvars.insert(name.to_string(), info);
        self
    }

    /// Adds (or replaces) a control variable.
    pub fn add_cvar(&mut self, name: &str, info: CvarInfo) -> &mut Self {
        self.cvars.insert(name.to_string(), info);
        self
    }

    /// Restricts tool metrics to the given names (by default all are accepted).
    pub fn set_tool_metrics(&mut self, names: &[&str]) -> &mut Self {
        self.tools = Some(names.iter().map(|s| s.to_string()).collect());
        self
    }
}

impl VariableLookup for MemoryCatalogue {
    fn pvar(&self, name: &str) -> Option<PvarInfo> {
        self.pvars.get(name).copied()
    }

    fn cvar(&self, name: &str) -> Option<CvarInfo> {
        self.cvars.get(name).cloned()
    }

    fn names(&self) -> Vec<String> {
        self.pvars
            .keys()
            .chain(self.cvars.keys())
            .cloned()
            .collect()
    }

    fn has_tool_metric(&self, name: &str) -> bool {
        match &self.tools {
            None => true,
            Some(t) => t.iter().any(|n| n == name),
        }
    }
}

/// How serious a [`Diagnostic`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Severity {
    /// The policy would do something wrong or unsafe with this MPI library
    /// (write a read-only CVAR, an ALL_EQ CVAR per rank, a wrong type):
    /// the file must be fixed.
    Error,
    /// A variable the policy needs is not exported by this MPI library (or
    /// the name is misspelt): the runtime disables this one policy and keeps
    /// the others; `mpit-tuner check --against-mpi` reports it.
    Missing,
    /// Legal but probably not what was meant.
    Warning,
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Severity::Error => "error",
            Severity::Missing => "missing",
            Severity::Warning => "warning",
        })
    }
}

/// A finding of [`PolicySet::check`](crate::PolicySet::check).
///
/// Displays as `file:line:col: error: policy "name": message`, or
/// `file:line:col: error: in [collectives]: message` for that table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// How serious it is.
    pub severity: Severity,
    /// Where in the policy file.
    pub location: Location,
    /// Index of the policy concerned in [`PolicySet::policies`](crate::PolicySet::policies);
    /// `usize::MAX` for the `[collectives]` table.
    pub policy: usize,
    /// Name of that policy; empty for the `[collectives]` table.
    pub policy_name: String,
    /// The variable concerned, if any.
    pub slot: Option<VarSlot>,
    /// What is wrong and why, with suggestions.
    pub message: String,
}

impl Diagnostic {
    /// Puts diagnostics in file order: line, column, then severity.
    pub fn sort(diagnostics: &mut [Diagnostic]) {
        diagnostics.sort_by_key(|d| (d.location.line, d.location.column, d.severity));
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.policy_name.is_empty() {
            return write!(f, "{}: {}: {}", self.location, self.severity, self.message);
        }
        write!(
            f,
            "{}: {}: policy {:?}: {}",
            self.location, self.severity, self.policy_name, self.message
        )
    }
}

/// Up to three names closest to `name`, best first (case differences count
/// as nothing).
pub(crate) fn closest<'a>(
    name: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Vec<String> {
    let lower = name.to_lowercase();
    let chars = lower.chars().count();
    let limit = (name.chars().count() / 3).max(2);
    // The distance is at least the difference in length, so most names
    // are ruled out without computing it: the runtime checks the shipped
    // policies' MVAPICH2 names against every variable of the library at
    // `MPI_Init` (without the filter, a 2-rank MPICH job spends 6 ms per
    // rank computing distances, measured with perf).
    let mut scored: Vec<(usize, &str)> = candidates
        .into_iter()
        .filter(|c| *c != name)
        .filter_map(|c| {
            let other = c.to_lowercase();
            if other.chars().count().abs_diff(chars) > limit {
                return None;
            }
            let d = strsim::levenshtein(&lower, &other);
            (d <= limit).then_some((d, c))
        })
        .collect();
    scored.sort();
    scored.dedup_by(|a, b| a.1 == b.1);
    scored
        .into_iter()
        .take(3)
        .map(|(_, c)| c.to_string())
        .collect()
}

/// "; closest known names: a, b" or "".
pub(crate) fn suggestion(close: &[String]) -> String {
    if close.is_empty() {
        String::new()
    } else {
        format!("; closest known names: {}", close.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggestions() {
        let names = [
            "mv2_vbuf_allocated_array",
            "mv2_vbuf_max_use_array",
            "mv2_vbuf_allocated",
            "MPIR_CVAR_VBUF_POOL_CONTROL",
        ];
        assert_eq!(
            closest("mv2_vbuf_alocated_array", names),
            vec![
                "mv2_vbuf_allocated_array",
                "mv2_vbuf_allocated",
                "mv2_vbuf_max_use_array"
            ]
        );
        assert_eq!(
            closest("mpir_cvar_vbuf_pool_control", names),
            vec!["MPIR_CVAR_VBUF_POOL_CONTROL"]
        );
        assert!(closest("zzz", names).is_empty());
    }

    /// The length filter only skips names whose distance is over the
    /// limit anyway: the result is what scoring every name gives.
    #[test]
    fn the_length_filter_changes_no_suggestion() {
        let every = |name: &str, names: &[&str]| {
            let limit = (name.chars().count() / 3).max(2);
            let mut s: Vec<(usize, &str)> = names
                .iter()
                .filter(|c| **c != name)
                .map(|c| {
                    (
                        strsim::levenshtein(&name.to_lowercase(), &c.to_lowercase()),
                        *c,
                    )
                })
                .filter(|(d, _)| *d <= limit)
                .collect();
            s.sort();
            s.into_iter()
                .take(3)
                .map(|(_, c)| c.to_string())
                .collect::<Vec<_>>()
        };
        let names = [
            "MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM",
            "MPIR_CVAR_ALLREDUCE_COLLECTIVE_ALGORITHM",
            "MPIR_CVAR_BCAST_INTRA_ALGORITHM",
            "MPIR_CVAR_CH4_EAGER_THRESHOLD",
            "MPIR_CVAR_VBUF_POOL_CONTROL",
            "mv2_vbuf_allocated",
            "mv2_vbuf_allocated_array",
            "mv2_vbuf_max_use_array",
            "unexpected_recvq_length",
            "ab",
            "abcd",
            "",
        ];
        let probes = [
            "MPIR_CVAR_ALLREDUCE_INTRA_ALGORITM",
            "mpir_cvar_bcast_intra_algorithms",
            "mv2_vbuf_alocated",
            "mv2_vbuf_max_use",
            "unexpected_recvq_len",
            "abc",
            "a",
            "",
        ];
        for probe in probes {
            assert_eq!(closest(probe, names), every(probe, &names), "{probe:?}");
        }
    }
}
