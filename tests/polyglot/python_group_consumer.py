#!/usr/bin/python3
"""Polyglot test: a Python consumer-group member (Debian's python3-grpcio, stubs generated from
proto/conduit/{log,coordinator}/v1/*.proto at test time) drives
conduit.coordinator.v1.GroupCoordinator end to end against conduit.log.v1.LogService.

Usage: python_group_consumer.py HOST:PORT    (run_with_server.sh appends the address)

It creates a uniquely named 4-partition topic, produces 40 keyed records, joins group "py-group"
(Heartbeat with member_epoch 0), heartbeats reporting its full assignment as owned until it owns
all 4 partitions, fetches each partition from its committed offset (none: 0), processes and
commits (member id and epoch of the latest heartbeat), then checks FetchOffsets, DescribeGroup lag
(0 records / 0 s when caught up; after 5 more records, 5 records in total and seconds > 0 where
behind, measured from the append time of the first unprocessed record), the status codes of bad
commits and of an unknown group, and finally LeaveGroup (group state EMPTY). Every call has a
deadline. Exit status 0 on success, 1 with a "FAIL:" message on the first failed expectation.
"""

import os
import sys
import time
import uuid

sys.dont_write_bytecode = True  # keep the source tree free of __pycache__
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import grpc  # noqa: E402

import polyglot_common as pc  # noqa: E402
from polyglot_common import DEADLINE_S, check, check_eq, expect_code  # noqa: E402

pc.generate_stubs(["conduit/log/v1/log.proto", "conduit/coordinator/v1/coordinator.proto"],
                  [os.path.join(pc.repo_root(), "proto"), pc.GRPC_PROTO_DIR, pc.WKT_DIR])
from conduit.coordinator.v1 import coordinator_pb2 as cpb  # noqa: E402
from conduit.coordinator.v1 import coordinator_pb2_grpc as cpb_grpc  # noqa: E402
from conduit.log.v1 import log_pb2 as lpb  # noqa: E402
from conduit.log.v1 import log_pb2_grpc as lpb_grpc  # noqa: E402

PARTITIONS = 4
RECORDS = 40
MORE_RECORDS = 5
GROUP = "py-group"
CLIENT_ID = "python_group_consumer/1"
StatusCode = grpc.StatusCode


def partitions_of(topic_partitions, topic):
    """The sorted partitions of `topic` in a repeated TopicPartitions field."""
    out = []
    for tp in topic_partitions:
        check_eq(tp.topic, topic, "topic in a TopicPartitions entry")
        out.extend(tp.partitions)
    check_eq(len(out), len(set(out)), "duplicate partitions in %s" % out)
    return sorted(out)


def lag_table(described):
    return {p.partition: p for p in described.partitions}


def show_lag(described):
    return ", ".join("p%d: committed %s hwm %d lag %d rec %.3f s" %
                     (p.partition, p.committed_offset if p.has_committed_offset else "-",
                      p.high_watermark, p.lag_records, p.lag_seconds)
                     for p in described.partitions)


