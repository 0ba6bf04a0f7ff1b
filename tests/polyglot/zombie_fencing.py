#!/usr/bin/python3
"""Polyglot test: zombie fencing in conduit.coordinator.v1.GroupCoordinator with real processes.

Usage: zombie_fencing.py HOST:PORT    (run_with_server.sh appends the address)

The driver (this script) creates a 4-partition topic with records in every partition and starts
two member processes (group_member.py, /usr/bin/python3), A and B, in one group with a 1.5 s
session timeout. Each commits its partitions every ~100 ms (commit BEFORE heartbeat in its loop)
and heartbeats at the returned interval, printing JSON lines. Then:
  1. wait until A and B own 2 partitions each (DescribeGroup) and both have committed them;
  2. SIGSTOP A; wait until DescribeGroup shows B alone, owning all 4 (A's session expired), and
     until B has committed all 4 (FetchOffsets committed_by == B);
  3. SIGCONT A: A's first action is a commit with its stale identity, which must be NOT_FOUND,
     and FetchOffsets must still show B's offsets on all 4 partitions; A's next heartbeat is
     NOT_FOUND too (fenced);
  4. SIGUSR1 makes A rejoin as a new member: the group rebalances to 2 + 2 again, and A's new
     identity commits its partitions;
  5. SIGTERM both: they leave, exit 0, and the group is EMPTY.
B must never see a rejected commit. Every child is stopped on the way out, also on failure
(SIGCONT, SIGTERM, then SIGKILL). Exit status 0 on success, 1 with "FAIL:" and the members'
output otherwise.
"""

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid

sys.dont_write_bytecode = True  # keep the source tree free of __pycache__
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import grpc  # noqa: E402

import polyglot_common as pc  # noqa: E402
from polyglot_common import DEADLINE_S, CheckFailed, check, check_eq  # noqa: E402

pc.generate_stubs(["conduit/log/v1/log.proto", "conduit/coordinator/v1/coordinator.proto"],
                  [os.path.join(pc.repo_root(), "proto"), pc.GRPC_PROTO_DIR, pc.WKT_DIR])
from conduit.coordinator.v1 import coordinator_pb2 as cpb  # noqa: E402
from conduit.coordinator.v1 import coordinator_pb2_grpc as cpb_grpc  # noqa: E402
from conduit.log.v1 import log_pb2 as lpb  # noqa: E402
from conduit.log.v1 import log_pb2_grpc as lpb_grpc  # noqa: E402

PYTHON = "/usr/bin/python3"
MEMBER_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "group_member.py")
PARTITIONS = 4
RECORDS_PER_PARTITION = 10
SESSION_TIMEOUT_S = 1.5
ALL = list(range(PARTITIONS))


