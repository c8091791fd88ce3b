#!/usr/bin/env bash
# The tool's own cost, every figure of issue 67 in one command: builds what
# it needs (release, target/mpich and target/openmpi), then measures, per
# library and interleaved round by round, the hot path of a settled tuned
# call (the criterion bench hot_path), 2-rank 8-byte allreduce and bcast
# loops with and without the tool, and the start-up and finalize of a
# trivial job on 2 and 32 ranks, and prints a markdown table of each figure
# against its target. See BENCHMARKS.md.
#
#   bash benches/own-cost.sh              # 5 rounds
#   bash benches/own-cost.sh --short      # 1 short round, checks every variant ran
#   bash benches/own-cost.sh --reps 9 --mpi openmpi
set -euo pipefail
cd "$(dirname "$0")/.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPICC=mpicc.mpich cargo build --release --locked --quiet --target-dir target/mpich \
  -p mpit-tuner-benches --bin own_cost
exec target/mpich/release/own_cost "$@"
