#!/usr/bin/python3
"""`make stubs` (scripts/make-stubs.sh) as a user runs it: the Python stubs it writes import
with Debian's grpcio and talk to a real server: create a topic, produce a record, fetch it back.

Usage: make_stubs_test.py HOST:PORT   (run_with_server.sh appends the address)
"""
import os
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def main():
    addr = sys.argv[1]
    with tempfile.TemporaryDirectory(prefix="conduit-stubs-") as out:
        subprocess.run([os.path.join(ROOT, "scripts", "make-stubs.sh"), out], check=True)
        sys.path.insert(0, os.path.join(out, "python"))
        import grpc
        from conduit.log.v1 import log_pb2, log_pb2_grpc

        stub = log_pb2_grpc.LogServiceStub(grpc.insecure_channel(addr))
        stub.CreateTopic(log_pb2.CreateTopicRequest(name="stubs", partitions=1), timeout=10)
        produced = stub.Produce(log_pb2.ProduceRequest(
            topic="stubs", records=[log_pb2.ProduceRecord(value=b"from make stubs")]), timeout=10)
        offset = produced.positions[0].offset
        fetched = stub.Fetch(log_pb2.FetchRequest(topic="stubs", partition=0, offset=offset),
                             timeout=10)
        values = [r.value for r in fetched.records]
        if values != [b"from make stubs"]:
            print(f"FAIL: fetched {values}")
            return 1
    print("ok   make stubs: generated, imported, produced and fetched")
    return 0


if __name__ == "__main__":
    sys.exit(main())
