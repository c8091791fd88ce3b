#!/usr/bin/env bash
# Installs what mpit-tuner needs on a fresh Debian machine: both MPI
# libraries (MPICH and Open MPI, with their compilers and launchers),
# libclang for bindgen, gfortran for the Fortran example, patchelf for the
# relinking test, a font for the PNG plots of `mpit-tuner report`, tmux
# for the test of the full-screen `mpit-tuner watch`, iproute2 for the
# emulated cluster of scripts/cluster.sh, valgrind for the instruction
# counts of benches/hot-path-instructions.sh; Slurm (slurmctld, slurmd,
# slurm-client) and munge for the emulated cluster's Slurm mode; then MPICH 5 and Open
# MPI 5 from the Python package registry into a cached virtual environment
# (scripts/mpi-wheels.sh; python3-venv for that); then MVAPICH2 2.3.7 from
# the vendored tarball beside the repository, built once into the cache
# (scripts/mvapich2.sh; librdmacm-dev, libibumad-dev and libibverbs-dev
# for that), or an installation named by MPIT_MV2_PREFIX; without either,
# one line says the mvapich2 flavour is skipped.
# Idempotent; installs only what is missing. Needs root (or
# sudo) for apt-get, and an existing Rust toolchain (cargo >= 1.85).
set -euo pipefail

need=()
have_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
for pkg in libmpich-dev mpich libopenmpi-dev openmpi-bin libclang-dev clang gfortran patchelf pkg-config make binutils procps fonts-dejavu-core tmux iproute2 python3 python3-venv valgrind slurmctld slurmd slurm-client munge; do
  have_pkg "$pkg" || need+=("$pkg")
done
mv2_tarball="${MPIT_MV2_TARBALL:-$(dirname "$0")/../../shared/vendor/mvapich2-2.3.7-1.tar.xz}"
if [ -z "${MPIT_MV2_PREFIX:-}" ] && [ "${MPIT_MV2:-}" != off ] && [ -f "$mv2_tarball" ]; then
  for pkg in librdmacm-dev libibumad-dev libibverbs-dev; do
    have_pkg "$pkg" || need+=("$pkg")
  done
fi

if ((${#need[@]})); then
  echo "setup: installing ${need[*]}" >&2
  SUDO=""
  if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq </dev/null
  $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" </dev/null >/dev/null
fi

if ! command -v cargo >/dev/null 2>&1; then
  echo "setup: cargo not found; install Rust (https://rustup.rs) and run again" >&2
  exit 1
fi
for tool in mpicc.mpich mpiexec.mpich mpicc.openmpi mpiexec.openmpi gfortran patchelf; do
  command -v "$tool" >/dev/null 2>&1 || { echo "setup: $tool still missing after install" >&2; exit 1; }
done
# The registry wheels (cached: a second run asks no registry).
bash "$(dirname "$0")/mpi-wheels.sh" >/dev/null
# MVAPICH2 (cached: a second run builds nothing).
mv2_env="$(bash "$(dirname "$0")/mvapich2.sh")"
eval "$mv2_env"
if [ -n "${MPIT_MV2_MPICC:-}" ]; then
  mv2="MVAPICH2 in $(dirname "$(dirname "$MPIT_MV2_MPICC")")"
else
  mv2="no MVAPICH2: ${MPIT_MV2_SKIP:-}"
fi
echo "setup: ok ($(cargo --version), $(mpichversion 2>/dev/null | head -1 | tr -s ' \t' ' '), Open MPI $(ompi_info --version 2>/dev/null | head -1 | awk '{print $NF}'), MPICH 5 and Open MPI 5 wheels, $mv2)" >&2
