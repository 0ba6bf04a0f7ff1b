"""Cluster routing for the Python polyglot tests, with plain generated stubs, as proto/README.md
("Routing in a cluster, for clients built from generated stubs") tells a client of its own to do
it: channels per broker, reading the conduit-leader-* trailing metadata, a Router, and waits for a
cluster that run_with_cluster.sh started to be ready. Importing it generates the
conduit.log.v1 stubs (polyglot_common.generate_stubs) and exports them as `pb` / `pb_grpc`.
"""

import os
import time

import grpc

import polyglot_common as pc
from polyglot_common import DEADLINE_S, CheckFailed, check, check_eq

pc.generate_stubs(["conduit/log/v1/log.proto"],
                  [os.path.join(pc.repo_root(), "proto"), pc.GRPC_PROTO_DIR, pc.WKT_DIR])
from conduit.log.v1 import log_pb2 as pb  # noqa: E402
from conduit.log.v1 import log_pb2_grpc as pb_grpc  # noqa: E402

CLUSTER_WAIT_S = 15.0  # leases are real etcd leases: views converge in well under a second
StatusCode = grpc.StatusCode
HINT_KEYS = ("conduit-leader-id", "conduit-leader-address", "conduit-leader-epoch")


def leader_hint(error):
    """The conduit-leader-* trailing metadata of a failed call as {key: str}; {} without it."""
    trailers = dict(error.trailing_metadata() or ())
    return {k: trailers[k] for k in HINT_KEYS if k in trailers}


def poll(what, fn, timeout=CLUSTER_WAIT_S):
    """Calls fn() every 50 ms until it returns something true; returns that, or fails."""
    deadline = time.monotonic() + timeout
    while True:
        result = fn()
        if result:
            return result
        if time.monotonic() > deadline:
            raise CheckFailed("%s: not within %.0f s" % (what, timeout))
        time.sleep(0.05)


class Stubs:
    """One channel and LogService stub per broker address, made on first use."""

    def __init__(self):
        self._channels = {}
        self._stubs = {}

    def __call__(self, address):
        if address not in self._stubs:
            channel = grpc.insecure_channel(address)
            pc.wait_ready(channel, address)
            self._channels[address] = channel
            self._stubs[address] = pb_grpc.LogServiceStub(channel)
        return self._stubs[address]

    def close(self):
        for channel in self._channels.values():
            channel.close()


class Router:
    """What proto/README.md asks of a client: GetMetadata names each partition's leader; calls go
    there; a not-leader answer with a newer epoch is followed at once, any other not-leader
    answer or UNAVAILABLE refreshes the metadata and retries after a backoff. Counts what it did,
    so the test can tell which path a call took."""

    ATTEMPTS = 20
    BACKOFF_S = 0.1

    def __init__(self, stubs, bootstraps, topic):
        self.stubs, self.bootstraps, self.topic = stubs, list(bootstraps), topic
        self.brokers = {}  # id -> address
        self.leaders = {}  # partition -> (leader id, leader epoch)
        self.hints_followed = 0
        self.refreshes = 0

    def refresh(self):
        self.refreshes += 1
        for address in list(self.brokers.values()) + self.bootstraps:
            try:
                meta = self.stubs(address).GetMetadata(
                    pb.GetMetadataRequest(topics=[self.topic]), timeout=DEADLINE_S)
            except grpc.RpcError:
                continue
            self.brokers.update({b.id: b.address for b in meta.brokers})
            for p in meta.topics[0].partitions if meta.topics else ():
                held = self.leaders.get(p.partition)
                if held is None or p.leader_epoch >= held[1]:  # only ever move forward
                    self.leaders[p.partition] = (p.leader, p.leader_epoch)
            return
        raise CheckFailed("GetMetadata answered by none of %s" % self.bootstraps)

    def produce(self, partition, records):
        """Produces `records` (all placed on `partition`) to its leader; returns the response."""
        request = pb.ProduceRequest(topic=self.topic, records=records)
        last = None
        for _ in range(self.ATTEMPTS):
            leader, epoch = self.leaders.get(partition, (-1, 0))
            if leader in self.brokers:
                try:
                    return self.stubs(self.brokers[leader]).Produce(request, timeout=DEADLINE_S)
                except grpc.RpcError as e:
                    last = "%s: %s" % (e.code().name, e.details())
                    hint = leader_hint(e)
                    if e.code() == StatusCode.FAILED_PRECONDITION and not hint:
                        raise  # not about routing: retrying would not help
                    if hint and int(hint["conduit-leader-epoch"]) > epoch:
                        new_id = int(hint["conduit-leader-id"])
                        self.brokers[new_id] = hint["conduit-leader-address"]
                        self.leaders[partition] = (new_id, int(hint["conduit-leader-epoch"]))
                        self.hints_followed += 1
                        continue  # news: resend there at once
                    if e.code() not in (StatusCode.FAILED_PRECONDITION, StatusCode.UNAVAILABLE):
                        raise
            time.sleep(self.BACKOFF_S)
            self.refresh()
        raise CheckFailed("produce to partition %d: no leader took it after %d attempts (%s)"
                          % (partition, self.ATTEMPTS, last))

    def fetch_all(self, partition):
        """Every record of `partition`, from its leader."""
        leader, _ = self.leaders[partition]
        return self.stubs(self.brokers[leader]).Fetch(
            pb.FetchRequest(topic=self.topic, partition=partition, offset=0, max_records=10000),
            timeout=DEADLINE_S)


