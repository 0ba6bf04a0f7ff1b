#!/usr/bin/python3
"""Polyglot test: a Python gRPC client (Debian's python3-grpcio), with stubs generated from
proto/conduit/log/v1/log.proto at test time, exercises conduit.log.v1.LogService end to end.

Usage: python_client.py HOST:PORT    (run_with_server.sh appends the address)

It creates a uniquely named 3-partition topic, produces keyed, keyless, explicitly placed,
empty-key, header-carrying and event-timed records, checks the positions the broker assigned
(dense offsets per partition, explicit partition honoured, keyed placement equal to Kafka's
default partitioner computed here independently), fetches everything back and compares it field
by field (including proto3 `optional` presence), checks ListOffsets / DescribeTopic / Tail, checks
the status codes of bad requests, and deletes the topic. Every call has a deadline. Exit status 0
on success, 1 with a "FAIL:" message on the first failed expectation.
"""

import os
import sys
import time
import uuid

sys.dont_write_bytecode = True  # keep the source tree free of __pycache__
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import grpc  # noqa: E402
from google.protobuf import duration_pb2, timestamp_pb2  # noqa: E402

import polyglot_common as pc  # noqa: E402
from polyglot_common import DEADLINE_S, check, check_eq, expect_code  # noqa: E402

pc.generate_stubs(["conduit/log/v1/log.proto"],
                  [os.path.join(pc.repo_root(), "proto"), pc.GRPC_PROTO_DIR, pc.WKT_DIR])
from conduit.log.v1 import log_pb2 as pb  # noqa: E402
from conduit.log.v1 import log_pb2_grpc as pb_grpc  # noqa: E402

PARTITIONS = 3
StatusCode = grpc.StatusCode


# --- Kafka's default partitioner, written here from Kafka's Utils.murmur2, independently of the
# broker's C++ version, so the test catches a broker that disagrees with Kafka clients.
def murmur2(data: bytes) -> int:
    m, r, mask = 0x5BD1E995, 24, 0xFFFFFFFF
    length = len(data)
    h = (0x9747B28C ^ length) & mask
    for i in range(0, length - length % 4, 4):
        k = data[i] | (data[i + 1] << 8) | (data[i + 2] << 16) | (data[i + 3] << 24)
        k = (k * m) & mask
        k ^= k >> r
        k = (k * m) & mask
        h = (h * m) & mask
        h ^= k
    tail = length - length % 4
    rem = length % 4
    if rem == 3:
        h ^= data[tail + 2] << 16
    if rem >= 2:
        h ^= data[tail + 1] << 8
    if rem >= 1:
        h ^= data[tail]
        h = (h * m) & mask
    h ^= h >> 13
    h = (h * m) & mask
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h  # as a Java int


def kafka_partition(key: bytes, partitions: int) -> int:
    return (murmur2(key) & 0x7FFFFFFF) % partitions


def check_murmur2_vectors():
    """Checks this file's murmur2 against the Kafka vectors in testdata/ before relying on it."""
    path = os.path.join(pc.repo_root(), "testdata", "kafka_murmur2.tsv")
    n = 0
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.strip() or line.startswith("#"):
                continue
            key, h, p3, p12, p100 = line.rstrip("\n").split("\t")
            k = key.encode()
            check_eq(murmur2(k), int(h), "murmur2(%r) (test's own implementation)" % key)
            check_eq([kafka_partition(k, 3), kafka_partition(k, 12), kafka_partition(k, 100)],
                     [int(p3), int(p12), int(p100)], "partitions of %r" % key)
            n += 1
    check(n >= 11, "expected >= 11 murmur2 vectors in %s, found %d" % (path, n))


# --- Helpers.
def ts(seconds, micros):
    return timestamp_pb2.Timestamp(seconds=seconds, nanos=micros * 1000)


