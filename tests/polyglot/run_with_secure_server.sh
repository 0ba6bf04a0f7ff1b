#!/usr/bin/env bash
# Runs one polyglot test command against a fresh conduit server on 127.0.0.1 that requires TLS
# with a client certificate, checks bearer tokens and enforces ACLs.
#
# Usage: run_with_secure_server.sh <server-binary> <command...>
#
# Like run_with_server.sh (the same start, wait, stop, log and exit status: test_server.sh), but
# first writes into the temporary dir
#   certs/   scripts/make-certs.sh: ca.pem; server.pem/.key (127.0.0.1); worker.pem/.key (principal
#            User:spiffe://conduit.dev/worker); operator.pem/.key (User:operator)
#   tokens   two random bearer tokens, as '<sha256-hex> <principal>': User:alice and User:mallory
#   acls     User:alice may Create, Write, Read, ViewPayload and Delete topics and queues whose
#            names start with "secure."; no other principal has a grant
# and starts the server with --tls-client-auth require, --auth-token-file and --acl-file. The
# command runs with "127.0.0.1:PORT" appended as its last argument and, in its environment,
#   CONDUIT_ADDRESS           127.0.0.1:PORT
#   CONDUIT_TLS_CA            the CA of the server's and the clients' certificates
#   CONDUIT_TLS_CERT          the worker's client certificate, CONDUIT_TLS_KEY its key
#   CONDUIT_TOKEN             alice's token
#   CONDUIT_TOKEN_NO_GRANTS   mallory's token: valid, but no ACL names User:mallory
#   CONDUIT_SECURE_PREFIX     "secure.", the prefix alice's grants cover
set -uo pipefail

if [ "$#" -lt 2 ]; then
  echo "usage: $0 <server-binary> <command...>" >&2
  exit 2
fi
readonly me=run_with_secure_server
here=$(dirname "${BASH_SOURCE[0]}")
# shellcheck source=tests/polyglot/test_server.sh
source "$here/test_server.sh"

server_begin "$1"
shift

readonly prefix=secure.
certs=$tmp/certs
if ! "$here/../../scripts/make-certs.sh" "$certs" >"$tmp/make-certs.log" 2>&1; then
  echo "$me: scripts/make-certs.sh failed:" >&2
  cat "$tmp/make-certs.log" >&2
  exit 1
fi

# A fresh random token, and the token file's line for it: the file holds only the hash.
new_token() { openssl rand -hex 24; }
token_line() { printf '%s %s\n' "$(printf %s "$1" | sha256sum | cut -d' ' -f1)" "$2"; }
alice_token=$(new_token)
mallory_token=$(new_token)
{
  token_line "$alice_token" User:alice
  token_line "$mallory_token" User:mallory
} >"$tmp/tokens"
cat >"$tmp/acls" <<ACLS
# alice works on the secure.* topics and queues; mallory and the worker's certificate have nothing.
allow User:alice topic prefixed $prefix Create,Write,Read,ViewPayload,Delete
allow User:alice queue prefixed $prefix Create,Write,Read,Delete
ACLS

server_start --tls-cert "$certs/server.pem" --tls-key "$certs/server.key" \
  --tls-client-ca "$certs/ca.pem" --tls-client-auth require \
  --auth-token-file "$tmp/tokens" --acl-file "$tmp/acls"

export CONDUIT_ADDRESS="127.0.0.1:$port"
export CONDUIT_TLS_CA="$certs/ca.pem"
export CONDUIT_TLS_CERT="$certs/worker.pem"
export CONDUIT_TLS_KEY="$certs/worker.key"
export CONDUIT_TOKEN="$alice_token"
export CONDUIT_TOKEN_NO_GRANTS="$mallory_token"
export CONDUIT_SECURE_PREFIX="$prefix"
server_run_command "$@"
