#!/usr/bin/env bash
# Development TLS material for Conduit's servers, made with the openssl CLI: a CA and
# three certificates it signs, every key ECDSA P-256, every key file mode 0600.
#
#   ca.pem ca.key            the dev CA (CN "Conduit dev CA <dir name>"): trust it on both sides
#   server.pem server.key    the server: SAN IP:127.0.0.1, IP:::1, DNS:localhost and the service
#                            names of deploy/docker-compose.yml (broker, coordinator, queue,
#                            broker-1..3: the servers dial each other by them); serverAuth
#   worker.pem worker.key    a client with URI SAN spiffe://conduit.dev/worker (CN conduit-worker)
#   operator.pem operator.key  a client with a CN only (CN operator, no SAN)
#
# Usage: make-certs.sh [DIR=certs/dev] [--force]      (`make certs`)
# An existing DIR/ca.pem is kept (and nothing is written) unless --force. The tests run it into
# temporary directories (tests/support/test_certs.h): no key is checked in.
# A server using them:
#   conduit-standalone --tls-cert DIR/server.pem --tls-key DIR/server.key --tls-client-ca DIR/ca.pem
set -euo pipefail
dir=""
force=0
for arg in "$@"; do
  case "$arg" in
    --force) force=1 ;;
    -*) echo "make-certs.sh: unknown option $arg" >&2; exit 2 ;;
    *) dir="$arg" ;;
  esac
done
dir="${dir:-certs/dev}"
command -v openssl >/dev/null || { echo "make-certs.sh: the openssl CLI is needed" >&2; exit 1; }
if [ -e "$dir/ca.pem" ] && [ "$force" = 0 ]; then
  echo "$dir/ca.pem exists: keeping the certificates in $dir (--force, or FORCE=1 make certs, replaces them)"
  exit 0
fi
mkdir -p "$dir"
umask 077
work="$(mktemp -d "$dir/.make-certs.XXXXXX")"
trap 'rm -rf "$work"' EXIT
ca_name="Conduit dev CA $(basename "$(cd "$dir" && pwd)")"

# A fresh P-256 key into $1.
new_key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }

new_key "$work/ca.key"
cat > "$work/ca.ext" <<EOF
basicConstraints = critical, CA:TRUE, pathlen:0
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash
EOF
openssl req -new -key "$work/ca.key" -subj "/O=Conduit dev/CN=$ca_name" -out "$work/ca.csr"
openssl x509 -req -in "$work/ca.csr" -signkey "$work/ca.key" -days 3650 -sha256 \
  -extfile "$work/ca.ext" -out "$work/ca.pem" 2>/dev/null

# Signs a leaf: $1 file stem, $2 subject, $3 extensions (one per line).
leaf() {
  new_key "$work/$1.key"
  openssl req -new -key "$work/$1.key" -subj "$2" -out "$work/$1.csr"
  printf '%s\n' "basicConstraints = critical, CA:FALSE" "keyUsage = critical, digitalSignature" \
    "subjectKeyIdentifier = hash" "authorityKeyIdentifier = keyid:always" "$3" > "$work/$1.ext"
  openssl x509 -req -in "$work/$1.csr" -CA "$work/ca.pem" -CAkey "$work/ca.key" \
    -set_serial "0x$(openssl rand -hex 16)" -days 825 -sha256 -extfile "$work/$1.ext" \
    -out "$work/$1.pem" 2>/dev/null
}
leaf server "/O=Conduit dev/CN=localhost" \
  "extendedKeyUsage = serverAuth
subjectAltName = IP:127.0.0.1, IP:::1, DNS:localhost, DNS:broker, DNS:coordinator, DNS:queue, DNS:broker-1, DNS:broker-2, DNS:broker-3"
leaf worker "/O=Conduit dev/CN=conduit-worker" \
  "extendedKeyUsage = clientAuth
subjectAltName = URI:spiffe://conduit.dev/worker"
leaf operator "/O=Conduit dev/CN=operator" "extendedKeyUsage = clientAuth"

for stem in server worker operator; do
  openssl verify -CAfile "$work/ca.pem" "$work/$stem.pem" >/dev/null
done
# Certificates readable by anyone, keys by the owner only; each file renamed into place whole.
chmod 0644 "$work"/*.pem
for f in ca server worker operator; do
  mv -f "$work/$f.key" "$dir/$f.key"
  mv -f "$work/$f.pem" "$dir/$f.pem"
done
echo "wrote $dir: ca.pem (CA), server.pem (127.0.0.1, ::1, localhost, compose service names)," \
  "worker.pem (spiffe://conduit.dev/worker), operator.pem (CN operator), and their .key files"
