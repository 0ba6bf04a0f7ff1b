#!/usr/bin/env bash
# A local Conduit cluster in the foreground (`make cluster`): one etcd, three conduit-broker in
# cluster mode (ids 1..3), the coordinator and the queue, all on free 127.0.0.1 ports. Prints
# every address, then waits; Ctrl-C (SIGINT) or SIGTERM stops every process it started, as does
# a failed start. A process that exits later (a broker you killed) is reported; the rest run on.
#
# Usage: run-cluster.sh [BIN_DIR]    (default <repo>/build/bin; `make cluster` builds it first)
# Env:   CLUSTER_DIR   state, logs, port files and `env` (the addresses); default <repo>/.cluster.
#                      Each start begins fresh: the previous run's directory is removed (only if
#                      this script made it and nothing it started still runs).
#        CLUSTER_NAME  --cluster-name (default local): keys under /conduit/<name>/ in etcd
#        BROKERS       how many brokers (default 3)
#        ETCD_BIN      etcd (default /usr/bin/etcd, package etcd-server)
#
# The children run in sessions of their own (setsid), so a terminal's Ctrl-C reaches only this
# script, which stops them in order: coordinator and queue, brokers (their leases revoked while
# etcd is still up), etcd last; SIGTERM, then SIGKILL after STOP_TIMEOUT_S.
set -uo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$root/build/bin}
dir=${CLUSTER_DIR:-$root/.cluster}
cluster=${CLUSTER_NAME:-local}
brokers=${BROKERS:-3}
etcd_bin=${ETCD_BIN:-/usr/bin/etcd}
readonly START_TIMEOUT_S=30 STOP_TIMEOUT_S=15 MARKER=.conduit-cluster

die() { echo "run-cluster: $*" >&2; exit 1; }

for b in conduit-broker conduit-coordinator conduit-queue conduit; do
  [ -x "$bin/$b" ] || die "no $bin/$b: build first (make cluster does)"
done
[ -x "$etcd_bin" ] || die "no etcd at $etcd_bin (apt-get install etcd-server, or make deps)"
[[ "$brokers" =~ ^[1-9][0-9]?$ ]] || die "BROKERS=$brokers is not a count from 1 to 99"
command -v curl >/dev/null || die "curl is missing (make deps)"
bin=$(cd "$bin" && pwd)

if [ -e "$dir" ]; then
  [ -f "$dir/$MARKER" ] || die "$dir exists and was not made by run-cluster.sh; set CLUSTER_DIR"
  dir=$(cd "$dir" && pwd)
  while read -r pid; do
    if tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF "$dir/"; then
      die "a cluster from $dir still runs (pid $pid); stop it first"
    fi
  done < <(cat "$dir/pids" 2>/dev/null)
  rm -rf "$dir"
fi
mkdir -p "$dir/logs" || die "cannot create $dir"
touch "$dir/$MARKER"
dir=$(cd "$dir" && pwd)

names=() pids=() cmds=()  # started children, in start order

alive() {
  local state
  state=$(awk '/^State:/ {print $2}' "/proc/$1/status" 2>/dev/null) || return 1
  [ -n "$state" ] && [ "$state" != Z ] && [ "$state" != X ]
}

# shellcheck disable=SC2317  # stop and cleanup run from the EXIT trap
# stop PID...: SIGTERM, up to STOP_TIMEOUT_S for all of them, SIGKILL for the rest; reaps them.
stop() {
  local pid waited=0
  for pid in "$@"; do kill -TERM "$pid" 2>/dev/null; done
  for pid in "$@"; do
    while alive "$pid" && [ "$waited" -lt $((STOP_TIMEOUT_S * 10)) ]; do
      sleep 0.1
      waited=$((waited + 1))
    done
    if alive "$pid"; then
      echo "run-cluster: pid $pid did not stop ${STOP_TIMEOUT_S}s after SIGTERM; SIGKILL" >&2
      kill -KILL "$pid" 2>/dev/null
    fi
    wait "$pid" 2>/dev/null
  done
}

