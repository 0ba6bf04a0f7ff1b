#!/usr/bin/env bash
# Smoke test of the Conduit image (`make image-smoke`; too slow for `make test`):
#   1. builds it (scripts/build-image.sh; SKIP_BUILD=1 uses an existing image),
#   2. checks it runs as a non-root user and carries the Conduit binaries,
#   3. runs conduit-standalone in it the way the Helm chart does — read-only root filesystem, all
#      capabilities dropped, no privilege escalation, data on a mounted volume —
#   4. checks gRPC health from outside the container (tests/deploy/grpc_health_check.py with
#      python3-grpcio: the whole server, conduit.log.v1.LogService,
#      conduit.coordinator.v1.GroupCoordinator, conduit.queue.v1.WorkQueue, and NOT_FOUND for an
#      unknown service) and that /metrics serves the conduit_log_* families,
#   5. stops it with SIGTERM (clean exit 0, "stopped" logged), starts it again on the same volume
#      and checks health again,
#   6. runs every service the Helm chart deploys by default (broker, coordinator, queue) with the
#      command and flag file the chart renders, and checks its health (the readiness probe's
#      service name) and /metrics. The coordinator's --broker_address names the chart's broker
#      Service, which does not resolve here: it asks the broker lazily, so it serves health
#      anyway.
#
# Usage: image-smoke.sh [IMAGE]    (default conduit:<appVersion>)
# Needs podman and runc (`scripts/install-deps.sh --image`), root for the volume's ownership.
# The container gets its own network namespace and publishes its two ports on 127.0.0.1 (free
# ports picked here; SMOKE_NETWORK=bridge, the default), so the check talks to it from outside as
# a client would. Where bridge networking (netavark/iptables) is unavailable, SMOKE_NETWORK=host
# shares the host's network namespace instead and binds 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."

app_version=$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\} *$/\1/p' helm/conduit/Chart.yaml)
image=${1:-conduit:${app_version}}
network=${SMOKE_NETWORK:-bridge}
podman=(podman --runtime runc)
# This machine kind's sandbox refuses podman's default rlimits (runc: "error setting rlimit").
limits=(--ulimit nofile=1024:1024 --ulimit nproc=1024:1024)
name="conduit-smoke-$$"

if [ "${SKIP_BUILD:-0}" != 1 ]; then
  ./scripts/build-image.sh "$image"
fi

step() { echo "== $*"; }
fail() {
  echo "FAIL: $*" >&2
  "${podman[@]}" logs "$name" 2>&1 | tail -n 30 >&2 || true
  exit 1
}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/conduit-smoke.XXXXXX")
cleanup() {
  "${podman[@]}" rm -f -t 0 "$name" >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT

step "image $image"
"${podman[@]}" image inspect --format '{{.Id}} {{.Size}} bytes, user {{.Config.User}}' "$image"
uid=$("${podman[@]}" run --rm "${limits[@]}" --network none "$image" id -u)
[ "$uid" = 10001 ] || fail "the image runs as uid $uid, expected 10001"
echo "runs as uid $uid"
binaries=$("${podman[@]}" run --rm "${limits[@]}" --network none "$image" sh -c 'ls /usr/local/bin | tr "\n" " "')
echo "binaries: $binaries"
for b in conduit-broker conduit-coordinator conduit-queue conduit-standalone; do
  case " $binaries " in *" $b "*) ;; *) fail "$b is not in /usr/local/bin" ;; esac
done

# Two free ports on the host's loopback.
read -r grpc_port metrics_port < <(/usr/bin/python3 -c '
import socket
socks = [socket.socket() for _ in range(2)]
for s in socks: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in socks])')

mkdir -p "$tmp/data"
chown 10001:10001 "$tmp/data"

run_server() {
  local net_args
  if [ "$network" = host ]; then
    net_args=(--network host)
    listen=127.0.0.1
  else
    net_args=(-p "127.0.0.1:$grpc_port:$grpc_port" -p "127.0.0.1:$metrics_port:$metrics_port")
    listen=0.0.0.0
  fi
  "${podman[@]}" run -d --name "$name" "${net_args[@]}" \
    --read-only --tmpfs /tmp --cap-drop ALL --security-opt no-new-privileges \
    "${limits[@]}" \
    -v "$tmp/data:/var/lib/conduit" \
    "$image" conduit-standalone --data-dir=/var/lib/conduit \
    --listen="$listen:$grpc_port" --metrics-listen="$listen:$metrics_port" >/dev/null ||
    fail "cannot start conduit-standalone"
}

# conduit-standalone hosts the log service, the group coordinator and the work queue.
standalone_services=(conduit.log.v1.LogService conduit.coordinator.v1.GroupCoordinator conduit.queue.v1.WorkQueue)

health() {
  /usr/bin/python3 tests/deploy/grpc_health_check.py "127.0.0.1:$grpc_port" \
    "${standalone_services[@]}" --expect-unknown conduit.nope.v1.Nope --wait 30 || fail "gRPC health"
}

