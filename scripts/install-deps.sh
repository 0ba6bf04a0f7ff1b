#!/usr/bin/env bash
# Installs the Debian 12 packages Conduit needs to build and test. Idempotent:
# prints nothing and touches nothing when every package is already present.
#
# Usage: install-deps.sh [--image]
#   --image  also the container tools of `make image` / `make image-smoke` (podman, runc,
#            debootstrap); `make test` does not need them.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config clang lld libclang-rt-14-dev
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  librocksdb-dev libabsl-dev prometheus-cpp-dev libjemalloc-dev
  libgtest-dev libgmock-dev libbenchmark-dev libspdlog-dev libfmt-dev libcli11-dev libssl-dev openssl
  python3 python3-grpcio python3-grpc-tools grpc-proto
  nodejs curl
  prometheus docker-compose
  etcd-server etcd-client golang-etcd-server-dev python3-etcd3
  postgresql libpq-dev
)
# clang: the compiler (CMakeLists.txt says why), which checks the lock annotations as it builds;
# lld: the linker, about 3 times faster than ld.bfd here;
# libclang-rt-14-dev: its libFuzzer and sanitizer runtimes (scripts/fuzz.sh).
# prometheus: promtool for the alert rules; docker-compose: its schema check of
# deploy/docker-compose.yml (`config` needs no container engine). See scripts/check-deploy.sh.
# etcd: cluster metadata (server, etcdctl); its protos for the C++ stubs; python3-etcd3 to inspect.
# postgresql, libpq-dev: conduit-outbox-relay (libpq) and its tests (initdb, pg_ctl; 15 on Debian 12).
# libssl-dev: common/security (JWT signatures, token hashes) with OpenSSL 3; openssl: make certs
# and the TLS tests (scripts/make-certs.sh).
if [ "${1:-}" = "--image" ]; then
  PACKAGES+=(podman runc debootstrap)
fi

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# npm may come from apt or from the Node.js install itself; only require apt's when absent.
command -v npm >/dev/null 2>&1 || missing+=(npm)

[ ${#missing[@]} -eq 0 ] && exit 0

echo "installing: ${missing[*]}"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get -o DPkg::Lock::Timeout=600 update -qq
$SUDO apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
