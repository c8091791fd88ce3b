#!/usr/bin/env bash
# The application-level overhead of mpit-tuner, in one command: builds what
# it needs (release, target/mpich and target/openmpi), then runs ping-pong
# latency and stencil3d on 2 ranks with and without the tuner, interleaved,
# on MPICH and on Open MPI, and prints markdown tables of tool / no-tool
# ratios (median, min, max over the repetitions). See BENCHMARKS.md.
#
#   bash benches/overhead.sh            # 7 repetitions (about 15 minutes)
#   bash benches/overhead.sh --short    # CI: 2 short repetitions, checks every variant ran
#   bash benches/overhead.sh --reps 3 --mpi openmpi
set -euo pipefail
cd "$(dirname "$0")/.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPICC=mpicc.mpich cargo build --release --locked --quiet --target-dir target/mpich \
  -p mpit-tuner-benches --bin overhead
exec target/mpich/release/overhead "$@"
