#!/usr/bin/python3
"""A consumer-group member process for zombie_fencing.py (not a test by itself).

Usage: group_member.py --group G --topic T --client-id C [--session-timeout S] HOST:PORT

Joins group G (subscribed to T, session timeout S seconds, default 1.5), then loops until SIGTERM:
  1. every ~100 ms, when it owns partitions, commits all of them (offset = the partition's high
     watermark read once at start; metadata = "<client-id> #<n>") with its current member epoch;
  2. when its heartbeat is due (the returned heartbeat_interval), heartbeats reporting the full
     list of partitions it owns, and takes the response's assignment as what it owns now.
The commit comes BEFORE the heartbeat in the loop on purpose: a process resumed after SIGSTOP
first commits with the identity it had before it stopped (a zombie).

A heartbeat answered NOT_FOUND (its session expired) fences it: it drops its partitions and its
identity and idles; SIGUSR1 makes it rejoin (member_epoch 0). On SIGTERM it leaves the group
(when it is a member) and exits 0.

Every event is one JSON object per line on stdout, flushed:
  {"event": "state", "member_id", "member_epoch", "group_epoch", "assignment", "pending", ...}
      whenever its member id, epoch or assignment changes;
  {"event": "commit", "member_id", "member_epoch", "partitions", "seq", "result": "OK" or the
      gRPC status code name, "message", "t_sent", "t_done"};
  {"event": "heartbeat", "member_id", "member_epoch", "assignment", "t_sent", "t_done"} after
      every successful heartbeat;
  {"event": "heartbeat_error", ...}, {"event": "fenced", ...}, {"event": "rejoin"},
  {"event": "left", ...}, {"event": "exit"}.
t_sent and t_done are time.monotonic() (CLOCK_MONOTONIC: comparable across processes).
"""

import argparse
import json
import os
import signal
import sys
import time

sys.dont_write_bytecode = True  # keep the source tree free of __pycache__
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import grpc  # noqa: E402
from google.protobuf import duration_pb2  # noqa: E402

import polyglot_common as pc  # noqa: E402
from polyglot_common import DEADLINE_S  # noqa: E402

pc.generate_stubs(["conduit/log/v1/log.proto", "conduit/coordinator/v1/coordinator.proto"],
                  [os.path.join(pc.repo_root(), "proto"), pc.GRPC_PROTO_DIR, pc.WKT_DIR])
from conduit.coordinator.v1 import coordinator_pb2 as cpb  # noqa: E402
from conduit.coordinator.v1 import coordinator_pb2_grpc as cpb_grpc  # noqa: E402
from conduit.log.v1 import log_pb2 as lpb  # noqa: E402
from conduit.log.v1 import log_pb2_grpc as lpb_grpc  # noqa: E402

COMMIT_EVERY_S = 0.1
RPC_TIMEOUT_S = 2.0  # short: a member must notice trouble well within a session timeout

stop_requested = False
rejoin_requested = False
# Set by SIGCONT: the next RPC must be a commit with the identity the member had when it was
# stopped (what a paused zombie does on waking), not a heartbeat that would tell it first.
resumed = False


def emit(event, **fields):
    fields = dict(event=event, pid=os.getpid(), **fields)
    sys.stdout.write(json.dumps(fields, sort_keys=True) + "\n")
    sys.stdout.flush()


def partitions_of(topic_partitions):
    return sorted(p for tp in topic_partitions for p in tp.partitions)


def seconds(duration):
    return duration.seconds + duration.nanos / 1e9


def die_with_parent():
    """Asks the kernel for SIGKILL when the driver dies (works even while SIGSTOPped), so that no
    member outlives a driver that was killed."""
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        PR_SET_PDEATHSIG = 1
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    if os.getppid() == 1:  # the driver is already gone
        sys.exit(1)


