#!/usr/bin/env bash
# The deployment checks (`make deploy-check`; ctest runs them as deploy_checks, label deploy).
# Offline, deterministic, a few seconds; no container engine and no cluster needed.
#
#   1. Helm: `helm lint` and `helm template` of helm/conduit for the default values and every
#      tests/deploy/values/*.yaml (standalone, monitoring, standalone-monitoring, all-services,
#      hardened, cluster with the in-chart etcd, cluster-external-etcd, cluster-large (5 brokers,
#      5 etcd members), cluster-single (1 and 1: no disruption budget); security: secure — TLS,
#      mTLS, metrics over HTTPS with client certificates, tokens, JWTs, ACLs, quotas —,
#      secure-cluster (metrics plain HTTP), tls-only (metrics over HTTPS)); values the schema and
#      the templates must reject are rejected (for the reason given, where a case names it);
#      values.schema.json declares every key of values.yaml's defaults and what the templates
#      read (tests/deploy/check-values-schema.js).
#   2. Every rendered manifest validated against the Kubernetes / Prometheus Operator schemas
#      (kubernetes-models) plus the chart's own rules (tests/deploy/validate-manifests.js; the
#      security flags, Secret mounts, ACL file and the ServiceMonitor's scheme and TLS settings:
#      tests/deploy/check-security-manifests.js; cluster identities, etcd's bootstrap and the
#      PodDisruptionBudgets — none for one pod, the brokers' one at a time, etcd's keeping a
#      quorum: tests/deploy/check-cluster-manifests.js).
#   3. docker-compose: its schema (`docker-compose config -q`, with and without the cluster
#      profile, alone and with the secure override docker-compose.secure.yml) and the images,
#      binaries, flags, ports, mounts and cluster-mode broker ids it names
#      (tests/deploy/check-compose.js; the secure variant's certificates, tokens and ACLs:
#      tests/deploy/check-compose-security.js, the HTTPS metrics scrape included); `promtool check
#      config` on the Prometheus configs (prometheus.yml, and prometheus.secure.yml for the secure
#      variant).
#   4. Alerts: `promtool check rules`, `promtool test rules tests/deploy/alerts_test.yml`, the
#      metric contract (tests/deploy/check-metrics.js) and the dashboard's queries through promtool.
#   5. The Dockerfile's build packages cover scripts/install-deps.sh's.
#
# Tools: helm and the npm packages from scripts/deploy-deps.sh (run here, idempotent), promtool
# (apt prometheus) and docker-compose (apt docker-compose) from scripts/install-deps.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

./scripts/deploy-deps.sh
for tool in promtool docker-compose node; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "check-deploy: $tool is missing: run scripts/install-deps.sh" >&2
    exit 1
  fi
done

helm="$root/tests/deploy/.tools/helm"
# Rendered manifests and logs; ctest points this into the build tree.
out=${DEPLOY_CHECK_OUT:-"$root/tests/deploy/out"}
rm -rf "$out"
mkdir -p "$out"
# Helm keeps caches and config out of $HOME.
export HELM_CACHE_HOME="$out/.helm/cache" HELM_CONFIG_HOME="$out/.helm/config" HELM_DATA_HOME="$out/.helm/data"

failures=0
step() { echo "== $*"; }
run() {
  # Runs a command; on failure prints its output and counts it.
  local log="$out/cmd.log"
  if "$@" >"$log" 2>&1; then
    return 0
  fi
  echo "FAIL: $*" >&2
  cat "$log" >&2
  failures=$((failures + 1))
  return 1
}

