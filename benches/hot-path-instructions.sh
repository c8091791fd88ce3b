#!/usr/bin/env bash
# What the wrapper and online collective tuning add to an 8-byte allreduce,
# counted in instructions per call (valgrind's callgrind), where timing
# calls of tens of nanoseconds on this shared 2-core machine spreads more
# than the 5 ns the issue-39 target allows (BENCHMARKS.md). Builds the
# hot_path criterion bench (target/mpich, MPICH: Open MPI's tuning does not
# run in one process), then runs it in its counting mode
# (HOT_PATH_COUNT, see benches/benches/hot_path.rs) under callgrind, once
# per case and window length: a one-rank MPI_COMM_WORLD, tuning on until
# the search has ended and no event came for 128 windows, then N calls of
# the library's function (direct), of the wrapper with tuning on (steady
# state) and of the wrapper after tuning stopped (off), each loop the only
# code collected. Prints a markdown table of instructions per call and
# their differences and ratios. The count moves by a few instructions per
# call from run to run at most when no tuning event comes while counting
# (the last column says how many came: callgrind's slowdown can make a
# check point see a drift).
#
#   bash benches/hot-path-instructions.sh                    # both cases, windows of 256 and 4096 calls
#   bash benches/hot-path-instructions.sh --calls 100000 --windows 256 --mode all
#
# Options: --calls N (per loop, default 200000), --windows "W ..." (calls
# per measurement window, fixed instead of sized by time, which callgrind
# slows about 50 times; default "256 4096", what 200 us of a 0.75 us and
# of a 0.05 us call make), --mode safe|all (the tuner's mode, default safe,
# the default mode: the double's allreduce then stays on the library's
# choice after the class check, the int64's is tuned).
set -euo pipefail
cd "$(dirname "$0")/.."
calls=200000
windows="256 4096"
mode=safe
while [ $# -gt 0 ]; do
  case "$1" in
    --calls) calls="$2"; shift 2 ;;
    --windows) windows="$2"; shift 2 ;;
    --mode) mode="$2"; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "hot-path-instructions: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
case "$mode" in
  safe) tuner=safe ;;
  all) tuner=allreduce ;;
  *) echo "hot-path-instructions: --mode is safe or all, not '$mode'" >&2; exit 2 ;;
esac
for tool in valgrind callgrind_annotate; do
  command -v "$tool" >/dev/null || {
    echo "hot-path-instructions: $tool not found (scripts/setup.sh installs valgrind)" >&2
    exit 2
  }
done
exe=$(MPICC=mpicc.mpich cargo bench --locked --no-run --target-dir target/mpich \
  -p mpit-tuner-benches --bench hot_path --message-format=json 2>/dev/null |
  grep '"kind":\["bench"\]' | grep '"name":"hot_path"' |
  sed -n 's/.*"executable":"\([^"]*\)".*/\1/p' | tail -1)
case "$exe" in
  */hot_path-*) [ -x "$exe" ] ;;
  *) false ;;
esac || { echo "hot-path-instructions: building the hot_path bench failed (no executable: '$exe')" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "Instructions per call of an 8-byte allreduce on a one-rank MPI_COMM_WORLD (MPICH $(mpichversion 2>/dev/null | awk -F: '/Version/{gsub(/[ \t]/,"",$2); print $2}'), $calls calls per loop, collective tuning in mode $mode); callgrind, $(valgrind --version)."
echo
echo "| case | window (calls) | direct | wrapper, tuning off | wrapper, tuning on | off - direct | on - off | on / off | tuning events while counted |"
echo "|---|---|---|---|---|---|---|---|---|"
for case in 'allreduce_8B_int(world)' 'allreduce_8B(world)'; do
  for w in $windows; do
    if ! HOT_PATH_COLLECTIVES="$tuner" MPIT_TUNER_INTERVAL=1h MPIT_TUNER_FLUSH=1h \
      HOT_PATH_COUNT="$calls" HOT_PATH_WINDOW="$w" HOT_PATH_CASE="$case" \
      valgrind --tool=callgrind --collect-atstart=no --toggle-collect='*counted_*' \
      --callgrind-out-file="$tmp/cg" "$exe" >"$tmp/out" 2>"$tmp/err"; then
      echo "hot-path-instructions: the counting run of $case (window $w) failed:" >&2
      cat "$tmp/out" "$tmp/err" >&2
      exit 1
    fi
    callgrind_annotate --inclusive=yes "$tmp/cg" >"$tmp/annotate"
    row=$(awk -v calls="$calls" -v c="$case" -v w="$w" \
      -v events="$(sed -n '/^hot_path: counting after/,$p' "$tmp/out" | grep -c 'tuning event at' || true)" '
      function per(name) {
        for (i = 1; i <= n; i++) if (line[i] ~ ("hot_path::" name " \\[")) {
          split(line[i], f, " "); gsub(",", "", f[1]); return f[1] / calls
        }
        return -1
      }
      { line[++n] = $0 }
      END {
        d = per("counted_direct"); on = per("counted_tuning_on"); off = per("counted_tuning_off")
        if (d < 0 || on < 0 || off < 0) exit 1
        printf "| %s | %d | %.1f | %.1f | %.1f | %+.1f | %+.1f | %.3f | %d |\n", c, w, d, off, on, off - d, on - off, on / off, events
      }' "$tmp/annotate") || {
      echo "hot-path-instructions: callgrind collected no counted loop for $case (window $w):" >&2
      cat "$tmp/out" >&2
      exit 1
    }
    echo "$row"
    grep -E '^hot_path: (counting|no tuning)' "$tmp/out" | sed 's/^/    /' >&2
  done
done
echo
echo "direct: the library's PMPI_Allreduce; off: the wrapper after collective tuning stopped (counting only, today's wrapper without tuning); on: the wrapper with tuning on, after the search ended (default kept). Instructions, not time: what an instruction costs depends on the processor; each row is one run."