def main():
    global rejoin_requested, resumed
    die_with_parent()
    parser = argparse.ArgumentParser()
    parser.add_argument("--group", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--client-id", required=True)
    parser.add_argument("--session-timeout", type=float, default=1.5)
    parser.add_argument("address")
    args = parser.parse_args()

    def on_term(signum, frame):
        global stop_requested
        stop_requested = True

    def on_usr1(signum, frame):
        global rejoin_requested
        rejoin_requested = True

    def on_cont(signum, frame):
        global resumed
        resumed = True

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    signal.signal(signal.SIGUSR1, on_usr1)
    signal.signal(signal.SIGCONT, on_cont)

    channel = grpc.insecure_channel(args.address)
    pc.wait_ready(channel, args.address)
    log = lpb_grpc.LogServiceStub(channel)
    coord = cpb_grpc.GroupCoordinatorStub(channel)

    latest = log.ListOffsets(lpb.ListOffsetsRequest(topic=args.topic, spec=lpb.OFFSET_SPEC_LATEST),
                             timeout=DEADLINE_S)
    hwm = {o.partition: o.offset for o in latest.offsets}
    emit("started", high_watermarks={str(p): o for p, o in sorted(hwm.items())})

    member_id = ""
    epoch = 0
    owned = []
    interval = 0.5
    joined = False   # a member now (not fenced)
    want_join = True
    seq = 0
    next_commit = time.monotonic()
    next_heartbeat = time.monotonic()
    last_state = None

    while not stop_requested:
        if rejoin_requested:
            rejoin_requested = False
            if not joined:
                emit("rejoin")
                want_join = True
                next_heartbeat = time.monotonic()

        now = time.monotonic()
        # 1. Commit first (see the module docstring); right after SIGCONT, unconditionally.
        if joined and owned and (now >= next_commit or resumed):
            resumed = False
            seq += 1
            req = cpb.CommitOffsetsRequest(
                group_id=args.group, member_id=member_id, member_epoch=epoch,
                topics=[cpb.TopicCommits(topic=args.topic, partitions=[
                    cpb.PartitionCommit(partition=p, offset=hwm[p],
                                        metadata="%s #%d" % (args.client_id, seq))
                    for p in owned])])
            t_sent = time.monotonic()
            try:
                coord.CommitOffsets(req, timeout=RPC_TIMEOUT_S)
                result, message = "OK", ""
            except grpc.RpcError as e:
                result, message = e.code().name, e.details()
            emit("commit", member_id=member_id, member_epoch=epoch, partitions=owned, seq=seq,
                 result=result, message=message, t_sent=t_sent, t_done=time.monotonic())
            next_commit = t_sent + COMMIT_EVERY_S

        # 2. Then the heartbeat, when due.
        now = time.monotonic()
        if resumed and joined and owned:
            continue  # woke between the commit check and here: commit first
        resumed = False  # (nothing to commit: the flag has no use)
        if (joined or want_join) and now >= next_heartbeat:
            if want_join:
                req = cpb.HeartbeatRequest(
                    group_id=args.group, member_epoch=0, subscribed_topics=[args.topic],
                    client_id=args.client_id,
                    session_timeout=duration_pb2.Duration(
                        seconds=int(args.session_timeout),
                        nanos=int(round((args.session_timeout % 1) * 1e9))))
            else:
                req = cpb.HeartbeatRequest(
                    group_id=args.group, member_id=member_id, member_epoch=epoch,
                    owned_partitions=[cpb.TopicPartitions(topic=args.topic, partitions=owned)]
                    if owned else [])
            t_sent = time.monotonic()
            try:
                resp = coord.Heartbeat(req, timeout=RPC_TIMEOUT_S)
            except grpc.RpcError as e:
                emit("heartbeat_error", member_id=member_id, member_epoch=epoch, code=e.code().name,
                     message=e.details(), t_sent=t_sent, t_done=time.monotonic())
                if e.code() == grpc.StatusCode.NOT_FOUND and joined:
                    # Fenced: the coordinator no longer knows this member. Drop everything.
                    emit("fenced", member_id=member_id, member_epoch=epoch, owned=owned)
                    joined, member_id, epoch, owned = False, "", 0, []
                    last_state = None
                next_heartbeat = time.monotonic() + min(interval, 0.5)
                continue
            joined, want_join = True, False
            member_id, epoch = resp.member_id, resp.member_epoch
            interval = seconds(resp.heartbeat_interval) or 0.5
            owned = partitions_of(resp.assignment)
            emit("heartbeat", member_id=member_id, member_epoch=epoch, assignment=owned,
                 t_sent=t_sent, t_done=time.monotonic())
            state = (member_id, epoch, tuple(owned))
            if state != last_state:
                last_state = state
                emit("state", member_id=member_id, member_epoch=epoch,
                     group_epoch=resp.group_epoch, assignment=owned,
                     pending=partitions_of(resp.pending_partitions),
                     heartbeat_interval=interval, t_sent=t_sent, t_done=time.monotonic())
            next_heartbeat = t_sent + interval

        due = []
        if joined or want_join:
            due.append(next_heartbeat)
        if joined and owned:
            due.append(next_commit)
        wait = (min(due) - time.monotonic()) if due else 0.05
        if wait > 0:
            time.sleep(min(wait, 0.05))

    if joined:
        try:
            coord.LeaveGroup(cpb.LeaveGroupRequest(group_id=args.group, member_id=member_id),
                             timeout=RPC_TIMEOUT_S)
            emit("left", member_id=member_id, result="OK")
        except grpc.RpcError as e:
            emit("left", member_id=member_id, result=e.code().name, message=e.details())
    channel.close()
    emit("exit")


if __name__ == "__main__":
    main()
