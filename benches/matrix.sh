#!/usr/bin/env bash
# The default mode (the tool preloaded, nothing set) against no tool, on a
# matrix of collectives (bcast 8 B / 64 KiB / 1 MiB, integer allreduce 8 B /
# 64 KiB / 1 MiB, integer reduce 8 B, allgather 1 KiB / 1 MiB, alltoall
# 64 KiB), on one host and on emulated nodes (scripts/cluster.sh; root),
# MPICH and Open MPI, interleaved rounds; prints markdown tables of
# default / none (median, min-max) and the search cost reported and
# measured. With --fixed, against the best algorithm fixed at start too.
# See BENCHMARKS.md ("The default mode on a matrix of collectives").
#
#   bash benches/matrix.sh                       # 5 rounds, 4 layouts
#   bash benches/matrix.sh --short               # CI: 2x1, 4 cases, fails over 1.10x
#   bash benches/matrix.sh --layouts 2x2 --mpi openmpi --cases reduce-8 --reps 7
set -euo pipefail
cd "$(dirname "$0")/.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPICC=mpicc.mpich cargo build --release --locked --quiet --target-dir target/mpich \
  -p mpit-tuner-benches --bin matrix
exec target/mpich/release/matrix "$@"
