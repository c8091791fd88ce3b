//! What each MPI library lets the tuner switch, and when a switch takes
//! effect: per library and version, from measurement (see the README's
//! "Collective tuning" section and the tests that re-check it), never
//! assumed from a write that "succeeds".

use mpit::{Catalogue, CvarInfo, Datatype, Library, Scope};

pub use vocab::collective::{Collective, COLLECTIVES};

/// MPICH's intra-communicator algorithm variable of `c`.
pub fn mpich_cvar(c: Collective) -> String {
    format!(
        "MPIR_CVAR_{}_INTRA_ALGORITHM",
        c.name().to_ascii_uppercase()
    )
}

/// Open MPI's algorithm variable of `c` (component `coll/tuned`; an
/// MPI_T enumeration gives its algorithms).
pub fn openmpi_cvar(c: Collective) -> String {
    format!("coll_tuned_{}_algorithm", c.name())
}

/// The algorithm variable of `c` in `library`, if it has one known here.
pub fn algorithm_cvar(library: Library, c: Collective) -> Option<String> {
    match library {
        Library::Mpich => Some(mpich_cvar(c)),
        Library::OpenMpi => Some(openmpi_cvar(c)),
        Library::Mvapich2 => mvapich2_cvar(c),
        _ => None,
    }
}

/// The algorithm variable of `c` in `library` and its algorithms as
/// (name, value), in value order: for MPICH the names of
/// [`mpich4_algorithms`], checked against the variable's description (MPI_T
/// gives no enumeration there); otherwise the variable's MPI_T enumeration.
/// The one mapping from names to values, for the runtime and for `mpit-tuner
/// check --against-mpi`. An error names the variable and says why.
pub fn algorithms(
    catalogue: &Catalogue,
    library: Library,
    c: Collective,
) -> Result<(&CvarInfo, Named), String> {
    let name = algorithm_cvar(library, c).ok_or_else(|| {
        format!(
            "no algorithm variable of {} is known for {}",
            c.name(),
            library.name()
        )
    })?;
    let info = catalogue
        .cvar(&name)
        .ok_or_else(|| format!("this MPI library has no {name}"))?;
    if let Some(e) = &info.enumeration {
        return Ok((
            info,
            e.items
                .iter()
                .map(|i| (i.name.clone(), i64::from(i.value)))
                .collect(),
        ));
    }
    if library != Library::Mpich {
        return Err(format!(
            "{name} has no MPI_T enumeration, so its algorithms' names are not known"
        ));
    }
    let names = mpich4_algorithms(c);
    check_description(&info.description, names).map_err(|missing| {
        format!("{name}'s description does not list `{missing}` where MPICH 4.0 does: this library's algorithms are not the ones known here")
    })?;
    Ok((
        info,
        names
            .iter()
            .enumerate()
            .map(|(v, n)| (n.to_string(), v as i64))
            .collect(),
    ))
}

/// Algorithms as (name, value), in value order.
pub type Named = Vec<(String, i64)>;

/// [`algorithms`] of the running library, as `mpit-tuner check
/// --against-mpi` asks for them.
#[derive(Debug, Clone, Copy)]
pub struct LibraryAlgorithms<'c> {
    /// The library.
    pub library: Library,
    /// Its variables.
    pub catalogue: &'c Catalogue,
}

impl policies::AlgorithmLookup for LibraryAlgorithms<'_> {
    fn library(&self) -> &str {
        self.library.name()
    }

    fn algorithms(&self, collective: Collective) -> Result<policies::Algorithms, String> {
        let (info, names) = algorithms(self.catalogue, self.library, collective)?;
        Ok(policies::Algorithms {
            variable: info.name.clone(),
            names: names.into_iter().map(|(n, _)| n).collect(),
        })
    }

    fn known(&self, library: &str, collective: Collective) -> Option<Vec<String>> {
        (library == Library::Mpich.name()).then(|| {
            mpich4_algorithms(collective)
                .iter()
                .map(|n| n.to_string())
                .collect()
        })
    }
}

/// MVAPICH2's algorithm variable of `c` (2.3.7 has one for allreduce,
/// bcast, reduce, allgather and alltoall among the collectives tuned here;
/// `None` for the others).
pub fn mvapich2_cvar(c: Collective) -> Option<String> {
    match c {
        Collective::ReduceScatterBlock | Collective::Barrier => None,
        _ => Some(format!(
            "MPIR_CVAR_{}_COLLECTIVE_ALGORITHM",
            c.name().to_ascii_uppercase()
        )),
    }
}

