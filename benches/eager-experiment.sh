#!/usr/bin/env bash
# The thesis' eager-threshold experiment (its Table 5, 3DStencil), reproduced
# with mpit-tuner on the libraries of this machine, in one command.
#
# examples/stencil3d exchanges 32 KiB halo messages (above the default eager
# limits: Open MPI's shared memory 4 KiB, MPICH/UCX about 8 KiB) with
# non-blocking calls around a fixed computation, on 4 ranks, on Open MPI and
# on MPICH (release builds in target/openmpi and target/mpich, MPICC =
# mpicc.<library>, libpreload.so from the same directories). Four runs per
# repetition, interleaved (A B C D A B C D ...):
#
#   A  default         no tool
#   B  tool            the tool with its default policies (policies.toml):
#                      the monitoring baseline, the memory PVARs at the default
#                      limit, and the end-of-run eager-threshold recommendation
#   C  eager           the tool with only the eager policy of the library
#                      (examples/policies/openmpi-eager-64k.toml or
#                      mpich-ucx-rndv-64k.toml): 64 KiB, set before MPI_Init
#   D  eager+defaults  one policy file = the eager policy + policies.toml
#
# It prints one markdown table per library like the thesis' Table 5: overlap
# (stencil3d's overlap_pct: 1 - wait / communication-only time, mean over
# ranks), the time left to wait in MPI_Waitall after the computation (per
# iteration, mean over ranks: what a larger eager limit should shrink),
# runtime of the main loop, and the memory PVARs the library exports
# (from each tool run's summary.json; Open MPI: mpool_hugepage_bytes_allocated
# summed over ranks and the largest unexpected-message queue; MPICH exports no
# PVARs), as median (min-max) over the repetitions. It checks that each
# eager run logged its `setenv` on every rank without error. It fails (exit
# status 1) if a run fails or a variant produced no numbers.
#
# On the benchmark's 2-core machine 4 ranks are oversubscribed, and
# MPICH's ch4 busy-polls, so its 4-rank numbers mostly measure the time
# slices of competing busy ranks; `--ranks 2` gives one rank per core.
#
#   bash benches/eager-experiment.sh              # 7 repetitions, 4 ranks
#   bash benches/eager-experiment.sh --short      # CI: 2 short repetitions (< 90 s)
#   bash benches/eager-experiment.sh --ranks 2 --mpi openmpi --reps 11
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

usage() {
  cat <<'EOF'
usage: benches/eager-experiment.sh [--short] [--reps N] [--ranks N] [--iters N]
                                   [--mpi mpich,openmpi] [--no-build] [--keep DIR]

  --short      CI mode: 2 repetitions of short runs; still fails if a variant
               produced no numbers
  --reps N     repetitions of each variant (default 7; --short 2)
  --ranks N    ranks per job (default 4)
  --iters N    stencil3d iterations (default 5000, or 300 for MPICH when the
               ranks outnumber the cores; --short: 300, or 20)
  --mpi LIST   libraries, comma-separated (default mpich,openmpi)
  --no-build   use what target/<library>/release already holds
  --keep DIR   keep every run's output and logs in DIR (default: a temporary
               directory, removed at the end)
EOF
}

short=0 reps="" ranks=4 iters="" flavors="mpich,openmpi" build=1 keep=""
while (($#)); do
  case "$1" in
    --short) short=1 ;;
    --reps) reps=${2:?--reps needs a number}; shift ;;
    --ranks) ranks=${2:?--ranks needs a number}; shift ;;
    --iters) iters=${2:?--iters needs a number}; shift ;;
    --mpi) flavors=${2:?--mpi needs a list}; shift ;;
    --no-build) build=0 ;;
    --keep) keep=${2:?--keep needs a directory}; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "eager-experiment: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
  shift
done
for n in "${reps:-1}" "$ranks" "${iters:-1}"; do
  [[ $n =~ ^[1-9][0-9]*$ ]] || { echo "eager-experiment: '$n' is not a positive number" >&2; exit 2; }
done
((ranks >= 2)) || { echo "eager-experiment: needs at least 2 ranks" >&2; exit 2; }
IFS=, read -r -a flavor_list <<<"$flavors"
for f in "${flavor_list[@]}"; do
  [[ $f == mpich || $f == openmpi ]] || { echo "eager-experiment: unknown library '$f' (mpich, openmpi)" >&2; exit 2; }
