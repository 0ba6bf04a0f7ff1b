#!/usr/bin/python3
"""Polyglot test and example: WorkQueue.Consume from a plain generated Python stub — a worker
that grants credits, gets jobs pushed as they become ready, and acks, nacks and extends on the
same stream.

Usage: python_consume_stream.py HOST:PORT    (run_with_server.sh appends the address)

1. Credits bound what is outstanding: 10 credits and no ack bring 10 jobs and no 11th (the
   queue shows 10 leased); then, one more credit with each ack (one message), all 300 jobs are
   delivered once, never more than 10 unacked, every ack answered OK with its request id.
2. Lease rules hold on the stream: an ack with a stale token is refused (FAILED_PRECONDITION)
   and the stream goes on; extend answers the new deadline; a transient nack answers retry_at
   and the job comes back as attempt 2.
3. Pushed, not polled: with a credit waiting on an empty queue, a job enqueued later arrives
   within half a second of the enqueue's answer (polling alone would take about 0.8 s here).
4. A broken stream: 5 jobs delivered on a stream that is then cancelled come back when their
   2 s leases expire, to another stream, with new tokens; the old tokens are refused.
5. Topped up in batches: a stream leases once a quarter of its window is free, so with 8
   credits one credit back brings no job and a second brings two; a worker that holds nothing
   and grants 1 credit (a smaller window) gets a job at once.
6. Bad input ends the stream with INVALID_ARGUMENT (credits before a start; a message with
   neither credits nor an ack, nack or extend).

A response carries every job and answer that was ready when the queue wrote it (its `jobs` and
`settled` lists); Stream hands them out one at a time.
"""

import os
import queue
import sys
import threading
import time
import uuid

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import grpc  # noqa: E402
from google.protobuf import duration_pb2  # noqa: E402

import polyglot_common as pc  # noqa: E402
from polyglot_common import DEADLINE_S, check, check_eq  # noqa: E402

pc.generate_stubs(["conduit/queue/v1/queue.proto"],
                  [os.path.join(pc.repo_root(), "proto"), pc.GRPC_PROTO_DIR, pc.WKT_DIR])
from conduit.queue.v1 import queue_pb2 as pb  # noqa: E402
from conduit.queue.v1 import queue_pb2_grpc as pb_grpc  # noqa: E402

OK = 0
FAILED_PRECONDITION = grpc.StatusCode.FAILED_PRECONDITION.value[0]


class Item:
    """One job or one settle answer of a Consume response."""

    def __init__(self, job=None, settled=None):
        self.job = job
        self.settled = settled


class Stream:
    """One Consume call: send() queues a request, answers are read from `responses`."""

    def __init__(self, stub, queue_name, credits, visibility_s=30, worker="py-worker"):
        self.requests = queue.Queue()
        self.next_id = 0
        self.requests.put(pb.ConsumeRequest(start=pb.ConsumeStart(
            queue=queue_name, worker_id=worker, credits=credits,
            visibility_timeout=duration_pb2.Duration(seconds=visibility_s))))
        self.call = stub.Consume(iter(self.requests.get, None), timeout=120)
        # Answers are read on a thread into a queue, so the test can wait for one with a timeout.
        self.answers = queue.Queue()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        try:
            for m in self.call:
                for job in m.jobs:
                    self.answers.put(Item(job=job))
                for settled in m.settled:
                    self.answers.put(Item(settled=settled))
        except grpc.RpcError as e:
            self.answers.put(e)
        self.answers.put(None)  # the end of the stream

    def send(self, **kind):
        self.next_id += 1
        self.requests.put(pb.ConsumeRequest(request_id=self.next_id, **kind))
        return self.next_id

    def ack(self, job, credits=0):
        """Acks `job`; with credits, asks for that many more jobs in the same message."""
        return self.send(ack=pb.AckRequest(job_id=job.job_id, lease_token=job.lease_token),
                         credits=credits)

    def grant(self, n):
        self.requests.put(pb.ConsumeRequest(credits=n))

    def next(self, timeout=DEADLINE_S):
        """The next job or answer (an Item); None at the end of the stream; queue.Empty after
        `timeout`."""
        m = self.answers.get(timeout=timeout)
        if isinstance(m, grpc.RpcError):
            raise m
        return m

    def close(self):
        self.requests.put(None)  # half-close


def enqueue(stub, name, payloads):
    stub.Enqueue(pb.EnqueueRequest(queue=name, jobs=[pb.NewJob(payload=p) for p in payloads]),
                 timeout=DEADLINE_S)


