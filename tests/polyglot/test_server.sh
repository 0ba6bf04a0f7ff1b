# One conduit server on 127.0.0.1 for one test command: sourced (not run) by run_with_server.sh
# and run_with_secure_server.sh, which set `me` (their name, the prefix of every message) and
# call, in this order:
#
#   server_begin SERVER           checks that SERVER is an executable (else exit 2), makes the
#                                 temporary dir $tmp and installs the cleanup on EXIT/INT/TERM
#   server_start [FLAG...]        starts SERVER on $tmp/data with an OS-chosen port and FLAGs,
#                                 waits (at most 20 s) for it to write that port to --port-file
#                                 and sets $port; exits 1 with the server's log if it does not
#   server_run_command CMD...     runs CMD with "127.0.0.1:$port" appended as its last argument
#                                 and exits with its status (the server's log when it failed)
#
# The cleanup always stops the command's process group, then the server (SIGTERM; SIGKILL if it
# has not exited 10 s later), and removes $tmp; the script exits with the command's status.
# shellcheck shell=bash

: "${me:?the script sourcing test_server.sh sets me, its name}"
readonly START_TIMEOUT_S=20
readonly STOP_TIMEOUT_S=10

server=""
server_pid=""
cmd_pid=""
tmp=""

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
        echo "$me: server did not exit ${STOP_TIMEOUT_S}s after SIGTERM; SIGKILL" >&2
        kill -KILL "$server_pid" 2>/dev/null
        show_server_log
      fi
    fi
    wait "$server_pid" 2>/dev/null
    local server_rc=$?
    if [ "$server_rc" -ne 0 ]; then
      echo "$me: warning: server exited with status $server_rc" >&2
    fi
  fi
  rm -rf "$tmp"
  exit "$rc"
}

server_begin() {
  server=$1
  if [ ! -x "$server" ]; then
    echo "$me: $server is not an executable" >&2
    exit 2
  fi
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/conduit-polyglot.XXXXXX")
  trap cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
}

server_start() {
  # setpriv execs the server with a parent-death signal: it ends with this script even when the
  # script is killed (a test timeout) before its cleanup can run.
  /usr/bin/setpriv --pdeathsig KILL -- "$server" --data-dir "$tmp/data" --listen 127.0.0.1:0 \
    --metrics-listen 127.0.0.1:0 --port-file "$tmp/port" "$@" >"$tmp/server.log" 2>&1 &
  server_pid=$!

  # The server writes the port file atomically (rename) once it is serving.
  local i
  for ((i = 0; i < START_TIMEOUT_S * 10; i++)); do
    [ -s "$tmp/port" ] && break
    if ! alive "$server_pid"; then
      echo "$me: server exited before serving" >&2
      show_server_log
      exit 1
    fi
    sleep 0.1
  done
  if [ ! -s "$tmp/port" ]; then
    echo "$me: no port file after ${START_TIMEOUT_S}s" >&2
    show_server_log
    exit 1
  fi
  port=$(tr -d '[:space:]' <"$tmp/port")
  if ! [[ "$port" =~ ^[0-9]+$ ]]; then
    echo "$me: port file holds '$port', not a port" >&2
    exit 1
  fi
}

server_run_command() {
  # In the background so that a signal to this script is handled (cleanup) without waiting for
  # it, and in a process group of its own (setsid) so that cleanup can stop its children too.
  setsid -w "$@" "127.0.0.1:$port" &
  cmd_pid=$!
  wait "$cmd_pid"
  local status=$?
  cmd_pid=""
  if [ "$status" -ne 0 ]; then
    echo "$me: '$*' failed with status $status" >&2
    show_server_log
  fi
  exit "$status"
}