class Member:
    """One group_member.py process; its stdout JSON lines and stderr are collected by threads."""

    def __init__(self, name, address, group, topic):
        self.name = name
        self.client_id = "zombie-test-" + name
        self.events = []
        self.stderr = []
        self.lock = threading.Lock()
        # setpriv execs the member with a parent-death signal: it ends with this test even when
        # the test is killed (a timeout) before its cleanup can run.
        self.proc = subprocess.Popen(
            ["/usr/bin/setpriv", "--pdeathsig", "KILL", "--", PYTHON, MEMBER_SCRIPT,
             "--group", group, "--topic", topic, "--client-id", self.client_id,
             "--session-timeout", str(SESSION_TIMEOUT_S), address],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.threads = [threading.Thread(target=self._read_stdout, daemon=True),
                        threading.Thread(target=self._read_stderr, daemon=True)]
        for t in self.threads:
            t.start()

    def _read_stdout(self):
        for line in self.proc.stdout:
            line = line.rstrip("\n")
            try:
                event = json.loads(line)
            except ValueError:
                event = {"event": "unparsed", "line": line}
            with self.lock:
                self.events.append(event)

    def _read_stderr(self):
        for line in self.proc.stderr:
            with self.lock:
                self.stderr.append(line.rstrip("\n"))

    def snapshot(self):
        with self.lock:
            return list(self.events)

    def of(self, kind):
        return [e for e in self.snapshot() if e["event"] == kind]

    def last_state(self):
        states = self.of("state")
        return states[-1] if states else None

    def signal(self, sig):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)

    def wait_stopped(self, timeout=5.0):
        """Waits until the kernel shows the process stopped (state T)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                with open("/proc/%d/stat" % self.proc.pid) as f:
                    state = f.read().rsplit(")", 1)[1].split()[0]
            except OSError:
                state = "?"
            if state == "T":
                return
            if time.monotonic() >= deadline:
                raise CheckFailed("member %s (pid %d) is not stopped %.0f s after SIGSTOP "
                                  "(state %s)" % (self.name, self.proc.pid, timeout, state))
            time.sleep(0.005)

    def stop(self, timeout=5.0):
        """SIGCONT (in case it is stopped), SIGTERM, then SIGKILL after `timeout`. Returns the
        exit status and whether SIGKILL was needed."""
        killed = False
        if self.proc.poll() is None:
            try:
                self.proc.send_signal(signal.SIGCONT)
                self.proc.send_signal(signal.SIGTERM)
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                killed = True
        for t in self.threads:
            t.join(timeout=2)
        return self.proc.returncode, killed

    def dump(self, out=sys.stderr, last=40):
        with self.lock:
            events, errors = list(self.events), list(self.stderr)
        print("---- member %s (pid %d, exit %s): last %d of %d events ----" %
              (self.name, self.proc.pid, self.proc.poll(), min(last, len(events)), len(events)),
              file=out)
        for e in events[-last:]:
            print("  " + json.dumps(e, sort_keys=True), file=out)
        if errors:
            print("---- member %s stderr ----" % self.name, file=out)
            for line in errors[-40:]:
                print("  " + line, file=out)


def wait_for(what, timeout, fn, interval=0.05):
    """Polls fn() until it returns something truthy, which is returned; CheckFailed when
    `timeout` seconds pass first."""
    deadline = time.monotonic() + timeout
    while True:
        value = fn()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise CheckFailed("timed out after %.1f s waiting for %s" % (timeout, what))
        time.sleep(interval)


def partitions_of(topic_partitions):
    return sorted(p for tp in topic_partitions for p in tp.partitions)


def describe_text(d):
    members = "; ".join("%s(%s) epoch %d owns %s revoking %s pending %s" %
                        (m.member_id, m.client_id, m.member_epoch, partitions_of(m.assignment),
                         partitions_of(m.revoking), partitions_of(m.pending)) for m in d.members)
    return "state %s, group epoch %d, rebalances %d, members: [%s]" % (
        cpb.GroupState.Name(d.state), d.group_epoch, d.rebalances, members)


def offsets_text(fetched):
    return ", ".join("p%d=%d by %s@%d (%s)" % (o.partition, o.offset, o.committed_by,
                                               o.member_epoch, o.metadata)
                     for o in sorted(fetched.offsets, key=lambda o: o.partition))


def on_sigterm(signum, frame):
    # run_with_server.sh (or ctest's timeout) stops the test with SIGTERM: unwind, so that the
    # finally block below stops the members (a SIGSTOPped one ignores SIGTERM until SIGCONT).
    raise SystemExit("zombie_fencing: FAIL: terminated by signal %d" % signum)


def main(address):
    signal.signal(signal.SIGTERM, on_sigterm)
    channel = grpc.insecure_channel(address)
    pc.wait_ready(channel, address)
    log = lpb_grpc.LogServiceStub(channel)
    coord = cpb_grpc.GroupCoordinatorStub(channel)
    suffix = uuid.uuid4().hex[:10]
    topic = "polyglot-zombie-" + suffix
    group = "zombie-group-" + suffix

    log.CreateTopic(lpb.CreateTopicRequest(name=topic, partitions=PARTITIONS), timeout=DEADLINE_S)
    log.Produce(lpb.ProduceRequest(topic=topic, records=[
        lpb.ProduceRecord(partition=p, key=b"k-%d-%d" % (p, i), value=b"v")
        for p in ALL for i in range(RECORDS_PER_PARTITION)]), timeout=DEADLINE_S)
    print("  ok: topic %s with %d records in each of %d partitions" %
          (topic, RECORDS_PER_PARTITION, PARTITIONS))

    def describe():
        return coord.DescribeGroup(cpb.DescribeGroupRequest(group_id=group), timeout=DEADLINE_S)

    def fetch_offsets():
        return coord.FetchOffsets(cpb.FetchOffsetsRequest(group_id=group, topics=[topic]),
                                  timeout=DEADLINE_S)

    last_described = {}

    def describe_or_none():
        try:
            d = describe()
        except grpc.RpcError as e:
            if e.code() == grpc.StatusCode.NOT_FOUND:  # nobody has joined yet
                return None
            raise
        last_described["d"] = d
        return d

    members = []
    try:
        a = Member("A", address, group, topic)
        members.append(a)
        b = Member("B", address, group, topic)
        members.append(b)
        t0 = time.monotonic()

        # --- 1. Both members own two partitions each and have committed them.
        def balanced():
            d = describe_or_none()
            if d is None or len(d.members) != 2:
                return None
            owned = {m.client_id: partitions_of(m.assignment) for m in d.members}
            if sorted(len(v) for v in owned.values()) != [2, 2]:
                return None
            if sorted(owned[a.client_id] + owned[b.client_id]) != ALL:
                return None
            if cpb.GroupState.Name(d.state) != "GROUP_STATE_STABLE":
                return None
            return d
        try:
            d = wait_for("A and B to own 2 partitions each", 10, balanced)
        except CheckFailed as e:
            raise CheckFailed("%s; last DescribeGroup: %s" %
                              (e, describe_text(last_described["d"]) if "d" in last_described
                               else "group not found"))
        ids = {m.client_id: m.member_id for m in d.members}
        a_id, b_id = ids[a.client_id], ids[b.client_id]
        a_parts = [partitions_of(m.assignment) for m in d.members if m.member_id == a_id][0]
        b_parts = [partitions_of(m.assignment) for m in d.members if m.member_id == b_id][0]
        print("  ok: after %.2f s A=%s owns %s, B=%s owns %s (%s)" %
              (time.monotonic() - t0, a_id, a_parts, b_id, b_parts, describe_text(d)))

        def members_agree(m, member_id, parts):
            s = m.last_state()
            return s is not None and s["member_id"] == member_id and s["assignment"] == parts
        wait_for("the members' own view to match DescribeGroup", 5,
                 lambda: members_agree(a, a_id, a_parts) and members_agree(b, b_id, b_parts))

        def committed_by(expected):  # expected: partition -> member id
            f = fetch_offsets()
            got = {o.partition: o.committed_by for o in f.offsets}
            return f if all(got.get(p) == mid for p, mid in expected.items()) else None
        expected = {**{p: a_id for p in a_parts}, **{p: b_id for p in b_parts}}
        f = wait_for("both members to commit their partitions", 5, lambda: committed_by(expected))
        print("  ok: both commit: " + offsets_text(f))
        a_state_before = a.last_state()

        # --- 2. Stop A; its session expires and B gets everything.
        # Stop A just after a heartbeat of its own, so that its session runs out SESSION_TIMEOUT_S
        # later. (A commit may still be in flight: A commits every 100 ms.)
        heartbeats_seen = len(a.of("heartbeat"))
        wait_for("a heartbeat of A", 5, lambda: len(a.of("heartbeat")) > heartbeats_seen,
                 interval=0.002)
        t_signal = time.monotonic()
        a.signal(signal.SIGSTOP)
        a.wait_stopped()
        # Every RPC A sends with t_sent > t_stop was sent after SIGCONT.
        t_stop = time.monotonic()
        print("  SIGSTOP A (pid %d)" % a.proc.pid)

        def b_alone():
            d = describe_or_none()
            if d is None or [m.member_id for m in d.members] != [b_id]:
                return None
            return d if partitions_of(d.members[0].assignment) == ALL else None
        try:
            d = wait_for("DescribeGroup to show B alone owning all partitions", 10, b_alone)
        except CheckFailed as e:
            raise CheckFailed("%s; last DescribeGroup: %s" %
                              (e, describe_text(last_described["d"])))
        took = time.monotonic() - t_signal
        b_epoch = d.members[0].member_epoch
        print("  ok: %.2f s after SIGSTOP, A is gone and B owns all (%s)" %
              (took, describe_text(d)))
        # A heartbeated just before it stopped: its session can not have expired sooner than
        # SESSION_TIMEOUT_S after SIGSTOP (with some slack for this poll).
        check(took >= SESSION_TIMEOUT_S - 0.2,
              "A was evicted %.2f s after SIGSTOP, before its %.1f s session could expire" %
              (took, SESSION_TIMEOUT_S))
        f = wait_for("B to commit all partitions", 5, lambda: committed_by({p: b_id for p in ALL}))
        print("  ok: B committed all: " + offsets_text(f))

        # --- 3. Resume A: its first action is a commit with its stale identity.
        t_cont = time.monotonic()
        a.signal(signal.SIGCONT)
        print("  SIGCONT A after %.2f s stopped" % (t_cont - t_stop))

        def after_stop(kinds):
            return [e for e in a.snapshot()
                    if e["event"] in kinds and e.get("t_sent", 0) > t_stop]
        rpc_kinds = ("commit", "heartbeat", "heartbeat_error")
        first = wait_for("A's first RPC after SIGCONT", 5, lambda: after_stop(rpc_kinds))[0]
        check_eq(first["event"], "commit", "A's first RPC after SIGCONT (event %s)" % first)
        check_eq(first["member_id"], a_id, "member id of A's first commit after SIGCONT")
        check_eq(first["member_epoch"], a_state_before["member_epoch"],
                 "epoch of A's first commit after SIGCONT")
        check_eq(first["result"], "NOT_FOUND",
                 "result of A's stale commit after SIGCONT (%s)" % first.get("message"))
        print("  ok: A's first action after SIGCONT: commit as %s epoch %d of %s -> %s (%s)" %
              (first["member_id"], first["member_epoch"], first["partitions"], first["result"],
               first["message"]))
        f = fetch_offsets()
        by = {o.partition: o for o in f.offsets}
        check_eq(sorted(by), ALL, "partitions with committed offsets after A's stale commit")
        for p in ALL:
            check_eq(by[p].committed_by, b_id, "p%d committed_by after A's stale commit "
                     "(offsets: %s)" % (p, offsets_text(f)))
            check_eq(by[p].member_epoch, b_epoch, "p%d member_epoch after A's stale commit" % p)
            check(by[p].metadata.startswith(b.client_id + " #"),
                  "p%d metadata is not B's: %s" % (p, offsets_text(f)))
        print("  ok: FetchOffsets still shows B's commits: " + offsets_text(f))
        stale_ok = [e for e in after_stop(("commit",)) if e["result"] == "OK"
                    and e["member_id"] == a_id]
        check(not stale_ok, "a commit by A's stale identity succeeded after SIGSTOP: %s" % stale_ok)

        fenced = wait_for("A's heartbeat to be rejected (fenced)", 5, lambda: a.of("fenced"))[0]
        hb_error = [e for e in a.of("heartbeat_error") if e["t_sent"] > t_stop][0]
        check_eq(hb_error["code"], "NOT_FOUND", "A's first heartbeat after SIGCONT")
        print("  ok: A's heartbeat after SIGCONT -> %s (%s); A dropped %s" %
              (hb_error["code"], hb_error["message"], fenced["owned"]))

        # --- 4. A rejoins as a new member; the group rebalances to 2 + 2.
        a.signal(signal.SIGUSR1)
        t_rejoin = time.monotonic()
        try:
            d = wait_for("A to rejoin and the group to rebalance to 2 + 2", 10, balanced)
        except CheckFailed as e:
            raise CheckFailed("%s; last DescribeGroup: %s" %
                              (e, describe_text(last_described["d"])))
        ids = {m.client_id: m.member_id for m in d.members}
        a2_id = ids[a.client_id]
        check(a2_id != a_id, "A rejoined with its old member id %s" % a_id)
        check_eq(ids[b.client_id], b_id, "B's member id after A rejoined")
        a2_parts = [partitions_of(m.assignment) for m in d.members if m.member_id == a2_id][0]
        b2_parts = [partitions_of(m.assignment) for m in d.members if m.member_id == b_id][0]
        f = wait_for("A's new identity to commit its partitions", 5, lambda: committed_by(
            {**{p: a2_id for p in a2_parts}, **{p: b_id for p in b2_parts}}))
        print("  ok: %.2f s after SIGUSR1 A rejoined as %s owning %s; B owns %s; offsets %s" %
              (time.monotonic() - t_rejoin, a2_id, a2_parts, b2_parts, offsets_text(f)))

        # --- The healthy member never had a commit rejected; neither had A outside its zombie
        # phase.
        b_rejected = [e for e in b.of("commit") if e["result"] != "OK"]
        check(not b_rejected, "B had %d rejected commits, first: %s" %
              (len(b_rejected), b_rejected[:1]))
        a_rejected = [e for e in a.of("commit") if e["result"] != "OK" and e["member_id"] != a_id]
        check(not a_rejected, "A's new identity had %d rejected commits, first: %s" %
              (len(a_rejected), a_rejected[:1]))
        # (A commit in flight when SIGSTOP landed may end DEADLINE_EXCEEDED after SIGCONT: the
        # stop can catch A mid-RPC, however soon after a heartbeat it is sent. Only commits that
        # completed before the signal count here.)
        a_old_rejected = [e for e in a.of("commit") if e["result"] != "OK"
                          and e["member_id"] == a_id and e["t_done"] < t_signal]
        check(not a_old_rejected, "A had commits rejected before SIGSTOP: %s" % a_old_rejected[:1])
        print("  ok: commits: A %d (%d rejected, all stale), B %d (0 rejected)" %
              (len(a.of("commit")), len([e for e in a.of("commit") if e["result"] != "OK"]),
               len(b.of("commit"))))

        # --- 5. Stop both: they leave, and the group is empty.
        for m in (a, b):
            rc, killed = m.stop()
            check(not killed, "member %s did not exit within 5 s of SIGTERM" % m.name)
            check_eq(rc, 0, "exit status of member %s" % m.name)
            left = m.of("left")
            check(left and left[-1]["result"] == "OK", "member %s did not leave: %s" %
                  (m.name, left))
        d = describe()
        check_eq(cpb.GroupState.Name(d.state), "GROUP_STATE_EMPTY",
                 "group state after both left (%s)" % describe_text(d))
        print("  ok: both members left and exited 0; group EMPTY")
    except BaseException:
        for m in members:
            m.dump()
        if "d" in last_described:
            print("---- last DescribeGroup: %s" % describe_text(last_described["d"]),
                  file=sys.stderr)
        raise
    finally:
        for m in members:
            if m.proc.poll() is None:
                m.stop()
        channel.close()


if __name__ == "__main__":
    pc.run_main("zombie_fencing", main)