def await_cluster(stubs, addresses):
    """GetMetadata on the first broker until it lists exactly `addresses` and one of them as
    the controller; returns id -> address."""
    def listed():
        meta = stubs(addresses[0]).GetMetadata(pb.GetMetadataRequest(), timeout=DEADLINE_S)
        ids = {b.id for b in meta.brokers}
        return meta if (sorted(b.address for b in meta.brokers) == sorted(addresses)
                        and meta.controller_id in ids) else None
    meta = poll("GetMetadata on %s lists brokers %s and a controller among them"
                % (addresses[0], addresses), listed)
    check(meta.cluster != "", "GetMetadata names no cluster")
    brokers = {b.id: b.address for b in meta.brokers}
    check_eq(len(brokers), len(addresses), "distinct broker ids")
    by_address = {a: i for i, a in brokers.items()}
    check_eq(meta.answered_by, by_address[addresses[0]], "GetMetadata answered_by")
    print("  ok: cluster '%s' of brokers %s, controller %d"
          % (meta.cluster, sorted(brokers.items()), meta.controller_id))
    return brokers


def await_placement(stubs, brokers, topic, partitions):
    """GetMetadata on every broker until each names a live leader for every partition of
    `topic` and they agree; returns [(leader id, leader epoch)] in partition order."""
    def agreed():
        views = []
        for address in brokers.values():
            try:
                meta = stubs(address).GetMetadata(pb.GetMetadataRequest(topics=[topic]),
                                                  timeout=DEADLINE_S)
            except grpc.RpcError as err:
                # A broker whose view has not caught up with etcd does not know the topic yet.
                if err.code() == grpc.StatusCode.NOT_FOUND:
                    return None
                raise
            parts = meta.topics[0].partitions if meta.topics else []
            views.append([(p.partition, p.leader, p.leader_epoch) for p in parts])
        first = views[0]
        done = (len(first) == partitions and all(v == first for v in views)
                and all(leader in brokers for _, leader, _ in first))
        return first if done else None
    view = poll("every broker names the same live leaders of %s" % topic, agreed)
    check_eq([p for p, _, _ in view], list(range(partitions)), "partitions in order")
    for p, leader, epoch in view:
        check(epoch >= 1, "partition %d: leader epoch %d" % (p, epoch))
    return [(leader, epoch) for _, leader, epoch in view]


def await_served(stubs, brokers, topic, leaders):
    """Waits until every broker has applied the placement of `topic`: ListOffsets of each
    partition answers OK on its leader and FAILED_PRECONDITION with the hint elsewhere. Returns
    the lagging answers (UNAVAILABLE) that came first.

    Each broker applies new metadata on its own: until a broker has applied the topic it answers
    UNAVAILABLE ("being set up on broker N; retry shortly"), never NOT_FOUND, and its GetMetadata
    names only what it has applied. A client retries UNAVAILABLE, as proto/README.md says."""
    lagging = []
    for p, (leader, _) in enumerate(leaders):
        for broker, address in sorted(brokers.items()):
            def served():
                try:
                    stubs(address).ListOffsets(pb.ListOffsetsRequest(
                        topic=topic, partitions=[p], spec=pb.OFFSET_SPEC_LATEST),
                        timeout=DEADLINE_S)
                    answer = "served"
                except grpc.RpcError as e:
                    if e.code() == StatusCode.UNAVAILABLE:
                        lagging.append("broker %d p%d: %s" % (broker, p, e.code().name))
                        return False
                    if e.code() != StatusCode.FAILED_PRECONDITION or not leader_hint(e):
                        raise
                    answer = "refused with a hint"
                check_eq(answer, "served" if broker == leader else "refused with a hint",
                         "ListOffsets p%d on broker %d (leader %d)" % (p, broker, leader))
                return True
            poll("broker %d serves p%d of %s as its placement says" % (broker, p, topic), served)
    return lagging


def check_hint(error, leader, address, epoch, what):
    hint = leader_hint(error)
    check_eq(hint, {"conduit-leader-id": str(leader), "conduit-leader-address": address,
                    "conduit-leader-epoch": str(epoch)}, what + ": trailing metadata")
    return hint