def main(address):
    channel = grpc.insecure_channel(address)
    pc.wait_ready(channel, address)
    log = lpb_grpc.LogServiceStub(channel)
    coord = cpb_grpc.GroupCoordinatorStub(channel)
    topic = "polyglot-group-" + uuid.uuid4().hex[:12]

    # --- A topic with 40 keyed records.
    log.CreateTopic(lpb.CreateTopicRequest(name=topic, partitions=PARTITIONS), timeout=DEADLINE_S)
    produced = stub_produce(log, topic, [b"key-%d" % i for i in range(RECORDS)], b"v")
    per_partition = {p: sum(1 for pos in produced.positions if pos.partition == p)
                     for p in range(PARTITIONS)}
    check_eq(sum(per_partition.values()), RECORDS, "records produced")
    print("  ok: created %s and produced %d keyed records %s" % (topic, RECORDS, per_partition))

    # --- Join.
    joined = coord.Heartbeat(cpb.HeartbeatRequest(group_id=GROUP, member_epoch=0,
                                                  subscribed_topics=[topic], client_id=CLIENT_ID),
                             timeout=DEADLINE_S)
    member_id = joined.member_id
    check(member_id != "", "join returned no member id")
    check(joined.member_epoch > 0, "join returned member epoch %d" % joined.member_epoch)
    interval = joined.heartbeat_interval.seconds + joined.heartbeat_interval.nanos / 1e9
    check(0 < interval <= 15, "join returned heartbeat interval %.3f s" % interval)
    print("  ok: joined %s as %s, epoch %d, group epoch %d, heartbeat interval %.3f s, "
          "assignment %s" % (GROUP, member_id, joined.member_epoch, joined.group_epoch, interval,
                             partitions_of(joined.assignment, topic)))

    # --- Heartbeat, always reporting the full assignment as owned, until it covers the topic.
    latest = joined
    owned = partitions_of(joined.assignment, topic)
    deadline = time.monotonic() + 10
    heartbeats = 0
    while owned != list(range(PARTITIONS)):
        check(time.monotonic() < deadline,
              "after %d heartbeats in 10 s the only member owns %s of %d partitions "
              "(pending %s, epoch %d, group epoch %d)" %
              (heartbeats, owned, PARTITIONS, partitions_of(latest.pending_partitions, topic),
               latest.member_epoch, latest.group_epoch))
        time.sleep(min(interval, 0.1))
        latest = coord.Heartbeat(cpb.HeartbeatRequest(
            group_id=GROUP, member_id=member_id, member_epoch=latest.member_epoch,
            owned_partitions=[cpb.TopicPartitions(topic=topic, partitions=owned)]),
            timeout=DEADLINE_S)
        heartbeats += 1
        check_eq(latest.member_id, member_id, "member id in a heartbeat response")
        owned = partitions_of(latest.assignment, topic)
    # One more heartbeat reporting all four as owned: the member is then fully reconciled.
    latest = coord.Heartbeat(cpb.HeartbeatRequest(
        group_id=GROUP, member_id=member_id, member_epoch=latest.member_epoch,
        owned_partitions=[cpb.TopicPartitions(topic=topic, partitions=owned)]),
        timeout=DEADLINE_S)
    check_eq(partitions_of(latest.assignment, topic), list(range(PARTITIONS)),
             "assignment after reporting all partitions owned")
    check_eq(partitions_of(latest.pending_partitions, topic), [], "pending partitions")
    epoch = latest.member_epoch
    print("  ok: owns all %d partitions after %d more heartbeats, epoch %d" %
          (PARTITIONS, heartbeats, epoch))

    # --- Consume from the committed offsets (none yet: from 0), process, commit.
    fetched_offsets = coord.FetchOffsets(cpb.FetchOffsetsRequest(group_id=GROUP, topics=[topic]),
                                         timeout=DEADLINE_S)
    committed = {(o.topic, o.partition): o.offset for o in fetched_offsets.offsets}
    check_eq(committed, {}, "FetchOffsets before any commit")
    next_offsets = {}
    processed_keys = []
    for p in owned:
        start = committed.get((topic, p), 0)
        resp = log.Fetch(lpb.FetchRequest(topic=topic, partition=p, offset=start, max_records=1000),
                         timeout=DEADLINE_S)
        check_eq([r.offset for r in resp.records], list(range(start, resp.high_watermark)),
                 "offsets fetched from p%d" % p)
        processed_keys.extend(r.key for r in resp.records)
        next_offsets[p] = resp.next_offset
        check_eq(resp.next_offset, per_partition[p], "p%d next_offset" % p)
    check_eq(sorted(processed_keys), sorted(b"key-%d" % i for i in range(RECORDS)),
             "keys of the processed records")
    coord.CommitOffsets(cpb.CommitOffsetsRequest(
        group_id=GROUP, member_id=member_id, member_epoch=epoch,
        topics=[cpb.TopicCommits(topic=topic, partitions=[
            cpb.PartitionCommit(partition=p, offset=o, metadata="processed by " + CLIENT_ID)
            for p, o in sorted(next_offsets.items())])]),
        timeout=DEADLINE_S)
    print("  ok: processed %d records and committed %s" % (len(processed_keys), next_offsets))

    def check_committed(what):
        got = coord.FetchOffsets(cpb.FetchOffsetsRequest(group_id=GROUP, topics=[topic]),
                                 timeout=DEADLINE_S)
        check_eq(sorted((o.topic, o.partition, o.offset) for o in got.offsets),
                 [(topic, p, o) for p, o in sorted(next_offsets.items())], what + ": offsets")
        for o in got.offsets:
            where = "%s: p%d" % (what, o.partition)
            check_eq(o.committed_by, member_id, where + " committed_by")
            check_eq(o.member_epoch, epoch, where + " member_epoch")
            check_eq(o.metadata, "processed by " + CLIENT_ID, where + " metadata")
            check(o.HasField("commit_time") and abs(o.commit_time.seconds - time.time()) < 300,
                  where + " commit_time is unset or far from now")

    check_committed("FetchOffsets after commit")
    all_offsets = coord.FetchOffsets(cpb.FetchOffsetsRequest(group_id=GROUP), timeout=DEADLINE_S)
    check_eq(len(all_offsets.offsets), PARTITIONS, "FetchOffsets with no topic filter: count")
    print("  ok: FetchOffsets returns the committed offsets, committed_by %s" % member_id)

    # --- DescribeGroup: one member owning everything, no lag.
    described = coord.DescribeGroup(cpb.DescribeGroupRequest(group_id=GROUP), timeout=DEADLINE_S)
    check_eq(described.group_id, GROUP, "DescribeGroup group_id")
    check_eq(described.broker_error, "", "DescribeGroup broker_error")
    check_eq(cpb.GroupState.Name(described.state), "GROUP_STATE_STABLE", "DescribeGroup state")
    check_eq([m.member_id for m in described.members], [member_id], "DescribeGroup members")
    m = described.members[0]
    check_eq(m.client_id, CLIENT_ID, "member client_id")
    check_eq(m.member_epoch, epoch, "member epoch")
    check_eq(list(m.subscribed_topics), [topic], "member subscribed_topics")
    check_eq(partitions_of(m.assignment, topic), list(range(PARTITIONS)), "member assignment")
    check_eq(partitions_of(m.revoking, topic), [], "member revoking")
    check_eq(partitions_of(m.pending, topic), [], "member pending")
    check("127.0.0.1" in m.client_host, "member client_host %r lacks 127.0.0.1" % m.client_host)
    lag = lag_table(described)
    check_eq(sorted(lag), list(range(PARTITIONS)), "DescribeGroup partitions")
    for p, v in sorted(lag.items()):
        where = "caught up: p%d" % p
        check_eq(v.topic, topic, where + " topic")
        check_eq(v.owner_member_id, member_id, where + " owner")
        check(v.has_committed_offset, where + " has no committed offset")
        check_eq(v.committed_offset, next_offsets[p], where + " committed_offset")
        check_eq(v.high_watermark, per_partition[p], where + " high_watermark")
        check_eq(v.lag_records, 0, where + " lag_records")
        check_eq(v.lag_seconds, 0.0, where + " lag_seconds")
    check_eq(described.max_lag_records, 0, "caught up: max_lag_records")
    check_eq(described.max_lag_seconds, 0.0, "caught up: max_lag_seconds")
    print("  ok: DescribeGroup: STABLE, %s owns all, lag 0 records / 0 s everywhere" % member_id)

    # --- 5 more records: lag in records and seconds.
    more = stub_produce(log, topic, [b"more-%d" % i for i in range(MORE_RECORDS)], b"w")
    appended_at = more.append_time.seconds + more.append_time.nanos / 1e9
    new_per_partition = {p: sum(1 for pos in more.positions if pos.partition == p)
                         for p in range(PARTITIONS)}
    time.sleep(0.3)  # so that lag_seconds is clearly positive
    before = time.time()
    described = coord.DescribeGroup(cpb.DescribeGroupRequest(group_id=GROUP), timeout=DEADLINE_S)
    after = time.time()
    check_eq(described.broker_error, "", "behind: DescribeGroup broker_error")
    lag = lag_table(described)
    print("  lag: " + show_lag(described))
    check_eq(sum(v.lag_records for v in lag.values()), MORE_RECORDS, "behind: sum of lag_records")
    lagging = [p for p, n in new_per_partition.items() if n > 0]
    check(lagging, "the 5 new records went nowhere?")
    for p, v in sorted(lag.items()):
        where = "behind: p%d" % p
        check_eq(v.high_watermark, per_partition[p] + new_per_partition[p],
                 where + " high_watermark")
        check_eq(v.committed_offset, next_offsets[p], where + " committed_offset")
        check_eq(v.lag_records, new_per_partition[p], where + " lag_records")
        if new_per_partition[p] == 0:
            check_eq(v.lag_seconds, 0.0, where + " lag_seconds (not behind)")
            continue
        check(v.lag_seconds > 0, where + " lag_seconds %r is not > 0" % v.lag_seconds)
        # The first unprocessed record is the first of the 5: appended at more.append_time.
        check_eq(v.first_unprocessed_append_time, more.append_time,
                 where + " first_unprocessed_append_time vs the ProduceResponse")
        check(before - appended_at - 1 <= v.lag_seconds <= after - appended_at + 1,
              where + " lag_seconds %.3f is not now - append time (%.3f..%.3f)" %
              (v.lag_seconds, before - appended_at, after - appended_at))
    check_eq(described.max_lag_records, max(new_per_partition.values()), "behind: max_lag_records")
    check_eq(described.max_lag_seconds, max(v.lag_seconds for v in lag.values()),
             "behind: max_lag_seconds")
    print("  ok: after %d more records: lag_records sum %d, lag_seconds > 0 on %s" %
          (MORE_RECORDS, MORE_RECORDS, ["p%d" % p for p in lagging]))

    # --- Bad commits get clear statuses and change nothing.
    def commit(mid, ep, offsets):
        return coord.CommitOffsets(cpb.CommitOffsetsRequest(
            group_id=GROUP, member_id=mid, member_epoch=ep,
            topics=[cpb.TopicCommits(topic=topic, partitions=[
                cpb.PartitionCommit(partition=p, offset=o) for p, o in sorted(offsets.items())])]),
            timeout=DEADLINE_S)

    p0_hwm = per_partition[0] + new_per_partition[0]
    expect_code(StatusCode.NOT_FOUND, "CommitOffsets with a wrong member id", commit,
                member_id + "-wrong", epoch, {0: p0_hwm})
    expect_code(StatusCode.FAILED_PRECONDITION, "CommitOffsets with epoch %d > member's %d" %
                (epoch + 1, epoch), commit, member_id, epoch + 1, {0: p0_hwm})
    expect_code(StatusCode.OUT_OF_RANGE, "CommitOffsets at high watermark + 1 (%d)" % (p0_hwm + 1),
                commit, member_id, epoch, {0: p0_hwm + 1})
    expect_code(StatusCode.NOT_FOUND, "DescribeGroup of an unknown group", coord.DescribeGroup,
                cpb.DescribeGroupRequest(group_id=GROUP + "-unknown-" + uuid.uuid4().hex[:6]),
                timeout=DEADLINE_S)
    check_committed("FetchOffsets after the rejected commits")
    print("  ok: rejected commits changed nothing")

    # --- Leave: the group is empty, its offsets stay.
    coord.LeaveGroup(cpb.LeaveGroupRequest(group_id=GROUP, member_id=member_id), timeout=DEADLINE_S)
    described = coord.DescribeGroup(cpb.DescribeGroupRequest(group_id=GROUP), timeout=DEADLINE_S)
    check_eq(cpb.GroupState.Name(described.state), "GROUP_STATE_EMPTY", "state after LeaveGroup")
    check_eq(len(described.members), 0, "members after LeaveGroup")
    check_eq(sorted(v.owner_member_id for v in described.partitions), [""] * PARTITIONS,
             "partition owners after LeaveGroup")
    check_committed("FetchOffsets after LeaveGroup")
    expect_code(StatusCode.NOT_FOUND, "Heartbeat of the member that left", coord.Heartbeat,
                cpb.HeartbeatRequest(group_id=GROUP, member_id=member_id, member_epoch=epoch),
                timeout=DEADLINE_S)
    print("  ok: LeaveGroup: state EMPTY, no members, offsets kept")

    log.DeleteTopic(lpb.DeleteTopicRequest(name=topic), timeout=DEADLINE_S)
    channel.close()


def stub_produce(log, topic, keys, value_prefix):
    records = [lpb.ProduceRecord(key=k, value=value_prefix + b"-" + k) for k in keys]
    resp = log.Produce(lpb.ProduceRequest(topic=topic, records=records), timeout=DEADLINE_S)
    check_eq(len(resp.positions), len(records), "Produce positions count")
    return resp


if __name__ == "__main__":
    pc.run_main("python_group_consumer", main)
