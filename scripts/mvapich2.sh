#!/usr/bin/env bash
# Provides MVAPICH2 for the `mvapich2` test flavour and prints `export`
# lines for it:
#   eval "$(bash scripts/mvapich2.sh)"
# sets MPIT_MV2_MPICC and MPIT_MV2_MPIEXEC, or MPIT_MV2_SKIP (one line
# saying why there is no MVAPICH2 here) and neither of the others.
#
# Where MVAPICH2 comes from, first match wins:
# - MPIT_MV2_PREFIX=DIR: an existing installation (a cluster's module:
#   DIR/bin/mpicc and DIR/bin/mpiexec). Used as it is.
# - MPIT_MV2=off: none (the flavour is skipped, saying so).
# - The vendored release tarball, ../shared/vendor/mvapich2-2.3.7-1.tar.xz
#   beside the repository (MPIT_MV2_TARBALL overrides the path): built once
#   into the cache, $MPIT_TUNER_CACHE (default ~/.cache/mpit-tuner), in a
#   directory named after the tarball's sha256, so a cached build is reused
#   (a second run takes well under a second) and a changed tarball builds
#   anew. Needs librdmacm-dev, libibumad-dev, libibverbs-dev (setup.sh
#   installs them), a C compiler and make; no autotools (the release's
#   configure scripts are generated). The build's log stays beside it.
# - Otherwise none, saying so.
#
# What is built (docs/libraries.md, "MVAPICH2"): the release's own
# configuration for InfiniBand (ch3:mrail, gen2), which also runs on one
# node without InfiniBand hardware through its shared-memory channel, with
# every PVAR (--enable-mpit-pvars=all); no Fortran, no C++ (the tests need
# neither), no embedded OSU benchmarks (they do not build here), no ROMIO
# (MPI-IO: nothing the tool or its tests call), and Hydra as the only
# launcher. A failed build is an error: it prints the end of the log and
# exits 1 (MPIT_MV2=off skips the flavour instead).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
cache="${MPIT_TUNER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mpit-tuner}"
tarball="${MPIT_MV2_TARBALL:-$here/../../shared/vendor/mvapich2-2.3.7-1.tar.xz}"

emit() { # prefix
  printf 'export MPIT_MV2_MPICC=%q MPIT_MV2_MPIEXEC=%q\n' "$1/bin/mpicc" "$1/bin/mpiexec"
}
skip() { # reason (the caller prints it)
  printf 'export MPIT_MV2_SKIP=%q\n' "$1"
}

if [ -n "${MPIT_MV2_PREFIX:-}" ]; then
  for tool in mpicc mpiexec; do
    [ -x "$MPIT_MV2_PREFIX/bin/$tool" ] || {
      echo "mvapich2: MPIT_MV2_PREFIX=$MPIT_MV2_PREFIX has no executable bin/$tool" >&2
      exit 1
    }
  done
  emit "$MPIT_MV2_PREFIX"
  exit 0
fi
if [ "${MPIT_MV2:-}" = off ]; then
  skip "MPIT_MV2=off: MVAPICH2 is not set up, the mvapich2 flavour is skipped"
  exit 0
fi
if [ ! -f "$tarball" ]; then
  skip "no MVAPICH2 here: neither MPIT_MV2_PREFIX nor the tarball $tarball; the mvapich2 flavour is skipped"
  exit 0
fi

sum="$(sha256sum "$tarball" | cut -c1-16)"
name="$(basename "$tarball" .tar.xz)"
prefix="$cache/$name-$sum"
stamp="$prefix/.mpit-tuner-built"
built() { [ -f "$stamp" ] && [ -x "$prefix/bin/mpicc" ] && [ -x "$prefix/bin/mpiexec" ]; }
if built; then
  emit "$prefix"
  exit 0
fi

for pkg in librdmacm-dev libibumad-dev libibverbs-dev; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || {
    echo "mvapich2: $pkg is not installed (bash scripts/setup.sh installs it)" >&2
    exit 1
  }
done

mkdir -p "$cache"
# One build at a time (setup.sh and a test run may both call this); the
# second waits, then finds the first one's build.
if command -v flock >/dev/null 2>&1; then
  exec 9>"$cache/.mvapich2.lock"
  flock 9
  if built; then
    emit "$prefix"
    exit 0
  fi
fi
log="$prefix.build.log"
work="$(mktemp -d "$cache/.mvapich2-build.XXXXXX")"
trap 'rm -rf "$work"' EXIT
rm -rf "$prefix"
echo "mvapich2: building $name (sha256 $sum...) into $prefix; log $log" >&2
start=$SECONDS
if ! (
  set -e
  tar -xJf "$tarball" -C "$work"
  cd "$work"/*/
  ./configure --prefix="$prefix" --with-device=ch3:mrail --with-rdma=gen2 \
    --enable-mpit-pvars=all --disable-fortran --disable-cxx --enable-shared \
    --disable-omb --disable-romio --with-pm=hydra
  # The collective tuning tables (src/mpi/coll/*_tuning.c, 14 MB of
  # generated initialisers) take gcc 3-4 minutes a file at -O2 and 6 s at
  # -O0, measured here: they are built first at -O0 (they run once, when a
  # communicator picks its algorithm), the rest as configured.
  tables="$(ls src/mpi/coll/*_tuning.c | sed 's|^src/mpi/coll/|src/mpi/coll/lib_libmpi_la-|; s|\.c$|.lo|')"
  cflags="$(sed -n 's/^CFLAGS = //p' Makefile | sed 's/-O[0-9s]/-O0/g')"
  # shellcheck disable=SC2086
  make -j"$(nproc)" CFLAGS="$cflags" $tables
  make -j"$(nproc)"
  make install
) </dev/null >"$log" 2>&1; then
  echo "mvapich2: the build failed; the end of $log:" >&2
  tail -n 30 "$log" >&2
  rm -rf "$prefix"
  exit 1
fi
echo "$sum" >"$stamp"
echo "mvapich2: built in $((SECONDS - start)) s" >&2
emit "$prefix"