def credits_bound_outstanding(stub, name):
    enqueue(stub, name, [b"job-%d" % i for i in range(300)])
    s = Stream(stub, name, credits=10)
    # Ten credits, no ack: ten jobs come, and no eleventh.
    held = [s.next().job for _ in range(10)]
    try:
        extra = s.next(timeout=1.0)
        raise pc.CheckFailed("an 11th message without a credit: %s" % extra)
    except queue.Empty:
        pass
    stats = stub.GetQueueStats(pb.GetQueueStatsRequest(queue=name), timeout=DEADLINE_S)
    check_eq(stats.leased, 10, "leased with 10 credits and no ack")
    delivered, acked, answered, outstanding_max = set(), 0, {}, 10
    pending_ids = set()
    for job in held:
        delivered.add(job.job_id)
        pending_ids.add(s.ack(job, credits=1))
        acked += 1
    while len(answered) < 300:
        m = s.next()
        if m.job is not None:
            check(m.job.job_id not in delivered, "job %d delivered once" % m.job.job_id)
            delivered.add(m.job.job_id)
            outstanding_max = max(outstanding_max, len(delivered) - acked)
            pending_ids.add(s.ack(m.job, credits=1))
            acked += 1
        else:
            check_eq(m.settled.code, OK, m.settled.message)
            check(m.settled.request_id in pending_ids, "a known request id")
            answered[m.settled.request_id] = m.settled.job_id
    check_eq(len(delivered), 300, "jobs delivered")
    check(outstanding_max <= 10, "at most 10 unacked at a time (saw %d)" % outstanding_max)
    stats = stub.GetQueueStats(pb.GetQueueStatsRequest(queue=name), timeout=DEADLINE_S)
    check_eq((stats.ready, stats.leased), (0, 0), "queue drained")
    s.close()
    check(s.next() is None, "the stream ends after the half-close")
    print("  ok: 10 credits: 10 jobs and no 11th until an ack; 300 jobs, each delivered once with "
          "at most %d unacked, 300 acks answered" % outstanding_max)


def lease_rules(stub, name):
    enqueue(stub, name, [b"rules"])
    s = Stream(stub, name, credits=1)
    job = s.next().job
    stale = s.send(ack=pb.AckRequest(job_id=job.job_id, lease_token=job.lease_token + "x"))
    r = s.next().settled
    check_eq((r.request_id, r.code), (stale, FAILED_PRECONDITION), "stale token refused")
    ext = s.send(extend=pb.ExtendLeaseRequest(job_id=job.job_id, lease_token=job.lease_token,
                                              extension=duration_pb2.Duration(seconds=60)))
    r = s.next().settled
    check_eq((r.request_id, r.code), (ext, OK), "extend: " + r.message)
    check(r.deadline.seconds > job.deadline.seconds, "extend moved the deadline")
    nack = s.send(nack=pb.NackRequest(job_id=job.job_id, lease_token=job.lease_token,
                                      reason="blip", retry_after=duration_pb2.Duration()))
    r = s.next().settled
    check_eq((r.request_id, r.code, r.dead), (nack, OK, False), "nack: " + r.message)
    s.grant(1)
    again = s.next().job
    check_eq((again.job_id, again.attempt), (job.job_id, 2), "the nacked job, attempt 2")
    s.ack(again)
    check_eq(s.next().settled.code, OK, "ack of attempt 2")
    s.close()
    print("  ok: stale token refused, extend and nack answered, the job back as attempt 2")


def pushed_not_polled(stub, name):
    s = Stream(stub, name, credits=1)
    # The stream waits with a credit on an empty queue. Its lease long-polls 1 s at a time, so at
    # 1.2 s it is 0.2 s into its second poll: polling alone would find the job about 0.8 s later.
    time.sleep(1.2)
    enqueue(stub, name, [b"late"])
    # From the enqueue's answer, so its own fsync (slow when the machine is busy) is not counted;
    # the job may even have arrived already.
    enqueued = time.monotonic()
    job = s.next().job
    latency = time.monotonic() - enqueued
    check(latency < 0.5, "pushed within 0.5 s of the enqueue's answer (took %.3f s)" % latency)
    s.ack(job)
    check_eq(s.next().settled.code, OK, "ack")
    s.close()
    print("  ok: a job enqueued later was pushed %.0f ms after its enqueue" % (latency * 1000))


