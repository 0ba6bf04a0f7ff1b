#!/usr/bin/env bash
# Installs the Node.js packages the polyglot tests use (from the npm registry), once.
set -euo pipefail
cd "$(dirname "$0")/../tests/polyglot"
if [ ! -d node_modules/@grpc/grpc-js ] || [ ! -d node_modules/@grpc/proto-loader ]; then
  echo "installing node test packages"
  npm install --no-audit --no-fund --silent >/dev/null
fi
