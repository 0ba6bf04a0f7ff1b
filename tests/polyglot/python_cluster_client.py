#!/usr/bin/python3
"""Polyglot cluster test: a Python client with plain generated stubs (Debian's python3-grpcio)
routes conduit.log.v1.LogService calls in a three-broker cluster as proto/README.md tells a
client of its own to ("Routing in a cluster, for clients built from generated stubs").

Usage: python_cluster_client.py [HOST:PORT,HOST:PORT,HOST:PORT]
       (default $CONDUIT_ADDRS, which run_with_cluster.sh sets)

1. GetMetadata on the first broker until it lists every broker of the list, by address, and a
   controller among them.
2. A uniquely named 6-partition topic is created through the first broker; GetMetadata on every
   broker until each names a live leader for every partition, and all agree; then until every
   broker has applied that placement (see cluster_routing.await_served: a known lag).
3. Per partition: a Produce (explicit partition) sent to a broker that does NOT lead it fails
   FAILED_PRECONDITION with trailing metadata naming the leader's id, address and epoch exactly
   as GetMetadata does; the same request sent to `conduit-leader-address` succeeds at offset 0;
   a Fetch there returns the record with that leader_epoch; Fetch and ListOffsets on the
   non-leader are refused with the same hint.
4. Keyed records placed on explicit partitions (crc32 of the key) and routed by GetMetadata
   reach their leader at the first try; a router holding a stale view (wrong leaders, epoch 0)
   is corrected by one hint per partition, which it follows at once; keyed records WITHOUT a
   partition (the broker places them by murmur2) sent to the brokers in turn are refused by the
   non-leaders and land by following the hint; one key always lands on one partition.
5. Every partition read back from its leader holds exactly what was acknowledged, in order.
Every call has a deadline. Exit status 0 on success, 1 with a "FAIL:" message otherwise.
"""

import os
import sys
import uuid
import zlib

sys.dont_write_bytecode = True  # keep the source tree free of __pycache__
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import grpc  # noqa: E402

import polyglot_common as pc  # noqa: E402
from polyglot_common import DEADLINE_S, check, check_eq, expect_code  # noqa: E402
from cluster_routing import (Router, StatusCode, Stubs, await_cluster,  # noqa: E402
                             await_placement, await_served, check_hint, leader_hint, pb)

PARTITIONS = 6


