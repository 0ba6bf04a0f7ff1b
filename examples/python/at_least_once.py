#!/usr/bin/python3
"""At-least-once delivery, shown with a real crash.

    /usr/bin/python3 examples/python/at_least_once.py 127.0.0.1:7070

A consumer group gives each record to a consumer *at least once*: a consumer commits the offset
of a record only after it has processed it, so if it dies in between, the record is delivered
again after the restart. This script shows it happen, step by step, and then shows the two
usual answers: an idempotent side effect, and replaying a topic on purpose.

  1. Create topic "payments" (2 partitions) and produce 10 payments, keyed by account.
  2. Start a consumer process in group "ledger". It joins the group, fetches its partitions
     from the committed offsets and, for each payment, appends a line to a ledger file (the
     side effect) and then commits the next offset. After the 7th payment it is SIGKILLed:
     the ledger line is written, the commit never happens.
  3. Start the consumer again. It rejoins the group, waits for the coordinator to expire the
     dead member's session (1.5 s) so that it gets its partitions, resumes from the committed
     offsets and processes the 7th payment a second time: the ledger shows a double charge.
  4. Make the side effect idempotent: the ledger is a JSON file holding the balances AND the ids
     of the payments already applied, replaced atomically in one write. Rewind group "ledger"
     to the start of the topic (ResetOffsets, audited) and repeat the same crash: the payment is
     delivered twice again, but applied once.
  5. A second group, "cache-rebuild", replays the whole topic from offset 0 to rebuild an
     in-memory cache of payments, without disturbing group "ledger".

Every expectation is checked; the script exits 0 when all hold and 1 otherwise. The consumer
of steps 2 to 4 is this same file, run as `at_least_once.py consumer ... HOST:PORT`.

The gRPC stubs are generated at start from proto/conduit/{log,coordinator}/v1/*.proto with
Debian's protoc and grpc_python_plugin (apt: python3-grpcio, protobuf-compiler,
protobuf-compiler-grpc, libprotobuf-dev). The examples start from a clean slate: they delete
their own topic "payments" and groups "ledger" and "cache-rebuild" when those exist.
"""

import argparse
import atexit
import collections
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback

sys.dont_write_bytecode = True  # keep the source tree free of __pycache__

import grpc  # noqa: E402  (python3-grpcio)
from google.protobuf import duration_pb2  # noqa: E402  (python3-protobuf)

TOPIC = "payments"
PARTITIONS = 2
LEDGER_GROUP = "ledger"
CACHE_GROUP = "cache-rebuild"
SESSION_TIMEOUT_S = 1.5   # short, so that a crashed member is evicted quickly
CRASH_AFTER_NTH = 7       # the consumer dies right after processing its 7th payment
RPC_TIMEOUT_S = 10.0      # every call has a deadline: a hung server fails the example
CHILD_TIMEOUT_S = 30.0    # a consumer process that takes longer is killed and the example fails
ACTOR = "examples/at_least_once.py"

# Payments: (id, account, amount in cents). The account is the record key, so the payments of
# one account stay in order in one partition.
PAYMENTS = [
    ("pay-001", "acct-alice", 1250), ("pay-002", "acct-bob", 990),
    ("pay-003", "acct-carol", 4500), ("pay-004", "acct-alice", 300),
    ("pay-005", "acct-dave", 12000), ("pay-006", "acct-bob", 2599),
    ("pay-007", "acct-carol", 780), ("pay-008", "acct-dave", 150),
    ("pay-009", "acct-alice", 6400), ("pay-010", "acct-bob", 1000),
]


class ExpectationFailed(Exception):
    pass


def expect(condition, message):
    if not condition:
        raise ExpectationFailed(message)


def say(message=""):
    print(message, flush=True)


def step(title):
    say()
    say("== " + title)


def money(cents):
    return "%d.%02d" % divmod(cents, 100)


# ---------------------------------------------------------------------------------------------
# The gRPC stubs, generated from the repository's protos at start.