# shellcheck disable=SC2317
cleanup() {
  local rc=$? i pid cmdline first=() broker_pids=() last=()
  trap - EXIT INT TERM
  [ ${#pids[@]} -eq 0 ] && exit "$rc"
  echo "stopping ${names[*]}"
  for i in "${!pids[@]}"; do
    case ${names[$i]} in
      etcd) last+=("${pids[$i]}") ;;
      broker-*) broker_pids+=("${pids[$i]}") ;;
      *) first+=("${pids[$i]}") ;;
    esac
  done
  # Processes started again by hand with the printed command (their pids appended to the file).
  while read -r pid; do
    [[ " ${pids[*]} " == *" $pid "* ]] && continue
    cmdline=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) || continue
    [[ "$cmdline" == *"$dir/"* ]] || continue
    case $cmdline in
      */etcd\ *) last+=("$pid") ;;
      *conduit-broker*) broker_pids+=("$pid") ;;
      *) first+=("$pid") ;;
    esac
  done < <(cat "$dir/pids" 2>/dev/null)
  [ ${#first[@]} -gt 0 ] && stop "${first[@]}"
  [ ${#broker_pids[@]} -gt 0 ] && stop "${broker_pids[@]}"
  [ ${#last[@]} -gt 0 ] && stop "${last[@]}"
  echo "stopped; logs in $dir/logs"
  exit "$rc"
}
trap cleanup EXIT
# A stop asked for (Ctrl-C, SIGTERM) is a success: exit 0 once everything has stopped.
trap 'exit 0' INT TERM

# spawn NAME CMD...: starts CMD in a session of its own, output to logs/NAME.log.
spawn() {
  local name=$1
  shift
  setsid "$@" >"$dir/logs/$name.log" 2>&1 </dev/null &
  names+=("$name")
  pids+=($!)
  cmds+=("$(printf '%q ' "$@")")
  echo "$!" >>"$dir/pids"
}

fail_start() {
  echo "run-cluster: $1 did not start: $2; the end of $dir/logs/$1.log:" >&2
  tail -n 20 "$dir/logs/$1.log" >&2
  exit 1
}

# await_port NAME: waits for the port file the server writes once serving; prints the port.
await_port() {
  local name=$1 pid=${pids[-1]} i
  for ((i = 0; i < START_TIMEOUT_S * 10; i++)); do
    [ -s "$dir/$name.port" ] && { tr -d '[:space:]' <"$dir/$name.port"; return 0; }
    alive "$pid" || fail_start "$name" "it exited"
    sleep 0.1
  done
  fail_start "$name" "no port file after ${START_TIMEOUT_S}s"
}

# Two distinct free loopback ports for etcd, both sockets held until both are known. Another
# process may take one before etcd binds it: etcd then exits and is started again on new ports.
free_ports() {
  python3 -c '
import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(*(x.getsockname()[1] for x in s))'
}

start_etcd() {
  local attempt i client peer
  for attempt in 1 2 3; do
    read -r client peer < <(free_ports) || die "no free 127.0.0.1 ports"
    rm -rf "$dir/etcd"
    spawn etcd "$etcd_bin" --name=conduit-local --data-dir="$dir/etcd" \
      --listen-client-urls="http://127.0.0.1:$client" --advertise-client-urls="http://127.0.0.1:$client" \
      --listen-peer-urls="http://127.0.0.1:$peer" --initial-advertise-peer-urls="http://127.0.0.1:$peer" \
      --initial-cluster="conduit-local=http://127.0.0.1:$peer" --initial-cluster-state=new
    for ((i = 0; i < START_TIMEOUT_S * 10; i++)); do
      if curl -sf --max-time 1 "http://127.0.0.1:$client/health" 2>/dev/null | grep -q '"health":"true"'; then
        etcd_endpoint=127.0.0.1:$client
        return 0
      fi
      alive "${pids[-1]}" || break
      sleep 0.1
    done
    alive "${pids[-1]}" && fail_start etcd "not healthy after ${START_TIMEOUT_S}s"
    wait "${pids[-1]}" 2>/dev/null
    unset 'pids[-1]' 'names[-1]' 'cmds[-1]'
    echo "run-cluster: etcd exited at start (attempt $attempt; a port taken?)" >&2
  done
  fail_start etcd "it exited three times"
}

declare -A addr=() metrics=()  # by child name: gRPC host:port, /metrics host:port

# serve NAME BINARY FLAG...: starts a Conduit server on free ports and waits until it serves
# (the port file is written once it serves; a broker has joined the cluster by then).
serve() {
  local name=$1 binary=$2 port
  shift 2
  mkdir -p "$dir/$name"
  spawn "$name" "$bin/$binary" --data-dir "$dir/$name" --listen 127.0.0.1:0 \
    --port-file "$dir/$name.port" --metrics-listen 127.0.0.1:0 "$@"
  port=$(await_port "$name") || exit 1
  addr[$name]=127.0.0.1:$port
  # The /metrics address the server logs at start: "metrics on http://HOST:PORT/metrics".
  metrics[$name]=$(sed -n 's#.*metrics on http://\([^/]*\)/metrics.*#\1#p' "$dir/logs/$name.log" | head -n 1)
}

echo "starting a Conduit cluster '$cluster' ($brokers brokers; state in $dir)"
start_etcd
brokers_csv=""
for ((id = 1; id <= brokers; id++)); do
  serve "broker-$id" conduit-broker --etcd-endpoints "$etcd_endpoint" --broker-id "$id" \
    --cluster-name "$cluster"
  brokers_csv+=${brokers_csv:+,}${addr[broker-$id]}
done
# The coordinator asks the brokers for offsets and append times (the next in the list when one is
# down). The queue's bridges read from every broker (routed by metadata) and join groups at the
# coordinator.
serve coordinator conduit-coordinator --broker-address "$brokers_csv"
serve queue conduit-queue --bridge-bootstrap "$brokers_csv" \
  --bridge-coordinator "${addr[coordinator]}"

# The names the CLI reads: `set -a; . .cluster/env; set +a` points `conduit` at this cluster.
cat >"$dir/env" <<EOF
CONDUIT_ADDR=$brokers_csv
CONDUIT_COORDINATOR=${addr[coordinator]}
CONDUIT_QUEUE_ADDR=${addr[queue]}
ETCD_ENDPOINT=$etcd_endpoint
EOF
echo
echo "Conduit cluster '$cluster' is up; Ctrl-C stops it (logs: $dir/logs, addresses: $dir/env)"
printf '  %-12s %s\n' etcd "$etcd_endpoint"
for name in "${names[@]:1}"; do
  printf '  %-12s %-21s metrics http://%s/metrics\n' "$name" "${addr[$name]}" "${metrics[$name]}"
done
cat <<EOF
The CLI takes every broker (--addr or CONDUIT_ADDR); groups and queues have servers of their own
here (--coordinator / CONDUIT_COORDINATOR, --queue-addr / CONDUIT_QUEUE_ADDR):
  $bin/conduit --addr $brokers_csv cluster describe
  $bin/conduit --addr $brokers_csv topic create orders --partitions 6
  $bin/conduit --addr $brokers_csv --coordinator ${addr[coordinator]} consume orders --group billing
  $bin/conduit --queue-addr ${addr[queue]} queue create emails
Or load them all: set -a; . $dir/env; set +a
  ETCDCTL_API=3 etcdctl --endpoints $etcd_endpoint get --prefix /conduit/$cluster/ --keys-only
EOF

# Until a signal (the traps). A child that exits is reported and the others keep running (kill a
# broker to watch its partitions fail over to the others); with none left, this exits 1.
running=("${pids[@]}")
while [ ${#running[@]} -gt 0 ]; do
  exited=""
  wait -n -p exited "${running[@]}"
  rc=$?
  [ -z "$exited" ] && continue
  for i in "${!pids[@]}"; do
    [ "${pids[$i]}" = "$exited" ] && name=${names[$i]} && cmd=${cmds[$i]}
  done
  # Again on the same ports, so that .cluster/env and the other servers' flags stay right.
  if [ "$name" != etcd ]; then
    cmd=${cmd/--listen 127.0.0.1:0 /--listen ${addr[$name]} }
    cmd=${cmd/--metrics-listen 127.0.0.1:0 /--metrics-listen ${metrics[$name]} }
  fi
  echo "run-cluster: $name (pid $exited) exited with status $rc; the rest keep running" >&2
  echo "  to start it again on the same ports (Ctrl-C here stops it too):" >&2
  echo "  (setsid $cmd>>$dir/logs/$name.log 2>&1 </dev/null & echo \$! >>$dir/pids)" >&2
  for i in "${!running[@]}"; do
    [ "${running[$i]}" = "$exited" ] && unset 'running[i]'
  done
  running=("${running[@]}")
done
echo "run-cluster: every process has exited" >&2
exit 1