done
: "${reps:=$((short ? 2 : 7))}"
timeout_s=$((short ? 60 : 300))

# The runs must see the libraries' defaults: nothing of ours, no eager
# setting inherited from the caller.
unset LD_PRELOAD UCX_RNDV_THRESH OMPI_MCA_btl_vader_eager_limit
for v in $(compgen -e); do
  [[ $v == MPIT_TUNER* ]] && unset "$v"
done
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_btl_base_warn_component_unused=0

if [[ -n $keep ]]; then
  mkdir -p "$keep"
  work=$(cd "$keep" && pwd)
else
  work=$(mktemp -d "${TMPDIR:-/tmp}/eager-experiment.XXXXXX")
  trap 'rm -rf "$work"' EXIT
fi
results=$work/results.tsv
: >"$results"
failures=0
cores=$(nproc 2>/dev/null || echo 1)

eager_policy() {
  case "$1" in
    openmpi) echo "$root/examples/policies/openmpi-eager-64k.toml" ;;
    mpich) echo "$root/examples/policies/mpich-ucx-rndv-64k.toml" ;;
  esac
}

default_limit() {
  case "$1" in
    openmpi) echo "4096 (btl_vader_eager_limit)" ;;
    mpich) echo "UCX auto (about 8 KiB)" ;;
  esac
}

# summary_value FILE NAME FIELD: a field (mean, max) of one variable of a
# summary.json (pretty-printed, keys sorted: "max" and "mean" come before
# "name" in each variable).
summary_value() {
  awk -v want="$2" -v field="$3" '
    /"variables": \[/ { on = 1 }
    !on { next }
    /^[ \t]*\{/ { mean = ""; max = "" }
    /^[ \t]*"mean": / { v = $2; sub(/,$/, "", v); mean = v }
    /^[ \t]*"max": / { v = $2; sub(/,$/, "", v); max = v }
    /^[ \t]*"name": / {
      n = $2; gsub(/[",]/, "", n)
      if (n == want) { print (field == "mean" ? mean : max); exit }
    }' "$1"
}

# run_one FLAVOR VARIANT REP: one stencil3d job; appends a line to results.
run_one() {
  local flavor=$1 variant=$2 rep=$3
  local bin=$root/target/$flavor/release
  local out=$work/$flavor-$variant-$rep
  local launcher=(timeout -k 5 "$timeout_s" "mpiexec.$flavor" -n "$ranks")
  [[ $flavor == openmpi ]] && launcher+=(--oversubscribe)
  local envs=() policy=""
  case "$variant" in
    default) ;;
    tool) ;;
    eager) policy=$(eager_policy "$flavor") ;;
    eager+defaults)
      policy=$work/eager-plus-defaults-$flavor.toml
      cat "$(eager_policy "$flavor")" "$root/policies.toml" >"$policy" ;;
  esac
  if [[ $variant != default ]]; then
    # No tuning store: no run starts from what an earlier one learned.
    envs=(LD_PRELOAD="$bin/libpreload.so" MPIT_TUNER_DIR="$out.run" MPIT_TUNER_QUIET=1
      MPIT_TUNER_STORE=off)
    [[ -n $policy ]] && envs+=(MPIT_TUNER_POLICY="$policy")
    if [[ $flavor == openmpi ]]; then
      for e in "${envs[@]}"; do launcher+=(-x "${e%%=*}"); done
    fi
  fi
  local status=0
  env "${envs[@]}" "${launcher[@]}" "$bin/stencil3d" "${stencil_args[@]}" \
    >"$out.out" 2>"$out.err" || status=$?
  local line runtime overlap wait mem="" unexpected="" problem=""
  line=$(grep -m1 '^time: ' "$out.out" || true)
  runtime=$(sed -n 's/.*runtime_s=\([0-9.]*\).*/\1/p' <<<"$line")
  overlap=$(sed -n 's/.* overlap_pct=\([0-9.]*\).*/\1/p' <<<"$line")
  wait=$(sed -n 's/.* wait_us=\([0-9.]*\).*/\1/p' <<<"$line")
  if ((status != 0)); then
    problem="exit status $status"
  elif [[ -z $runtime || -z $overlap || -z $wait ]]; then
    problem="no time: line"
  fi
  if [[ -z $problem && $variant != default ]]; then
    local summary=$out.run/summary.json
    if [[ ! -s $summary ]]; then
      problem="no summary.json"
    elif [[ $flavor == openmpi ]]; then
      local m u
      m=$(summary_value "$summary" mpool_hugepage_bytes_allocated mean)
      u=$(summary_value "$summary" 'pml_ob1_unexpected_msgq_length@world:max' max)
      [[ -n $m ]] && mem=$(awk -v m="$m" -v r="$ranks" 'BEGIN { printf "%.1f", m * r / 1024 }')
      unexpected=$u
    fi
    if [[ -z $problem && $variant == eager* ]]; then
      # Every rank set the variable before MPI_Init, without error.
      local r log
      for ((r = 0; r < ranks; r++)); do
        log=$(printf '%s.run/rank-%05d.jsonl' "$out" "$r")
        if ! grep '"type":"setenv"' "$log" 2>/dev/null | grep -q '"error":null'; then
          problem="rank $r logged no successful setenv"
          break
        fi
      done
    fi
  fi
  if [[ -n $problem ]]; then
    echo "eager-experiment: $flavor $variant run $rep: $problem (output in $out.out, $out.err)" >&2
    sed 's/^/    /' "$out.err" | tail -n 5 >&2
    failures=$((failures + 1))
    return
  fi
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$flavor" "$variant" "$rep" "$runtime" "$overlap" \
    "${mem:-n/a}" "${unexpected:-n/a}" "$wait" >>"$results"
}