/// MPICH 4.0-4.1's algorithm names of `c`, in value order (0 is `auto`),
/// as the variable's description lists them (MPICH generates the values in
/// that order). MPI_T gives no enumeration for these variables, and the
/// description it returns has lost its line breaks, so the names are known
/// here and checked against the description at load.
pub fn mpich4_algorithms(c: Collective) -> &'static [&'static str] {
    {
        match c {
            Collective::Allreduce => &[
                "auto",
                "nb",
                "smp",
                "recursive_doubling",
                "reduce_scatter_allgather",
            ],
            Collective::Bcast => &[
                "auto",
                "binomial",
                "nb",
                "smp",
                "scatter_recursive_doubling_allgather",
                "scatter_ring_allgather",
            ],
            Collective::Reduce => &["auto", "binomial", "nb", "smp", "reduce_scatter_gather"],
            Collective::Allgather => &["auto", "brucks", "nb", "recursive_doubling", "ring"],
            Collective::Alltoall => &[
                "auto",
                "brucks",
                "nb",
                "pairwise",
                "pairwise_sendrecv_replace",
                "scattered",
            ],
            Collective::ReduceScatterBlock => &[
                "auto",
                "noncommutative",
                "recursive_doubling",
                "pairwise",
                "recursive_halving",
                "nb",
            ],
            Collective::Barrier => &["auto", "nb", "smp", "dissemination"],
        }
    }
}

/// When a value written through MPI_T after `MPI_Init` takes effect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Support {
    /// At the library's next call (MPICH 4.0.2, measured: `MPIR_<Coll>_impl`
    /// switches on the variable at every call; a 1 MiB allreduce on 4 ranks
    /// halves its time at the call after the write).
    NextCall,
    /// Only when set before start (environment or pre-init write): the
    /// online mode cannot tune this library; the reason says what can.
    StartOnly(String),
    /// Not known for this library or version: not tuned online.
    Unknown(String),
}

/// What `library` (its `MPI_Get_library_version` text in `version`) does
/// with algorithm variables written at run time.
pub fn support(library: Library, version: &str) -> Support {
    match library {
        Library::Mpich => match mpich_major_minor(version) {
            Some((4, 0 | 1)) => Support::NextCall,
            Some((major, minor)) => Support::Unknown(format!(
                "MPICH {major}.{minor} is not measured yet (online collective tuning is known to work on MPICH 4.0 and 4.1)"
            )),
            None => Support::Unknown("the MPICH version could not be read".into()),
        },
        Library::OpenMpi => Support::StartOnly(
            "Open MPI accepts a write of coll_tuned_<coll>_algorithm after MPI_Init and reads it back, \
             but a communicator keeps the algorithm chosen when it was created: a write reaches only \
             communicators created after it (measured on 4.1.4 with examples/c/coll_witness.c); \
             choose algorithms before start instead (OMPI_MCA_coll_tuned_use_dynamic_rules=1 and \
             OMPI_MCA_coll_tuned_<coll>_algorithm, or a dynamic rules file)"
                .into(),
        ),
        Library::Mvapich2 => Support::StartOnly(
            "MVAPICH2 2.3.7 accepts a write of MPIR_CVAR_<COLL>_COLLECTIVE_ALGORITHM after MPI_Init \
             and keeps the algorithm chosen at start (measured); set it in the environment instead"
                .into(),
        ),
        _ => Support::Unknown(format!(
            "{library:?} is not measured (online collective tuning is known to work on MPICH 4.0 and 4.1)"
        )),
    }
}

/// `(4, 0)` from "MPICH Version:      4.0.2 ...".
fn mpich_major_minor(version: &str) -> Option<(u32, u32)> {
    let rest = version.split("Version:").nth(1)?.trim_start();
    let mut parts = rest
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty());
    Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}

/// One collective the tuner may switch in this process: the variable and
/// the algorithms (index 0 is the value at start, the library's default).
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    /// The collective.
    pub collective: Collective,
    /// The variable's metadata.
    pub cvar: CvarInfo,
    /// (name, value) of each candidate; index 0 is the default.
    pub candidates: Vec<(String, i64)>,
}

