//! The blocking collectives whose algorithm the tuner can choose: their
//! names in policy files, settings and logs, defined once.

/// The blocking collectives the tuner can switch (ordered as
/// [`COLLECTIVES`] lists them).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
#[repr(usize)]
pub enum Collective {
    /// `MPI_Allreduce`
    Allreduce,
    /// `MPI_Bcast`
    Bcast,
    /// `MPI_Reduce`
    Reduce,
    /// `MPI_Allgather`
    Allgather,
    /// `MPI_Alltoall`
    Alltoall,
    /// `MPI_Reduce_scatter_block`
    ReduceScatterBlock,
    /// `MPI_Barrier`
    Barrier,
}

/// Every collective, in index order.
pub const COLLECTIVES: [Collective; 7] = [
    Collective::Allreduce,
    Collective::Bcast,
    Collective::Reduce,
    Collective::Allgather,
    Collective::Alltoall,
    Collective::ReduceScatterBlock,
    Collective::Barrier,
];

impl Collective {
    /// The lower-case name (`allreduce`, `reduce_scatter_block`), as in
    /// policy files and logs.
    pub fn name(self) -> &'static str {
        match self {
            Collective::Allreduce => "allreduce",
            Collective::Bcast => "bcast",
            Collective::Reduce => "reduce",
            Collective::Allgather => "allgather",
            Collective::Alltoall => "alltoall",
            Collective::ReduceScatterBlock => "reduce_scatter_block",
            Collective::Barrier => "barrier",
        }
    }

    /// The collective named `name` (as [`Collective::name`] spells it).
    pub fn parse(name: &str) -> Option<Collective> {
        COLLECTIVES
            .into_iter()
            .find(|c| c.name().eq_ignore_ascii_case(name.trim()))
    }
}
