#!/usr/bin/env bash
# The main job: sets up a fresh machine, builds mpit-tuner, and runs the
# demo MPI program (examples/stencil3d, 4 ranks) under the tuner with the
# default policies, then shows what the tuner recorded.
#
#   bash scripts/demo.sh            # MPICH (default)
#   MPI=openmpi bash scripts/demo.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh

flavor="${MPI:-mpich}"
case "$flavor" in mpich|openmpi) ;; *) echo "demo: MPI must be mpich or openmpi" >&2; exit 2;; esac
export MPICC="mpicc.${flavor}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
target="target/${flavor}"
cargo build --release --locked --target-dir "$target" -p mpit-tuner -p mpit-tuner-preload -p stencil3d
bin="$target/release"

echo
echo "== the MPI_T variables of this library (mpit-tuner list, first lines)"
"$bin/mpit-tuner" list | head -n 8

run_dir="demo-run-${flavor}"
rm -rf "$run_dir"
echo
echo "== examples/stencil3d on 4 ranks under the tuner (default policies, sampling every 100 ms)"
"$bin/mpit-tuner" run --dir "$run_dir" --interval 100ms -- \
  "mpiexec.${flavor}" -n 4 "$bin/stencil3d" --iters 400

echo
echo "== what the tuner recorded in $run_dir"
ls -l "$run_dir"
echo "-- first records of rank 0's log:"
head -n 3 "$run_dir/rank-00000.jsonl" | cut -c1-300
if "$bin/mpit-tuner" report --help >/dev/null 2>&1; then
  echo
  "$bin/mpit-tuner" report "$run_dir"
fi
