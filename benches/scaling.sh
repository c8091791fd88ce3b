#!/usr/bin/env bash
# The scaling benchmark of mpit-tuner, in one command: builds what it needs
# (release, target/mpich and target/openmpi), then runs a trivial job (init,
# one barrier, finalize) with and without the tool and a mostly idle job
# with it, on 4, 16, 64 and 128 ranks of this host (or of an emulated
# cluster with --cluster N), on MPICH and on Open MPI, and prints markdown
# tables: the tool's start-up and finalize cost as a ratio, the files and
# bytes in the run directory, the listings of its control/ directory a
# second, and the projection to 10,000 ranks on 100 nodes. See
# BENCHMARKS.md.
#
#   bash benches/scaling.sh                # 3 repetitions
#   bash benches/scaling.sh --short        # CI: 4 and 8 ranks, 1 repetition
#   bash benches/scaling.sh --cluster 4 --ranks 16,64
set -euo pipefail
cd "$(dirname "$0")/.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPICC=mpicc.mpich cargo build --release --locked --quiet --target-dir target/mpich \
  -p mpit-tuner-benches --bin scaling
exec target/mpich/release/scaling "$@"