step "helm lint and template ($("$helm" version --short))"
cases=(default)
for f in tests/deploy/values/*.yaml; do cases+=("$(basename "$f" .yaml)"); done
manifest_args=()
for c in "${cases[@]}"; do
  values=()
  [ "$c" != default ] && values=(-f "tests/deploy/values/$c.yaml")
  if run "$helm" lint --strict helm/conduit "${values[@]}" &&
    run "$helm" template conduit-test helm/conduit --namespace conduit "${values[@]}" \
      --output-dir "$out/rendered-$c"; then
    # One stream per case, documents in a stable order.
    find "$out/rendered-$c" -name '*.yaml' | sort | xargs cat >"$out/$c.yaml"
    echo "$c: lint ok, $(grep -c '^kind:' "$out/$c.yaml") documents"
    manifest_args+=("$c=$out/$c.yaml")
  fi
done
run node tests/deploy/check-values-schema.js && cat "$out/cmd.log"
# Values the schema and the templates must refuse: reject WHY [--error REGEX] HELM-ARGS...; with
# --error, the refusal must say REGEX (a refusal for another reason, a template that breaks, fails).
reject() {
  local why=$1 pattern=""
  shift
  if [ "${1:-}" = --error ]; then
    pattern=$2
    shift 2
  fi
  if "$helm" template conduit-test helm/conduit "$@" >"$out/reject.log" 2>&1; then
    echo "FAIL: helm template accepted $* ($why)" >&2
    failures=$((failures + 1))
  elif [ -n "$pattern" ] && ! grep -qE -- "$pattern" "$out/reject.log"; then
    echo "FAIL: helm template refused $* ($why), but not with /$pattern/:" >&2
    cat "$out/reject.log" >&2
    failures=$((failures + 1))
  else
    echo "rejected as expected: $why"
  fi
}
reject "a misspelt key" --set broker.enable=true
reject "a dashed flag name" --set broker.extraFlags.log-level=debug
reject "nothing enabled" --set broker.enabled=false --set coordinator.enabled=false --set queue.enabled=false
reject "a coordinator with no broker to ask" --set broker.enabled=false
reject "a broker address without a port" --set coordinator.brokerAddress=broker
reject "a per-service persistence switch" --set broker.persistence.enabled=false
reject "several brokers without cluster mode" --set broker.replicas=3
reject "cluster mode with no etcd" --set cluster.enabled=true --set etcd.enabled=false
reject "both the in-chart etcd and etcd.endpoints" --set cluster.enabled=true --set 'etcd.endpoints={etcd:2379}'
reject "an etcd endpoint without a port" --set cluster.enabled=true --set etcd.enabled=false --set 'etcd.endpoints={etcd}'
reject "an even etcd member count" --set cluster.enabled=true --set etcd.replicas=2
reject "cluster mode in standalone" --set cluster.enabled=true --set standalone.enabled=true
reject "cluster mode without the broker" --set cluster.enabled=true --set broker.enabled=false
reject "cluster mode before Kubernetes 1.28 (no pod-index label)" --set cluster.enabled=true --kube-version 1.27.0
reject "a misspelt defaults key" --error 'defaults: Additional property grpcport' --set defaults.grpcport=7000
reject "a bad type in defaults" --error 'defaults.podDisruptionBudget.enabled: Invalid type' \
  --set defaults.podDisruptionBudget.enabled=yes
reject "an unknown key under defaults" --error 'defaults.persistence: Additional property sise' \
  --set defaults.persistence.sise=1Gi
reject "a defaults key the templates need, removed" --error 'defaults: grpcPort is required' --set defaults.grpcPort=null
reject "a defaults probe removed" --error 'defaults.probes: startup is required' --set defaults.probes.startup=null
reject "a log level the servers refuse" --error 'defaults.logLevel' --set defaults.logLevel=verbose
reject "an empty listen address" --error 'defaults.grpcListenHost' --set defaults.grpcListenHost=
reject "a port out of range" --error 'defaults.metricsPort' --set defaults.metricsPort=70000
reject "one port for gRPC and metrics" --error 'grpcPort and metricsPort are both 7070' --set broker.metricsPort=7070
reject "a resource quantity that is none" --error 'defaults.resources.requests.memory' --set defaults.resources.requests.memory=lots
reject "a resources key Kubernetes lacks" --error 'defaults.resources: Additional property request ' --set defaults.resources.request.cpu=1
reject "a volume size that is no quantity" --error 'defaults.persistence.size' --set defaults.persistence.size=big
reject "an access mode Kubernetes lacks" --error 'defaults.persistence.accessModes' --set 'defaults.persistence.accessModes={ReadWriteSometimes}'
reject "a StorageClass name Kubernetes refuses" --error 'defaults.persistence.storageClass' --set defaults.persistence.storageClass=Fast_SSD
reject "a liveness probe needing two successes" --error 'defaults.probes.liveness.successThreshold' --set defaults.probes.liveness.successThreshold=2
reject "an unknown probe setting" --error 'defaults.probes.readiness: Additional property period' --set defaults.probes.readiness.period=5
reject "a grace period that skips the drain" --error 'defaults.terminationGracePeriodSeconds' --set defaults.terminationGracePeriodSeconds=0
reject "an annotation value that is no string" --error 'defaults.podAnnotations.team: Invalid type' --set defaults.podAnnotations.team=1
reject "a pod label replacing a selector label" --error 'defaults.podLabels' --set 'defaults.podLabels.app\.kubernetes\.io/component=x'
reject "a node selector value that is no string" --error 'defaults.nodeSelector.zone: Invalid type' --set defaults.nodeSelector.zone=1
reject "a toleration that is no object" --error 'defaults.tolerations.0: Invalid type' --set 'defaults.tolerations[0]=dedicated'
reject "a toleration operator Kubernetes lacks" --error 'defaults.tolerations.0.operator' --set 'defaults.tolerations[0].operator=Maybe'
reject "a misspelt affinity kind" --error 'defaults.affinity: Additional property nodeAfinity' --set defaults.affinity.nodeAfinity.x=1
reject "an unknown Service type" --error 'defaults.serviceType' --set defaults.serviceType=ExternalName
reject "a disruption budget for a single-replica service" --error 'coordinator: Additional property podDisruptionBudget' \
  --set coordinator.podDisruptionBudget.minAvailable=1
reject "a disruption budget letting no broker go (maxUnavailable 0)" --error 'podDisruptionBudget.maxUnavailable' \
  --set cluster.enabled=true --set broker.podDisruptionBudget.maxUnavailable=0
reject "a disruption budget keeping every broker" --error 'minAvailable 3 keeps all 3 pods' \
  --set cluster.enabled=true --set broker.podDisruptionBudget.minAvailable=3
reject "a disruption budget keeping every broker once rounded up" --error 'minAvailable 67% keeps all 3 pods' \
  --set cluster.enabled=true --set broker.podDisruptionBudget.minAvailable=67%
reject "a disruption budget of 100%" --error 'podDisruptionBudget.minAvailable' \
  --set cluster.enabled=true --set broker.podDisruptionBudget.minAvailable=100%
reject "both minAvailable and maxUnavailable" --error 'set minAvailable or maxUnavailable, not both' \
  --set cluster.enabled=true --set defaults.podDisruptionBudget.maxUnavailable=1 --set broker.podDisruptionBudget.minAvailable=2
reject "an etcd quantity that is none" --error 'etcd.resources.requests.memory' --set etcd.resources.requests.memory=lots
reject "TLS without its Secret" --set security.tls.enabled=true
reject "an unknown TLS client auth" --set security.tls.enabled=true --set security.tls.secretName=tls --set security.tls.clientAuth=optional
reject "metrics over HTTPS without TLS" --set security.tls.metrics=true
reject "a security flag also in extraFlags" --set security.tls.enabled=true --set security.tls.secretName=tls --set broker.extraFlags.tls_cert=/x.pem
reject "JWT keys without issuer and audience" --set security.auth.jwt.secretName=jwt --set 'security.auth.jwt.keys[0].algorithm=EdDSA' --set 'security.auth.jwt.keys[0].key=k.pem'
reject "a JWT algorithm the servers refuse" --set security.auth.jwt.secretName=jwt --set 'security.auth.jwt.keys[0].algorithm=HS256' --set 'security.auth.jwt.keys[0].key=k.pem' --set security.auth.jwt.issuer=i --set security.auth.jwt.audience=a
reject "a superuser that is no principal" --set security.authorization.enabled=true --set 'security.authorization.superusers={alice}'
acl=(--set security.authorization.enabled=true --set 'security.authorization.acls[0].permission=allow' --set 'security.authorization.acls[0].principal=User:alice' --set 'security.authorization.acls[0].resourceType=topic')
reject "an ACL with pattern any and a name" "${acl[@]}" --set 'security.authorization.acls[0].patternType=any' --set 'security.authorization.acls[0].name=orders' --set 'security.authorization.acls[0].operations={Read}'
reject "an ACL with no name" "${acl[@]}" --set 'security.authorization.acls[0].patternType=literal' --set 'security.authorization.acls[0].operations={Read}'
reject "an ACL with an unknown operation" "${acl[@]}" --set 'security.authorization.acls[0].patternType=literal' --set 'security.authorization.acls[0].name=orders' --set 'security.authorization.acls[0].operations={Wrte}'
reject "a negative quota" --set security.quotas.requests=-1

step "manifests against Kubernetes schemas"
[ ${#manifest_args[@]} -gt 0 ] && run node tests/deploy/validate-manifests.js "${manifest_args[@]}" && cat "$out/cmd.log"

step "docker-compose"
run docker-compose -f deploy/docker-compose.yml config -q &&
  echo "docker-compose config: valid"
run docker-compose -f deploy/docker-compose.yml --profile cluster config -q &&
  echo "docker-compose --profile cluster config: valid"
run node tests/deploy/check-compose.js && cat "$out/cmd.log"
secure=(-f deploy/docker-compose.yml -f deploy/docker-compose.secure.yml)
run docker-compose "${secure[@]}" config -q &&
  echo "docker-compose -f docker-compose.yml -f docker-compose.secure.yml config: valid"
# The merged secure variant, cluster profile included, as docker-compose resolves it (stdout only).
if run docker-compose "${secure[@]}" --profile cluster config -q &&
  docker-compose "${secure[@]}" --profile cluster config >"$out/compose-secure.yml" 2>/dev/null; then
  echo "docker-compose -f docker-compose.yml -f docker-compose.secure.yml --profile cluster config: valid"
  run node tests/deploy/check-compose.js --secure "$out/compose-secure.yml" && cat "$out/cmd.log"
fi
for config in prometheus.yml prometheus.secure.yml; do
  run promtool check config "deploy/prometheus/$config" &&
    echo "promtool check config deploy/prometheus/$config: valid, $(grep -o '[0-9]* rule files found' "$out/cmd.log")"
done

step "alert rules and dashboard queries"
run promtool check rules deploy/prometheus/rules/*.yml &&
  echo "promtool check rules: $(grep -o '[0-9]* rules found' "$out/cmd.log" | paste -sd+ | sed 's/ rules found//g') rules" 
run promtool test rules tests/deploy/alerts_test.yml &&
  echo "promtool test rules tests/deploy/alerts_test.yml: $(grep -c 'alertname:' tests/deploy/alerts_test.yml) alert expectations, $(grep -o SUCCESS "$out/cmd.log")"
run node tests/deploy/check-metrics.js "$out/dashboard-queries.rules.yml" && cat "$out/cmd.log"
run promtool check rules "$out/dashboard-queries.rules.yml" && echo "dashboard queries: $(grep -o '[0-9]* rules found' "$out/cmd.log")"

step "Dockerfile build packages"
# Every package install-deps.sh installs is needed by the image's build stage, except these,
# which only tests, tooling or the image build itself use (clang and its runtimes: the thread-safety
# check and the fuzzers; etcd itself: the cluster tests; golang-etcd-server-dev is the build's:
# its protos become the etcd client's stubs; postgresql: the outbox relay's tests, while its
# libpq-dev is the build's).
not_for_build=" ccache clang libclang-rt-14-dev python3 python3-grpcio python3-grpc-tools nodejs npm curl prometheus docker-compose podman runc debootstrap etcd-server etcd-client python3-etcd3 postgresql "
deps=$(sed -n '/^PACKAGES=(/,/^)/p' scripts/install-deps.sh | sed '1d;$d' | tr -s ' \n' '\n' | sed '/^$/d;/^#/d')
missing=()
for p in $deps; do
  [[ "$not_for_build" == *" $p "* ]] && continue
  grep -qE "(^|[[:space:]])$(printf '%s' "$p" | sed 's/[+.]/\\&/g')([[:space:]]|\\\\|$)" docker/Dockerfile || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "FAIL: docker/Dockerfile's build stage lacks ${missing[*]} (scripts/install-deps.sh installs them)" >&2
  failures=$((failures + 1))
else
  echo "the build stage installs every build package of scripts/install-deps.sh"
fi

if [ "$failures" -ne 0 ]; then
  echo "deploy checks: $failures failed" >&2
  exit 1
fi
echo "deploy checks: all passed"
