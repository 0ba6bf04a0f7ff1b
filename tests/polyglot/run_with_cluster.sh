#!/usr/bin/env bash
# Runs one polyglot test command against a fresh Conduit cluster on 127.0.0.1: one etcd and
# three conduit-broker processes in cluster mode (broker ids 1, 2, 3; 2 s etcd leases).
#
# Usage: run_with_cluster.sh <broker-binary> <command...>
#
# Starts etcd (/usr/bin/etcd, or $CONDUIT_ETCD_BIN) on two free loopback ports with test-speed
# raft timing and waits (at most 20 s) for its /health; a first start that exits early (a port
# taken between choosing and binding) is tried again on new ports. Then starts the brokers, each
# on its own data dir with an OS-chosen port, and waits (at most 30 s each) for their port files:
# a broker writes it once it serves and has joined the cluster. It then runs <command...> with
#   CONDUIT_ADDRS           "127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3" (brokers 1, 2, 3 in order)
#   CONDUIT_ETCD_ENDPOINT   "127.0.0.1:PORT"
# in its environment. Each broker has registered by then, but one broker's view may still lag
# the others': a test polls GetMetadata until it lists all three.
#
# Every process started here is stopped when the command ends, fails, or this script is
# interrupted (INT/TERM; SIGTERM, then SIGKILL 10 s later). Should this script itself be killed
# (SIGKILL), etcd and the brokers get SIGKILL and the command SIGTERM (setpriv --pdeathsig);
# only the temporary dir stays then. Otherwise the temporary dir is removed and the command's
# status returned. The brokers' and etcd's logs are printed when the command or the cluster
# fails. Broker log level: $CONDUIT_CLUSTER_LOG_LEVEL (default info).
set -uo pipefail

if [ "$#" -lt 2 ]; then
  echo "usage: $0 <broker-binary> <command...>" >&2
  exit 2
fi
broker_bin=$1
shift
etcd_bin=${CONDUIT_ETCD_BIN:-/usr/bin/etcd}
for bin in "$broker_bin" "$etcd_bin"; do
  if [ ! -x "$bin" ]; then
    echo "run_with_cluster: $bin is not an executable (etcd: apt-get install etcd-server)" >&2
    exit 2
  fi
done

readonly BROKERS=3
readonly ETCD_START_TIMEOUT_S=20
readonly BROKER_START_TIMEOUT_S=30
readonly STOP_TIMEOUT_S=10
readonly LOG_LEVEL=${CONDUIT_CLUSTER_LOG_LEVEL:-info}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/conduit-cluster.XXXXXX")
etcd_pid=""
broker_pids=()
cmd_pid=""

# True while $1 is a running (not exited, not zombie) process.
alive() {
  local state
  state=$(awk '/^State:/ {print $2}' "/proc/$1/status" 2>/dev/null) || return 1
  [ -n "$state" ] && [ "$state" != "Z" ] && [ "$state" != "X" ]
}

show_logs() {
  local id
  for ((id = 1; id <= BROKERS; id++)); do
    [ -f "$tmp/broker-$id/server.log" ] || continue
    echo "---- broker $id log (last 40 lines) ----" >&2
    tail -n 40 "$tmp/broker-$id/server.log" >&2
  done
  if [ -f "$tmp/etcd.log" ]; then
    echo "---- etcd log (last 15 lines) ----" >&2
    tail -n 15 "$tmp/etcd.log" >&2
  fi
  echo "------------------------------------" >&2
}

# Waits for pid $1 (named $2, already sent SIGTERM) to exit, SIGKILLs it if it is still running
# STOP_TIMEOUT_S later, and reaps it. Warns about an exit status other than 0 or $3.
# shellcheck disable=SC2317  # called from cleanup
await_exit() {
  local pid=$1 name=$2 also_ok=${3:-0} waited=0 rc
  while alive "$pid" && [ "$waited" -lt $((STOP_TIMEOUT_S * 10)) ]; do
    sleep 0.1
    waited=$((waited + 1))
  done
  if alive "$pid"; then
    echo "run_with_cluster: $name did not exit ${STOP_TIMEOUT_S}s after SIGTERM; SIGKILL" >&2
    kill -KILL "$pid" 2>/dev/null
  fi
  wait "$pid" 2>/dev/null
  rc=$?
  if [ "$rc" -ne 0 ] && [ "$rc" -ne "$also_ok" ]; then
    echo "run_with_cluster: warning: $name exited with status $rc" >&2
  fi
}

# SIGTERM, and SIGCONT in case it is paused (a stopped process cannot act on SIGTERM).
# shellcheck disable=SC2317  # called from cleanup
terminate() {
  kill -TERM "$1" 2>/dev/null
  kill -CONT "$1" 2>/dev/null
}

