#!/usr/bin/python3
"""Asks a Conduit server for its gRPC health, as Kubernetes' gRPC probes do.

Usage: grpc_health_check.py HOST:PORT [SERVICE ...] [--wait SECONDS] [--expect-unknown NAME]

Checks grpc.health.v1.Health/Check for the whole server ("") and for every SERVICE, and
prints one line each. Exit 0 when all are SERVING (and every --expect-unknown name gets
NOT_FOUND, as the health service answers for names it does not know); 1 otherwise. --wait
retries the first check until the server answers (default 20 s).

Stubs come from Debian's grpc-proto (/usr/share/grpc-proto/grpc/health/v1/health.proto),
generated into a temporary folder with Debian's protoc and grpc_python_plugin; grpcio is
python3-grpcio. No grpc_health_probe needed.
"""

import argparse
import atexit
import shutil
import subprocess
import sys
import tempfile
import time

import grpc

DEADLINE_S = 5.0


def load_health_stubs():
    out = tempfile.mkdtemp(prefix="conduit-health-stubs-")
    atexit.register(shutil.rmtree, out, ignore_errors=True)
    subprocess.run(
        ["/usr/bin/protoc", "-I/usr/share/grpc-proto/grpc", "--python_out=" + out,
         "--grpc_out=" + out, "--plugin=protoc-gen-grpc=/usr/bin/grpc_python_plugin",
         "health/v1/health.proto"],
        check=True)
    sys.path.insert(0, out)
    from health.v1 import health_pb2, health_pb2_grpc  # noqa: E402 (generated just now)
    return health_pb2, health_pb2_grpc


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("address")
    parser.add_argument("services", nargs="*")
    parser.add_argument("--wait", type=float, default=20.0)
    parser.add_argument("--expect-unknown", action="append", default=[])
    args = parser.parse_args()

    health_pb2, health_pb2_grpc = load_health_stubs()
    channel = grpc.insecure_channel(args.address)
    stub = health_pb2_grpc.HealthStub(channel)
    serving = health_pb2.HealthCheckResponse.SERVING

    deadline = time.monotonic() + args.wait
    while True:
        try:
            stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=DEADLINE_S)
            break
        except grpc.RpcError as e:
            if time.monotonic() > deadline:
                print("FAIL %s: no health answer after %.0fs: %s" % (args.address, args.wait, e.code()))
                return 1
            time.sleep(0.5)

    ok = True
    for name in [""] + args.services:
        status = stub.Check(health_pb2.HealthCheckRequest(service=name), timeout=DEADLINE_S).status
        label = health_pb2.HealthCheckResponse.ServingStatus.Name(status)
        print("health %s service=%r: %s" % (args.address, name, label))
        ok = ok and status == serving
    for name in args.expect_unknown:
        try:
            stub.Check(health_pb2.HealthCheckRequest(service=name), timeout=DEADLINE_S)
            print("health %s service=%r: answered, expected NOT_FOUND" % (args.address, name))
            ok = False
        except grpc.RpcError as e:
            print("health %s service=%r: %s" % (args.address, name, e.code().name))
            ok = ok and e.code() == grpc.StatusCode.NOT_FOUND
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