def broken_stream(stub, name):
    enqueue(stub, name, [b"b%d" % i for i in range(5)])
    s = Stream(stub, name, credits=5, visibility_s=2)
    first = [s.next().job for _ in range(5)]
    s.call.cancel()
    cut = time.monotonic()
    t = Stream(stub, name, credits=5, worker="py-worker-2")
    again = [t.next().job for _ in range(5)]
    waited = time.monotonic() - cut
    check(waited >= 1.5, "back only when the leases expired (%.1f s)" % waited)
    check_eq(sorted(j.job_id for j in again), sorted(j.job_id for j in first), "the same jobs")
    check(all(j.lease_token != f.lease_token for j in again for f in first), "new tokens")
    stale = t.send(ack=pb.AckRequest(job_id=first[0].job_id, lease_token=first[0].lease_token))
    r = t.next().settled
    check_eq((r.request_id, r.code), (stale, FAILED_PRECONDITION), "the old token refused")
    for j in again:
        t.ack(j)
    for _ in again:
        check_eq(t.next().settled.code, OK, "ack")
    t.close()
    print("  ok: a cancelled stream's 5 jobs came back after %.1f s (2 s leases) with new tokens"
          % waited)


def topped_up_in_batches(stub, name):
    enqueue(stub, name, [b"t%d" % i for i in range(20)])
    s = Stream(stub, name, credits=8)
    held = [s.next().job for _ in range(8)]
    # A window of 8 is topped up 2 jobs at a time (a quarter of it): one credit back brings none.
    s.ack(held[0], credits=1)
    items = []
    try:
        while True:
            items.append(s.next(timeout=0.5))
    except queue.Empty:
        pass
    check_eq(len([i for i in items if i.job is not None]), 0, "jobs pushed with 1 of 8 credits free")
    check_eq([i.settled.code for i in items if i.settled is not None], [OK], "the ack answered")
    s.ack(held[1], credits=1)
    more, answered = [], 0
    while len(more) < 2 or answered < 1:  # the two jobs and the ack's answer, in either order
        m = s.next()
        if m.job is not None:
            more.append(m.job)
        else:
            check_eq(m.settled.code, OK, "ack")
            answered += 1
    check_eq(len(more), 2, "jobs pushed for 2 of 8 credits free")
    for job in held[2:] + more:
        s.ack(job)
    for _ in held[2:] + more:
        check_eq(s.next().settled.code, OK, "ack")
    # Holding nothing, the worker shrinks its window to 1: that credit brings a job at once.
    s.grant(1)
    last = s.next().job
    check(last is not None, "a job for the one credit of a worker holding nothing")
    s.ack(last)
    check_eq(s.next().settled.code, OK, "ack")
    s.close()
    stats = stub.GetQueueStats(pb.GetQueueStatsRequest(queue=name), timeout=DEADLINE_S)
    check_eq((stats.ready, stats.leased), (9, 0), "9 jobs left, none leased after the close")
    print("  ok: 8 credits: one credit back brought no job, a second brought two; holding "
          "nothing, a window of 1 got its job")


def bad_input(stub, name):
    start = pb.ConsumeRequest(start=pb.ConsumeStart(queue=name, worker_id="bad"))
    cases = [("credits before a start", [pb.ConsumeRequest(credits=5)]),
             ("a message with nothing in it", [start, pb.ConsumeRequest(request_id=7)])]
    for what, messages in cases:
        call = stub.Consume(iter(messages), timeout=DEADLINE_S)
        try:
            for _ in call:
                pass
        except grpc.RpcError as e:
            check_eq(e.code(), grpc.StatusCode.INVALID_ARGUMENT, what)
            print("  ok: %s -> INVALID_ARGUMENT (%s)" % (what, e.details()))
            continue
        raise pc.CheckFailed("%s: the stream ended OK" % what)


def main(address):
    channel = grpc.insecure_channel(address)
    pc.wait_ready(channel, address)
    stub = pb_grpc.WorkQueueStub(channel)
    name = "consume-" + uuid.uuid4().hex[:8]
    stub.CreateQueue(pb.CreateQueueRequest(name=name), timeout=DEADLINE_S)
    credits_bound_outstanding(stub, name)
    lease_rules(stub, name)
    pushed_not_polled(stub, name)
    broken_stream(stub, name)
    topped_up_in_batches(stub, name)
    bad_input(stub, name)
    stub.DeleteQueue(pb.DeleteQueueRequest(name=name), timeout=DEADLINE_S)


if __name__ == "__main__":
    pc.run_main("python_consume_stream", main)
