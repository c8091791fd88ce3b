#!/usr/bin/env bash
# An emulated cluster on this machine: N nodes, each a network namespace
# and a UTS namespace (its own host name, node1 ... nodeN), joined by veth
# pairs to a bridge that lives in a namespace of the cluster's own, plus a
# head node (host name `head`) on the same bridge, from which launchers
# start jobs. The one definition that tests (crates/mpit-testkit/src/cluster.rs),
# benchmarks and scripts/demo.sh use. Run `bash scripts/cluster.sh --help`.
set -euo pipefail

usage() {
  cat <<'EOF'
Usage: cluster.sh [--name NAME] COMMAND ...

An emulated cluster on this machine, for running MPI jobs over several
nodes: each node is a network namespace with a UTS namespace of its own
(host name node1 ... nodeN), joined by a veth pair to a bridge; a head node
(host name `head`) on the same bridge runs the launchers. Needs root, `ip`
(iproute2) and `unshare` (util-linux).

Commands:
  up N [--link RATE] [--share-boot-id] [--slurm] [--owner PID]
        Creates N nodes (1 to 250), replacing a cluster of the same name.
        --link shapes every node's link with tbf on both ends of its veth
        pair, so both ways (1gbit, 100mbit; a burst of 4 ms at that rate).
        Each node shows a boot id of its own, since UCX tells machines apart
        by it (with the machine's on every node, ranks on two nodes would
        share memory);
        --share-boot-id keeps the machine's on every node: UCX then moves
        data between nodes through shared memory, and no data crosses the
        links (Debian's MPICH 4.0.2 on UCX 1.13 hangs now and then in
        MPI_Finalize when its ranks talk over TCP: openucx/ucx#8738).
        --slurm: a Slurm cluster too (Debian's slurmctld, slurmd, munge):
        munged and slurmctld on the head, one slurmd on each node (its
        NodeName its host name), a generated slurm.conf; returns once
        `sinfo` shows N idle nodes. Commands entered on a node or the head
        find it (SLURM_CONF), so `exec head -- srun -N 2 ...` and `sbatch`
        work there. Exit 3 when Slurm or munge is not installed.
        --owner: the cluster belongs to the process PID; `down --stale` (run
        by every `up`) removes it once that process is gone. Prints the
        cluster's settings (as `env` does).
  down  Removes the cluster: kills what still runs inside its namespaces,
        deletes them, removes its state directory. Safe to run again.
  down --stale
        Removes every cluster whose owner process is gone.
  reap  Waits until its standard input closes, then runs `down`: a test
        process keeps the pipe open while it runs (even a crash closes it).
  exec NODE -- CMD [ARG...]
        Runs CMD inside NODE (`head`, `node1`, ...) with this environment.
  args LAUNCHER [--per-node K] [--nodes N]
        Prints the options, one per line, that make LAUNCHER (an mpiexec
        of MPICH's Hydra, Open MPI 4.1 or Open MPI 5) start K ranks (1 by
        default) on each of N nodes (all by default) of the cluster.
        Run LAUNCHER from the head: `exec head -- LAUNCHER OPTIONS... -n X APP`.
  launch [--per-node K] [--nodes N] [--forward PATTERNS] -- LAUNCHER ARG...
        Runs LAUNCHER on the head with those options, and for Open MPI
        `-x VAR` for each variable of the environment that matches one of
        PATTERNS (default 'LD_PRELOAD MPIT_*'; Hydra forwards every
        variable, Open MPI only OMPI_* and what -x names), then ARG...
  env   Prints the settings of the cluster as KEY=VALUE lines:
        MPIT_CLUSTER_NAME, _DIR, _NODES, _HOSTS, _SUBNET, _AGENT, _IFACE,
        _LINK, _BOOT_ID, _SLURM (the head's slurm.conf, or `no`).
  status
        Says whether the cluster is up, and lists its namespaces.

The launcher agent (_AGENT, a stand-in for ssh: `AGENT [ssh options] HOST
COMMAND`) runs COMMAND on the node HOST names (host name or address) with
a clean environment, as ssh would: a launcher must forward what the ranks
need. Host names resolve inside the cluster from a hosts file bind-mounted
over /etc/hosts in the nodes' own mount namespaces: the machine's
/etc/hosts is never changed.

What it touches: only namespaces it creates (NAME-net holding the bridge,
NAME-head, NAME-node1 ...) and the interfaces inside them; the addresses
(10.77.0.0/24: nodes .1 to .N, head .254) exist only inside those
namespaces, which have no route out. Every cluster has its own namespaces,
so two clusters of other names never share a link. The machine's own
interfaces, routes and files are not changed; the state lives in
/run/mpit-cluster/NAME. The name is `mpitc` unless --name or MPIT_CLUSTER
says otherwise.

Slurm (--slurm): the daemons run inside the cluster's namespaces (so
`down` ends them with the rest) as root, with their state, spool, logs
and munge's key and socket in the state directory; each node has its own
slurm.conf directory (the same slurm.conf; its own mpi.conf, since the
pmix plugin's per-step directories would collide in the /tmp every node
shares). Inside a node /sys is the namespace's own, without the
machine's cgroup mounts, and slurmd 22.05 starts its cgroup plugin
whatever the configuration: each slurmd gets an empty tmpfs there, in its
own mount namespace (proctrack/pgid and task/none: nothing is confined).
A stand-in for a site's Prolog and TaskProlog records, per node and job,
the shared objects each loaded and its LD_PRELOAD
($DIR/slurm/NODE/prolog-JOB.maps, task-prolog-JOB.maps).

Exit status: 0 done; 1 failed (says what); 2 bad usage; 3 this machine
cannot make the cluster (not root, no `ip`, no `unshare`, no namespaces,
veth or bridge in the kernel; with --slurm, no Slurm or munge): it says
why.
EOF
}

die() { echo "cluster.sh: $*" >&2; exit 1; }
cannot() { echo "cluster.sh: cannot make an emulated cluster here: $*" >&2; exit 3; }
usage_error() { echo "cluster.sh: $*" >&2; echo "Try: bash scripts/cluster.sh --help" >&2; exit 2; }

name="${MPIT_CLUSTER:-mpitc}"
if [ "${1:-}" = --name ]; then
  [ $# -ge 2 ] || usage_error "--name needs a value"
  name="$2"
  shift 2
fi
case "$name" in
  *[!A-Za-z0-9_-]* | "") usage_error "the name may hold letters, digits, - and _ only: $name" ;;
esac
root=/run/mpit-cluster
dir="$root/$name"
prefix=10.77.0
subnet="$prefix.0/24"
head_addr="$prefix.254"

# The namespaces of a cluster, by name: its bridge's, the head's, the nodes'.
ns_of() { echo "$1-$2"; }
# The namespaces of cluster $1 that exist now.
namespaces_of() {
  ip netns list 2>/dev/null | awk '{print $1}' |
    grep -E "^$1-(net|head|node[0-9]+)\$" || true
}

# Kills what runs inside the namespaces of cluster $1 (processes the
# cluster's launchers started), then deletes the namespaces and the state.
down_cluster() {
  local c="$1" ns pids
  for ns in $(namespaces_of "$c"); do
    pids="$(ip netns pids "$ns" 2>/dev/null || true)"
    if [ -n "$pids" ]; then
      # shellcheck disable=SC2086
      kill -KILL $pids 2>/dev/null || true
    fi
    ip netns delete "$ns" 2>/dev/null || true
  done
  rm -rf "${root:?}/$c"
}

# Whether the owner recorded for cluster $1 is gone (pid and start time).
owner_gone() {
  local file="$root/$1/owner" pid start now
  [ -f "$file" ] || return 1
  read -r pid start <"$file" || return 0
  [ -r "/proc/$pid/stat" ] || return 0
  now="$(awk '{print $22}' "/proc/$pid/stat" 2>/dev/null || true)"
  [ "$now" != "$start" ]
}

down_stale() {
  local d c
  [ -d "$root" ] || return 0
  for d in "$root"/*/; do
    [ -d "$d" ] || continue
    c="$(basename "$d")"
    if owner_gone "$c"; then
      echo "cluster.sh: removing cluster $c: its owner process is gone" >&2
      down_cluster "$c"
    fi
  done
}

# What this machine lacks for a cluster, if anything (exit 3).
preflight() {
  [ "$(id -u)" = 0 ] || cannot "network namespaces need root"
  command -v ip >/dev/null 2>&1 || cannot "\`ip\` (iproute2) is not installed"
  command -v unshare >/dev/null 2>&1 || cannot "\`unshare\` (util-linux) is not installed"
  command -v mount >/dev/null 2>&1 || cannot "\`mount\` is not installed"
  unshare --uts true 2>/dev/null || cannot "\`unshare --uts\` fails: no UTS namespaces"
}

# `ip -n NS ARGS`, failing with what ip said.
ipn() {
  local ns="$1"; shift
  local out
  out="$(ip -n "$ns" "$@" 2>&1)" || die "\`ip -n $ns $*\` failed: $out"
}

print_env() {
  [ -f "$dir/env" ] || die "cluster $name is not up (bash scripts/cluster.sh --name $name up N)"
  cat "$dir/env"
}

# Waits until every port of the bridge forwards (no sleep as a signal:
# the state is asked every 50 ms, for 10 s at most).
wait_forwarding() {
  local want="$1" n
  for _ in $(seq 200); do
    n="$(ip -n "$(ns_of "$name" net)" link show master br0 2>/dev/null | grep -c 'state UP' || true)"
    if [ "$n" -ge "$want" ] && ! ip -n "$(ns_of "$name" net)" -d link show master br0 2>/dev/null |
      grep -Eq 'state (listening|learning|blocking|disabled)'; then
      return 0
    fi
    sleep 0.05
  done
  die "the bridge's ports did not come up within 10 s: $(ip -n "$(ns_of "$name" net)" -br link 2>&1)"
}

# tbf on one interface: RATE, a burst of 4 ms at that rate (at least 32 KiB).
shape() {
  local ns="$1" dev="$2" rate="$3" bits burst out
  bits="$(rate_bits "$rate")" || die "--link $rate: not a rate (such as 1gbit, 100mbit)"
  burst=$((bits / 8 / 250))
  [ "$burst" -ge 32768 ] || burst=32768
  out="$(ip netns exec "$ns" tc qdisc replace dev "$dev" root tbf rate "$rate" burst "$burst" latency 50ms 2>&1)" ||
    die "shaping $dev in $ns with tbf failed (is sch_tbf in the kernel?): $out"
}

rate_bits() {
  local r="$1" n unit
  n="${r%%[a-zA-Z]*}"
  unit="${r#"$n"}"
  [[ "$n" =~ ^[0-9]+$ ]] || return 1
  case "$unit" in
    gbit) echo $((n * 1000000000)) ;;
    mbit) echo $((n * 1000000)) ;;
    kbit) echo $((n * 1000)) ;;
    bit) echo "$n" ;;
    *) return 1 ;;
  esac
}

up() {
  local nodes="" link="" owner="" share_boot_id="" slurm=""
  while [ $# -gt 0 ]; do
    case "$1" in
      --share-boot-id) share_boot_id=1; shift ;;
      --slurm) slurm=1; shift ;;
      --link) [ $# -ge 2 ] || usage_error "--link needs a rate"; link="$2"; shift 2 ;;
      --owner) [ $# -ge 2 ] || usage_error "--owner needs a pid"; owner="$2"; shift 2 ;;
      -*) usage_error "up: unknown option $1" ;;
      *) [ -z "$nodes" ] || usage_error "up: one node count"; nodes="$1"; shift ;;
    esac
  done
  [[ "$nodes" =~ ^[0-9]+$ ]] && [ "$nodes" -ge 1 ] && [ "$nodes" -le 250 ] ||
    usage_error "up N: N is a node count from 1 to 250"
  if [ -n "$link" ]; then rate_bits "$link" >/dev/null || usage_error "--link $link: not a rate (such as 1gbit, 100mbit)"; fi
  if [ -n "$owner" ]; then
    [ -r "/proc/$owner/stat" ] || usage_error "--owner $owner: no such process"
  fi
  preflight
  [ -z "$slurm" ] || slurm_preflight
  down_stale
  down_cluster "$name"
  mkdir -p "$dir"
  chmod 755 "$root" "$dir"
  # The owner first: a crash from here on leaves a cluster `down --stale`
  # removes.
  if [ -n "$owner" ]; then
    echo "$owner $(awk '{print $22}' "/proc/$owner/stat")" >"$dir/owner"
  fi
  local net head
  net="$(ns_of "$name" net)"
  head="$(ns_of "$name" head)"
  ip netns add "$net" 2>/dev/null || { down_cluster "$name"; cannot "\`ip netns add\` fails (no network namespaces?)"; }
  ipn "$net" link set lo up
  ip -n "$net" link add br0 type bridge forward_delay 0 stp_state 0 2>/dev/null ||
    { down_cluster "$name"; cannot "the kernel cannot make a bridge"; }
  ipn "$net" link set br0 up
  {
    echo "127.0.0.1 localhost"
    echo "$head_addr head"
    for i in $(seq "$nodes"); do echo "$prefix.$i node$i"; done
  } >"$dir/hosts"
  local i node ns addr
  for i in head $(seq "$nodes"); do
    if [ "$i" = head ]; then node=head; addr="$head_addr"; else node="node$i"; addr="$prefix.$i"; fi
    [ -n "$share_boot_id" ] || cat /proc/sys/kernel/random/uuid >"$dir/boot_id-$node"
    ns="$(ns_of "$name" "$node")"
    ip netns add "$ns" 2>/dev/null || die "\`ip netns add $ns\` failed"
    ipn "$ns" link set lo up
    ip -n "$net" link add "v-$node" type veth peer name eth0 netns "$ns" 2>/dev/null ||
      { down_cluster "$name"; cannot "the kernel cannot make a veth pair"; }
    ipn "$net" link set "v-$node" master br0
    ipn "$net" link set "v-$node" up
    ipn "$ns" addr add "$addr/24" dev eth0
    ipn "$ns" link set eth0 up
    if [ -n "$link" ]; then
      shape "$net" "v-$node" "$link"
      shape "$ns" eth0 "$link"
    fi
  done
  wait_forwarding $((nodes + 1))
  write_helpers "$nodes" "$link" "$share_boot_id"
  if [ -n "$slurm" ]; then
    slurm_up "$nodes"
    sed -i "s|^MPIT_CLUSTER_SLURM=.*|MPIT_CLUSTER_SLURM=$dir/slurm/etc-head/slurm.conf|" "$dir/env"
  fi
  print_env
}

# What --slurm needs that this machine lacks, if anything (exit 3).
slurm_preflight() {
  local tool
  for tool in munged mungekey slurmctld slurmd sinfo srun sbatch; do
    command -v "$tool" >/dev/null 2>&1 ||
      cannot "--slurm: \`$tool\` is not installed (scripts/setup.sh installs slurmctld, slurmd, slurm-client and munge)"
  done
}

# Fails the `up` after removing what it made, with the end of LOG.
slurm_fail() {
  local log="$1" tail_text=""
  shift
  [ ! -s "$log" ] || tail_text="$(tail -n 5 "$log")"
  down_cluster "$name"
  die "$*${tail_text:+; the end of $log:
$tail_text}"
}

# munge, slurmctld on the head and one slurmd per node, inside the
# cluster's namespaces; waits until sinfo shows every node idle.
slurm_up() {
  local nodes="$1" s="$dir/slurm" node i state="" script
  mkdir -p "$s/munge" "$s/ctld"
  chmod 700 "$s/munge"
  mungekey -c -k "$s/munge/munge.key" >/dev/null 2>&1 ||
    slurm_fail /dev/null "mungekey could not create a key in $s/munge"
  # --force: munged refuses to run as root without it (every daemon of
  # this cluster is root's).
  "$dir/enter" head munged --force --socket="$s/munge/socket" --key-file="$s/munge/munge.key" \
    --log-file="$s/munge/munged.log" --pid-file="$s/munge/munged.pid" \
    --seed-file="$s/munge/munged.seed" ||
    slurm_fail "$s/munge/munged.log" "munged did not start"
  {
    echo "# Generated by scripts/cluster.sh up --slurm for the emulated cluster $name."
    echo "ClusterName=$name"
    echo "SlurmctldHost=head($head_addr)"
    echo "SlurmUser=root"
    echo "SlurmdUser=root"
    echo "AuthType=auth/munge"
    echo "CredType=cred/munge"
    echo "AuthInfo=socket=$s/munge/socket"
    echo "StateSaveLocation=$s/ctld"
    echo "SlurmctldPidFile=$s/ctld/slurmctld.pid"
    echo "SlurmctldLogFile=$s/ctld/slurmctld.log"
    echo "SlurmdSpoolDir=$s/%n/spool"
    echo "SlurmdPidFile=$s/%n/slurmd.pid"
    echo "SlurmdLogFile=$s/%n/slurmd.log"
    echo "Prolog=$s/prolog"
    echo "TaskProlog=$s/task-prolog"
    echo "ProctrackType=proctrack/pgid"
    echo "TaskPlugin=task/none"
    echo "JobAcctGatherType=jobacct_gather/none"
    echo "AccountingStorageType=accounting_storage/none"
    echo "JobCompType=jobcomp/none"
    echo "SelectType=select/cons_tres"
    echo "SelectTypeParameters=CR_Core"
    echo "SchedulerType=sched/backfill"
    echo "MpiDefault=none"
    echo "ReturnToService=2"
    # The nodes share this machine's cores: each says 4 CPUs whatever the
    # machine has, so what a job may ask does not depend on it.
    echo "SlurmdParameters=config_overrides"
    for i in $(seq "$nodes"); do
      echo "NodeName=node$i NodeAddr=$prefix.$i CPUs=4 State=UNKNOWN"
    done
    echo "PartitionName=all Nodes=ALL Default=YES MaxTime=INFINITE State=UP"
  } >"$s/slurm.conf"
  for script in prolog task-prolog; do
    {
      echo '#!/bin/sh'
      echo "# A stand-in for a site's $script (scripts/cluster.sh up --slurm):"
      echo '# records the shared objects this shell loaded, and its LD_PRELOAD.'
      echo "out=\"$s/\$(hostname)/$script-\${SLURM_JOB_ID:-none}.maps\""
      echo '{ echo "LD_PRELOAD=${LD_PRELOAD:-}"; awk '"'"'$6 ~ /^\// { print $6 }'"'"' /proc/$$/maps | sort -u; } >>"$out"'
      echo 'exit 0'
    } >"$s/$script"
    chmod 755 "$s/$script"
  done
  for node in head $(seq -f 'node%g' 1 "$nodes"); do
    mkdir -p "$s/$node/spool" "$s/$node/pmix" "$s/etc-$node"
    cp "$s/slurm.conf" "$s/etc-$node/slurm.conf"
    printf 'CgroupPlugin=cgroup/v1\nCgroupAutomount=yes\n' >"$s/etc-$node/cgroup.conf"
    echo "PMIxCliTmpDirBase=$s/$node/pmix" >"$s/etc-$node/mpi.conf"
  done
  "$dir/enter" head slurmctld || slurm_fail "$s/ctld/slurmctld.log" "slurmctld did not start"
  for i in $(seq "$nodes"); do
    "$dir/enter" "node$i" sh -c 'mount -t tmpfs mpit-cgroup /sys/fs/cgroup && exec slurmd' ||
      slurm_fail "$s/node$i/slurmd.log" "slurmd did not start on node$i"
  done
  # Until every node is idle (asked every 100 ms, 30 s at most).
  for _ in $(seq 300); do
    state="$("$dir/enter" head sinfo -h -N -o '%N %t' 2>/dev/null || true)"
    if [ "$(echo "$state" | grep -c ' idle$')" -eq "$nodes" ]; then
      return 0
    fi
    sleep 0.1
  done
  slurm_fail "$s/ctld/slurmctld.log" "Slurm's nodes were not idle within 30 s (sinfo: ${state:-nothing})"
}

# The state directory's programs: `enter` (a command inside a node) and
# `agent` (the ssh stand-in), with the cluster's name in them.
write_helpers() {
  local nodes="$1" link="$2" share_boot_id="$3" hosts_list
  cat >"$dir/enter" <<EOF
#!/bin/sh
# enter NODE CMD [ARG...]: runs CMD inside NODE of the emulated cluster
# $name (scripts/cluster.sh): its network namespace, a UTS namespace of
# its own named NODE, and, in the mount namespace \`ip netns exec\` makes
# (so only there), the cluster's hosts file over /etc/hosts and, unless the
# cluster shares the machine's, the node's own boot id over the kernel's
# (libraries such as UCX tell machines apart by it: with the machine's,
# ranks on two nodes would share memory).
node="\$1"; shift
grep -q " \$node\\\$" "$dir/hosts" || { echo "cluster $name has no node \$node" >&2; exit 255; }
# With Slurm (up --slurm), the node's slurm.conf is the one its commands
# find.
[ ! -f "$dir/slurm/etc-\$node/slurm.conf" ] || export SLURM_CONF="$dir/slurm/etc-\$node/slurm.conf"
exec ip netns exec "$name-\$node" unshare --uts -- sh -c 'mount --bind "\$0/hosts" /etc/hosts && { [ ! -f "\$0/boot_id-\$1" ] || mount --bind "\$0/boot_id-\$1" /proc/sys/kernel/random/boot_id; } && hostname "\$1" && shift && exec "\$@"' "$dir" "\$node" "\$@"
EOF
  cat >"$dir/agent" <<EOF
#!/bin/sh
# The ssh stand-in of the emulated cluster $name (scripts/cluster.sh):
# agent [ssh options] HOST COMMAND... runs COMMAND with sh on HOST (a node's
# host name or address), with a clean environment, as ssh would.
while [ \$# -gt 0 ]; do
  case "\$1" in
    -[BbcDEeFIiJLlmOopQRSWw]) shift 2 ;;
    --) shift; break ;;
    -*) shift ;;
    *) break ;;
  esac
done
[ \$# -ge 1 ] || { echo "agent: no host given" >&2; exit 255; }
host="\$1"; shift
node="\$(awk -v h="\$host" '\$1 == h || \$2 == h { print \$2; exit }' "$dir/hosts")"
[ -n "\$node" ] || { echo "agent: no host \$host in the emulated cluster $name" >&2; exit 255; }
exec env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \\
  HOME="\${HOME:-/root}" USER="\$(id -un)" LOGNAME="\$(id -un)" SHELL=/bin/sh \\
  "$dir/enter" "\$node" sh -c "\$*"
EOF
  chmod 755 "$dir/enter" "$dir/agent"
  hosts_list="$(seq -s, -f 'node%g' 1 "$nodes")"
  cat >"$dir/env" <<EOF
MPIT_CLUSTER_NAME=$name
MPIT_CLUSTER_DIR=$dir
MPIT_CLUSTER_NODES=$nodes
MPIT_CLUSTER_HOSTS=$hosts_list
MPIT_CLUSTER_SUBNET=$subnet
MPIT_CLUSTER_AGENT=$dir/agent
MPIT_CLUSTER_IFACE=eth0
MPIT_CLUSTER_LINK=${link:-unshaped}
MPIT_CLUSTER_BOOT_ID=$([ -n "$share_boot_id" ] && echo shared || echo per-node)
MPIT_CLUSTER_SLURM=no
EOF
}

exec_on() {
  [ $# -ge 1 ] || usage_error "exec NODE -- CMD"
  local node="$1"; shift
  [ "${1:-}" = -- ] && shift
  [ $# -ge 1 ] || usage_error "exec $node: no command"
  [ -x "$dir/enter" ] || die "cluster $name is not up (bash scripts/cluster.sh --name $name up N)"
  exec "$dir/enter" "$node" "$@"
}

# The launcher's kind, from its --version: hydra, ompi4 (ORTE) or ompi5
# (PRRTE).
launcher_kind() {
  local v
  v="$("$1" --version 2>&1 || true)"
  case "$v" in
    *HYDRA*) echo hydra ;;
    *OpenRTE*) echo ompi4 ;;
    *"Open MPI"* | *PRRTE* | *prterun*) echo ompi5 ;;
    *) die "$1 --version says neither Hydra (MPICH), Open MPI 4 nor 5: ${v%%$'\n'*}" ;;
  esac
}

args() {
  [ $# -ge 1 ] || usage_error "args LAUNCHER [--per-node K] [--nodes N]"
  local launcher="$1" per=1 count="" kind hosts
  shift
  while [ $# -gt 0 ]; do
    case "$1" in
      --per-node) per="${2:-}"; shift 2 ;;
      --nodes) count="${2:-}"; shift 2 ;;
      *) usage_error "args: unknown option $1" ;;
    esac
  done
  [ -f "$dir/env" ] || die "cluster $name is not up (bash scripts/cluster.sh --name $name up N)"
  local nodes
  nodes="$(sed -n 's/^MPIT_CLUSTER_NODES=//p' "$dir/env")"
  count="${count:-$nodes}"
  [[ "$per" =~ ^[0-9]+$ ]] && [ "$per" -ge 1 ] || usage_error "--per-node K: K from 1"
  [[ "$count" =~ ^[0-9]+$ ]] && [ "$count" -ge 1 ] && [ "$count" -le "$nodes" ] ||
    usage_error "--nodes N: N from 1 to $nodes"
  kind="$(launcher_kind "$launcher")"
  hosts="$(for i in $(seq "$count"); do printf 'node%s:%s,' "$i" "$per"; done)"
  hosts="${hosts%,}"
  # K ranks on each node, whatever default mapping the environment sets
  # (PRRTE packs every rank on the first node under `:oversubscribe`).
  # Open MPI binds ranks to cores by default, each node's daemon on its
  # own: the emulated nodes share this machine's cores, so node1's and
  # node2's first ranks were both bound to core 0 and took turns on it,
  # in scheduler time slices (an 8-byte allreduce on 2x1: 4 ms a call
  # bound, 10 us with --bind-to none). Hydra does not bind by default.
  case "$kind" in
    hydra)
      # -iface: the address of eth0, not the host name, in what the
      # proxies and ranks are told.
      printf '%s\n' -launcher ssh -launcher-exec "$dir/agent" -iface eth0 -hosts "$hosts"
      ;;
    ompi4)
      printf '%s\n' --mca plm_rsh_agent "$dir/agent" --mca btl self,vader,tcp \
        --mca btl_tcp_if_include "$subnet" --mca oob_tcp_if_include "$subnet" --host "$hosts" \
        --map-by "ppr:$per:node" --bind-to none
      ;;
    ompi5)
      printf '%s\n' --prtemca plm_ssh_agent "$dir/agent" --mca btl self,sm,tcp \
        --mca btl_tcp_if_include "$subnet" --prtemca oob_tcp_if_include "$subnet" --host "$hosts" \
        --map-by "ppr:$per:node" --bind-to none
      ;;
  esac
}

# Runs LAUNCHER on the head with the cluster's options, then (Open MPI,
# whose launchers forward only what -x names besides OMPI_*) `-x NAME` for
# every variable of the environment that matches one of the patterns,
# then ARG...
launch() {
  local per=1 count="" forward='LD_PRELOAD MPIT_*' opts=()
  while [ $# -gt 0 ]; do
    case "$1" in
      --per-node) per="${2:-}"; shift 2 ;;
      --nodes) count="${2:-}"; shift 2 ;;
      --forward) forward="${2:-}"; shift 2 ;;
      --) shift; break ;;
      *) usage_error "launch: unknown option $1" ;;
    esac
  done
  [ $# -ge 1 ] || usage_error "launch [--per-node K] [--nodes N] [--forward PATTERNS] -- LAUNCHER [ARG...]"
  local launcher="$1" line var pattern
  shift
  while IFS= read -r line; do opts+=("$line"); done < <(args "$launcher" --per-node "$per" ${count:+--nodes "$count"})
  if [ "$(launcher_kind "$launcher")" != hydra ]; then
    while IFS= read -r var; do
      for pattern in $forward; do
        # shellcheck disable=SC2053
        if [[ "$var" == $pattern ]]; then opts+=(-x "$var"); break; fi
      done
    done < <(compgen -e)
  fi
  exec_on head -- "$launcher" "${opts[@]}" "$@"
}

status() {
  local list
  list="$(namespaces_of "$name")"
  if [ -f "$dir/env" ]; then
    echo "cluster $name is up: $(sed -n 's/^MPIT_CLUSTER_HOSTS=//p' "$dir/env") and head, link $(sed -n 's/^MPIT_CLUSTER_LINK=//p' "$dir/env")"
  else
    echo "cluster $name is not up"
  fi
  [ -z "$list" ] || echo "namespaces: $(echo "$list" | tr '\n' ' ')"
  [ -f "$dir/env" ]
}

cmd="${1:-}"
[ $# -gt 0 ] && shift
case "$cmd" in
  -h | --help | help) usage ;;
  up) up "$@" ;;
  down)
    case "${1:-}" in
      --stale) [ "$(id -u)" = 0 ] || cannot "network namespaces need root"; down_stale ;;
      "") [ "$(id -u)" = 0 ] || cannot "network namespaces need root"; down_cluster "$name" ;;
      *) usage_error "down [--stale]" ;;
    esac
    ;;
  reap)
    # Until the owner's end of the pipe closes; then the cluster goes.
    cat >/dev/null || true
    down_cluster "$name"
    ;;
  exec) exec_on "$@" ;;
  args) args "$@" ;;
  launch) launch "$@" ;;
  env) print_env ;;
  status) status ;;
  "") usage_error "no command" ;;
  *) usage_error "unknown command $cmd" ;;
esac
