#!/usr/bin/python3
"""Polyglot test: LogService.ProduceStream from a plain generated Python stub (Debian's
python3-grpcio), the way a caller with one record at a time uses it.

Usage: python_produce_stream.py HOST:PORT    (run_with_server.sh appends the address)

1. Order and positions: 3,000 messages of one record each, idempotent (producer id, epoch and a
   sequence per partition), spread over 3 partitions, one bad message in the middle: every
   answer comes back in message order with its sequence echoed, the bad one refused (NOT_FOUND)
   while the stream goes on, and each partition's offsets are dense and in send order.
   The last message of each partition, sent again, is answered as a duplicate at its offset.
2. A stream cut mid-way: 400 more messages, the call cancelled after 100 answers; every message
   without an answer is sent again, unchanged, on a new stream: the log holds each value once.
3. Flow control: 30,000 messages offered while the caller reads no answer for 4 s: appends stop
   (the same count 1.5 s apart, short of the total): the broker stopped reading; once the caller
   reads, all are appended, and the answers that waited come several to a response (fewer
   responses than half the messages).
4. Plain messages (no producer id), which the broker groups: 3,000 one-record messages to 3
   partitions with, in the middle, a record for a partition that does not exist, a message with
   no records, a record whose event time is in the year 10000 (outside protobuf's Timestamp
   range), an idempotent message and a message to another topic: each refused message gets
   its own error while the others are appended, every answer comes in message order, and each
   partition's log holds the values in send order at the answered offsets.
"""

import os
import sys
import threading
import time
import uuid

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import grpc  # noqa: E402

import polyglot_common as pc  # noqa: E402
from polyglot_common import DEADLINE_S, check, check_eq  # noqa: E402

pc.generate_stubs(["conduit/log/v1/log.proto"],
                  [os.path.join(pc.repo_root(), "proto"), pc.GRPC_PROTO_DIR, pc.WKT_DIR])
from conduit.log.v1 import log_pb2 as pb  # noqa: E402
from conduit.log.v1 import log_pb2_grpc as pb_grpc  # noqa: E402

PARTITIONS = 3
FAILED_PRECONDITION = grpc.StatusCode.FAILED_PRECONDITION.value[0]


class Sender:
    """Builds one-record ProduceStream messages of an idempotent producer: a sequence per
    partition, as Produce asks for."""

    def __init__(self, topic, producer):
        self.topic = topic
        self.producer = producer
        self.next_sequence = [0] * PARTITIONS

    def message(self, n, partition, value, sequence=None):
        if sequence is None:
            sequence = self.next_sequence[partition]
            self.next_sequence[partition] += 1
        request = pb.ProduceRequest(topic=self.topic, producer_id=self.producer.producer_id,
                                    producer_epoch=self.producer.producer_epoch)
        request.records.add(partition=partition, value=value)
        request.sequences.add(partition=partition, base_sequence=sequence)
        return pb.ProduceStreamRequest(sequence=n, request=request)


