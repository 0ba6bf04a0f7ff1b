#!/usr/bin/env bash
# Runs one polyglot test command against a fresh conduit server on 127.0.0.1.
#
# Usage: run_with_server.sh <server-binary> <command...>
#
# Starts <server-binary> (conduit-standalone) on a temporary data dir with an OS-chosen port,
# waits (at most 20 s) for it to write that port to --port-file, runs <command...> with
# "127.0.0.1:PORT" appended as its last argument, then always stops the server (SIGTERM; SIGKILL
# if it has not exited 10 s later), removes the temporary dir and exits with the command's status.
# The server's log is printed when the command or the server fails. The steps are test_server.sh's
# (run_with_secure_server.sh uses them too, with TLS and tokens).
set -uo pipefail

if [ "$#" -lt 2 ]; then
  echo "usage: $0 <server-binary> <command...>" >&2
  exit 2
fi
readonly me=run_with_server
# shellcheck source=tests/polyglot/test_server.sh
source "$(dirname "${BASH_SOURCE[0]}")/test_server.sh"

server_begin "$1"
shift
# shellcheck disable=SC2119  # no server flags here
server_start
server_run_command "$@"