# stats FLAVOR VARIANT COLUMN: "median (min-max)" of a results column, or
# "n/a" when the library does not export it.
stats() {
  awk -F'\t' -v f="$1" -v v="$2" -v c="$3" '$1 == f && $2 == v { print $c }' "$results" |
    { grep -v '^n/a$' || true; } | sort -g |
    awk -v fmt="$4" '
      { x[NR] = $1 }
      END {
        if (NR == 0) { print "n/a"; exit }
        med = (NR % 2) ? x[(NR + 1) / 2] : (x[NR / 2] + x[NR / 2 + 1]) / 2
        printf fmt " (" fmt "-" fmt ")\n", med, x[1], x[NR]
      }'
}

# median FLAVOR VARIANT COLUMN, minimum FLAVOR VARIANT COLUMN
median() {
  awk -F'\t' -v f="$1" -v v="$2" -v c="$3" '$1 == f && $2 == v { print $c }' "$results" | sort -g |
    awk '{ x[NR] = $1 } END { if (NR) print (NR % 2) ? x[(NR + 1) / 2] : (x[NR / 2] + x[NR / 2 + 1]) / 2 }'
}

minimum() {
  awk -F'\t' -v f="$1" -v v="$2" -v c="$3" '$1 == f && $2 == v { print $c }' "$results" | sort -g | head -n 1
}

variants=(default tool eager eager+defaults)
start=$SECONDS
for flavor in "${flavor_list[@]}"; do
  bin=$root/target/$flavor/release
  if ((build)); then
    echo "eager-experiment: building for $flavor (release, target/$flavor)" >&2
    MPICC=mpicc.$flavor cargo build --release --locked --quiet --target-dir "target/$flavor" \
      -p preload -p stencil3d
  fi
  for f in "$bin/stencil3d" "$bin/libpreload.so"; do
    [[ -e $f ]] || { echo "eager-experiment: $f is missing (run without --no-build)" >&2; exit 1; }
  done
  n=$iters
  if [[ -z $n ]]; then
    # MPICH with more ranks than cores: about 15 ms per iteration here.
    if [[ $flavor == mpich ]] && ((ranks > cores)); then
      n=$((short ? 20 : 300))
    else
      n=$((short ? 300 : 5000))
    fi
  fi
  stencil_args=(--iters "$n" --grid 8 --msg-bytes 32768 --compute-us 100)
  echo "eager-experiment: $flavor, $ranks ranks on $cores cores, stencil3d ${stencil_args[*]}, $reps repetitions of ${variants[*]}" >&2
  for ((rep = 1; rep <= reps; rep++)); do
    for variant in "${variants[@]}"; do
      run_one "$flavor" "$variant" "$rep"
    done
  done
  printf '%s\t%s\n' "$flavor" "${stencil_args[*]}" >>"$work/args.tsv"
done
elapsed=$((SECONDS - start))

