#!/usr/bin/env bash
# Makes a local Debian 12 (bookworm) base image without pulling from any container registry:
# debootstrap --variant=minbase into a temporary folder, then import the tree into podman.
#
# Usage: debian-base-image.sh [IMAGE]     (default localhost/conduit-debian:bookworm)
# Env:   DEBIAN_MIRROR  the Debian mirror URL; default: the first bookworm source of this
#                       machine's apt configuration (the same place apt-get installs from).
#        FORCE=1        rebuild even when the image exists.
# Needs root, debootstrap and podman (`scripts/install-deps.sh --image` installs them).
set -euo pipefail

image=${1:-localhost/conduit-debian:bookworm}

if [ "${FORCE:-0}" != 1 ] && podman image exists "$image"; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "debian-base-image: debootstrap needs root" >&2
  exit 1
fi

mirror=${DEBIAN_MIRROR:-}
if [ -z "$mirror" ]; then
  # deb822 sources (Debian 12's default) first, then the one-line format.
  mirror=$(awk '/^URIs:/ {uri=$2} /^Suites:/ && / bookworm( |$)/ && uri {print uri; exit}' \
    /etc/apt/sources.list.d/*.sources 2>/dev/null || true)
  if [ -z "$mirror" ]; then
    mirror=$(awk '$1 == "deb" && $3 == "bookworm" {print $2; exit}' \
      /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null || true)
  fi
fi
if [ -z "$mirror" ]; then
  echo "debian-base-image: no bookworm source in /etc/apt; set DEBIAN_MIRROR" >&2
  exit 1
fi

root=$(mktemp -d "${TMPDIR:-/var/tmp}/conduit-rootfs.XXXXXX")
trap 'rm -rf "$root"' EXIT
echo "debootstrap bookworm (minbase) from $mirror"
debootstrap --variant=minbase bookworm "$root" "$mirror" >"$root.log" 2>&1 || {
  tail -n 30 "$root.log" >&2
  rm -f "$root.log"
  exit 1
}
rm -f "$root.log"
# Leave no package lists or caches in the base; the Dockerfile runs apt-get update itself.
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb
tar -C "$root" -c . | podman import --change 'CMD ["/bin/bash"]' - "$image" >/dev/null
echo "base image $image ready"
