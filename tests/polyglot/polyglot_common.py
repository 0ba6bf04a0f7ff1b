"""Shared helpers for the Python polyglot tests (python_client.py, python_cluster_client.py, ...).

Stubs are generated at test time, into a temporary folder, with Debian's protoc 3.21 and
grpc_python_plugin. (python3-grpc-tools' bundled protoc is 3.5 and rejects proto3 `optional`,
which log.proto uses.) `-I/usr/share/grpc-proto/grpc`, not `/usr/share/grpc-proto`: the latter
would generate a `grpc/` package that shadows the real grpc module. The well-known types
(google/protobuf/*.proto) resolve from /usr/include and are imported from python3-protobuf.
"""

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
import traceback

import grpc

# Every RPC gets this deadline (seconds), so a hung server fails the test instead of stalling it.
DEADLINE_S = 10.0

PROTOC = "/usr/bin/protoc"
GRPC_PYTHON_PLUGIN = "/usr/bin/grpc_python_plugin"
GRPC_PROTO_DIR = "/usr/share/grpc-proto/grpc"
WKT_DIR = "/usr/include"


class CheckFailed(Exception):
    """A test expectation did not hold."""


def repo_root():
    """The Conduit source tree: $CONDUIT_SOURCE_DIR, else two levels above this file."""
    root = os.environ.get("CONDUIT_SOURCE_DIR")
    if root:
        return root
    return os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def generate_stubs(proto_files, include_dirs):
    """Runs protoc for `proto_files` (paths relative to an include dir) into a fresh temp dir,
    puts that dir first on sys.path and returns it. The dir is removed at exit. Called at import
    time, before run_main, so it exits (status 1, a FAIL message) itself when it cannot work."""
    needed = {PROTOC: "protobuf-compiler", GRPC_PYTHON_PLUGIN: "protobuf-compiler-grpc",
              GRPC_PROTO_DIR: "grpc-proto", os.path.join(WKT_DIR, "google/protobuf"): "libprotobuf-dev"}
    for path, package in needed.items():
        if not os.path.exists(path):
            _exit_fail("%s is missing: apt-get install %s" % (path, package))
    out = tempfile.mkdtemp(prefix="conduit-polyglot-stubs-")
    atexit.register(shutil.rmtree, out, ignore_errors=True)
    cmd = [PROTOC]
    cmd += ["-I" + d for d in include_dirs]
    cmd += ["--python_out=" + out, "--grpc_out=" + out,
            "--plugin=protoc-gen-grpc=" + GRPC_PYTHON_PLUGIN]
    cmd += list(proto_files)
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        _exit_fail("protoc failed (%d): %s\n%s" % (result.returncode, " ".join(cmd), result.stderr))
    sys.path.insert(0, out)
    return out


def _exit_fail(message):
    print("%s: FAIL: %s" % (os.path.basename(sys.argv[0]), message), file=sys.stderr)
    sys.exit(1)


def check(condition, message):
    """Fails the test with `message` unless `condition` holds."""
    if not condition:
        raise CheckFailed(message)


def check_eq(actual, expected, what):
    if actual != expected:
        raise CheckFailed("%s: expected %r, got %r" % (what, expected, actual))


def expect_code(expected_code, what, fn, *args, **kwargs):
    """Calls fn(*args, **kwargs) and checks that it fails with gRPC status `expected_code`."""
    try:
        fn(*args, **kwargs)
    except grpc.RpcError as e:
        if e.code() != expected_code:
            raise CheckFailed("%s: expected %s, got %s (%s)" % (what, expected_code.name,
                                                                e.code().name, e.details()))
        print("  ok: %s -> %s (%s)" % (what, e.code().name, e.details()))
        return e
    raise CheckFailed("%s: expected %s, but the call succeeded" % (what, expected_code.name))


def wait_ready(channel, address):
    try:
        grpc.channel_ready_future(channel).result(timeout=DEADLINE_S)
    except grpc.FutureTimeoutError:
        raise CheckFailed("could not connect to %s within %.0f s" % (address, DEADLINE_S))


def run_main(name, main):
    """Runs main(address) with the address from the last command-line argument; exits 0 on
    success, 1 with a clear message on any failure."""
    if len(sys.argv) < 2:
        print("usage: %s HOST:PORT" % sys.argv[0], file=sys.stderr)
        sys.exit(2)
    _run(name, main, sys.argv[-1])


def run_cluster_main(name, main):
    """Runs main(addresses), the brokers of a cluster, from the last command-line argument or,
    without one, from $CONDUIT_ADDRS (run_with_cluster.sh sets it): host:port, comma-separated.
    Exits 0 on success, 1 with a clear message on any failure."""
    spec = sys.argv[-1] if len(sys.argv) >= 2 else os.environ.get("CONDUIT_ADDRS", "")
    addresses = [a for a in spec.split(",") if a]
    if not addresses:
        print("usage: %s HOST:PORT,HOST:PORT,...  (or set CONDUIT_ADDRS)" % sys.argv[0],
              file=sys.stderr)
        sys.exit(2)
    _run(name, main, addresses)


def _run(name, main, arg):
    try:
        main(arg)
    except CheckFailed as e:
        print("%s: FAIL: %s" % (name, e), file=sys.stderr)
        sys.exit(1)
    except grpc.RpcError as e:
        traceback.print_exc()
        print("%s: FAIL: unexpected RPC error %s: %s" % (name, e.code().name, e.details()),
              file=sys.stderr)
        sys.exit(1)
    except Exception:  # noqa: BLE001 - any other error is a test failure too
        traceback.print_exc()
        print("%s: FAIL: unexpected exception (see above)" % name, file=sys.stderr)
        sys.exit(1)
    print("%s: PASS" % name)
