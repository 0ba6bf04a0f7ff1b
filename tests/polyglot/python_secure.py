#!/usr/bin/python3
"""Polyglot test: examples/python/secure_client.py against a conduit-standalone that
requires a client certificate, checks bearer tokens and enforces ACLs.

Usage: python_secure.py HOST:PORT, run by run_with_secure_server.sh, whose environment gives the
CA, the worker's certificate and key, alice's token and mallory's (valid, without grants).

With the example's own functions (channel_credentials, connect, run) it checks that
  (a) over mTLS with alice's token the example's flow works, twice (the second run keeps the
      topic and the queue): the records come back intact, the leased job is the one enqueued
      and the queue is empty afterwards;
  (b) the same flow with mallory's token fails with PERMISSION_DENIED naming User:mallory, and
      so do her Produce, Fetch, Enqueue and Lease on alice's topic and queue; with a garbage
      token it fails with UNAUTHENTICATED; with the certificate and no token, PERMISSION_DENIED
      naming the certificate's principal (the token, when sent, names the caller instead);
  (c) over a plaintext channel to the TLS port it fails with UNAVAILABLE;
  (d) over TLS with alice's token but without a client certificate it fails with UNAVAILABLE;
and that none of the refused runs created its topic. Exit status 0 on success, 1 with a "FAIL:"
message on the first failed expectation.
"""

import os
import sys
import uuid

sys.dont_write_bytecode = True  # keep the source tree free of __pycache__
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import grpc  # noqa: E402

import polyglot_common as pc  # noqa: E402
from polyglot_common import DEADLINE_S, check, check_eq, expect_code  # noqa: E402

sys.path.insert(0, os.path.join(pc.repo_root(), "examples", "python"))
import secure_client as ex  # noqa: E402  (generates the stubs it imports)

StatusCode = grpc.StatusCode
WORKER_PRINCIPAL = "User:spiffe://conduit.dev/worker"


def env(name):
    value = os.environ.get(name, "")
    if not value:
        raise pc.CheckFailed("$%s is not set: run me with run_with_secure_server.sh" % name)
    return value