def plain_messages_in_order(stub, topic, sender):
    other = topic + "-other"
    stub.CreateTopic(pb.CreateTopicRequest(name=other, partitions=1), timeout=DEADLINE_S)
    before = [len(fetch_all(stub, topic, p)) for p in range(PARTITIONS)]
    messages, expect = [], {}  # expect: message number -> (topic, partition, value) or a code
    for n in range(3000):
        p = n % PARTITIONS
        value = b"plain%d" % n
        if n == 2100:
            messages.append(sender.message(n, p, value))
            expect[n] = (topic, p, value)
            continue
        request = pb.ProduceRequest(topic=other if n == 2500 else topic)
        if n == 700:
            request.records.add(partition=99, value=value)
            expect[n] = grpc.StatusCode.NOT_FOUND.value[0]
        elif n == 1400:
            expect[n] = grpc.StatusCode.INVALID_ARGUMENT.value[0]
        elif n == 1800:
            record = request.records.add(partition=p, value=value)
            record.event_time.seconds = 253402300800  # 10000-01-01T00:00:00Z
            expect[n] = grpc.StatusCode.INVALID_ARGUMENT.value[0]
        else:
            request.records.add(partition=0 if n == 2500 else p, value=value)
            expect[n] = (request.topic, 0 if n == 2500 else p, value)
        messages.append(pb.ProduceStreamRequest(sequence=n, request=request))
    answers = list(answers_of(stub.ProduceStream(iter(messages), timeout=60)))
    check_eq(len(answers), len(messages), "one answer per message")
    logs = {(topic, p): fetch_all(stub, topic, p) for p in range(PARTITIONS)}
    logs[(other, 0)] = fetch_all(stub, other, 0)
    appended = {key: [] for key in logs}
    for n, a in enumerate(answers):
        check_eq(a.sequence, n, "answers in message order")
        if isinstance(expect[n], int):
            check_eq(a.code, expect[n], "message %d refused alone: %s" % (n, a.message))
            continue
        check_eq(a.code, 0, "message %d: %s" % (n, a.message))
        t, p, value = expect[n]
        check_eq((a.positions[0].partition, len(a.positions)), (p, 1), "message %d's position" % n)
        check_eq(logs[(t, p)][a.positions[0].offset].value, value, "the value at its offset")
        appended[(t, p)].append(value)
    for (t, p), values in appended.items():
        start = before[p] if t == topic else 0
        check_eq([r.value for r in logs[(t, p)][start:]], values,
                 "%s/%d holds the values in send order, nothing else" % (t, p))
    stub.DeleteTopic(pb.DeleteTopicRequest(name=other), timeout=DEADLINE_S)
    check("records[0].event_time" in answers[1800].message,
          "the bad time is named: %s" % answers[1800].message)
    print("  ok: 2,997 plain and idempotent messages appended in send order; the bad record "
          "(%s), the empty message (%s) and the year-10000 event time (%s) refused alone"
          % (answers[700].message, answers[1400].message, answers[1800].message))


def answers_of(call):
    """The answers of a ProduceStream call, one per message, in message order: a response carries
    every answer that was ready when the broker wrote it."""
    for response in call:
        yield from response.answers


def fetch_all(stub, topic, partition):
    out, offset = [], 0
    while True:
        r = stub.Fetch(pb.FetchRequest(topic=topic, partition=partition, offset=offset,
                                       max_records=10000), timeout=DEADLINE_S)
        if not r.records:
            return out
        out.extend(r.records)
        offset = r.next_offset


def high_watermarks(stub, topic):
    d = stub.DescribeTopic(pb.DescribeTopicRequest(name=topic), timeout=DEADLINE_S)
    return sum(p.high_watermark for p in d.partitions)


def order_and_positions(stub, topic, sender):
    messages = []
    for n in range(3000):
        if n == 1500:
            bad = pb.ProduceRequest(topic="no-such-topic-" + topic)
            bad.records.add(value=b"x")
            messages.append(pb.ProduceStreamRequest(sequence=n, request=bad))
            continue
        p = n % PARTITIONS
        messages.append(sender.message(n, p, b"v%d" % n))
    answers = list(answers_of(stub.ProduceStream(iter(messages), timeout=60)))
    check_eq(len(answers), len(messages), "one answer per message")
    next_offset = [0] * PARTITIONS
    for n, a in enumerate(answers):
        check_eq(a.sequence, n, "answers in message order")
        if n == 1500:
            check_eq(a.code, grpc.StatusCode.NOT_FOUND.value[0], "the bad message's code")
            check("does not exist" in a.message or "no-such-topic" in a.message, a.message)
            continue
        check_eq(a.code, 0, "message %d: %s" % (n, a.message))
        check_eq(len(a.positions), 1, "one position")
        pos = a.positions[0]
        check_eq(pos.partition, n % PARTITIONS, "partition of message %d" % n)
        check_eq(pos.offset, next_offset[pos.partition], "dense offsets in send order")
        next_offset[pos.partition] += 1
    # The last message of each partition again: its batch is among the last 5, so it is answered
    # as a duplicate at its original offset.
    last = {}
    for n, m in enumerate(messages):
        if n != 1500:
            last[m.request.records[0].partition] = (m, answers[n].positions[0].offset)
    again = list(answers_of(stub.ProduceStream(iter(m for m, _ in last.values()),
                                               timeout=DEADLINE_S)))
    for a, (m, offset) in zip(again, last.values()):
        check(a.code == 0 and a.positions[0].duplicate, "a resent message is a duplicate")
        check_eq(a.positions[0].offset, offset, "at its original offset")
    print("  ok: 2,999 answers in order with dense offsets; the bad message refused (%s), the "
          "stream went on" % answers[1500].message)
    return sum(next_offset)