step "run conduit-standalone (network $network, read-only root, cap-drop ALL, gRPC :$grpc_port, metrics :$metrics_port)"
run_server
health

step "metrics"
metrics=$(curl -fsS "http://127.0.0.1:$metrics_port/metrics") || fail "GET /metrics"
families=$(grep -o '^# TYPE conduit_log_[a-z_]*' <<<"$metrics" | sed 's/# TYPE //' | sort -u)
[ -n "$families" ] || fail "no conduit_log_* families on /metrics"
echo "$(wc -l <<<"$families") conduit_log_* families, e.g. $(head -n 3 <<<"$families" | tr '\n' ' ')"

step "SIGTERM"
"${podman[@]}" stop -t 30 "$name" >/dev/null
code=$("${podman[@]}" inspect --format '{{.State.ExitCode}}' "$name")
[ "$code" = 0 ] || fail "exit code $code after SIGTERM"
"${podman[@]}" logs "$name" 2>&1 | grep -q 'conduit-standalone: stopped' || fail "no clean stop in the log"
echo "exit code 0; log: $("${podman[@]}" logs "$name" 2>&1 | grep -c . ) lines, ends with: $("${podman[@]}" logs "$name" 2>&1 | tail -n 1)"
[ -d "$tmp/data/broker" ] || fail "no broker data on the volume"
echo "volume holds: $(cd "$tmp/data" && echo *) (owner $(stat -c %u:%g "$tmp/data/broker"))"
"${podman[@]}" rm "$name" >/dev/null

step "restart on the same volume"
run_server
health
"${podman[@]}" stop -t 30 "$name" >/dev/null
"${podman[@]}" rm "$name" >/dev/null

# Every service the chart runs by default, exactly as the chart runs it: its command and the
# flag file it renders (ConfigMap mounted read-only at /etc/conduit), container ports 7070/9464,
# readiness on the service's own health name.
helm=tests/deploy/.tools/helm
if [ "$network" = bridge ] && { [ -x "$helm" ] || ./scripts/deploy-deps.sh; }; then
  export HELM_CACHE_HOME="$tmp/helm" HELM_CONFIG_HOME="$tmp/helm" HELM_DATA_HOME="$tmp/helm"
  "$helm" template smoke helm/conduit >"$tmp/chart.yaml"
  components=$(/usr/bin/python3 -c 'import sys, yaml
for d in yaml.safe_load_all(open(sys.argv[1])):
    if d and d["kind"] == "StatefulSet":
        print(d["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/component"])' "$tmp/chart.yaml")
  for component in $components; do
    step "$component as the chart runs it"
    mkdir -p "$tmp/$component/flags" "$tmp/$component/data"
    chown 10001:10001 "$tmp/$component/data"
    # Prints the container command and the readiness service; writes the flag file.
    read -r health command < <(/usr/bin/python3 -c 'import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
label = lambda d: d["metadata"]["labels"].get("app.kubernetes.io/component")
sts = next(d for d in docs if d["kind"] == "StatefulSet" and label(d) == sys.argv[2])
c = sts["spec"]["template"]["spec"]["containers"][0]
cm = next(d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] ==
          sts["spec"]["template"]["spec"]["volumes"][0]["configMap"]["name"])
open(sys.argv[3], "w").write(cm["data"]["flags"])
print(c["readinessProbe"]["grpc"]["service"], " ".join(c["command"]))' \
      "$tmp/chart.yaml" "$component" "$tmp/$component/flags/flags")
    echo "  command: $command; readiness: $health; flag file:"
    sed 's/^/    /' "$tmp/$component/flags/flags"
    # shellcheck disable=SC2086  # the chart's command, word-split on purpose
    "${podman[@]}" run -d --name "$name" -p "127.0.0.1:$grpc_port:7070" -p "127.0.0.1:$metrics_port:9464" \
      --read-only --tmpfs /tmp --cap-drop ALL --security-opt no-new-privileges "${limits[@]}" \
      -v "$tmp/$component/data:/var/lib/conduit" -v "$tmp/$component/flags:/etc/conduit:ro" \
      "$image" $command >/dev/null || fail "cannot start $command"
    /usr/bin/python3 tests/deploy/grpc_health_check.py "127.0.0.1:$grpc_port" "$health" \
      --wait 30 || fail "gRPC health of $component"
    # A family without series is not printed (the queue's, before any queue exists): only the
    # endpoint itself is checked here; the standalone step above checks the broker's families.
    metrics=$(curl -fsS "http://127.0.0.1:$metrics_port/metrics") || fail "$component /metrics"
    families=$(grep -c '^# TYPE conduit_' <<<"$metrics" || true)
    "${podman[@]}" stop -t 30 "$name" >/dev/null
    code=$("${podman[@]}" inspect --format '{{.State.ExitCode}}' "$name")
    [ "$code" = 0 ] || fail "$component exit code $code after SIGTERM"
    "${podman[@]}" rm "$name" >/dev/null
    echo "$component: healthy, /metrics served ($families conduit_* families), exit code 0 after SIGTERM"
  done
fi

echo "image smoke: PASS"
