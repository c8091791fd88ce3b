//! The algorithms a benchmark fixes at start, per library: for the
//! oracle of `collectives` and the best fixed algorithm of `matrix`.

use tuner_core::collectives::{self, Collective};

/// One algorithm of a collective.
#[derive(Debug, Clone)]
pub struct Algorithm {
    pub name: String,
    /// The variables that fix it at start.
    pub env: Vec<(String, String)>,
    /// MPICH: coll_bench's `COLL_BENCH_SWITCH` that writes it before every
    /// call and the default back after it (a library that reads the
    /// variable at every call); `None` on Open MPI, where online tuning
    /// switches by communicator and writes nothing per call.
    pub per_call: Option<String>,
}

/// The algorithms of `c` in `flavor`, without the default. MPICH 4.0's
/// names and values as the tuner knows them
/// (`collectives::mpich4_algorithms`: the value is the position in the
/// variable's description); Open MPI 4.1's values of
/// `coll_tuned_<coll>_algorithm` (`ompi_info --param coll tuned --level 9`),
/// without 0 (`ignore`: the default), less those that fail the call on
/// `ranks` ranks.
pub fn algorithms(flavor: &str, c: Collective, ranks: u32) -> Vec<Algorithm> {
    if flavor == "mpich" {
        let cvar = collectives::mpich_cvar(c);
        return collectives::mpich4_algorithms(c)
            .iter()
            .enumerate()
            .skip(1)
            .map(|(value, name)| Algorithm {
                name: name.to_string(),
                env: vec![(cvar.clone(), name.to_string())],
                per_call: Some(format!("{}:{cvar}={value}", c.name())),
            })
            .collect();
    }
    let names: &[&str] = match c {
        Collective::Bcast => &[
            "basic_linear",
            "chain",
            "pipeline",
            "split_binary_tree",
            "binary_tree",
            "binomial",
            "knomial",
            "scatter_allgather",
            "scatter_allgather_ring",
        ],
        Collective::Allreduce => &[
            "basic_linear",
            "nonoverlapping",
            "recursive_doubling",
            "ring",
            "segmented_ring",
            "rabenseifner",
        ],
        Collective::Allgather => &[
            "linear",
            "bruck",
            "recursive_doubling",
            "ring",
            "neighbor",
            "two_proc",
        ],
        Collective::Reduce => &[
            "linear",
            "chain",
            "pipeline",
            "binary",
            "binomial",
            "in-order_binary",
            "rabenseifner",
        ],
        Collective::Alltoall => &[
            "linear",
            "pairwise",
            "modified_bruck",
            "linear_sync",
            "two_proc",
        ],
        _ => &[],
    };
    names
        .iter()
        .enumerate()
        // The ones that fail the call on this many ranks (two_proc).
        .filter(|(_, name)| collectives::open_mpi_unsuitable(c, name, ranks as i32).is_none())
        .map(|(i, name)| Algorithm {
            name: name.to_string(),
            env: vec![
                (
                    "OMPI_MCA_coll_tuned_use_dynamic_rules".into(),
                    "1".to_string(),
                ),
                (
                    format!("OMPI_MCA_coll_tuned_{}_algorithm", c.name()),
                    (i + 1).to_string(),
                ),
            ],
            per_call: None,
        })
        .collect()
}