def main(addresses):
    check_eq(len(addresses), 3, "brokers given")
    stubs = Stubs()
    brokers = await_cluster(stubs, addresses)
    topic = "polyglot-py-cluster-" + uuid.uuid4().hex[:12]
    created = stubs(addresses[0]).CreateTopic(
        pb.CreateTopicRequest(name=topic, partitions=PARTITIONS), timeout=DEADLINE_S)
    check_eq(created.topic.partitions, PARTITIONS, "CreateTopic topic.partitions")
    leaders = await_placement(stubs, brokers, topic, PARTITIONS)
    check_eq(sorted({leader for leader, _ in leaders}), sorted(brokers),
             "brokers leading a partition of %s (placement %s)" % (topic, leaders))
    print("  ok: CreateTopic %s through broker %s; leaders (id, epoch) by partition %s"
          % (topic, addresses[0], leaders))
    lagging = await_served(stubs, brokers, topic, leaders)
    print("  ok: every broker applied the placement (%d lagging answers first%s)"
          % (len(lagging), ": " + ", ".join(lagging) if lagging else ""))

    # --- 3. A non-leader refuses and names the leader; following the hint succeeds.
    expected = {p: [] for p in range(PARTITIONS)}  # partition -> [(key, value)] acknowledged
    for p, (leader, epoch) in enumerate(leaders):
        others = sorted(i for i in brokers if i != leader)
        other = others[p % len(others)]  # both non-leaders take turns
        record = pb.ProduceRecord(partition=p, key=b"first-%d" % p, value=b"py-first-%d" % p)
        request = pb.ProduceRequest(topic=topic, records=[record])
        what = "Produce p%d to broker %d (leader %d)" % (p, other, leader)
        e = expect_code(StatusCode.FAILED_PRECONDITION, what, stubs(brokers[other]).Produce,
                        request, timeout=DEADLINE_S)
        hint = check_hint(e, leader, brokers[leader], epoch, what)
        resp = stubs(hint["conduit-leader-address"]).Produce(request, timeout=DEADLINE_S)
        check_eq([(x.partition, x.offset, x.duplicate) for x in resp.positions], [(p, 0, False)],
                 "p%d: positions of the produce that followed the hint" % p)
        expected[p].append((record.key, record.value))

        fetched = stubs(brokers[leader]).Fetch(pb.FetchRequest(topic=topic, partition=p, offset=0),
                                               timeout=DEADLINE_S)
        check_eq([(r.partition, r.offset, r.key, r.value, r.leader_epoch) for r in fetched.records],
                 [(p, 0, record.key, record.value, epoch)],
                 "p%d: Fetch from leader %d" % (p, leader))
        check_eq(fetched.high_watermark, 1, "p%d: high watermark" % p)

        what = "Fetch p%d from broker %d" % (p, other)
        e = expect_code(StatusCode.FAILED_PRECONDITION, what, stubs(brokers[other]).Fetch,
                        pb.FetchRequest(topic=topic, partition=p, offset=0), timeout=DEADLINE_S)
        check_hint(e, leader, brokers[leader], epoch, what)
        what = "ListOffsets p%d from broker %d" % (p, other)
        e = expect_code(StatusCode.FAILED_PRECONDITION, what, stubs(brokers[other]).ListOffsets,
                        pb.ListOffsetsRequest(topic=topic, partitions=[p],
                                              spec=pb.OFFSET_SPEC_LATEST), timeout=DEADLINE_S)
        check_hint(e, leader, brokers[leader], epoch, what)
    print("  ok: every partition's non-leader refused with the leader's id, address and epoch;"
          " the produce that followed the hint landed at offset 0 with its leader epoch")

    # --- 4a. Keyed records on explicit partitions, routed by GetMetadata: no refusal at all.
    router = Router(stubs, addresses, topic)
    router.refresh()
    check_eq([router.leaders[p] for p in range(PARTITIONS)], leaders, "Router's view")
    keys = [b"user-%d" % (i % 9) for i in range(45)]
    for i, key in enumerate(keys):
        p = zlib.crc32(key) % PARTITIONS
        record = pb.ProduceRecord(partition=p, key=key, value=b"routed-%d" % i)
        resp = router.produce(p, [record])
        check_eq([(x.partition, x.offset) for x in resp.positions], [(p, len(expected[p]))],
                 "routed record %d: position" % i)
        expected[p].append((key, record.value))
    check_eq((router.hints_followed, router.refreshes), (0, 1),
             "hints followed and metadata refreshes while routing by current metadata")
    print("  ok: %d keyed records routed by GetMetadata reached their leaders at the first try"
          % len(keys))

    # A client holding an older view (every leader wrong, epoch 0): each partition's first
    # produce is refused with a newer epoch, which the router takes and follows at once.
    stale = Router(stubs, addresses, topic)
    stale.brokers = dict(brokers)
    stale.leaders = {p: (min(i for i in brokers if i != leader), 0)
                     for p, (leader, _) in enumerate(leaders)}
    for p in range(PARTITIONS):
        for n in range(2):
            record = pb.ProduceRecord(partition=p, key=b"stale-%d" % p,
                                      value=b"stale-%d-%d" % (p, n))
            resp = stale.produce(p, [record])
            check_eq([(x.partition, x.offset) for x in resp.positions], [(p, len(expected[p]))],
                     "stale-view record %d of p%d: position" % (n, p))
            expected[p].append((record.key, record.value))
    check_eq((stale.hints_followed, stale.refreshes), (PARTITIONS, 0),
             "hints followed and metadata refreshes with a stale view")
    check_eq([stale.leaders[p] for p in range(PARTITIONS)], leaders, "stale view, corrected")
    print("  ok: a stale view was corrected by one hint per partition, without a GetMetadata")

    # --- 4b. Keyed records without a partition: the broker places them (murmur2), a non-leader
    # refuses and names the leader, the client follows.
    placed = {}  # key -> partition the brokers chose
    followed = 0
    for i in range(30):
        key = b"free-%d" % (i % 7)
        record = pb.ProduceRecord(key=key, value=b"placed-%d" % i)
        request = pb.ProduceRequest(topic=topic, records=[record])
        first = addresses[i % len(addresses)]
        hint = None
        try:
            resp = stubs(first).Produce(request, timeout=DEADLINE_S)
        except grpc.RpcError as e:
            hint = leader_hint(e)
            if e.code() != StatusCode.FAILED_PRECONDITION or not hint:
                raise
            resp = stubs(hint["conduit-leader-address"]).Produce(request, timeout=DEADLINE_S)
            followed += 1
        check_eq(len(resp.positions), 1, "placed record %d: positions" % i)
        pos = resp.positions[0]
        leader, epoch = leaders[pos.partition]
        if hint is None:
            check_eq(first, brokers[leader],
                     "placed record %d (p%d) accepted by" % (i, pos.partition))
        else:
            check_eq(hint, {"conduit-leader-id": str(leader), "conduit-leader-address":
                            brokers[leader], "conduit-leader-epoch": str(epoch)},
                     "placed record %d (p%d): hint" % (i, pos.partition))
        check_eq(placed.setdefault(key, pos.partition), pos.partition,
                 "partition of key %r (one key, one partition)" % key)
        check_eq(pos.offset, len(expected[pos.partition]), "placed record %d: offset" % i)
        expected[pos.partition].append((key, record.value))
    check(followed > 0, "no produce without a partition was refused: the hint path went untested")
    print("  ok: 30 keyed records placed by the brokers; %d followed a not-leader hint, keys %s"
          % (followed, sorted((k.decode(), p) for k, p in placed.items())))

    # --- 5. Everything acknowledged is there, in order, at the leader's epoch.
    for p in range(PARTITIONS):
        fetched = router.fetch_all(p)
        want = expected[p]
        check_eq(fetched.high_watermark, len(want), "p%d high watermark" % p)
        check_eq([(r.offset, r.key, r.value) for r in fetched.records],
                 [(off, k, v) for off, (k, v) in enumerate(want)], "p%d records in order" % p)
        check_eq({r.leader_epoch for r in fetched.records}, {leaders[p][1]},
                 "p%d leader epochs" % p)
    print("  ok: read back %s records per partition, in order"
          % [len(expected[p]) for p in range(PARTITIONS)])
    stubs.close()


if __name__ == "__main__":
    pc.run_cluster_main("python_cluster_client", main)
