#!/usr/bin/env bash
# Builds the Conduit image from docker/Dockerfile (`make image`).
#
# Usage: build-image.sh [IMAGE]    (default conduit:<appVersion of helm/conduit/Chart.yaml>)
# Also builds ETCD_IMAGE (default conduit-etcd:<appVersion>) from docker/etcd.Dockerfile.
# Env:   ENGINE      podman (default when installed) or docker
#        BASE_IMAGE  the Debian 12 base of both stages. Default with podman: a local base made
#                    by scripts/debian-base-image.sh (debootstrap; no registry pull). Default with
#                    docker: the Dockerfile's own (debian:bookworm-slim).
#        JOBS        parallel compile jobs inside the build (default 2)
#        CONTEXT     the build context (default: this work tree, as .dockerignore filters it); e.g.
#                    a `git archive` of a commit, to build exactly what was committed
# podman runs with runc (this machine kind's working runtime), host networking for apt during the
# build and explicit rlimits; the build's processes inherit this script's nice level
# (`nice -n 19 make image`).
set -euo pipefail
cd "$(dirname "$0")/.."

app_version=$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\} *$/\1/p' helm/conduit/Chart.yaml)
image=${1:-conduit:${app_version}}
engine=${ENGINE:-}
if [ -z "$engine" ]; then
  if command -v podman >/dev/null 2>&1; then engine=podman; else engine=docker; fi
fi

build_args=(--build-arg "JOBS=${JOBS:-2}")
if [ "$engine" = podman ]; then
  if [ -z "${BASE_IMAGE:-}" ]; then
    BASE_IMAGE=localhost/conduit-debian:bookworm
    ./scripts/debian-base-image.sh "$BASE_IMAGE"
    build_args+=(--pull=never)
  fi
  engine_cmd=(podman --runtime runc)
  # This machine kind's sandbox refuses podman's default rlimits (runc: "error setting rlimit").
  build_args+=(--network host --ulimit nofile=1024:1024 --ulimit nproc=1024:1024)
else
  engine_cmd=(docker)
fi
[ -n "${BASE_IMAGE:-}" ] && build_args+=(--build-arg "BASE_IMAGE=$BASE_IMAGE")

echo "building $image with $engine (base: ${BASE_IMAGE:-Dockerfile default})"
context=${CONTEXT:-.}
"${engine_cmd[@]}" build "${build_args[@]}" -f "$context/docker/Dockerfile" -t "$image" "$context"

# etcd for cluster mode (compose profile cluster, the chart's etcd.enabled): Debian's etcd-server
# on the same base. Its context is docker/ alone; it copies nothing.
etcd_image=${ETCD_IMAGE:-conduit-etcd:${app_version}}
echo "building $etcd_image (Debian's etcd-server) with $engine"
"${engine_cmd[@]}" build "${build_args[@]}" -f "$context/docker/etcd.Dockerfile" -t "$etcd_image" "$context/docker"