def record_view(r):
    """The client-visible content of a Record or ProduceRecord, with optional-field presence."""
    return {
        "key": r.key if r.HasField("key") else None,
        "value": r.value if r.HasField("value") else None,
        "headers": [(h.key, h.value) for h in r.headers],
        "event_time": (r.event_time.seconds, r.event_time.nanos) if r.HasField("event_time") else None,
        "event_id": r.event_id,
    }


def main(address):
    check_murmur2_vectors()
    print("  ok: murmur2 matches Kafka's vectors")

    channel = grpc.insecure_channel(address)
    pc.wait_ready(channel, address)
    stub = pb_grpc.LogServiceStub(channel)
    topic = "polyglot-py-" + uuid.uuid4().hex[:12]

    # --- CreateTopic, with the defaults the proto documents.
    created = stub.CreateTopic(pb.CreateTopicRequest(name=topic, partitions=PARTITIONS),
                               timeout=DEADLINE_S)
    info = created.topic
    check_eq(info.name, topic, "CreateTopic topic.name")
    check_eq(info.partitions, PARTITIONS, "CreateTopic topic.partitions")
    check_eq(info.config.durability, pb.DURABILITY_SYNC, "default durability")
    check_eq(info.config.max_record_bytes, 1 << 20, "default max_record_bytes")
    check_eq((info.config.flush_interval.seconds, info.config.flush_interval.nanos),
             (0, 100_000_000), "default flush_interval")
    check(info.HasField("created") and info.created.seconds > 0, "topic.created is unset")
    check(abs(info.created.seconds - time.time()) < 300,
          "topic.created %d is far from now %d" % (info.created.seconds, time.time()))
    print("  ok: CreateTopic %s" % topic)
    expect_code(StatusCode.ALREADY_EXISTS, "CreateTopic of an existing name", stub.CreateTopic,
                pb.CreateTopicRequest(name=topic, partitions=1), timeout=DEADLINE_S)
    listed = stub.ListTopics(pb.ListTopicsRequest(), timeout=DEADLINE_S)
    check(topic in [t.name for t in listed.topics], "ListTopics does not list %s" % topic)

    # --- Produce one mixed batch.
    event_time = ts(1_700_000_000, 123_456)  # microsecond-aligned: the broker keeps microseconds
    batch1 = [
        pb.ProduceRecord(key=b"foobar", value=b"v0", event_time=event_time, event_id="e-0",
                         headers=[pb.Header(key="h1", value=b"x"),
                                  pb.Header(key="h2", value=b"\x00\xff")]),
        pb.ProduceRecord(key=b"12", value=b"v1"),
        pb.ProduceRecord(key=b"123", value=b"v2",
                         headers=[pb.Header(key="dup", value=b"1"), pb.Header(key="dup", value=b"2"),
                                  pb.Header(key="empty-value")]),
        pb.ProduceRecord(key=b"foobar", value=b"v3"),  # same key as record 0
        pb.ProduceRecord(partition=1, key=b"abc", value=b"v4"),  # Kafka would pick 0 for "abc"
        pb.ProduceRecord(key=b"", value=b"v5"),  # empty key: present, so hashed
        pb.ProduceRecord(key=b"\xff\xfe\x80\x01\x7f", value=b""),  # binary key, empty value
        pb.ProduceRecord(key=b"12"),  # no value at all
        pb.ProduceRecord(partition=2, value=b"v8", event_id="e-8"),  # explicit, keyless
    ]
    check_eq(kafka_partition(b"abc", PARTITIONS), 0, "Kafka partition of 'abc'")
    resp1 = stub.Produce(pb.ProduceRequest(topic=topic, records=batch1), timeout=DEADLINE_S)
    check_eq(len(resp1.positions), len(batch1), "Produce positions count")
    check(resp1.HasField("append_time"), "ProduceResponse.append_time is unset")
    for i, (rec, pos) in enumerate(zip(batch1, resp1.positions)):
        if rec.HasField("partition"):
            check_eq(pos.partition, rec.partition, "record %d: explicit partition" % i)
        else:
            check_eq(pos.partition, kafka_partition(rec.key, PARTITIONS),
                     "record %d (key %r): partition vs Kafka's default partitioner" % (i, rec.key))
    check_eq(resp1.positions[0].partition, resp1.positions[3].partition, "same key, same partition")
    print("  ok: Produce batch 1 placed %s" % [(p.partition, p.offset) for p in resp1.positions])

    # --- Two keyless batches: each goes whole to one partition, round-robin across requests.
    batch2 = [pb.ProduceRecord(value=b"k2-%d" % i) for i in range(3)]
    batch3 = [pb.ProduceRecord(value=b"k3-%d" % i) for i in range(2)]
    resp2 = stub.Produce(pb.ProduceRequest(topic=topic, records=batch2), timeout=DEADLINE_S)
    resp3 = stub.Produce(pb.ProduceRequest(topic=topic, records=batch3), timeout=DEADLINE_S)
    parts2 = {p.partition for p in resp2.positions}
    parts3 = {p.partition for p in resp3.positions}
    check_eq(len(parts2), 1, "keyless batch 2 spread over partitions %s" % parts2)
    check_eq(len(parts3), 1, "keyless batch 3 spread over partitions %s" % parts3)
    check_eq(parts3.pop(), (resp2.positions[0].partition + 1) % PARTITIONS,
             "keyless batch 3 partition (round-robin after batch 2)")
    print("  ok: keyless batches placed %s and %s" %
          ([(p.partition, p.offset) for p in resp2.positions],
           [(p.partition, p.offset) for p in resp3.positions]))

    # --- Offsets are dense per partition, in request order, from 0.
    expected = {p: [] for p in range(PARTITIONS)}  # partition -> [(record, append_time)]
    for batch, resp in ((batch1, resp1), (batch2, resp2), (batch3, resp3)):
        for rec, pos in zip(batch, resp.positions):
            check_eq(pos.offset, len(expected[pos.partition]),
                     "offset of a record in partition %d (dense offsets)" % pos.partition)
            expected[pos.partition].append((rec, resp.append_time))
    total = sum(len(v) for v in expected.values())
    check_eq(total, len(batch1) + len(batch2) + len(batch3), "records produced")
    print("  ok: offsets dense; per-partition counts %s" %
          {p: len(v) for p, v in expected.items()})

    # --- Fetch everything back and compare field by field.
    stored = {}  # (partition, offset) -> fetched Record
    for p in range(PARTITIONS):
        fetched = stub.Fetch(pb.FetchRequest(topic=topic, partition=p, offset=0, max_records=1000),
                             timeout=DEADLINE_S)
        stored.update({(r.partition, r.offset): r for r in fetched.records})
        want = expected[p]
        check_eq(fetched.high_watermark, len(want), "Fetch p%d high_watermark" % p)
        check_eq(fetched.log_start_offset, 0, "Fetch p%d log_start_offset" % p)
        check_eq(len(fetched.records), len(want), "Fetch p%d record count" % p)
        prev_append = None
        for off, (got, (sent, append_time)) in enumerate(zip(fetched.records, want)):
            where = "p%d offset %d" % (p, off)
            check_eq(got.partition, p, where + " partition")
            check_eq(got.offset, off, where + " offset")
            check_eq(record_view(got), record_view(sent), where + " content")
            check_eq(got.append_time, append_time, where + " append_time vs ProduceResponse")
            at = (got.append_time.seconds, got.append_time.nanos)
            check(prev_append is None or at >= prev_append, where + " append_time went backwards")
            prev_append = at

    # proto3 `optional` presence, spelled out: empty is not absent, for keys and values alike.
    def stored_for(i):
        pos = resp1.positions[i]
        return stored[(pos.partition, pos.offset)]
    empty_key, no_value, empty_value, keyless = (stored_for(5), stored_for(7), stored_for(6),
                                                 stored_for(8))
    check(empty_key.HasField("key") and empty_key.key == b"", "empty key came back absent")
    check(not no_value.HasField("value"), "absent value came back present")
    check(empty_value.HasField("value") and empty_value.value == b"",
          "empty value came back absent")
    check(not keyless.HasField("key"), "absent key came back present")
    check_eq(stored_for(0).event_time, event_time, "event_time of record 0")
    check(not stored_for(1).HasField("event_time"), "event_time set on a record produced without")
    print("  ok: Fetch returned every record intact (keys, values, presence, headers, times)")

    # max_records is honoured and a fetch can start mid-partition.
    busiest = max(expected, key=lambda p: len(expected[p]))
    one = stub.Fetch(pb.FetchRequest(topic=topic, partition=busiest, offset=1, max_records=1),
                     timeout=DEADLINE_S)
    check_eq([r.offset for r in one.records], [1], "Fetch offset=1 max_records=1")
    # Fetching at the high watermark is valid and returns nothing (no max_wait: no waiting).
    hw = len(expected[busiest])
    at_end = stub.Fetch(pb.FetchRequest(topic=topic, partition=busiest, offset=hw),
                        timeout=DEADLINE_S)
    check_eq(len(at_end.records), 0, "Fetch at the high watermark")
    # A long-poll at the high watermark with nothing arriving returns empty after max_wait.
    started = time.monotonic()
    waited = stub.Fetch(pb.FetchRequest(topic=topic, partition=busiest, offset=hw,
                                        max_wait=duration_pb2.Duration(nanos=300_000_000)),
                        timeout=DEADLINE_S)
    elapsed = time.monotonic() - started
    check_eq(len(waited.records), 0, "long-poll Fetch with nothing new")
    check(0.2 <= elapsed < 5, "long-poll Fetch with max_wait 300ms took %.3fs" % elapsed)
    print("  ok: max_records, fetch at high watermark, long-poll timeout (%.2fs)" % elapsed)

    # --- ListOffsets and DescribeTopic agree with what was produced.
    latest = stub.ListOffsets(pb.ListOffsetsRequest(topic=topic, spec=pb.OFFSET_SPEC_LATEST),
                              timeout=DEADLINE_S)
    check_eq(sorted((o.partition, o.offset) for o in latest.offsets),
             [(p, len(expected[p])) for p in range(PARTITIONS)], "ListOffsets LATEST")
    earliest = stub.ListOffsets(pb.ListOffsetsRequest(topic=topic, partitions=[1],
                                                      spec=pb.OFFSET_SPEC_EARLIEST),
                                timeout=DEADLINE_S)
    check_eq([(o.partition, o.offset) for o in earliest.offsets], [(1, 0)],
             "ListOffsets EARLIEST partition 1")
    described = stub.DescribeTopic(pb.DescribeTopicRequest(name=topic), timeout=DEADLINE_S)
    check_eq(described.topic.name, topic, "DescribeTopic name")
    check_eq([(d.partition, d.log_start_offset, d.high_watermark) for d in described.partitions],
             [(p, 0, len(expected[p])) for p in range(PARTITIONS)], "DescribeTopic partitions")
    print("  ok: ListOffsets and DescribeTopic")

    # --- Tail (server streaming) from the earliest offset delivers the same records.
    tail = stub.Tail(pb.TailRequest(topic=topic, partition=busiest, start=pb.OFFSET_SPEC_EARLIEST),
                     timeout=DEADLINE_S)
    tailed = []
    for msg in tail:
        tailed.extend(msg.records)
        if len(tailed) >= hw:
            break
    tail.cancel()
    check_eq([(r.offset, record_view(r)) for r in tailed],
             [(i, record_view(rec)) for i, (rec, _) in enumerate(expected[busiest])],
             "Tail from earliest on p%d" % busiest)
    print("  ok: Tail streamed %d records" % len(tailed))

    # --- Bad input gives the documented status codes.
    expect_code(StatusCode.INVALID_ARGUMENT, "CreateTopic 'bad name!'", stub.CreateTopic,
                pb.CreateTopicRequest(name="bad name!", partitions=1), timeout=DEADLINE_S)
    expect_code(StatusCode.INVALID_ARGUMENT, "CreateTopic with 0 partitions", stub.CreateTopic,
                pb.CreateTopicRequest(name=topic + "-zero", partitions=0), timeout=DEADLINE_S)
    expect_code(StatusCode.OUT_OF_RANGE, "Fetch beyond the high watermark", stub.Fetch,
                pb.FetchRequest(topic=topic, partition=busiest, offset=hw + 1), timeout=DEADLINE_S)
    expect_code(StatusCode.INVALID_ARGUMENT, "Fetch with a negative offset", stub.Fetch,
                pb.FetchRequest(topic=topic, partition=0, offset=-1), timeout=DEADLINE_S)
    missing = topic + "-missing"
    expect_code(StatusCode.NOT_FOUND, "Fetch from an unknown topic", stub.Fetch,
                pb.FetchRequest(topic=missing, partition=0, offset=0), timeout=DEADLINE_S)
    expect_code(StatusCode.NOT_FOUND, "Produce to an unknown topic", stub.Produce,
                pb.ProduceRequest(topic=missing, records=[pb.ProduceRecord(value=b"x")]),
                timeout=DEADLINE_S)
    expect_code(StatusCode.NOT_FOUND, "Produce to partition 3 of 3", stub.Produce,
                pb.ProduceRequest(topic=topic, records=[pb.ProduceRecord(partition=3, value=b"x")]),
                timeout=DEADLINE_S)
    expect_code(StatusCode.INVALID_ARGUMENT, "Produce with no records", stub.Produce,
                pb.ProduceRequest(topic=topic), timeout=DEADLINE_S)
    expect_code(StatusCode.INVALID_ARGUMENT, "Produce with an empty header key", stub.Produce,
                pb.ProduceRequest(topic=topic, records=[
                    pb.ProduceRecord(value=b"x", headers=[pb.Header(key="", value=b"v")])]),
                timeout=DEADLINE_S)
    expect_code(StatusCode.INVALID_ARGUMENT, "ListOffsets without a spec", stub.ListOffsets,
                pb.ListOffsetsRequest(topic=topic), timeout=DEADLINE_S)
    # None of the rejected produces may have appended anything.
    after = stub.ListOffsets(pb.ListOffsetsRequest(topic=topic, spec=pb.OFFSET_SPEC_LATEST),
                             timeout=DEADLINE_S)
    check_eq(sorted((o.partition, o.offset) for o in after.offsets),
             [(p, len(expected[p])) for p in range(PARTITIONS)],
             "ListOffsets LATEST after rejected produces")

    # --- DeleteTopic: gone from ListTopics, further calls NOT_FOUND.
    stub.DeleteTopic(pb.DeleteTopicRequest(name=topic), timeout=DEADLINE_S)
    listed = stub.ListTopics(pb.ListTopicsRequest(), timeout=DEADLINE_S)
    check(topic not in [t.name for t in listed.topics], "ListTopics still lists deleted " + topic)
    expect_code(StatusCode.NOT_FOUND, "Fetch from the deleted topic", stub.Fetch,
                pb.FetchRequest(topic=topic, partition=0, offset=0), timeout=DEADLINE_S)
    expect_code(StatusCode.NOT_FOUND, "DeleteTopic twice", stub.DeleteTopic,
                pb.DeleteTopicRequest(name=topic), timeout=DEADLINE_S)
    print("  ok: DeleteTopic")
    channel.close()


if __name__ == "__main__":
    pc.run_main("python_client", main)