impl Target {
    /// The target for `collective` in this library, with the candidates
    /// `wanted` (names; empty: every algorithm the library lists), after
    /// `default` (the variable's value at start). An error names the
    /// variable and says why it cannot be tuned.
    pub fn find(
        catalogue: &Catalogue,
        library: Library,
        collective: Collective,
        default: i64,
        wanted: &[String],
    ) -> Result<Target, String> {
        let (info, names) = algorithms(catalogue, library, collective)?;
        let name = &info.name;
        if !matches!(info.scope, Scope::AllEq | Scope::All | Scope::Local) {
            return Err(format!(
                "{name} cannot be written after MPI_Init (scope {})",
                info.scope
            ));
        }
        if !matches!(info.datatype, Datatype::Int | Datatype::Unsigned) {
            return Err(format!("{name} is not an integer variable"));
        }
        let mut candidates = vec![(
            names
                .iter()
                .find(|(_, v)| *v == default)
                .map_or_else(|| default.to_string(), |(n, _)| n.clone()),
            default,
        )];
        for w in wanted {
            if !names.iter().any(|(n, _)| n.eq_ignore_ascii_case(w)) {
                let all: Vec<&str> = names.iter().map(|(n, _)| n.as_str()).collect();
                return Err(format!(
                    "`{w}` is not an algorithm of {name} (it has {})",
                    all.join(", ")
                ));
            }
        }
        for (n, value) in &names {
            let value = *value;
            let chosen = wanted.is_empty() || wanted.iter().any(|w| w.eq_ignore_ascii_case(n));
            if value != default && chosen && candidates.len() < super::search::MAX_CANDIDATES {
                candidates.push((n.to_string(), value));
            }
        }
        Ok(Target {
            collective,
            cvar: info.clone(),
            candidates,
        })
    }
}

/// Checks that `names` appear in `desc` in this order (the description
/// lost its line breaks, so each name may be glued to the text before it).
/// Returns the first name that does not.
fn check_description(desc: &str, names: &[&'static str]) -> Result<(), &'static str> {
    let mut rest = desc;
    for name in names {
        // Each entry reads "<name><padding>- <text>".
        let found = rest.match_indices(name).find(|(i, _)| {
            rest[i + name.len()..]
                .trim_start_matches(' ')
                .starts_with('-')
        });
        match found {
            Some((i, _)) => rest = &rest[i + name.len()..],
            None => return Err(name),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALLREDUCE: &str = "Variable to select allreduce algorithmauto - Internal algorithm selection (can be overridden with MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE)nb                       - Force nonblocking algorithmsmp                      - Force smp algorithmrecursive_doubling       - Force recursive doubling algorithmreduce_scatter_allgather - Force reduce scatter allgather algorithm";

    #[test]
    fn mpich_descriptions_are_checked_in_order() {
        let names = mpich4_algorithms(Collective::Allreduce);
        assert_eq!(check_description(ALLREDUCE, names), Ok(()));
        assert_eq!(
            check_description(ALLREDUCE, &["auto", "recursive_doubling", "smp"]),
            Err("smp")
        );
        assert_eq!(check_description(ALLREDUCE, &["auto", "ring"]), Err("ring"));
    }

    #[test]
    fn versions() {
        assert_eq!(
            mpich_major_minor("MPICH Version:      4.0.2\nMPICH Release date: ..."),
            Some((4, 0))
        );
        assert_eq!(mpich_major_minor("MPICH Version:\t5.0.2"), Some((5, 0)));
        assert_eq!(mpich_major_minor("Open MPI v4.1.4"), None);
        assert_eq!(
            support(Library::Mpich, "MPICH Version: 4.0.2"),
            Support::NextCall
        );
        assert!(matches!(
            support(Library::OpenMpi, "Open MPI v4.1.4"),
            Support::StartOnly(_)
        ));
    }

    #[test]
    fn names() {
        for c in COLLECTIVES {
            assert_eq!(Collective::parse(c.name()), Some(c));
            assert_eq!(mpich4_algorithms(c)[0], "auto");
        }
        assert_eq!(
            mpich_cvar(Collective::ReduceScatterBlock),
            "MPIR_CVAR_REDUCE_SCATTER_BLOCK_INTRA_ALGORITHM"
        );
    }

    /// MVAPICH2 is not installable here: its algorithm variables are
    /// checked against the list MVAPICH2 2.3.7 exports.
    #[test]
    fn mvapich2_variables_exist_in_its_list() {
        let list = include_str!("../../../../policies/tests/fixtures/mvapich2-2.3.7-variables.txt");
        let cvars: Vec<&str> = list
            .lines()
            .filter_map(|l| l.strip_prefix("CVAR "))
            .filter_map(|l| l.split_whitespace().next())
            .collect();
        let mut named = 0;
        for c in COLLECTIVES {
            if let Some(name) = mvapich2_cvar(c) {
                assert!(
                    cvars.contains(&name.as_str()),
                    "{name} is not in MVAPICH2 2.3.7's list"
                );
                named += 1;
            }
        }
        assert_eq!(named, 5);
        // Its per-algorithm timers, which a policy can read.
        assert!(list.contains("PVAR mv2_coll_timer_allreduce_shm_rd TIMER"));
    }
}
