#!/usr/bin/env bash
# What the wrapper and online collective tuning add to an 8-byte allreduce,
# counted in instructions per call (valgrind's callgrind), where timing
# calls of tens of nanoseconds on this shared 2-core machine spreads more
# than the 5 ns the issue-39 target allows (BENCHMARKS.md). Builds the
# hot_path criterion bench (target/<mpi>), then runs it in its counting
# mode (HOT_PATH_COUNT, see benches/benches/hot_path.rs) under callgrind,
# once per case and window length: MPI_COMM_WORLD of --ranks ranks, tuning
# on until the search has ended and no event came for 128 windows, then N
# calls of the library's function (direct), of the wrapper with tuning on
# (steady state) and of the wrapper after tuning stopped (off), each loop
# the only code collected. Each loop's count is split (callgrind's
# --separate-callers) into the library's function and the rest: the
# tool's instructions, which do not depend on the library's progress
# engine, are the rest of a wrapped loop minus the rest of the direct loop
# (the loop and the bench's closure). Prints a markdown table per rank.
# The count moves by a few instructions per call from run to run at most
# when no tuning event comes while counting (the last column says how
# many came: callgrind's slowdown can make a check point see a drift).
#
#   bash benches/hot-path-instructions.sh                    # MPICH, 1 rank, both cases, windows of 256 and 4096 calls (about 2 minutes)
#   bash benches/hot-path-instructions.sh --calls 100000 --windows 256 --mode all
#   bash benches/hot-path-instructions.sh --mpi openmpi --ranks 2 --calls 20000 --windows 256
#
# Options: --calls N (per loop, default 200000), --windows "W ..." (calls
# per measurement window, fixed instead of sized by time, which callgrind
# slows about 50 times; default "256 4096", what 200 us of a 0.75 us and
# of a 0.05 us call make), --mode safe|all (the tuner's mode, default safe,
# the default mode: the double's allreduce then stays on the library's
# choice after the class check, the int64's is tuned), --mpi mpich|openmpi
# (default mpich), --ranks N (default 1; Open MPI tunes only
# communicators of 2 ranks or more, so its tuned path needs --ranks 2;
# with several ranks the library's own count moves with its polling, the
# tool's does not).
set -euo pipefail
cd "$(dirname "$0")/.."
calls=200000
windows="256 4096"
mode=safe
mpi=mpich
ranks=1
while [ $# -gt 0 ]; do
  case "$1" in
    --calls) calls="$2"; shift 2 ;;
    --windows) windows="$2"; shift 2 ;;
    --mode) mode="$2"; shift 2 ;;
    --mpi) mpi="$2"; shift 2 ;;
    --ranks) ranks="$2"; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "hot-path-instructions: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
case "$mode" in
  safe) tuner=safe ;;
  all) tuner=allreduce ;;
  *) echo "hot-path-instructions: --mode is safe or all, not '$mode'" >&2; exit 2 ;;
esac
case "$mpi" in
  mpich) version=$(mpichversion 2>/dev/null | awk -F: '/Version/{gsub(/[ \t]/,"",$2); print "MPICH " $2}') ;;
  openmpi) version=$(ompi_info --version 2>/dev/null | head -1) ;;
  *) echo "hot-path-instructions: --mpi is mpich or openmpi, not '$mpi'" >&2; exit 2 ;;
esac
case "$ranks" in
  '' | *[!0-9]* | 0) echo "hot-path-instructions: --ranks is a number of ranks, not '$ranks'" >&2; exit 2 ;;
esac
for tool in valgrind callgrind_annotate "mpiexec.$mpi"; do
  command -v "$tool" >/dev/null || {
    echo "hot-path-instructions: $tool not found (scripts/setup.sh installs it)" >&2
    exit 2
  }
done
exe=$(MPICC="mpicc.$mpi" cargo bench --locked --no-run --target-dir "target/$mpi" \
  -p mpit-tuner-benches --bench hot_path --message-format=json 2>/dev/null |
  grep '"kind":\["bench"\]' | grep '"name":"hot_path"' |
  sed -n 's/.*"executable":"\([^"]*\)".*/\1/p' | tail -1)
case "$exe" in
  */hot_path-*) [ -x "$exe" ] ;;
  *) false ;;