# The tables.
label() {
  case "$1" in
    default) echo "Default (no tool)" ;;
    tool) echo "Tool, default policies" ;;
    eager) echo "Eager policy" ;;
    eager+defaults) echo "Eager policy + default policies" ;;
  esac
}
echo
echo "Eager-threshold experiment: stencil3d, $ranks ranks on $cores cores, 32768-byte messages, $reps interleaved repetitions; median (min-max)."
for flavor in "${flavor_list[@]}"; do
  args=$(awk -F'\t' -v f="$flavor" '$1 == f { print $2 }' "$work/args.tsv")
  echo
  echo "### $flavor: stencil3d $args"
  echo
  if [[ $flavor == openmpi ]]; then
    mem_head="mpool_hugepage_bytes_allocated, all ranks (KiB) | unexpected queue, max"
  else
    mem_head="memory PVARs"
  fi
  echo "| Run | Ranks | Message (B) | Eager limit (B) | Overlap (%) | Wait (us/iteration) | Runtime (s) | $mem_head |"
  if [[ $flavor == openmpi ]]; then
    echo "|---|---|---|---|---|---|---|---|---|"
  else
    echo "|---|---|---|---|---|---|---|---|"
  fi
  for variant in "${variants[@]}"; do
    limit=$(default_limit "$flavor")
    [[ $variant == eager* ]] && limit=65536
    row="| $(label "$variant") | $ranks | 32768 | $limit | $(stats "$flavor" "$variant" 5 %.1f) | $(stats "$flavor" "$variant" 8 %.1f) | $(stats "$flavor" "$variant" 4 %.3f)"
    if [[ $flavor == openmpi ]]; then
      if [[ $variant == default ]]; then
        row+=" | n/a (no tool) | n/a (no tool) |"
      else
        row+=" | $(stats "$flavor" "$variant" 6 %.1f) | $(stats "$flavor" "$variant" 7 %.0f) |"
      fi
    else
      row+=" | n/a (MPICH exports no PVARs) |"
    fi
    echo "$row"
  done
  echo
  for variant in tool eager eager+defaults; do
    line="$(label "$variant") against the default:"
    for what in "runtime:4" "wait:8"; do
      c=${what#*:}
      b=$(median "$flavor" default "$c") m=$(median "$flavor" "$variant" "$c")
      bmin=$(minimum "$flavor" default "$c") mmin=$(minimum "$flavor" "$variant" "$c")
      [[ -n $b && -n $m && -n $bmin && -n $mmin ]] || continue
      line+=$(awk -v b="$b" -v m="$m" -v x="$bmin" -v y="$mmin" -v w="${what%%:*}" 'BEGIN {
        printf " %s median %s, fastest run %s;", w,
          (b > 0 ? sprintf("%+.1f%%", (m - b) / b * 100) : "n/a"),
          (x > 0 ? sprintf("%+.1f%%", (y - x) / x * 100) : "n/a") }')
    done
    echo "${line%;}"
    echo
  done
  rec=""
  for ((rep = 1; rep <= reps; rep++)); do
    s=$work/$flavor-tool-$rep.run/summary.json
    if [[ -s $s ]] && grep -q '"id": "eager-threshold"' "$s"; then
      # Keys are sorted: "setting" follows "id" in the same recommendation.
      rec=$(awk '/"id": "eager-threshold"/ { on = 1; next }
        on && /"setting": / { sub(/^[ \t]*"setting": "/, ""); sub(/",?$/, ""); print; exit }' "$s")
      break
    fi
  done
  if [[ -n $rec ]]; then
    echo "Recommendation of the tool run (summary.json, eager-threshold): $rec"
  else
    echo "No eager-threshold recommendation in the tool runs' summary.json."
  fi
done
echo
echo "($((${#variants[@]} * reps * ${#flavor_list[@]})) runs in ${elapsed} s; $failures failed)"

# Every variant must have produced numbers.
missing=0
for flavor in "${flavor_list[@]}"; do
  for variant in "${variants[@]}"; do
    if ! awk -F'\t' -v f="$flavor" -v v="$variant" '$1 == f && $2 == v { found = 1 } END { exit !found }' "$results"; then
      echo "eager-experiment: $flavor $variant produced no numbers" >&2
      missing=1
    fi
  done
done
if ((failures || missing)); then
  exit 1
fi
