#!/usr/bin/python3
"""A Conduit client over TLS with a bearer token on every call.

    export CONDUIT_TOKEN=...            # the token the server's --auth-token-file knows
    /usr/bin/python3 examples/python/secure_client.py --ca certs/dev/ca.pem \\
        --cert certs/dev/worker.pem --key certs/dev/worker.key 127.0.0.1:7070

It trusts the server's certificate authority (--ca), presents a client certificate when it has
one (--cert and --key: mutual TLS, for a server started with --tls-client-ca) and sends
`authorization: Bearer <token>` with every call. Then it does what a service does:

  1. creates topic "secure.orders" (keeps it if it exists) and produces two records,
  2. fetches them back,
  3. creates queue "secure.emails" (keeps it if it exists), enqueues a job, leases it, acks it.

Settings come from the arguments or the environment: the address (last argument,
$CONDUIT_ADDRESS), --ca ($CONDUIT_TLS_CA), --cert ($CONDUIT_TLS_CERT), --key ($CONDUIT_TLS_KEY),
and the token from --token-file or $CONDUIT_TOKEN (never an argument: `ps` would show it).

Who the caller is, the server decides: the principal of the token (its line in the token file)
or, without a token, of the client certificate (User:<URI SAN or CN>). What it may do, the
server's ACLs decide; for this example, for instance:
    allow User:alice topic prefixed secure. Create,Write,Read,ViewPayload
    allow User:alice queue prefixed secure. Create,Write,Read
An unknown token fails with UNAUTHENTICATED, a missing grant with PERMISSION_DENIED, a plaintext
connection or (when the server requires one) a missing client certificate with UNAVAILABLE.

The gRPC stubs are generated at start from proto/ with Debian's protoc and grpc_python_plugin
(apt: python3-grpcio, protobuf-compiler, protobuf-compiler-grpc, libprotobuf-dev).
"""

import argparse
import atexit
import collections
import os
import shutil
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True  # keep the source tree free of __pycache__

import grpc  # noqa: E402  (python3-grpcio)
from google.protobuf import duration_pb2  # noqa: E402  (python3-protobuf)

TOPIC = "secure.orders"
QUEUE = "secure.emails"
RPC_TIMEOUT_S = 10.0  # every call has a deadline
RECORDS = [(b"order-1001", b'{"total": "25.99"}'), (b"order-1002", b'{"total": "7.50"}')]
JOB = b'{"to": "alice@example.com", "template": "receipt", "order": 1001}'