# shellcheck disable=SC2317  # called through the EXIT trap
cleanup() {
  local rc=$? pid id=0
  trap - EXIT INT TERM
  if [ -n "$cmd_pid" ] && alive "$cmd_pid"; then
    kill -TERM -- "-$cmd_pid" 2>/dev/null || kill -TERM "$cmd_pid" 2>/dev/null
    wait "$cmd_pid" 2>/dev/null
  fi
  # Brokers first, all signalled before any is waited for, then etcd, so that no broker spends
  # its shutdown waiting for an etcd that is gone.
  for pid in "${broker_pids[@]}"; do
    terminate "$pid"
  done
  for pid in "${broker_pids[@]}"; do
    id=$((id + 1))
    await_exit "$pid" "broker $id"
  done
  if [ -n "$etcd_pid" ]; then
    terminate "$etcd_pid"
    await_exit "$etcd_pid" etcd 143  # etcd re-raises SIGTERM once it has shut down
  fi
  rm -rf "$tmp"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Prints $1 distinct free 127.0.0.1 ports, all sockets held until every one is known.
free_ports() {
  /usr/bin/python3 - "$1" <<'EOF'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
EOF
}

# Starts etcd on fresh ports; returns 0 once it is healthy, 1 if it exited, 2 if it never got
# healthy in time.
start_etcd() {
  local client_port peer_port i
  read -r client_port peer_port < <(free_ports 2) || return 1
  rm -rf "$tmp/etcd-data"
  etcd_endpoint="127.0.0.1:$client_port"
  local client="http://127.0.0.1:$client_port" peer="http://127.0.0.1:$peer_port"
  setpriv --pdeathsig KILL "$etcd_bin" --name default --data-dir "$tmp/etcd-data" \
    --listen-client-urls "$client" --advertise-client-urls "$client" \
    --listen-peer-urls "$peer" --initial-advertise-peer-urls "$peer" \
    --initial-cluster "default=$peer" \
    --heartbeat-interval 50 --election-timeout 500 >>"$tmp/etcd.log" 2>&1 &
  etcd_pid=$!
  for ((i = 0; i < ETCD_START_TIMEOUT_S * 10; i++)); do
    if ! alive "$etcd_pid"; then
      wait "$etcd_pid" 2>/dev/null
      etcd_pid=""
      return 1
    fi
    if curl -s --max-time 0.5 "$client/health" 2>/dev/null | grep -q '"health":"true"'; then
      return 0
    fi
    sleep 0.1
  done
  return 2
}

started=1
for attempt in 1 2 3 4 5; do
  start_etcd
  started=$?
  [ "$started" -ne 1 ] && break
  echo "run_with_cluster: etcd exited while starting (attempt $attempt); trying new ports" >&2
done
if [ "$started" -ne 0 ]; then
  echo "run_with_cluster: etcd not healthy within ${ETCD_START_TIMEOUT_S}s" >&2
  show_logs
  exit 1
fi

# Brokers start one after another: a broker writes its port file only after it has joined, and
# the harness reports exactly which one did not come up.
addrs=()
for ((id = 1; id <= BROKERS; id++)); do
  work="$tmp/broker-$id"
  mkdir -p "$work"
  setpriv --pdeathsig KILL "$broker_bin" --data-dir "$work/data" --listen 127.0.0.1:0 \
    --metrics-listen "" --port-file "$work/port" --log-level "$LOG_LEVEL" \
    --etcd-endpoints "$etcd_endpoint" --broker-id "$id" --cluster-name polyglot \
    --etcd-lease-ttl 2s >"$work/server.log" 2>&1 &
  pid=$!
  broker_pids+=("$pid")
  for ((i = 0; i < BROKER_START_TIMEOUT_S * 10; i++)); do
    [ -s "$work/port" ] && break
    if ! alive "$pid"; then
      echo "run_with_cluster: broker $id exited before serving" >&2
      show_logs
      exit 1
    fi
    sleep 0.1
  done
  port=$(tr -d '[:space:]' <"$work/port" 2>/dev/null)
  if ! [[ "$port" =~ ^[0-9]+$ ]]; then
    echo "run_with_cluster: broker $id wrote no port within ${BROKER_START_TIMEOUT_S}s" \
      "(port file: '$port')" >&2
    show_logs
    exit 1
  fi
  addrs+=("127.0.0.1:$port")
done

CONDUIT_ADDRS=$(IFS=,; echo "${addrs[*]}")
export CONDUIT_ADDRS
export CONDUIT_ETCD_ENDPOINT=$etcd_endpoint

# In the background so that a signal to this script is handled (cleanup) without waiting for it,
# in a process group of its own (setsid) so that cleanup can stop its children too, and with
# SIGTERM should this script die without cleaning up.
setsid -w setpriv --pdeathsig TERM "$@" &
cmd_pid=$!
wait "$cmd_pid"
status=$?
cmd_pid=""
if [ "$status" -ne 0 ]; then
  echo "run_with_cluster: '$*' failed with status $status" >&2
  show_logs
else
  # A broker that died during the test is a failure even when the test did not notice (this
  # harness is not for tests that stop brokers on purpose).
  id=0
  for pid in "${broker_pids[@]}"; do
    id=$((id + 1))
    if ! alive "$pid"; then
      echo "run_with_cluster: broker $id exited during the test" >&2
      status=1
    fi
  done
  [ "$status" -ne 0 ] && show_logs
fi
exit "$status"