def cut_and_resend(stub, topic, sender, already):
    batch = [sender.message(10000 + i, i % PARTITIONS, b"cut%d" % i) for i in range(400)]
    call = stub.ProduceStream(iter(batch), timeout=60)
    seen = set()
    for a in answers_of(call):
        check_eq(a.code, 0, a.message)
        seen.add(a.sequence)
        if len(seen) >= 100:
            call.cancel()  # the stream is cut: the rest may or may not have been appended
            break
    # What a caller does after a cut: resend every message without an answer, unchanged (same
    # producer id, epoch and sequences). Each is appended now, or recognised as appended before:
    # answered as a duplicate when among its partition's last 5 batches, else refused as
    # "already appended" (FAILED_PRECONDITION) — never appended twice.
    unanswered = [m for m in batch if m.sequence not in seen]
    answers = list(answers_of(stub.ProduceStream(iter(unanswered), timeout=60)))
    check_eq(len(answers), len(unanswered), "answers on the second stream")
    kinds = {"appended": 0, "duplicate": 0, "already appended": 0}
    for a in answers:
        if a.code == FAILED_PRECONDITION and "already appended" in a.message:
            kinds["already appended"] += 1
            continue
        check_eq(a.code, 0, a.message)
        kinds["duplicate" if a.positions[0].duplicate else "appended"] += 1
    values = []
    for p in range(PARTITIONS):
        values.extend(r.value for r in fetch_all(stub, topic, p) if r.value.startswith(b"cut"))
    check_eq(len(values), 400, "records of the cut batch in the log")
    check_eq(len(set(values)), 400, "each exactly once")
    check_eq(high_watermarks(stub, topic), already + 400, "nothing else appended")
    print("  ok: cut after 100 answers; the %d unanswered resent: %s; each of the 400 values once "
          "in the log" % (len(unanswered), kinds))


def flow_control(address, stub, topic):
    # A channel without BDP probing keeps the client's receive window at HTTP/2's default, so the
    # answers buffered in the transport stay few and the broker's own window shows.
    channel = grpc.insecure_channel(address, options=[("grpc.http2.bdp_probe", 0)])
    pc.wait_ready(channel, address)
    stream_stub = pb_grpc.LogServiceStub(channel)
    total = 30000
    before = high_watermarks(stub, topic)

    def messages():
        for n in range(total):
            request = pb.ProduceRequest(topic=topic)
            request.records.add(partition=n % PARTITIONS, value=b"f")
            yield pb.ProduceStreamRequest(sequence=n, request=request)

    call = stream_stub.ProduceStream(messages(), timeout=120)
    # The caller reads nothing: once the broker's window (1024 unanswered) and the transport's
    # buffers are full, the broker stops reading and nothing more is appended.
    time.sleep(2.5)
    first = high_watermarks(stub, topic) - before
    time.sleep(1.5)
    second = high_watermarks(stub, topic) - before
    check(second == first and second < total,
          "with no answer read, appends stop: %d, then %d of %d" % (first, second, total))
    answered, responses = 0, 0
    for response in call:
        responses += 1
        answered += sum(1 for a in response.answers if a.code == 0)
    check_eq(answered, total, "answers once the caller reads")
    # Answers that waited for the caller go out together, not one response each.
    check(responses < total // 2, "%d answers in %d responses" % (total, responses))
    check_eq(high_watermarks(stub, topic) - before, total, "all appended")
    print("  ok: with no answer read, appends stopped at %d of %d (the transport's buffers and "
          "the broker's window); once read, all %d appended, answered in %d responses"
          % (second, total, total, responses))


def main(address):
    channel = grpc.insecure_channel(address)
    pc.wait_ready(channel, address)
    stub = pb_grpc.LogServiceStub(channel)
    topic = "stream-" + uuid.uuid4().hex[:8]
    stub.CreateTopic(pb.CreateTopicRequest(name=topic, partitions=PARTITIONS), timeout=DEADLINE_S)
    producer = stub.InitProducer(pb.InitProducerRequest(), timeout=DEADLINE_S)
    sender = Sender(topic, producer)
    appended = order_and_positions(stub, topic, sender)
    cut_and_resend(stub, topic, sender, appended)
    flow_control(address, stub, topic)
    plain_messages_in_order(stub, topic, sender)
    stub.DeleteTopic(pb.DeleteTopicRequest(name=topic), timeout=DEADLINE_S)


if __name__ == "__main__":
    pc.run_main("python_produce_stream", main)