esac || { echo "hot-path-instructions: building the hot_path bench failed (no executable: '$exe')" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# What every rank must see (mpiexec.openmpi passes only what -x names).
vars=(HOT_PATH_COLLECTIVES="$tuner" MPIT_TUNER_INTERVAL=1h MPIT_TUNER_FLUSH=1h MPIT_TUNER_STORE=off HOT_PATH_COUNT="$calls")
forward=()
if [ "$mpi" = openmpi ]; then
  forward=(--oversubscribe)
  for v in "${vars[@]}" HOT_PATH_WINDOW= HOT_PATH_CASE=; do forward+=(-x "${v%%=*}"); done
fi

echo "Instructions per call of an 8-byte allreduce on MPI_COMM_WORLD of $ranks rank(s) ($version, $calls calls per loop, collective tuning in mode $mode); callgrind, $(valgrind --version)."
echo
echo "| case | window (calls) | rank | library, direct | tool, tuning off | tool, tuning on | on - off | tuning events while counted |"
echo "|---|---|---|---|---|---|---|---|"
for case in 'allreduce_8B_int(world)' 'allreduce_8B(world)'; do
  for w in $windows; do
    rm -f "$tmp"/cg.*
    if ! env "${vars[@]}" HOT_PATH_WINDOW="$w" HOT_PATH_CASE="$case" \
      timeout 1800 "mpiexec.$mpi" "${forward[@]}" -n "$ranks" \
      valgrind -q --tool=callgrind --collect-atstart=no --toggle-collect='*counted_*' \
      --separate-callers=8 --callgrind-out-file="$tmp/cg.%p" "$exe" >"$tmp/out" 2>"$tmp/err"; then
      echo "hot-path-instructions: the counting run of $case (window $w) failed:" >&2
      cat "$tmp/out" "$tmp/err" >&2
      exit 1
    fi
    # Events printed after "counting after", by any rank, over the ranks.
    events=$(sed -n '/^hot_path: counting after/,$p' "$tmp/out" | grep -c 'tuning event at' || true)
    rank=0
    for cg in $(ls "$tmp" | grep '^cg\.' | sort -t. -k2 -n); do
      callgrind_annotate --inclusive=yes --threshold=100 "$tmp/$cg" 2>/dev/null >"$tmp/annotate"
      row=$(awk -v calls="$calls" -v c="$case" -v w="$w" -v r="$rank" -v events="$((events / ranks))" -v q="'" '
        # A listed function: "COUNT (PCT)  FILE:FUNCTION(q)CALLER(q)... [OBJECT]";
        # the largest count of a loop function (inlined code is listed
        # again under other files), and the library function called
        # inside each loop.
        $3 != "=>" && match($0, /:[^ ]*/) {
          n = $1; gsub(",", "", n); name = substr($0, RSTART + 1, RLENGTH - 1)
          library = (index(name, "PMPI_Allreduce" q) == 1 || index(name, "MPI_Allreduce" q) == 1) && $0 ~ /lib(mpich|mpi)\.so/
          for (l in want) {
            if (index(name, "hot_path::" l q) == 1 && n + 0 > loop[l]) loop[l] = n + 0
            if (library && index(name, "hot_path::" l q) && n + 0 > lib[l]) lib[l] = n + 0
          }
        }
        BEGIN { want["counted_direct"]; want["counted_tuning_on"]; want["counted_tuning_off"] }
        END {
          for (l in want) if (!loop[l] || !lib[l]) exit 1
          rest = (loop["counted_direct"] - lib["counted_direct"]) / calls
          off = (loop["counted_tuning_off"] - lib["counted_tuning_off"]) / calls - rest
          on = (loop["counted_tuning_on"] - lib["counted_tuning_on"]) / calls - rest
          printf "| %s | %d | %d | %.1f | %+.1f | %+.1f | %+.1f | %d |\n", c, w, r, lib["counted_direct"] / calls, off, on, on - off, events
        }' "$tmp/annotate") || {
        echo "hot-path-instructions: callgrind collected no counted loop for $case (window $w, rank $rank):" >&2
        cat "$tmp/out" >&2
        exit 1
      }
      echo "$row"
      rank=$((rank + 1))
    done
    grep -E '^hot_path: (counting|no tuning)' "$tmp/out" | sort -u | sed 's/^/    /' >&2
  done
done
echo
echo "library, direct: the library's own allreduce, called directly; tool: what the wrapper adds to it (its loop's instructions other than the library's function, minus the direct loop's), with tuning off (counting only) and on (after the search ended, default kept). Instructions, not time: what an instruction costs depends on the processor; each row is one run (ranks are numbered in the order of their process ids)."
