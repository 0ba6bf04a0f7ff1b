#!/usr/bin/env bash
# Runs one polyglot test command against a fresh conduit server on 127.0.0.1.
#
# Usage: run_with_server.sh <server-binary> <command...>
#
# Starts <server-binary> (conduit-standalone) on a temporary data dir with an OS-chosen port,
# waits (at most 20 s) for it to write that port to --port-file, runs <command...> with
# "127.0.0.1:PORT" appended as its last argument, then always stops the server (SIGTERM; SIGKILL
# if it has not exited 10 s later), removes the temporary dir and exits with the command's status.
# The server's log is printed when the command or the server fails.
set -uo pipefail

if [ "$#" -lt 2 ]; then
  echo "usage: $0 <server-binary> <command...>" >&2
  exit 2
fi
server=$1
shift
if [ ! -x "$server" ]; then
  echo "run_with_server: $server is not an executable" >&2
  exit 2
fi

readonly START_TIMEOUT_S=20
readonly STOP_TIMEOUT_S=10

tmp=$(mktemp -d "${TMPDIR:-/tmp}/conduit-polyglot.XXXXXX")
server_pid=""
cmd_pid=""

# True while $1 is a running (not exited, not zombie) process.
alive() {
  local state
  state=$(awk '/^State:/ {print $2}' "/proc/$1/status" 2>/dev/null) || return 1
  [ -n "$state" ] && [ "$state" != "Z" ] && [ "$state" != "X" ]
}

show_server_log() {
  echo "---- server log (last 50 lines) ----" >&2
  tail -n 50 "$tmp/server.log" >&2 2>/dev/null
  echo "------------------------------------" >&2
}

# shellcheck disable=SC2317  # called through the EXIT trap
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if [ -n "$cmd_pid" ] && alive "$cmd_pid"; then
    kill -TERM -- "-$cmd_pid" 2>/dev/null || kill -TERM "$cmd_pid" 2>/dev/null
    wait "$cmd_pid" 2>/dev/null
  fi
  if [ -n "$server_pid" ]; then
    if alive "$server_pid"; then
      kill -TERM "$server_pid" 2>/dev/null
      local waited=0
      while alive "$server_pid" && [ "$waited" -lt $((STOP_TIMEOUT_S * 10)) ]; do
        sleep 0.1
        waited=$((waited + 1))
      done
      if alive "$server_pid"; then
        echo "run_with_server: server did not exit ${STOP_TIMEOUT_S}s after SIGTERM; SIGKILL" >&2
        kill -KILL "$server_pid" 2>/dev/null
        show_server_log
      fi
    fi
    wait "$server_pid" 2>/dev/null
    local server_rc=$?
    if [ "$server_rc" -ne 0 ]; then
      echo "run_with_server: warning: server exited with status $server_rc" >&2
    fi
  fi
  rm -rf "$tmp"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

"$server" --data-dir "$tmp/data" --listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 \
  --port-file "$tmp/port" >"$tmp/server.log" 2>&1 &
server_pid=$!

# The server writes the port file atomically (rename) once it is serving.
for ((i = 0; i < START_TIMEOUT_S * 10; i++)); do
  [ -s "$tmp/port" ] && break
  if ! alive "$server_pid"; then
    echo "run_with_server: server exited before serving" >&2
    show_server_log
    exit 1
  fi
  sleep 0.1
done
if [ ! -s "$tmp/port" ]; then
  echo "run_with_server: no port file after ${START_TIMEOUT_S}s" >&2
  show_server_log
  exit 1
fi
port=$(tr -d '[:space:]' <"$tmp/port")
if ! [[ "$port" =~ ^[0-9]+$ ]]; then
  echo "run_with_server: port file holds '$port', not a port" >&2
  exit 1
fi

# In the background so that a signal to this script is handled (cleanup) without waiting for it,
# and in a process group of its own (setsid) so that cleanup can stop its children too.
setsid -w "$@" "127.0.0.1:$port" &
cmd_pid=$!
wait "$cmd_pid"
status=$?
cmd_pid=""
if [ "$status" -ne 0 ]; then
  echo "run_with_server: '$*' failed with status $status" >&2
  show_server_log
fi
exit "$status"