def repo_root():
    return os.environ.get("CONDUIT_SOURCE_DIR") or os.path.abspath(
        os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def load_stubs():
    """Generates the Python stubs into a temporary directory (or reuses the one a parent
    process made: $CONDUIT_EXAMPLE_STUBS) and imports them."""
    out = os.environ.get("CONDUIT_EXAMPLE_STUBS")
    if not out:
        out = tempfile.mkdtemp(prefix="conduit-example-stubs-")
        atexit.register(shutil.rmtree, out, ignore_errors=True)
        cmd = ["/usr/bin/protoc", "-I" + os.path.join(repo_root(), "proto"), "-I/usr/include",
               "--python_out=" + out, "--grpc_out=" + out,
               "--plugin=protoc-gen-grpc=/usr/bin/grpc_python_plugin",
               "conduit/log/v1/log.proto", "conduit/coordinator/v1/coordinator.proto"]
        try:
            subprocess.run(cmd, check=True, capture_output=True, text=True)
        except (OSError, subprocess.CalledProcessError) as e:
            sys.exit("at_least_once: FAIL: cannot generate the gRPC stubs (%s): %s\n"
                     "needs apt packages protobuf-compiler, protobuf-compiler-grpc, "
                     "libprotobuf-dev" % (" ".join(cmd), getattr(e, "stderr", e)))
        os.environ["CONDUIT_EXAMPLE_STUBS"] = out  # inherited by the consumer processes
    sys.path.insert(0, out)


load_stubs()
from conduit.coordinator.v1 import coordinator_pb2 as cpb  # noqa: E402
from conduit.coordinator.v1 import coordinator_pb2_grpc as cpb_grpc  # noqa: E402
from conduit.log.v1 import log_pb2 as lpb  # noqa: E402
from conduit.log.v1 import log_pb2_grpc as lpb_grpc  # noqa: E402


def connect(address):
    channel = grpc.insecure_channel(address)
    try:
        grpc.channel_ready_future(channel).result(timeout=RPC_TIMEOUT_S)
    except grpc.FutureTimeoutError:
        raise ExpectationFailed("no gRPC server at %s" % address)
    return channel, lpb_grpc.LogServiceStub(channel), cpb_grpc.GroupCoordinatorStub(channel)


def duration(seconds):
    return duration_pb2.Duration(seconds=int(seconds), nanos=int(round(seconds % 1 * 1e9)))


def to_seconds(d):
    return d.seconds + d.nanos / 1e9


def partitions_of(topic_partitions):
    return sorted(p for tp in topic_partitions if tp.topic == TOPIC for p in tp.partitions)


def committed_offsets(coord, group):
    resp = coord.FetchOffsets(cpb.FetchOffsetsRequest(group_id=group, topics=[TOPIC]),
                              timeout=RPC_TIMEOUT_S)
    return {o.partition: o for o in resp.offsets if o.topic == TOPIC}


# ---------------------------------------------------------------------------------------------
# A group member: join, heartbeat, commit, leave (the coordinator's KIP-848-style protocol).

class GroupMember:
    def __init__(self, coord, group, client_id, log=say):
        self.coord, self.group, self.client_id, self.log = coord, group, client_id, log
        self.member_id, self.epoch, self.owned = "", 0, []
        self.interval = 0.5
        self.next_heartbeat = 0.0

    def _heartbeat(self, request):
        resp = self.coord.Heartbeat(request, timeout=RPC_TIMEOUT_S)
        self.member_id, self.epoch = resp.member_id, resp.member_epoch
        self.interval = to_seconds(resp.heartbeat_interval) or 0.5
        self.next_heartbeat = time.monotonic() + self.interval
        # The assignment is what this member may own now: anything else must be released, which
        # the next heartbeat does by leaving it out of owned_partitions.
        self.owned = partitions_of(resp.assignment)
        return resp

    def join(self):
        resp = self._heartbeat(cpb.HeartbeatRequest(
            group_id=self.group, member_epoch=0, subscribed_topics=[TOPIC],
            session_timeout=duration(SESSION_TIMEOUT_S), client_id=self.client_id))
        self.log("joined group %r as member %s (epoch %d, heartbeat every %.2f s); "
                 "assigned %s, pending %s" % (self.group, self.member_id, self.epoch,
                                              self.interval, self.owned,
                                              partitions_of(resp.pending_partitions)))
        return resp

    def heartbeat(self):
        """Keeps the session alive, reporting the full list of owned partitions."""
        return self._heartbeat(cpb.HeartbeatRequest(
            group_id=self.group, member_id=self.member_id, member_epoch=self.epoch,
            owned_partitions=[cpb.TopicPartitions(topic=TOPIC, partitions=self.owned)]))

    def heartbeat_if_due(self):
        if time.monotonic() >= self.next_heartbeat:
            self.heartbeat()

    def wait_for_all_partitions(self, timeout_s=10.0):
        """This example runs one consumer per group, so it waits until it owns every partition.
        A partition still held by a member that died stays `pending` until that member's session
        times out."""
        deadline = time.monotonic() + timeout_s
        started = time.monotonic()
        told = False
        while True:
            resp = self.heartbeat()
            pending = partitions_of(resp.pending_partitions)
            if self.owned == list(range(PARTITIONS)) and not pending:
                break
            if pending and not told:
                self.log("partitions %s are still held by another member (here: the crashed one); "
                         "waiting for its %.1f s session to expire" % (pending, SESSION_TIMEOUT_S))
                told = True
            expect(time.monotonic() < deadline,
                   "member %s of %r owns %s (pending %s) after %.0f s" % (
                       self.member_id, self.group, self.owned, pending, timeout_s))
            time.sleep(min(self.interval, 0.1))
        self.log("owns partitions %s at epoch %d (after %.1f s)" % (
            self.owned, self.epoch, time.monotonic() - started))

    def commit(self, partition, next_offset, metadata=""):
        # The committed offset is the NEXT offset to consume: one past the processed record.
        self.coord.CommitOffsets(cpb.CommitOffsetsRequest(
            group_id=self.group, member_id=self.member_id, member_epoch=self.epoch,
            topics=[cpb.TopicCommits(topic=TOPIC, partitions=[
                cpb.PartitionCommit(partition=partition, offset=next_offset, metadata=metadata)])]),
            timeout=RPC_TIMEOUT_S)

    def leave(self):
        self.coord.LeaveGroup(cpb.LeaveGroupRequest(group_id=self.group,
                                                     member_id=self.member_id),
                              timeout=RPC_TIMEOUT_S)
        self.log("left group %r" % self.group)


def consume(log, member, start_offsets, handle):
    """Reads every owned partition from start_offsets up to its current end, calling
    handle(partition, record) for each record, in partition order."""
    for p in member.owned:
        offset = start_offsets[p]
        while True:
            member.heartbeat_if_due()
            resp = log.Fetch(lpb.FetchRequest(topic=TOPIC, partition=p, offset=offset,
                                              max_records=100), timeout=RPC_TIMEOUT_S)
            for record in resp.records:
                handle(p, record)
            offset = resp.next_offset
            if offset >= resp.high_watermark:
                break


# ---------------------------------------------------------------------------------------------
# Side effects. A plain append-only ledger file (not idempotent), and an idempotent ledger: the
# balances and the set of applied payment ids in ONE file, replaced atomically, so that "applied"
# and "remembered as applied" can never disagree, whenever the process dies.

class PlainLedger:
    def __init__(self, path):
        self.path = path

    def apply(self, payment):
        with open(self.path, "a", encoding="utf-8") as f:
            f.write("%s %s %s\n" % (payment["id"], payment["account"],
                                    money(payment["amount_cents"])))
            f.flush()
            os.fsync(f.fileno())
        return True

    @staticmethod
    def read_ids(path):
        with open(path, encoding="utf-8") as f:
            return [line.split()[0] for line in f if line.strip()]


class IdempotentLedger:
    def __init__(self, path):
        self.path = path
        try:
            with open(path, encoding="utf-8") as f:
                self.state = json.load(f)
        except FileNotFoundError:
            self.state = {"balances": {}, "applied_ids": []}

    def apply(self, payment):
        if payment["id"] in self.state["applied_ids"]:
            return False  # already applied: skip the side effect, just commit
        balances = self.state["balances"]
        balances[payment["account"]] = balances.get(payment["account"], 0) + payment["amount_cents"]
        self.state["applied_ids"].append(payment["id"])
        write_atomically(self.path, json.dumps(self.state, indent=1, sort_keys=True))
        return True


def write_atomically(path, text):
    """Write a temporary file, fsync it, rename it over the old one, fsync the directory."""
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    dir_fd = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


# ---------------------------------------------------------------------------------------------
# The consumer process (`at_least_once.py consumer ...`): what a real service would run.

def consumer_main(argv):
    parser = argparse.ArgumentParser(prog="at_least_once.py consumer")
    parser.add_argument("--ledger", required=True, help="the side-effect file")
    parser.add_argument("--idempotent", action="store_true")
    parser.add_argument("--crash-after", default="", help="payment id: SIGKILL self after it")
    parser.add_argument("--report", default="", help="JSON summary written at a clean exit")
    parser.add_argument("address")
    args = parser.parse_args(argv)
    die_with_parent()
    prefix = "    consumer pid %d | " % os.getpid()

    def log_line(message):
        say(prefix + message)

    channel, log, coord = connect(args.address)
    member = GroupMember(coord, LEDGER_GROUP, "at-least-once-consumer/%d" % os.getpid(), log_line)
    member.join()
    member.wait_for_all_partitions()

    # Resume from the committed offsets; a partition without one starts at the log start.
    committed = committed_offsets(coord, LEDGER_GROUP)
    earliest = log.ListOffsets(lpb.ListOffsetsRequest(topic=TOPIC, spec=lpb.OFFSET_SPEC_EARLIEST),
                               timeout=RPC_TIMEOUT_S)
    start = {o.partition: o.offset for o in earliest.offsets}
    for p, c in committed.items():
        start[p] = c.offset
    log_line("committed offsets %s -> resuming at %s" % (
        {p: c.offset for p, c in sorted(committed.items())} or "none", dict(sorted(start.items()))))

    ledger = IdempotentLedger(args.ledger) if args.idempotent else PlainLedger(args.ledger)
    seen, applied, skipped = [], [], []

    def handle(partition, record):
        payment = json.loads(record.value)
        seen.append(payment["id"])
        # 1. the side effect ...
        if ledger.apply(payment):
            applied.append(payment["id"])
            log_line("p%d@%d %s: charged %s %s" % (partition, record.offset, payment["id"],
                                                  payment["account"],
                                                  money(payment["amount_cents"])))
        else:
            skipped.append(payment["id"])
            log_line("p%d@%d %s: already applied (its id is in the ledger): skipped" % (
                partition, record.offset, payment["id"]))
        # ... the crash window: the effect is durable, the commit has not happened ...
        if payment["id"] == args.crash_after:
            log_line("*** CRASH: SIGKILL right after applying %s, before committing offset %d" %
                     (payment["id"], record.offset + 1))
            os.kill(os.getpid(), signal.SIGKILL)
        # 2. ... and only then the commit of the next offset.
        member.commit(partition, record.offset + 1, metadata="after " + payment["id"])

    consume(log, member, start, handle)
    log_line("caught up; committed %s" % {
        p: c.offset for p, c in sorted(committed_offsets(coord, LEDGER_GROUP).items())})
    member.leave()
    channel.close()
    if args.report:
        write_atomically(args.report, json.dumps({"member_id": member.member_id, "seen": seen,
                                                  "applied": applied, "skipped": skipped}))


def die_with_parent():
    """Linux: SIGKILL this process if the example driver dies, so that no consumer outlives it."""
    try:
        import ctypes
        ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() == 1:
        sys.exit(1)


# ---------------------------------------------------------------------------------------------
# The driver: the story, and the checks.

class Consumers:
    """Starts consumer processes and makes sure none is left running."""

    def __init__(self, address):
        self.address, self.procs = address, []

    def run(self, ledger, idempotent=False, crash_after="", report=""):
        cmd = [sys.executable, os.path.abspath(__file__), "consumer", "--ledger", ledger]
        if idempotent:
            cmd.append("--idempotent")
        if crash_after:
            cmd += ["--crash-after", crash_after]
        if report:
            cmd += ["--report", report]
        proc = subprocess.Popen(cmd + [self.address], stdin=subprocess.DEVNULL)
        self.procs.append(proc)
        say("  started consumer process pid %d" % proc.pid)
        try:
            rc = proc.wait(timeout=CHILD_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise ExpectationFailed("consumer pid %d still running after %.0f s" %
                                    (proc.pid, CHILD_TIMEOUT_S))
        say("  consumer pid %d ended: %s" % (
            proc.pid, "killed by SIGKILL" if rc == -signal.SIGKILL else "exit status %d" % rc))
        return rc

    def stop_all(self):
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def delete_leftovers(log, coord):
    """A clean slate: the groups and topic of a previous run are deleted. A group still has a
    member for at most a session timeout after a crashed run, hence the retry."""
    for group in (LEDGER_GROUP, CACHE_GROUP):
        deadline = time.monotonic() + 3 * SESSION_TIMEOUT_S + 2
        while True:
            try:
                coord.DeleteGroup(cpb.DeleteGroupRequest(group_id=group), timeout=RPC_TIMEOUT_S)
                say("  deleted group %r left by an earlier run" % group)
                break
            except grpc.RpcError as e:
                if e.code() == grpc.StatusCode.NOT_FOUND:
                    break
                if e.code() != grpc.StatusCode.FAILED_PRECONDITION or time.monotonic() > deadline:
                    raise
                time.sleep(0.5)  # it still has members: wait for their sessions to expire
    try:
        log.DeleteTopic(lpb.DeleteTopicRequest(name=TOPIC), timeout=RPC_TIMEOUT_S)
        say("  deleted topic %r left by an earlier run" % TOPIC)
    except grpc.RpcError as e:
        if e.code() != grpc.StatusCode.NOT_FOUND:
            raise


def produce_payments(log):
    resp = log.Produce(lpb.ProduceRequest(topic=TOPIC, records=[
        lpb.ProduceRecord(key=account.encode(), value=json.dumps(
            {"id": pid, "account": account, "amount_cents": cents}).encode())
        for pid, account, cents in PAYMENTS]), timeout=RPC_TIMEOUT_S)
    expect(len(resp.positions) == len(PAYMENTS), "Produce returned %d positions for %d records"
           % (len(resp.positions), len(PAYMENTS)))
    return {pid: (pos.partition, pos.offset) for (pid, _, _), pos in zip(PAYMENTS, resp.positions)}


def crash_experiment(coord, consumers, ledger_path, idempotent, crash_id, crash_position,
                     report_path):
    """Runs the consumer until it crashes after crash_id, then once more to the end."""
    say("-- run 1: the consumer will die right after applying %s, before its commit" % crash_id)
    rc = consumers.run(ledger_path, idempotent=idempotent, crash_after=crash_id)
    expect(rc == -signal.SIGKILL, "the first consumer should die of SIGKILL, got status %s" % rc)
    partition, offset = crash_position
    committed = committed_offsets(coord, LEDGER_GROUP)
    got = committed[partition].offset if partition in committed else None  # None: never committed
    expect(got == offset or (got is None and offset == 0),
           "after the crash, p%d's committed offset should be %d (that of %s), got %s" % (
               partition, offset, crash_id, got))
    say("  the side effect of %s is done, yet p%d's committed offset is still %s: %s's own offset"
        % (crash_id, partition, "unset" if got is None else got, crash_id))
    say("-- run 2: the consumer restarts (a new process, a new member of the group)")
    rc = consumers.run(ledger_path, idempotent=idempotent, report=report_path)
    expect(rc == 0, "the restarted consumer failed with status %d" % rc)
    with open(report_path, encoding="utf-8") as f:
        return json.load(f)


def main(address):
    workdir = tempfile.mkdtemp(prefix="conduit-at-least-once-")
    consumers = Consumers(address)
    channel, log, coord = connect(address)
    try:
        story(address, log, coord, consumers, workdir)
    finally:
        consumers.stop_all()
        channel.close()
        shutil.rmtree(workdir, ignore_errors=True)


def story(address, log, coord, consumers, workdir):
    say("Conduit at %s; scratch files in %s" % (address, workdir))
    delete_leftovers(log, coord)

    # -- 1. The topic and the payments.
    step("1. Topic %r with %d partitions, %d payments keyed by account" %
         (TOPIC, PARTITIONS, len(PAYMENTS)))
    log.CreateTopic(lpb.CreateTopicRequest(name=TOPIC, partitions=PARTITIONS),
                    timeout=RPC_TIMEOUT_S)
    positions = produce_payments(log)
    for pid, account, cents in PAYMENTS:
        say("  %s %-10s %8s -> partition %d offset %d" % (pid, account, money(cents),
                                                          *positions[pid]))
    # A consumer that owns both partitions reads partition 0, then partition 1.
    order = sorted(positions, key=lambda pid: positions[pid])
    expect(len({p for p, _ in positions.values()}) == PARTITIONS,
           "all payments landed in one partition; the example wants both used")
    crash_id = order[CRASH_AFTER_NTH - 1]
    crash_partition, crash_offset = positions[crash_id]
    say("  a consumer owning both partitions processes them in this order: %s" % " ".join(order))
    say("  -> its payment #%d is %s (partition %d, offset %d)" % (
        CRASH_AFTER_NTH, crash_id, crash_partition, crash_offset))
    end_offsets = {p: sum(1 for q, _ in positions.values() if q == p) for p in range(PARTITIONS)}

    # -- 2 and 3. At least once: the crash between side effect and commit.
    step("2-3. At-least-once: process (append to ledger.txt), then commit; crash in between")
    plain_path = os.path.join(workdir, "ledger.txt")
    report = crash_experiment(coord, consumers, plain_path, False, crash_id, positions[crash_id],
                              os.path.join(workdir, "report-plain.json"))
    ledger_ids = PlainLedger.read_ids(plain_path)
    say("  ledger.txt now holds %d lines:" % len(ledger_ids))
    with open(plain_path, encoding="utf-8") as f:
        for line in f:
            dup = "   <-- DUPLICATE: charged twice" if line.split()[0] == crash_id else ""
            say("    " + line.rstrip("\n") + dup)
    counts = collections.Counter(ledger_ids)
    expect(report["seen"][0] == crash_id,
           "the restarted consumer should first see %s again (resuming at the committed offset), "
           "it saw %s" % (crash_id, report["seen"]))
    expect(report["seen"] == order[CRASH_AFTER_NTH - 1:],
           "the restarted consumer saw %s, expected %s" % (report["seen"],
                                                          order[CRASH_AFTER_NTH - 1:]))
    expect(ledger_ids == order[:CRASH_AFTER_NTH] + order[CRASH_AFTER_NTH - 1:],
           "ledger.txt holds %s" % ledger_ids)
    expect({pid for pid, n in counts.items() if n > 1} == {crash_id} and counts[crash_id] == 2,
           "expected exactly %s twice in ledger.txt, counts %s" % (crash_id, dict(counts)))
    expect(set(counts) == set(order), "ledger.txt misses payments: %s" % (set(order) - set(counts)))
    offsets = committed_offsets(coord, LEDGER_GROUP)
    expect({p: o.offset for p, o in offsets.items()} == end_offsets,
           "group %r committed %s, expected %s" % (
               LEDGER_GROUP, {p: o.offset for p, o in offsets.items()}, end_offsets))
    expect(offsets[crash_partition].committed_by == report["member_id"],
           "p%d's final offset should be committed by the restarted member %s, not %s" % (
               crash_partition, report["member_id"], offsets[crash_partition].committed_by))
    say("  => at-least-once: %s was delivered twice and applied twice; nothing was lost. "
        "Group %r is at %s." % (crash_id, LEDGER_GROUP, end_offsets))

    # -- 4. The same crash with an idempotent side effect.
    step("4. Idempotent side effect: balances + applied ids in one atomically replaced file")
    dry = coord.ResetOffsets(cpb.ResetOffsetsRequest(
        group_id=LEDGER_GROUP, topic=TOPIC, to_earliest=True, execute=False, actor=ACTOR),
        timeout=RPC_TIMEOUT_S)
    expect(not dry.executed, "a ResetOffsets without execute must be a dry run")
    say("  ResetOffsets dry run (execute=false) would move group %r: %s" % (
        LEDGER_GROUP, ", ".join("p%d %d -> %d" % (r.partition, r.before, r.after)
                                for r in dry.partitions)))
    expect({p: o.offset for p, o in committed_offsets(coord, LEDGER_GROUP).items()} ==
           end_offsets, "the dry run changed the committed offsets")
    reset = coord.ResetOffsets(cpb.ResetOffsetsRequest(
        group_id=LEDGER_GROUP, topic=TOPIC, to_earliest=True, execute=True, actor=ACTOR,
        reason="replay the payments into the idempotent ledger"), timeout=RPC_TIMEOUT_S)
    expect(reset.executed and all(r.after == 0 for r in reset.partitions) and
           len(reset.partitions) == PARTITIONS, "ResetOffsets executed: %s" % reset)
    audit = coord.ListGroupAudit(cpb.ListGroupAuditRequest(group_id=LEDGER_GROUP),
                                 timeout=RPC_TIMEOUT_S)
    expect(audit.entries and audit.entries[0].id == reset.audit_id and
           audit.entries[0].actor == ACTOR, "ListGroupAudit: %s" % audit)
    say("  rewound group %r to the log start (audit entry %d: actor %r, spec %r)" % (
        LEDGER_GROUP, reset.audit_id, audit.entries[0].actor, audit.entries[0].spec))
    json_path = os.path.join(workdir, "ledger.json")
    report = crash_experiment(coord, consumers, json_path, True, crash_id, positions[crash_id],
                              os.path.join(workdir, "report-idempotent.json"))
    with open(json_path, encoding="utf-8") as f:
        state = json.load(f)
    expected_balances = collections.Counter()
    for _, account, cents in PAYMENTS:
        expected_balances[account] += cents
    say("  ledger.json: balances %s" % {a: money(c) for a, c in sorted(state["balances"].items())})
    say("  ledger.json: applied ids %s" % " ".join(state["applied_ids"]))
    expect(report["seen"][0] == crash_id,
           "the restarted consumer should see %s again, it saw %s" % (crash_id, report["seen"]))
    expect(report["skipped"] == [crash_id],
           "the restarted consumer should skip exactly %s, skipped %s" % (crash_id,
                                                                          report["skipped"]))
    expect(state["applied_ids"] == order, "applied ids %s, expected %s" % (state["applied_ids"],
                                                                           order))
    expect(state["balances"] == dict(expected_balances),
           "balances %s, expected %s" % (state["balances"], dict(expected_balances)))
    offsets = committed_offsets(coord, LEDGER_GROUP)
    expect({p: o.offset for p, o in offsets.items()} == end_offsets,
           "group %r committed %s after the replay" % (LEDGER_GROUP, offsets))
    say("  => %s was delivered twice again, but applied once: every balance is right." % crash_id)

    # -- 5. Replay the topic in another group.
    step("5. Group %r replays the whole topic into an in-memory cache" % CACHE_GROUP)
    member = GroupMember(coord, CACHE_GROUP, "cache-rebuild/%d" % os.getpid(),
                         lambda m: say("  " + m))
    member.join()
    member.wait_for_all_partitions()
    expect(committed_offsets(coord, CACHE_GROUP) == {},
           "group %r should have no committed offsets" % CACHE_GROUP)
    # The cache lives in memory, so it must be rebuilt from the whole log at every start: this
    # group never commits, and a group without committed offsets starts at the log start.
    earliest = log.ListOffsets(lpb.ListOffsetsRequest(topic=TOPIC, spec=lpb.OFFSET_SPEC_EARLIEST),
                               timeout=RPC_TIMEOUT_S)
    start = {o.partition: o.offset for o in earliest.offsets}
    expect(start == {p: 0 for p in range(PARTITIONS)}, "log start offsets %s" % start)
    say("  no committed offsets: reading from the log start %s" % start)
    cache = {}

    def remember(partition, record):
        payment = json.loads(record.value)
        cache[payment["id"]] = payment

    consume(log, member, start, remember)
    member.leave()
    say("  cache holds %d payments: %s" % (len(cache), " ".join(sorted(cache))))
    expect(cache == {pid: {"id": pid, "account": account, "amount_cents": cents}
                     for pid, account, cents in PAYMENTS},
           "the cache differs from the produced payments: %s" % cache)
    ledger_after = {p: o.offset for p, o in committed_offsets(coord, LEDGER_GROUP).items()}
    expect(ledger_after == end_offsets,
           "group %r moved to %s while %r replayed" % (LEDGER_GROUP, ledger_after, CACHE_GROUP))
    say("  => every payment is in the cache; group %r is still at %s (groups are independent)" %
        (LEDGER_GROUP, ledger_after))


if __name__ == "__main__":
    sys.stdout.reconfigure(line_buffering=True)
    if len(sys.argv) >= 2 and sys.argv[1] == "consumer":
        consumer_main(sys.argv[2:])
        sys.exit(0)
    if len(sys.argv) != 2:
        sys.exit("usage: %s HOST:PORT" % sys.argv[0])
    # SIGTERM (ctest's timeout, Ctrl-C's cousin) unwinds like an error: the `finally` blocks stop
    # the consumer processes and remove the scratch files.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(143))
    try:
        main(sys.argv[1])
    except ExpectationFailed as e:
        say()
        print("at_least_once: FAIL: %s" % e, file=sys.stderr, flush=True)
        sys.exit(1)
    except grpc.RpcError as e:
        traceback.print_exc()
        print("at_least_once: FAIL: RPC error %s: %s" % (e.code().name, e.details()),
              file=sys.stderr, flush=True)
        sys.exit(1)
    except Exception:  # noqa: BLE001 - anything else is a failure too
        traceback.print_exc()
        print("at_least_once: FAIL: unexpected exception (see above)", file=sys.stderr)
        sys.exit(1)
    say()
    say("at_least_once: PASS")
