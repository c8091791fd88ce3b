#!/usr/bin/env bash
# Sets up a fresh machine and runs every test, twice: built against MPICH
# and built against Open MPI (separate target directories). MPI tests run
# real jobs under mpiexec, one at a time; a test that needs MPI and finds
# none fails. This is what CI runs (.ci/run).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh

export CARGO_TERM_COLOR=never
# MPI jobs as root (CI) and oversubscribed 2-core machines.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1

echo "== format" >&2
cargo fmt --all -- --check

for flavor in mpich openmpi; do
  echo "== build and test against ${flavor}" >&2
  export MPICC="mpicc.${flavor}"
  dir="target/${flavor}"
  cargo build --workspace --all-targets --locked --target-dir "$dir"
  cargo test --workspace --locked --target-dir "$dir" -- --test-threads=1
done

echo "== clippy (MPICH build)" >&2
MPICC=mpicc.mpich cargo clippy --workspace --all-targets --locked --target-dir target/mpich -- -D warnings
echo "== benchmarks compile (MPICH build, bench profile)" >&2
MPICC=mpicc.mpich cargo bench --workspace --no-run --locked --target-dir target/mpich
echo "== application-level overhead, short mode (MPICH and Open MPI: every variant must run)" >&2
bash benches/overhead.sh --short
echo "== collective tuning benchmark, short mode (MPICH and Open MPI: every variant must run)" >&2
bash benches/collectives.sh --short
echo "== eager-threshold experiment, short mode (MPICH and Open MPI: every variant must run)" >&2
bash benches/eager-experiment.sh --short
echo "== all tests passed on MPICH and Open MPI" >&2
