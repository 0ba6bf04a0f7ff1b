#!/usr/bin/env bash
# Client stubs generated from proto/ (`make stubs`): Python messages and gRPC stubs with Debian's
# protoc and grpc_python_plugin, the recipe proto/README.md explains.
#
# Usage: make-stubs.sh [OUT=stubs]   then: PYTHONPATH=OUT/python /usr/bin/python3 ...
#   OUT/python/conduit/<svc>/v1/<svc>_pb2.py, <svc>_pb2_grpc.py for the public services:
#   log, coordinator, queue (with bridges) and security.
# Node.js needs no generated code: @grpc/proto-loader reads proto/ at run time (proto/README.md).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/stubs}
protos=(conduit/log/v1/log.proto conduit/coordinator/v1/coordinator.proto
        conduit/queue/v1/queue.proto conduit/queue/v1/bridge.proto
        conduit/security/v1/security.proto)
for tool in /usr/bin/protoc /usr/bin/grpc_python_plugin; do
  [ -x "$tool" ] || { echo "make-stubs: $tool is missing (make deps installs it)" >&2; exit 1; }
done
mkdir -p "$out/python"
# python3-grpc-tools' own protoc is too old for proto3 `optional`: Debian's protoc with the
# plugin instead. /usr/include holds the well-known types (google/protobuf/*.proto).
/usr/bin/protoc -I"$root/proto" -I/usr/include --python_out="$out/python" \
  --grpc_out="$out/python" --plugin=protoc-gen-grpc=/usr/bin/grpc_python_plugin "${protos[@]}"
echo "python stubs in $out/python (PYTHONPATH=$out/python; the grpcio and protobuf modules from" \
     "apt: python3-grpcio, /usr/bin/python3)"