def load_stubs():
    """Generates the Python stubs of the log and queue protos into a temporary directory (removed
    at exit) and puts it on sys.path."""
    root = os.environ.get("CONDUIT_SOURCE_DIR") or os.path.abspath(
        os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    out = tempfile.mkdtemp(prefix="conduit-example-stubs-")
    atexit.register(shutil.rmtree, out, ignore_errors=True)
    cmd = ["/usr/bin/protoc", "-I" + os.path.join(root, "proto"), "-I/usr/include",
           "--python_out=" + out, "--grpc_out=" + out,
           "--plugin=protoc-gen-grpc=/usr/bin/grpc_python_plugin",
           "conduit/log/v1/log.proto", "conduit/queue/v1/queue.proto"]
    try:
        subprocess.run(cmd, check=True, capture_output=True, text=True)
    except (OSError, subprocess.CalledProcessError) as e:
        sys.exit("secure_client: cannot generate the gRPC stubs (%s): %s\nneeds apt packages "
                 "protobuf-compiler, protobuf-compiler-grpc, libprotobuf-dev"
                 % (" ".join(cmd), getattr(e, "stderr", e)))
    sys.path.insert(0, out)


load_stubs()
from conduit.log.v1 import log_pb2, log_pb2_grpc  # noqa: E402
from conduit.queue.v1 import queue_pb2, queue_pb2_grpc  # noqa: E402


def channel_credentials(ca_file, token="", cert_file="", key_file=""):
    """TLS that trusts the CA in `ca_file`, presents the client certificate `cert_file` with its
    key `key_file` when both are given, and sends `token` as a bearer token on every call when
    one is given."""
    def read(path):
        with open(path, "rb") as f:
            return f.read()

    tls = grpc.ssl_channel_credentials(
        root_certificates=read(ca_file),
        private_key=read(key_file) if key_file else None,
        certificate_chain=read(cert_file) if cert_file else None)
    if not token:
        return tls
    # Adds "authorization: Bearer <token>" to each call's metadata. gRPC sends call credentials
    # only over a secure channel, so the token never leaves in plaintext.
    return grpc.composite_channel_credentials(tls, grpc.access_token_call_credentials(token))


def connect(address, credentials):
    """A channel to `address` ("host:port"; the server's certificate must name the host)."""
    return grpc.secure_channel(address, credentials)


# What run() did: the records fetched back as (offset, key, value), and the job leased and acked.
Outcome = collections.namedtuple("Outcome", "records enqueued_job_id leased_job_id job_payload")


def run(channel, topic=TOPIC, queue=QUEUE):
    """Produces RECORDS to `topic` and fetches them back, then runs one job through `queue`
    (enqueue, lease, ack); creates the topic and the queue when they do not exist. Raises
    grpc.RpcError when a call fails."""
    log = log_pb2_grpc.LogServiceStub(channel)
    work = queue_pb2_grpc.WorkQueueStub(channel)

    # 1. A topic, and two records in it.
    try:
        log.CreateTopic(log_pb2.CreateTopicRequest(name=topic, partitions=1),
                        timeout=RPC_TIMEOUT_S)
        print("created topic %s" % topic)
    except grpc.RpcError as e:
        if e.code() != grpc.StatusCode.ALREADY_EXISTS:
            raise
    produced = log.Produce(log_pb2.ProduceRequest(topic=topic, records=[
        log_pb2.ProduceRecord(key=key, value=value) for key, value in RECORDS]),
        timeout=RPC_TIMEOUT_S)
    first = produced.positions[0]
    print("produced %d records to %s partition %d from offset %d"
          % (len(RECORDS), topic, first.partition, first.offset))

    # 2. The same records, fetched back.
    fetched = log.Fetch(log_pb2.FetchRequest(topic=topic, partition=first.partition,
                                             offset=first.offset, max_records=len(RECORDS)),
                        timeout=RPC_TIMEOUT_S)
    records = [(r.offset, r.key, r.value) for r in fetched.records]
    for offset, key, value in records:
        print("  offset %d: %s = %s" % (offset, key.decode(), value.decode()))

    # 3. A queue, and one job through it.
    try:
        work.CreateQueue(queue_pb2.CreateQueueRequest(name=queue), timeout=RPC_TIMEOUT_S)
        print("created queue %s" % queue)
    except grpc.RpcError as e:
        if e.code() != grpc.StatusCode.ALREADY_EXISTS:
            raise
    enqueued = work.Enqueue(queue_pb2.EnqueueRequest(queue=queue, jobs=[
        queue_pb2.NewJob(payload=JOB)]), timeout=RPC_TIMEOUT_S)
    job_id = enqueued.jobs[0].job_id
    print("enqueued job %d" % job_id)
    leased = work.Lease(queue_pb2.LeaseRequest(queue=queue, worker_id="secure-client",
                                               max_jobs=1,
                                               max_wait=duration_pb2.Duration(seconds=5)),
                        timeout=RPC_TIMEOUT_S)
    if not leased.jobs:
        raise RuntimeError("no job to lease from queue %s after 5 s" % queue)
    job = leased.jobs[0]
    print("leased job %d (attempt %d): %s" % (job.job_id, job.attempt, job.payload.decode()))
    work.Ack(queue_pb2.AckRequest(queue=queue, job_id=job.job_id, lease_token=job.lease_token),
             timeout=RPC_TIMEOUT_S)
    print("acked job %d" % job.job_id)
    return Outcome(records, job_id, job.job_id, job.payload)


def main(argv=None):
    env = os.environ.get
    parser = argparse.ArgumentParser(description="Conduit over TLS with a bearer token.")
    parser.add_argument("address", nargs="?", default=env("CONDUIT_ADDRESS", "127.0.0.1:7070"),
                        help="host:port ($CONDUIT_ADDRESS)")
    parser.add_argument("--ca", default=env("CONDUIT_TLS_CA"),
                        help="PEM file of the CA that signed the server's certificate "
                             "($CONDUIT_TLS_CA)")
    parser.add_argument("--cert", default=env("CONDUIT_TLS_CERT"),
                        help="PEM client certificate, for mTLS ($CONDUIT_TLS_CERT)")
    parser.add_argument("--key", default=env("CONDUIT_TLS_KEY"),
                        help="PEM key of --cert ($CONDUIT_TLS_KEY)")
    parser.add_argument("--token-file", help="a file holding the bearer token "
                                             "(default: $CONDUIT_TOKEN)")
    parser.add_argument("--topic", default=TOPIC)
    parser.add_argument("--queue", default=QUEUE)
    args = parser.parse_args(argv)
    if not args.ca:
        parser.error("--ca (or $CONDUIT_TLS_CA) is required")
    if bool(args.cert) != bool(args.key):
        parser.error("--cert and --key go together")
    if args.token_file:
        with open(args.token_file, encoding="utf-8") as f:
            token = f.read().strip()
    else:
        token = env("CONDUIT_TOKEN", "")

    channel = connect(args.address, channel_credentials(args.ca, token, args.cert, args.key))
    try:
        run(channel, args.topic, args.queue)
    except grpc.RpcError as e:
        print("secure_client: %s: %s" % (e.code().name, e.details()), file=sys.stderr)
        return 1
    finally:
        channel.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