def main(address):
    ca, cert, key = env("CONDUIT_TLS_CA"), env("CONDUIT_TLS_CERT"), env("CONDUIT_TLS_KEY")
    good_token, no_grants_token = env("CONDUIT_TOKEN"), env("CONDUIT_TOKEN_NO_GRANTS")
    prefix = env("CONDUIT_SECURE_PREFIX")
    run_id = uuid.uuid4().hex[:12]
    topic, queue = "%spy-%s" % (prefix, run_id), "%spy-%s" % (prefix, run_id)

    def channel(token, with_cert=True):
        return ex.connect(address, ex.channel_credentials(
            ca, token, cert if with_cert else "", key if with_cert else ""))

    # --- (a) mTLS and alice's token: the example works, and works again on what it left.
    alice = channel(good_token)
    pc.wait_ready(alice, address)
    log = ex.log_pb2_grpc.LogServiceStub(alice)
    work = ex.queue_pb2_grpc.WorkQueueStub(alice)
    for run in (1, 2):
        outcome = ex.run(alice, topic, queue)
        first = (run - 1) * len(ex.RECORDS)
        check_eq(outcome.records,
                 [(first + i, k, v) for i, (k, v) in enumerate(ex.RECORDS)],
                 "run %d: records fetched back (offset, key, value)" % run)
        check_eq(outcome.leased_job_id, outcome.enqueued_job_id,
                 "run %d: the leased job is the one enqueued" % run)
        check_eq(outcome.job_payload, ex.JOB, "run %d: leased job payload" % run)
    stats = work.GetQueueStats(ex.queue_pb2.GetQueueStatsRequest(queue=queue), timeout=DEADLINE_S)
    check_eq((stats.ready, stats.delayed, stats.leased, stats.dead), (0, 0, 0, 0),
             "queue stats (ready, delayed, leased, dead) after two acked jobs")
    print("  ok: (a) mTLS + alice's token: the example ran twice on %s and %s" % (topic, queue))

    # --- (b) a valid token without grants, a garbage token, and the certificate alone.
    mallory = channel(no_grants_token)
    refused = {}  # topic a refused run tried to create -> what it was
    mallory_topic = topic + "-mallory"
    refused[mallory_topic] = "mallory's run"
    e = expect_code(StatusCode.PERMISSION_DENIED, "mallory's token: the example's flow", ex.run,
                    mallory, mallory_topic, queue + "-mallory")
    check("User:mallory" in e.details(), "the refusal does not name User:mallory: " + e.details())
    mallory_log = ex.log_pb2_grpc.LogServiceStub(mallory)
    mallory_work = ex.queue_pb2_grpc.WorkQueueStub(mallory)
    lpb, qpb = ex.log_pb2, ex.queue_pb2
    for what, fn, request in [
            ("Produce to alice's topic", mallory_log.Produce,
             lpb.ProduceRequest(topic=topic, records=[lpb.ProduceRecord(value=b"x")])),
            ("Fetch from alice's topic", mallory_log.Fetch,
             lpb.FetchRequest(topic=topic, partition=0, offset=0)),
            ("Enqueue to alice's queue", mallory_work.Enqueue,
             qpb.EnqueueRequest(queue=queue, jobs=[qpb.NewJob(payload=b"x")])),
            ("Lease from alice's queue", mallory_work.Lease,
             qpb.LeaseRequest(queue=queue, worker_id="mallory"))]:
        expect_code(StatusCode.PERMISSION_DENIED, "mallory's token: " + what, fn, request,
                    timeout=DEADLINE_S)
    mallory.close()

    garbage_topic = topic + "-garbage"
    refused[garbage_topic] = "the garbage token's run"
    garbage = channel("not-a-token-" + run_id)
    expect_code(StatusCode.UNAUTHENTICATED, "a garbage token: the example's flow", ex.run,
                garbage, garbage_topic, queue + "-garbage")
    garbage.close()

    cert_topic = topic + "-cert-only"
    refused[cert_topic] = "the certificate-only run"
    cert_only = channel("")
    e = expect_code(StatusCode.PERMISSION_DENIED, "the worker's certificate without a token",
                    ex.run, cert_only, cert_topic, queue + "-cert-only")
    check(WORKER_PRINCIPAL in e.details(),
          "the refusal does not name %s: %s" % (WORKER_PRINCIPAL, e.details()))
    cert_only.close()

    # --- (c) plaintext to the TLS port.
    plain_topic = topic + "-plaintext"
    refused[plain_topic] = "the plaintext run"
    plaintext = grpc.insecure_channel(address)
    expect_code(StatusCode.UNAVAILABLE, "a plaintext channel to the TLS port", ex.run,
                plaintext, plain_topic, queue + "-plaintext")
    plaintext.close()

    # --- (d) TLS and a good token, but no client certificate where one is required.
    no_cert_topic = topic + "-no-cert"
    refused[no_cert_topic] = "the run without a client certificate"
    no_cert = channel(good_token, with_cert=False)
    expect_code(StatusCode.UNAVAILABLE, "TLS + alice's token without a client certificate",
                ex.run, no_cert, no_cert_topic, queue + "-no-cert")
    no_cert.close()

    # None of the refused runs got as far as creating its topic (alice may see them all).
    listed = {t.name for t in log.ListTopics(lpb.ListTopicsRequest(), timeout=DEADLINE_S).topics}
    check(topic in listed, "alice's ListTopics does not list her own %s: %s" % (topic, listed))
    for name, what in refused.items():
        check(name not in listed, "%s created topic %s" % (what, name))
    print("  ok: no refused run created its topic")
    alice.close()


if __name__ == "__main__":
    pc.run_main("python_secure", main)
