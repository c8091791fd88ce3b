#!/usr/bin/env bash
# Online collective tuning against the library's default and every
# algorithm fixed at start, in one command: builds what it needs (release
# preload and examples/c/coll_bench.c, in target/mpich and target/openmpi),
# then runs allreduce (8 B, 64 KiB, 1 MiB), bcast (1 MiB) and a mixed
# application on 2 and 4 ranks, every variant interleaved run by run, on
# MPICH and on Open MPI, and prints markdown tables: default, oracle (best
# fixed choice) and online time per call, the ratios online / oracle,
# default / online and monitored / online (the default with the tool loaded,
# no tuning; median, min-max over the rounds), and what online tuning
# chose. The figures: BENCHMARKS.md#collective-tuning-issue-13; what they
# mean: docs/benchmarks.md#what-the-numbers-mean-collective-tuning.
#
#   bash benches/collectives.sh              # 5 repetitions
#   bash benches/collectives.sh --short      # CI: 1 short repetition on 2 ranks, checks every variant ran
#   bash benches/collectives.sh --reps 3 --mpi mpich --ranks 2 --cases allreduce-1m,mixed
set -euo pipefail
cd "$(dirname "$0")/.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPICC=mpicc.mpich cargo build --release --locked --quiet --target-dir target/mpich \
  -p mpit-tuner-benches --bin collectives
exec target/mpich/release/collectives "$@"
