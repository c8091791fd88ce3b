#!/usr/bin/env bash
# What collective tuning's default mode costs a job of sub-microsecond
# collectives, in one command: builds what it needs (release, target/mpich
# and target/openmpi), then runs coll_bench's 8-byte allreduce of doubles
# (left on the library's choice) and of int64 (tuned) on 2 ranks, 200,000
# and 2,000,000 calls, with tuning off and in the default mode,
# interleaved, and prints markdown tables of default / off ratios and of
# what the search cost. See BENCHMARKS.md.
#
#   bash benches/default-mode.sh            # 9 repetitions (about 4 minutes)
#   bash benches/default-mode.sh --short    # CI: 1 short repetition, checks every variant ran
#   bash benches/default-mode.sh --reps 5 --mpi mpich
set -euo pipefail
cd "$(dirname "$0")/.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPICC=mpicc.mpich cargo build --release --locked --quiet --target-dir target/mpich \
  -p mpit-tuner-benches --bin default_mode
exec target/mpich/release/default_mode "$@"
