#!/usr/bin/python3
"""CLI integration test: runs the real `conduit` binary (as a subprocess) against a real
conduit-standalone and checks its output and exit codes.

Usage: cli_test.py CONDUIT_BINARY HOST:PORT    (run_with_server.sh appends the address)

Plain Python 3 stdlib: the test only drives the binary. Exit codes of the CLI: 0 ok; 1 the
server refused ("error: CODE: message" on stderr); 2 bad usage.

Sections (each with its own topic / group / queue names, so one failure does not hide the
others): topics, produce/consume, consumer groups and offset resets, queues and the dead-letter
lane, bulk enqueue (batches) and acks of several jobs, bridges, the cluster (describe; --addr as
a bootstrap list), bad input. Every subprocess has a timeout.

The last three sections cover defects this test found, since fixed: consume --group --max
committed past what it printed, produce to a missing partition exited 0, and -o json was ignored
by consume --group.

Exit status 0 when every check passed; 1 with "FAIL:" lines otherwise.
"""

import base64
import datetime
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import traceback
import uuid

sys.dont_write_bytecode = True

CALL_TIMEOUT_S = 20
UNREACHABLE = "127.0.0.1:1"  # nothing listens on port 1
TIME_RE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")

if len(sys.argv) < 3:
    print("usage: cli_test.py CONDUIT_BINARY HOST:PORT", file=sys.stderr)
    sys.exit(2)
BIN = sys.argv[1]
ADDR = sys.argv[-1]
SUFFIX = uuid.uuid4().hex[:8]


class CheckError(AssertionError):
    pass


class Result:
    def __init__(self, args, rc, out, err):
        self.args, self.rc, self.out, self.err = args, rc, out, err

    def describe(self):
        return (f"command: {' '.join(self.args)}\n  exit: {self.rc}\n"
                f"  stdout: {self.out!r}\n  stderr: {self.err!r}")


def conduit(*args, stdin=None, addr=ADDR, output=None, expect=0, env=None):
    """Runs `conduit --addr ADDR [-o OUTPUT] ARGS...`; checks the exit code (None: any)."""
    argv = [BIN]
    if addr is not None:
        argv += ["--addr", addr]
    if output is not None:
        argv += ["-o", output]
    argv += [str(a) for a in args]
    try:
        p = subprocess.run(argv, input=stdin if stdin is not None else "",
                           capture_output=True, text=True, timeout=CALL_TIMEOUT_S, env=env)
    except subprocess.TimeoutExpired as e:
        raise CheckError(f"timed out after {CALL_TIMEOUT_S}s: {' '.join(argv)}\n"
                         f"  stdout so far: {e.stdout!r}\n  stderr so far: {e.stderr!r}")
    r = Result(argv, p.returncode, p.stdout, p.stderr)
    if p.returncode < 0:
        raise CheckError(f"conduit died of signal {-p.returncode}\n  {r.describe()}")
    if expect is not None and p.returncode != expect:
        raise CheckError(f"expected exit {expect}\n  {r.describe()}")
    return r


def check(cond, what, result=None):
    if not cond:
        raise CheckError(what + (f"\n  {result.describe()}" if result else ""))


def check_eq(actual, expected, what, result=None):
    check(actual == expected, f"{what}: expected {expected!r}, got {actual!r}", result)


def expect_error(result, code):
    """The server refused: exit 1 and "error: CODE: message" on stderr."""
    check_eq(result.rc, 1, "exit code", result)
    check(re.search(rf"^error: {code}: \S", result.err, re.M) is not None,
          f"stderr should carry 'error: {code}: ...'", result)


def expect_usage(result, needle=None):
    check_eq(result.rc, 2, "exit code of a usage error", result)
    check(result.err.strip() != "", "a usage error explains itself on stderr", result)
    if needle is not None:
        check(needle in result.err, f"stderr should mention {needle!r}", result)


def table(text):
    """A whitespace-separated table → list of rows (lists of cells); blank lines skipped."""
    return [line.split() for line in text.splitlines() if line.strip()]


def table_after(text, first_header_cell):
    """Rows of the table whose header starts with `first_header_cell` (header included)."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        cells = line.split()
        if cells and cells[0] == first_header_cell:
            rows = []
            for rest in lines[i:]:
                if not rest.strip():
                    break
                rows.append(rest.split())
            return rows
    raise CheckError(f"no table with header {first_header_cell!r} in:\n{text}")


def as_dicts(rows):
    header = rows[0]
    return [dict(zip(header, r)) for r in rows[1:]]


def json_stream(text):
    """Parses concatenated JSON documents (one per record, pretty-printed)."""
    dec = json.JSONDecoder()
    out, i = [], 0
    while True:
        while i < len(text) and text[i].isspace():
            i += 1
        if i >= len(text):
            return out
        obj, i = dec.raw_decode(text, i)
        out.append(obj)


def records(r):
    """Default-format consume output ("%p\\t%o\\t%T\\t%k\\t%v") → [(partition, offset, key,
    value)], checking the time column."""
    out = []
    for line in r.out.splitlines():
        cells = line.split("\t")
        check_eq(len(cells), 5, f"tab-separated fields in consume line {line!r}", r)
        check(TIME_RE.match(cells[2]) is not None, f"append time column of {line!r}", r)
        out.append((int(cells[0]), int(cells[1]), cells[3], cells[4]))
    return out


def b64(s):
    return base64.b64decode(s).decode()


def rfc3339(t):
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime(
        "%Y-%m-%dT%H:%M:%S.%fZ")


# ---------------------------------------------------------------------------------------------
# Topics


def test_topics():
    topic = f"cli-topics-{SUFFIX}"
    r = conduit("topic", "create", topic, "--partitions", 3)
    check_eq(r.out, f"created topic {topic} with 3 partitions, replication factor 1\n",
             "create output", r)
    check_eq(r.err, "", "create stderr", r)

    # Creating it again: the server refuses.
    expect_error(conduit("topic", "create", topic, expect=None), "ALREADY_EXISTS")

    # list (table)
    r = conduit("topic", "list")
    rows = table(r.out)
    check_eq(rows[0][:4], ["TOPIC", "PARTITIONS", "REPLICATION-FACTOR", "CONFIG"],
             "topic list header", r)
    mine = [row for row in rows[1:] if row[0] == topic]
    check_eq(len(mine), 1, "rows for the topic in topic list", r)
    check_eq(mine[0][1], "3", "partition count in topic list", r)
    check_eq(mine[0][2], "1", "replication factor in topic list (a single node)", r)
    check("retention=168h" in r.out, "default retention (7d) shown in topic list", r)

    # list (json)
    r = conduit("topic", "list", output="json")
    doc = json.loads(r.out)
    t = [x for x in doc["topics"] if x["name"] == topic]
    check_eq(len(t), 1, "topic in JSON topic list", r)
    check_eq(t[0]["partitions"], 3, "partitions in JSON topic list", r)
    check_eq(t[0]["config"]["retentionTime"], "604800s", "retentionTime in JSON", r)

    # describe (table): header line and one row per partition.
    r = conduit("topic", "describe", topic)
    first = r.out.splitlines()[0]
    check(first.startswith(f"topic {topic}: 3 partitions, "), "describe summary line", r)
    rows = as_dicts(table_after(r.out, "PARTITION"))
    check_eq([row["PARTITION"] for row in rows], ["0", "1", "2"], "describe partition rows", r)
    check_eq(list(rows[0].keys()),
             ["PARTITION", "LEADER", "EPOCH", "REPLICAS", "ISR", "LOG-START", "HIGH-WATERMARK",
              "RECORDS", "BYTES", "NEWEST-APPEND"],
             "describe columns", r)
    for row in rows:
        check_eq((row["LOG-START"], row["HIGH-WATERMARK"], row["NEWEST-APPEND"]), ("0", "0", "-"),
                 "empty partition", r)
        # A single node is broker 0, the one replica, in sync, leading at epoch 0.
        check_eq((row["LEADER"], row["EPOCH"], row["REPLICAS"], row["ISR"]), ("0", "0", "0", "0"),
                 "single-node replication columns", r)
    check("replication factor 1" in first and "acks=all" in first and "min_insync=1" in first,
          "describe summary shows replication settings", r)
    check("followers of" not in r.out, "no follower lines without followers", r)

    # After producing to partition 1, describe shows it.
    conduit("produce", topic, "--partition", 1, stdin="a\nb\n")
    r = conduit("topic", "describe", topic)
    rows = {row["PARTITION"]: row for row in as_dicts(table_after(r.out, "PARTITION"))}
    check_eq(rows["1"]["HIGH-WATERMARK"], "2", "high watermark of partition 1", r)
    check_eq(rows["1"]["RECORDS"], "2", "records of partition 1", r)
    check(TIME_RE.match(rows["1"]["NEWEST-APPEND"]) is not None, "newest append time", r)
    check_eq(rows["0"]["HIGH-WATERMARK"], "0", "high watermark of partition 0", r)

    # describe (json). proto3 JSON leaves out zero values (partition 0, offsets 0).
    r = conduit("topic", "describe", topic, output="json")
    doc = json.loads(r.out)
    check_eq(doc["topic"]["name"], topic, "JSON describe name", r)
    check_eq(doc["topic"]["partitions"], 3, "JSON describe partition count", r)
    parts = {p.get("partition", 0): p for p in doc["partitions"]}
    check_eq(sorted(parts), [0, 1, 2], "JSON describe partitions", r)
    check_eq(parts[1].get("highWatermark"), "2", "JSON describe high watermark", r)
    check_eq((parts[1].get("role"), parts[1].get("replicas"), parts[1].get("isr"),
              parts[1].get("followers", [])), ("REPLICA_ROLE_SOLE", [0], [0], []),
             "JSON describe replication", r)

    # alter --retention-time
    r = conduit("topic", "alter", topic, "--retention-time", "2h")
    check(r.out.startswith(f"topic {topic}: ") and "retention=2h" in r.out, "alter output", r)
    r = conduit("topic", "describe", topic)
    check("retention=2h" in r.out.splitlines()[0], "describe shows the new retention", r)
    r = conduit("topic", "describe", topic, output="json")
    check_eq(json.loads(r.out)["topic"]["config"]["retentionTime"], "7200s",
             "JSON retentionTime after alter", r)
    r = conduit("topic", "alter", topic, "--retention-time", "1d")
    check("retention=24h" in r.out, "alter with days", r)
    expect_usage(conduit("topic", "alter", topic, "--retention-time", "soon", expect=None),
                 "--retention-time")
    expect_usage(conduit("topic", "alter", topic, "--cleanup-policy", "never", expect=None))
    expect_error(conduit("topic", "alter", f"no-such-{SUFFIX}", "--retention-time", "1h",
                         expect=None), "NOT_FOUND")

    # Replication settings: create, alter, produce with --acks. A single node takes RF 1 only.
    rtopic = f"cli-replicated-{SUFFIX}"
    conduit("topic", "create", rtopic, "--replication-factor", 1, "--min-insync-replicas", 1,
            "--acks", "leader", "--unclean-leader-election", "false")
    r = conduit("topic", "describe", rtopic, output="json")
    config = json.loads(r.out)["topic"]["config"]
    check_eq((config.get("acks"), config.get("minInsyncReplicas"),
              config.get("uncleanLeaderElection", False)), ("ACKS_LEADER", 1, False),
             "created with the replication settings", r)
    r = conduit("topic", "alter", rtopic, "--acks", "all", "--unclean-leader-election", "true")
    check("acks=all" in r.out and "unclean_leader_election" in r.out, "alter acks and unclean", r)
    expect_error(conduit("topic", "alter", rtopic, "--min-insync-replicas", 2, expect=None),
                 "INVALID_ARGUMENT")
    expect_error(conduit("topic", "create", f"rf2-{SUFFIX}", "--replication-factor", 2,
                         expect=None), "INVALID_ARGUMENT")
    expect_usage(conduit("topic", "alter", rtopic, "--acks", "some", expect=None), "--acks")
    r = conduit("produce", rtopic, "--acks", "leader", stdin="x\ny\n")
    check(r.out.startswith(f"produced 2 records to {rtopic}"), "produce --acks leader", r)
    expect_usage(conduit("produce", rtopic, "--acks", "none", stdin="z\n", expect=None), "--acks")
    conduit("topic", "delete", rtopic)

    # Server-side validation comes back as INVALID_ARGUMENT.
    expect_error(conduit("topic", "create", f"zero-{SUFFIX}", "--partitions", 0, expect=None),
                 "INVALID_ARGUMENT")
    expect_error(conduit("topic", "create", "bad/name", expect=None), "INVALID_ARGUMENT")

    # delete
    r = conduit("topic", "delete", topic)
    check_eq(r.out, f"deleted topic {topic}\n", "delete output", r)
    expect_error(conduit("topic", "describe", topic, expect=None), "NOT_FOUND")
    r = conduit("topic", "list")
    check(all(row[0] != topic for row in table(r.out)), "deleted topic gone from list", r)


# ---------------------------------------------------------------------------------------------
# produce / consume


def test_produce_consume():
    topic = f"cli-records-{SUFFIX}"
    before_everything = time.time() - 1
    conduit("topic", "create", topic)

    # stdin, a multi-character key separator (split at its first occurrence) and headers.
    r = conduit("produce", topic, "--key-separator", "::", "--header", "src=cli",
                "--header", "trace=a=b", stdin="k1::v1\nk2::v2::more\nnokey\n")
    check(r.out.startswith(f"produced 3 records to {topic} in "), "produce output", r)

    # --file
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write("f1\nf2\n")
        path = f.name
    try:
        r = conduit("produce", topic, "--file", path)
        check(r.out.startswith(f"produced 2 records to {topic} in "), "produce --file output", r)
    finally:
        os.unlink(path)
    expect_usage(conduit("produce", topic, "--file", "/nonexistent/records.txt", expect=None),
                 "/nonexistent/records.txt")
    expect_usage(conduit("produce", topic, "--header", "novalue", stdin="x\n", expect=None),
                 "key=value")

    # Records of batch 2 appended strictly after `between`.
    time.sleep(0.05)
    between = time.time()
    time.sleep(0.05)
    conduit("produce", topic, "-K", "=", stdin="late=1\n")
    everything = [(0, 0, "k1", "v1"), (0, 1, "k2", "v2::more"), (0, 2, "", "nokey"),
                  (0, 3, "", "f1"), (0, 4, "", "f2"), (0, 5, "late", "1")]

    # Default format "%p\t%o\t%T\t%k\t%v".
    r = conduit("consume", topic)
    check_eq(records(r), everything, "consume (default format)", r)

    # -o json: the Record message; headers arrive (bytes fields are base64, as in grpcurl).
    r = conduit("consume", topic, "--max", 1, output="json")
    docs = json_stream(r.out)
    check_eq(len(docs), 1, "JSON records with --max 1", r)
    rec = docs[0]
    check_eq(rec.get("offset", "0"), "0", "JSON offset", r)
    check_eq((b64(rec["key"]), b64(rec["value"])), ("k1", "v1"), "JSON key and value", r)
    headers = [(h["key"], b64(h["value"])) for h in rec.get("headers", [])]
    check_eq(headers, [("src", "cli"), ("trace", "a=b")], "headers from --header", r)
    r = conduit("consume", topic, "--offset", 5, output="json")
    docs = json_stream(r.out)
    check_eq(len(docs), 1, "JSON records from offset 5", r)
    check_eq(docs[0].get("headers") or [], [], "no headers on records produced without --header", r)
    check_eq(docs[0].get("offset"), "5", "JSON shows every field (64-bit numbers as strings)", r)

    # --max
    r = conduit("consume", topic, "--max", 2)
    check_eq(records(r), everything[:2], "consume --max 2", r)
    r = conduit("consume", topic, "-n", 0)
    check_eq(r.out, "", "consume --max 0", r)

    # --partition / --offset
    r = conduit("consume", topic, "--partition", 0, "--offset", 3)
    check_eq(records(r), everything[3:], "consume --partition 0 --offset 3", r)
    r = conduit("consume", topic, "--partition", 0, "--offset", 3, "--max", 1)
    check_eq(records(r), everything[3:4], "consume --offset 3 --max 1", r)
    r = conduit("consume", topic, "--offset", 6)
    check_eq(r.out, "", "consume from the high watermark", r)
    expect_error(conduit("consume", topic, "--offset", 99, expect=None), "OUT_OF_RANGE")
    expect_usage(conduit("consume", topic, "--partition", 5, expect=None), "no partition 5")

    # --from-time: before the first record → everything; RFC 3339 and Unix seconds.
    r = conduit("consume", topic, "--from-time", rfc3339(before_everything))
    check_eq(records(r), everything, "consume --from-time before the first record", r)
    r = conduit("consume", topic, "--from-time", int(before_everything))
    check_eq(records(r), everything, "consume --from-time in Unix seconds", r)
    r = conduit("consume", topic, "--from-time", rfc3339(between))
    check_eq(records(r), everything[5:], "consume --from-time between the batches", r)
    r = conduit("consume", topic, "--from-time", "2999-01-01T00:00:00Z")
    check_eq(r.out, "", "consume --from-time in the future", r)
    expect_usage(conduit("consume", topic, "--from-time", "yesterday", expect=None),
                 "RFC 3339 (2026-11-29T10:00:00Z), Unix seconds, or a time ago (-1h")
    # A time ago: an hour back is before everything this test produced.
    r = conduit("consume", topic, "--from-time", "-1h")
    check_eq(records(r), everything, "consume --from-time -1h", r)

    # --format
    r = conduit("consume", topic, "--format", "%k=%v")
    check_eq(r.out, "k1=v1\nk2=v2::more\n=nokey\n=f1\n=f2\nlate=1\n", "consume --format", r)
    r = conduit("consume", topic, "--format", "%t/%p/%o", "--max", 2)
    check_eq(r.out, f"{topic}/0/0\n{topic}/0/1\n", "consume --format with %t %p %o", r)

    # --follow stops at --max.
    r = conduit("consume", topic, "--follow", "--max", 3)
    check_eq(records(r), everything[:3], "consume --follow --max 3", r)

    # Explicit partitions on a multi-partition topic.
    multi = f"cli-multi-{SUFFIX}"
    conduit("topic", "create", multi, "-p", 2)
    conduit("produce", multi, "--partition", 1, stdin="p1a\np1b\n")
    conduit("produce", multi, "--partition", 0, stdin="p0a\n")
    r = conduit("consume", multi, "--partition", 1)
    check_eq(records(r), [(1, 0, "", "p1a"), (1, 1, "", "p1b")], "consume --partition 1", r)
    r = conduit("consume", multi)
    check_eq(sorted(records(r)), [(0, 0, "", "p0a"), (1, 0, "", "p1a"), (1, 1, "", "p1b")],
             "consume every partition", r)

    # Too large a record: the server refuses it and the CLI says so.
    r = conduit("produce", topic, stdin="x" * 1_100_000 + "\n", expect=None)
    expect_error(r, "INVALID_ARGUMENT")
    check("records failed" in r.err, "produce names the failed records", r)


# ---------------------------------------------------------------------------------------------
# Consumer groups


def reset_rows(r):
    """The BEFORE/AFTER table of reset-offsets (the closing "dry run"/"applied" line left out)."""
    lines = r.out.splitlines()
    check(len(lines) >= 2 and lines[0].split()[:1] == ["TOPIC"], "reset-offsets table", r)
    return as_dicts([line.split() for line in lines[:-1]])


def group_lag_rows(group):
    r = conduit("group", "describe", group)
    return r, as_dicts(table_after(r.out, "TOPIC"))


def test_groups():
    topic = f"cli-groups-{SUFFIX}"
    group = f"cli-group-{SUFFIX}"
    conduit("topic", "create", topic)
    conduit("produce", topic, stdin="r0\nr1\nr2\nr3\n")
    first = [(0, i, "", f"r{i}") for i in range(4)]

    # First consume --group prints everything and commits; the second prints nothing.
    r = conduit("consume", topic, "--group", group)
    check_eq(records(r), first, "first consume --group", r)
    check_eq(r.err, "", "consume --group stderr", r)
    r = conduit("consume", topic, "-g", group)
    check_eq(r.out, "", "second consume --group (offsets committed)", r)

    # group list
    r = conduit("group", "list")
    rows = as_dicts(table_after(r.out, "GROUP"))
    mine = [row for row in rows if row["GROUP"] == group]
    check_eq(len(mine), 1, "group in group list", r)
    check_eq((mine[0]["STATE"], mine[0]["MEMBERS"]), ("EMPTY", "0"), "group state", r)
    r = conduit("group", "list", output="json")
    groups = [x for x in json.loads(r.out)["groups"] if x["groupId"] == group]
    check_eq(len(groups), 1, "group in JSON group list", r)
    check_eq(groups[0]["state"], "GROUP_STATE_EMPTY", "JSON group state", r)

    # group describe: caught up.
    r, lag = group_lag_rows(group)
    check(r.out.startswith(f"group {group}: EMPTY, "), "describe summary", r)
    check("max lag 0 records" in r.out, "no lag after consuming everything", r)
    check_eq(list(lag[0].keys()), ["TOPIC", "PARTITION", "COMMITTED", "HIGH-WATERMARK", "LAG",
                                   "LAG-TIME", "CATCH-UP", "OWNER"], "lag table columns", r)
    check_eq([(x["TOPIC"], x["PARTITION"], x["COMMITTED"], x["HIGH-WATERMARK"], x["LAG"])
              for x in lag], [(topic, "0", "4", "4", "0")], "lag table when caught up", r)

    # More records: lag > 0.
    conduit("produce", topic, stdin="r4\nr5\nr6\n")
    everything = first + [(0, i, "", f"r{i}") for i in range(4, 7)]
    r, lag = group_lag_rows(group)
    check("max lag 3 records" in r.out, "max lag after producing 3 more", r)
    check_eq([(x["COMMITTED"], x["HIGH-WATERMARK"], x["LAG"]) for x in lag], [("4", "7", "3")],
             "lag table after producing 3 more", r)
    r = conduit("group", "describe", group, output="json")
    doc = json.loads(r.out)
    check_eq(doc["groupId"], group, "JSON describe group id", r)
    check_eq(doc["maxLagRecords"], "3", "JSON max lag", r)
    check_eq((doc["partitions"][0]["topic"], doc["partitions"][0]["lagRecords"]), (topic, "3"),
             "JSON partition lag", r)

    # Consume the rest: lag back to 0.
    r = conduit("consume", topic, "--group", group)
    check_eq(records(r), everything[4:], "consume --group after producing more", r)
    r, lag = group_lag_rows(group)
    check_eq([(x["COMMITTED"], x["LAG"]) for x in lag], [("7", "0")], "lag after catching up", r)

    # reset-offsets: a dry run changes nothing.
    r = conduit("group", "reset-offsets", group, "--topic", topic, "--to-earliest")
    check(r.out.splitlines()[-1].startswith("dry run: nothing changed"), "dry run says so", r)
    rows = reset_rows(r)
    check_eq([(x["PARTITION"], x["BEFORE"], x["AFTER"]) for x in rows], [("0", "7", "0")],
             "dry-run table", r)
    r, lag = group_lag_rows(group)
    check_eq([(x["COMMITTED"], x["LAG"]) for x in lag], [("7", "0")],
             "committed offset unchanged after a dry run", r)
    r = conduit("consume", topic, "--group", group)
    check_eq(r.out, "", "consume --group after a dry run prints nothing", r)

    # Other targets, dry run.
    r = conduit("group", "reset-offsets", group, "--topic", topic, "--shift-by", -2)
    check_eq([(x["BEFORE"], x["AFTER"]) for x in reset_rows(r)],
             [("7", "5")], "--shift-by -2 dry run", r)
    r = conduit("group", "reset-offsets", group, "--topic", topic, "--to-offset", 3,
                "--partitions", 0)
    check_eq([(x["BEFORE"], x["AFTER"]) for x in reset_rows(r)],
             [("7", "3")], "--to-offset 3 dry run", r)
    r = conduit("group", "reset-offsets", group, "--topic", topic, "--to-earliest",
                output="json")
    doc = json.loads(r.out)
    check(not doc.get("executed", False), "JSON dry run not executed", r)
    check_eq(doc["partitions"][0].get("after", "0"), "0", "JSON dry run after", r)

    # --execute: the next consume --group replays everything.
    r = conduit("group", "reset-offsets", group, "--topic", topic, "--to-earliest", "--execute",
                "--reason", "cli test replay")
    check(re.search(r"^applied \(audit entry \d+\)", r.out, re.M) is not None,
          "execute says applied", r)
    check("dry run" not in r.out, "execute is not a dry run", r)
    r, lag = group_lag_rows(group)
    check_eq([(x["COMMITTED"], x["LAG"]) for x in lag], [("0", "7")], "lag after reset", r)
    r = conduit("consume", topic, "--group", group)
    check_eq(records(r), everything, "consume --group after reset --execute replays all", r)

    # Usage errors: two targets, no target, missing --topic; --group with --partition.
    expect_usage(conduit("group", "reset-offsets", group, "--topic", topic, "--to-earliest",
                         "--to-latest", expect=None), "exactly one")
    expect_usage(conduit("group", "reset-offsets", group, "--topic", topic, "--to-offset", 1,
                         "--shift-by", 1, "--execute", expect=None), "exactly one")
    expect_usage(conduit("group", "reset-offsets", group, "--topic", topic, expect=None),
                 "exactly one")
    expect_usage(conduit("group", "reset-offsets", group, "--to-earliest", expect=None),
                 "--topic")
    expect_usage(conduit("consume", topic, "--group", group, "--partition", 0, expect=None))
    # Nothing moved by the refused resets.
    r, lag = group_lag_rows(group)
    check_eq([x["COMMITTED"] for x in lag], ["7"], "refused resets changed nothing", r)

    expect_error(conduit("group", "describe", f"no-such-group-{SUFFIX}", expect=None),
                 "NOT_FOUND")
    expect_error(conduit("group", "reset-offsets", group, "--topic", f"no-such-{SUFFIX}",
                         "--to-earliest", expect=None), "NOT_FOUND")

    # delete
    r = conduit("group", "delete", group)
    check_eq(r.out, f"deleted group {group}\n", "group delete output", r)
    expect_error(conduit("group", "describe", group, expect=None), "NOT_FOUND")


# ---------------------------------------------------------------------------------------------
# Queues and the dead-letter lane


def job_ids(out):
    ids = re.findall(r"^job (\d+)$", out, re.M)
    return [int(i) for i in ids]


def stats(queue):
    r = conduit("queue", "stats", queue)
    rows = as_dicts(table(r.out))
    check_eq(len(rows), 1, "one stats row", r)
    return r, rows[0]


def lease(queue, n):
    """Leases up to n jobs → {job id: (token, attempt, payload)}."""
    r = conduit("queue", "lease", queue, "--max", n)
    if not r.out.strip():
        return r, {}
    rows = as_dicts(table(r.out))
    check(all(TIME_RE.match(x["DEADLINE"]) for x in rows), "lease deadlines", r)
    return r, {int(x["JOB"]): (x["TOKEN"], int(x["ATTEMPT"]), x["PAYLOAD"]) for x in rows}


def test_queues():
    queue = f"cli-queue-{SUFFIX}"
    r = conduit("queue", "create", queue, "--visibility-timeout", "30s", "--max-attempts", 3,
                "--durability", "interval")
    check_eq(r.out, f"created queue {queue}\n", "queue create output", r)
    expect_error(conduit("queue", "create", queue, expect=None), "ALREADY_EXISTS")
    expect_usage(conduit("queue", "create", f"q2-{SUFFIX}", "--visibility-timeout", "long",
                         expect=None), "--visibility-timeout")

    r = conduit("queue", "list")
    mine = [x for x in as_dicts(table(r.out)) if x["QUEUE"] == queue]
    check_eq([(x["VISIBILITY"], x["MAX-ATTEMPTS"], x["DURABILITY"]) for x in mine],
             [("30s", "3", "interval")], "queue list row", r)
    expect_usage(conduit("queue", "create", f"q3-{SUFFIX}", "--durability", "always",
                         expect=None), "--durability")

    # enqueue from arguments and from stdin.
    r = conduit("queue", "enqueue", queue, "job-a", "job-b")
    ab = job_ids(r.out)
    check_eq(len(ab), 2, "job ids from enqueue", r)
    r = conduit("queue", "enqueue", queue, stdin="job-c\njob-d\n")
    cd = job_ids(r.out)
    check_eq(len(cd), 2, "job ids from enqueue (stdin)", r)
    ids = ab + cd
    check_eq(len(set(ids)), 4, "distinct job ids", r)
    payload_of = dict(zip(ids, ["job-a", "job-b", "job-c", "job-d"]))

    r, s = stats(queue)
    check_eq((s["READY"], s["LEASED"], s["DEAD"]), ("4", "0", "0"), "stats after enqueue", r)
    # Ages in tenths of a second (or whole seconds), rates with two decimals, not raw floats.
    check(re.fullmatch(r"(\d+ms|\d+(\.\d)?s|\d+m(\d+s)?|0)", s["OLDEST-READY"]) is not None,
          "oldest-ready age rounded", r)
    check(re.fullmatch(r"\d+(\.\d\d)?", s["ENQUEUE/S"]) is not None, "enqueue rate rounded", r)

    # lease (table), then lease (json).
    r, leased = lease(queue, 2)
    check_eq(len(leased), 2, "lease --max 2", r)
    check(all(att == 1 and payload_of[j] == p for j, (_, att, p) in leased.items()),
          "leased jobs carry attempt 1 and their payload", r)
    r = conduit("queue", "lease", queue, output="json")
    jobs = json.loads(r.out)["jobs"]
    check_eq(len(jobs), 1, "JSON lease", r)
    j = jobs[0]
    leased[int(j["jobId"])] = (j["leaseToken"], j["attempt"], b64(j["payload"]))
    check_eq(b64(j["payload"]), payload_of[int(j["jobId"])], "JSON lease payload", r)
    r, s = stats(queue)
    check_eq((s["READY"], s["LEASED"]), ("1", "3"), "stats after leasing 3", r)

    acked, retried, dead = sorted(leased)
    # ack
    r = conduit("queue", "ack", queue, acked, leased[acked][0])
    check_eq(r.out, f"acked job {acked}\n", "ack output", r)
    r = conduit("queue", "ack", queue, acked, leased[acked][0], expect=None)
    check_eq(r.rc, 1, "acking twice is refused", r)
    check(re.match(r"error: [A-Z_]+: ", r.err) is not None, "refused ack explains", r)
    # nack (transient): retried later.
    r = conduit("queue", "nack", queue, retried, leased[retried][0], "--reason", "flaky")
    check(re.match(rf"job {retried} retries at \d{{4}}-", r.out) is not None, "nack output", r)
    # nack --permanent: the dead-letter lane.
    r = conduit("queue", "nack", queue, dead, leased[dead][0], "--reason", "bad payload",
                "--permanent")
    check_eq(r.out, f"job {dead} is in the dead-letter lane\n", "nack --permanent output", r)
    expect_usage(conduit("queue", "nack", queue, dead, leased[dead][0], expect=None),
                 "--reason")
    expect_usage(conduit("queue", "ack", queue, dead, expect=None), "token")

    r, s = stats(queue)
    check_eq((s["LEASED"], s["DEAD"]), ("0", "1"), "stats after ack/nack", r)
    check_eq(int(s["READY"]) + int(s["DELAYED"]), 2, "ready + delayed after ack/nack", r)
    r = conduit("queue", "stats", queue, output="json")
    check_eq(json.loads(r.out).get("dead"), "1", "JSON stats dead", r)

    # dlq list / show
    r = conduit("dlq", "list", queue)
    rows = as_dicts(table(r.out))
    check_eq([x["JOB"] for x in rows], [str(dead)], "dlq list", r)
    check("bad payload" in r.out, "dlq list shows the reason", r)
    r = conduit("dlq", "list", queue, "--reason-contains", "nothing like it")
    check_eq(table(r.out)[1:], [], "dlq list --reason-contains filters", r)
    r = conduit("dlq", "show", queue, dead)
    lines = r.out.splitlines()
    check(lines[0].startswith(f"job {dead}: ") and "bad payload" in lines[0], "dlq show head", r)
    check_eq(lines[1], f"payload: {payload_of[dead]}", "dlq show payload", r)
    attempts = as_dicts(table_after(r.out, "ATTEMPT"))
    check_eq([(x["ATTEMPT"], x["OUTCOME"]) for x in attempts], [("1", "OUTCOME_NACKED")],
             "dlq show attempts", r)
    expect_error(conduit("dlq", "show", queue, acked, expect=None), "NOT_FOUND")

    # redrive: dry run changes nothing; --execute brings the job back (attempt 2).
    r = conduit("dlq", "redrive", queue)
    check_eq(r.out, f"would redrive 1 jobs: {dead}\n", "redrive dry run", r)
    r = conduit("dlq", "list", queue)
    check_eq([x["JOB"] for x in as_dicts(table(r.out))], [str(dead)],
             "dead job still listed after a dry run", r)
    r = conduit("dlq", "redrive", queue, "--ids", dead, "--execute")
    check_eq(r.out, f"redrove 1 jobs: {dead}\n", "redrive --execute", r)
    r = conduit("dlq", "list", queue)
    check_eq(table(r.out)[1:], [], "dlq empty after redrive", r)
    r, s = stats(queue)
    check_eq(s["DEAD"], "0", "stats dead after redrive", r)
    r, again = lease(queue, 10)
    check(dead in again, "the redriven job can be leased again", r)
    check_eq(again[dead][1:], (2, payload_of[dead]), "redriven job: attempt 2, same payload", r)

    # discard: needs --reason; dry run; --execute.
    conduit("queue", "nack", queue, dead, again[dead][0], "--reason", "still bad", "--permanent")
    expect_usage(conduit("dlq", "discard", queue, expect=None), "--reason")
    r = conduit("dlq", "discard", queue, "--reason", "cli test")
    check_eq(r.out, f"would discard 1 jobs: {dead}\n", "discard dry run", r)
    r = conduit("dlq", "show", queue, dead)
    check_eq(len(as_dicts(table_after(r.out, "ATTEMPT"))), 2,
             "dead job (two attempts) still there after a dry run", r)
    r = conduit("dlq", "discard", queue, "--reason", "cli test", "--ids", dead, "--execute")
    check_eq(r.out, f"discarded 1 jobs: {dead}\n", "discard --execute", r)
    r = conduit("dlq", "list", queue)
    check_eq(table(r.out)[1:], [], "dlq empty after discard", r)
    expect_error(conduit("dlq", "show", queue, dead, expect=None), "NOT_FOUND")
    r, s = stats(queue)
    check_eq(s["DEAD"], "0", "stats dead after discard", r)

    # Unknown queue.
    nope = f"no-such-queue-{SUFFIX}"
    for args in (["queue", "stats", nope], ["queue", "enqueue", nope, "x"], ["dlq", "list", nope],
                 ["queue", "lease", nope]):
        expect_error(conduit(*args, expect=None), "NOT_FOUND")


# ---------------------------------------------------------------------------------------------
# Bulk jobs: enqueue in batches, ack several at once

# What `queue enqueue` may print on stderr besides an error: its progress line, rewritten after
# a "\r" (which text-mode capture turns into "\n").
PROGRESS_RE = re.compile(r"(?:(?:[\r\n]sent \d+ jobs \(\d+/s\))+\n)?")


def lease_json(queue, n):
    """Leases up to n jobs (-o json) → [(job id, token, payload)] in lease order."""
    r = conduit("queue", "lease", queue, "--max", n, output="json")
    return r, [(int(j["jobId"]), j["leaseToken"], b64(j.get("payload", "")))
               for j in json.loads(r.out).get("jobs", [])]


def check_enqueued(r, queue, n):
    """The output of a successful enqueue of n jobs → their ids, checked to follow the input."""
    ids = job_ids(r.out)
    check_eq(len(ids), n, "one 'job ID' line per input line", r)
    check(all(a < b for a, b in zip(ids, ids[1:])), "job ids increase in input order", r)
    check(r.out.endswith("\n") and
          r.out.splitlines()[-1].startswith(f"enqueued {n} job{'' if n == 1 else 's'} to {queue} in "),
          "enqueue ends with its summary line", r)
    check(PROGRESS_RE.fullmatch(r.err) is not None, "stderr holds only the progress line", r)
    return ids


def test_queue_bulk_enqueue():
    """enqueue cuts stdin into batches (by count and by bytes) sent in order, so inputs far past
    a gRPC message limit go through, and a failed batch says how far it got. The 70 MB input was
    one 70 MB request before (RESOURCE_EXHAUSTED: the server takes 64 MiB; nothing enqueued)."""
    # Big lines: 70 x 1 MB, cut by bytes (one line a batch), past the server's 64 MiB limit.
    big = f"cli-bulk-big-{SUFFIX}"
    conduit("queue", "create", big)
    payloads = [f"{i:04d}-" + "x" * 999_995 for i in range(70)]
    r = conduit("queue", "enqueue", big, stdin="".join(p + "\n" for p in payloads))
    big_ids = check_enqueued(r, big, len(payloads))
    r, s = stats(big)
    check_eq(s["READY"], "70", "every big line is a ready job", r)
    got = []
    for _ in range(3):  # 3 MB a lease (under the CLI's 4 MiB answer limit); the first 9 jobs
        r, leased = lease_json(big, 3)
        got += [(j, p) for j, _, p in leased]
    check_eq([j for j, _ in got], big_ids[:9], "big jobs lease in input order", r)
    check(all(p == want for (_, p), want in zip(got, payloads)), "big payloads arrive whole", r)

    # Many short lines: 50 batches cut at 1000 jobs.
    queue = f"cli-bulk-{SUFFIX}"
    conduit("queue", "create", queue)
    lines = [f"line-{i:06d}" for i in range(50_000)]
    r = conduit("queue", "enqueue", queue, stdin="".join(x + "\n" for x in lines))
    ids = check_enqueued(r, queue, len(lines))
    r, s = stats(queue)
    check_eq(s["READY"], str(len(lines)), "every line is a ready job", r)
    r, leased = lease_json(queue, 1000)
    check_eq([(j, p) for j, _, p in leased], list(zip(ids[:1000], lines[:1000])),
             "the first 1000 jobs lease in input order", r)
    # A thousand JOB TOKEN pairs acked by one command.
    pairs = [str(x) for j, t, _ in leased for x in (j, t)]
    r = conduit("queue", "ack", queue, *pairs)
    check_eq(r.out.splitlines()[-1], "acked 1000 of 1000 jobs", "ack of 1000 jobs", r)
    r, s = stats(queue)
    check_eq((s["READY"], s["LEASED"]), (str(len(lines) - 1000), "0"), "stats after acking", r)

    # A line over the server's 1 MiB payload limit after 2500 good ones: the batches before it
    # stay enqueued, the command fails and says how far it got; the line after it is not sent.
    partial = f"cli-bulk-partial-{SUFFIX}"
    conduit("queue", "create", partial)
    text = "".join(f"p{i}\n" for i in range(2500)) + "y" * 1_100_000 + "\nafter\n"
    r = conduit("queue", "enqueue", partial, stdin=text, expect=None)
    expect_error(r, "INVALID_ARGUMENT")
    check("enqueued the first 2500 lines; lines 2501..2501 failed" in r.err,
          "the error says which lines were enqueued", r)
    check_eq(len(job_ids(r.out)), 2500, "job ids of the enqueued batches", r)
    check(f"enqueued 2500 jobs to {partial} in " in r.out, "summary of the partial enqueue", r)
    r, s = stats(partial)
    check_eq(s["READY"], "2500", "nothing after the refused line was enqueued", r)

    # --file; arguments and --file together; an empty input (the server refuses no jobs).
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write("from-file-1\nfrom-file-2\n")
        path = f.name
    try:
        r = conduit("queue", "enqueue", partial, "--file", path)
        check_enqueued(r, partial, 2)
        expect_usage(conduit("queue", "enqueue", partial, "x", "--file", path, expect=None))
    finally:
        os.unlink(path)
    expect_usage(conduit("queue", "enqueue", partial, "--file", "/nonexistent/jobs.txt",
                         expect=None), "/nonexistent/jobs.txt")
    expect_error(conduit("queue", "enqueue", partial, stdin="", expect=None), "INVALID_ARGUMENT")


def test_queue_ack_several():
    """queue ack JOB TOKEN JOB TOKEN ...: one AckBatch; each job's result; exit 1 when any job
    was not acked; usage errors ack nothing."""
    queue = f"cli-ackn-{SUFFIX}"
    conduit("queue", "create", queue)
    conduit("queue", "enqueue", queue, "a", "b", "c", "d", "e")
    r, leased = lease_json(queue, 5)
    check_eq([p for *_, p in leased], ["a", "b", "c", "d", "e"], "leased in order", r)
    (j1, t1, _), (j2, t2, _), (j3, t3, _), (j4, t4, _), (j5, t5, _) = leased

    r = conduit("queue", "ack", queue, j1, t1, j2, t2)
    check_eq(r.out, f"acked job {j1}\nacked job {j2}\nacked 2 of 2 jobs\n", "ack of two jobs", r)
    check_eq(r.err, "", "ack of two jobs: stderr", r)

    # Usage errors, before anything is sent: j3 stays leased.
    expect_usage(conduit("queue", "ack", queue, j3, t3, j4, expect=None), "no lease token")
    expect_usage(conduit("queue", "ack", queue, j3, t3, j3, t3, expect=None), "listed twice")
    expect_usage(conduit("queue", "ack", queue, j3, t3, "seven", t4, expect=None), "seven")
    r, s = stats(queue)
    check_eq(s["LEASED"], "3", "usage errors acked nothing", r)

    # Mixed: j3 acked, j4 with a wrong token refused (stays leased), j1 already acked.
    r = conduit("queue", "ack", queue, j3, t3, j4, t5, j1, t1, expect=None)
    check_eq(r.rc, 1, "exit 1 when a job was not acked", r)
    check_eq(r.out, f"acked job {j3}\nacked 1 of 3 jobs\n", "mixed ack output", r)
    errors = r.err.splitlines()
    check_eq(len(errors), 2, "one error line per job not acked", r)
    check(re.match(rf"error: FAILED_PRECONDITION: .*\b{j4}\b", errors[0]) is not None,
          "the wrong token is a stale lease (FAILED_PRECONDITION) naming the job", r)
    check(re.match(rf"error: NOT_FOUND: .*\b{j1}\b", errors[1]) is not None,
          "the acked job is gone (NOT_FOUND) naming the job", r)
    r, s = stats(queue)
    check_eq(s["LEASED"], "2", "j4 and j5 still leased", r)

    # -o json: the AckBatchResponse, a result per job in order.
    r = conduit("queue", "ack", queue, j4, t4, j5, "stale", output="json", expect=None)
    check_eq(r.rc, 1, "json ack with a refused job exits 1", r)
    results = [(int(x["jobId"]), x["code"]) for x in json.loads(r.out)["results"]]
    check_eq(results, [(j4, 0), (j5, 9)], "JSON results (0 OK, 9 FAILED_PRECONDITION)", r)
    r, s = stats(queue)
    check_eq((s["READY"], s["LEASED"]), ("0", "1"), "only j5 left, leased", r)


# ---------------------------------------------------------------------------------------------
# The cluster: describe, and --addr as a list of bootstrap brokers


def bridge_jobs(queue):
    _, row = stats(queue)
    return int(row["READY"]) + int(row["DELAYED"]) + int(row["LEASED"])


def test_bridges():
    topic, queue, name = f"cli-btopic-{SUFFIX}", f"cli-bqueue-{SUFFIX}", f"cli-bridge-{SUFFIX}"
    conduit("topic", "create", topic)
    conduit("queue", "create", queue)
    r = conduit("bridge", "create", name, "--topic", topic, "--queue", queue, "--key-prefix", "sku-",
                "--tenant-header", "merchant")
    check_eq(r.out, f"created bridge {name}: topic {topic} (group bridge.{name}) -> queue {queue}\n",
             "bridge create output", r)
    expect_error(conduit("bridge", "create", name, "--topic", topic, "--queue", queue, expect=None),
                 "ALREADY_EXISTS")
    expect_error(conduit("bridge", "create", f"{name}-x", "--topic", topic, "--queue", "no-such",
                         expect=None), "NOT_FOUND")
    expect_usage(conduit("bridge", "create", f"{name}-y", "--topic", topic, "--queue", queue,
                         "--header", "no-equals-sign", expect=None), "--header")
    conduit("produce", topic, "-K", ":", "-H", "merchant=m1",
            stdin="sku-1:price 90\nuser-1:login\nsku-2:price 80\n")
    deadline = time.monotonic() + 20
    while bridge_jobs(queue) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    check_eq(bridge_jobs(queue), 2, "the two sku- records became jobs")
    r = conduit("queue", "lease", queue, "--max", 10, output="json")
    jobs = json.loads(r.out)["jobs"]
    check_eq(sorted(base64.b64decode(j["payload"]).decode() for j in jobs), ["price 80", "price 90"],
             "job payloads are the record values", r)
    check(all(j["tenant"] == "m1" for j in jobs), "tenant from the merchant header", r)
    check(all(j["source"]["topic"] == topic for j in jobs), "jobs name their source topic", r)

    r = conduit("bridge", "list")
    rows = [x for x in as_dicts(table(r.out)) if x["BRIDGE"] == name]
    check_eq(len(rows), 1, "the bridge in bridge list", r)
    check_eq(rows[0]["FILTER"], "key^=sku-", "filter column", r)
    check_eq(rows[0]["STATE"], "running", "state column", r)
    r = conduit("bridge", "describe", name)
    check("state running, 2 bridged, 1 filtered" in r.out, "describe counts", r)
    check_eq(conduit("bridge", "pause", name).out, f"paused bridge {name}\n", "pause output")
    check("state paused" in conduit("bridge", "describe", name).out, "paused in describe")
    check_eq(conduit("bridge", "resume", name).out, f"resumed bridge {name}\n", "resume output")
    check_eq(conduit("bridge", "delete", name).out, f"deleted bridge {name}\n", "delete output")
    expect_error(conduit("bridge", "describe", name, expect=None), "NOT_FOUND")


def test_cluster():
    topic = f"cli-cluster-{SUFFIX}"
    conduit("topic", "create", topic, "--partitions", 3)

    # A single node is a cluster of one: broker 0 at its address, controller, leader of all.
    r = conduit("cluster", "describe")
    check(r.out.startswith("cluster (single node): 1 brokers, controller broker 0 (epoch 0)"),
          "cluster describe summary line", r)
    brokers = as_dicts(table_after(r.out, "BROKER"))
    check_eq([(b["BROKER"], b["ADDRESS"], b["CONTROLLER"]) for b in brokers], [("0", ADDR, "yes")],
             "cluster describe brokers", r)
    parts = as_dicts(table_after(r.out, "TOPIC"))
    check_eq(list(parts[0].keys()),
             ["TOPIC", "PARTITION", "LEADER", "EPOCH", "REPLICAS", "ISR", "MOVING-TO"],
             "cluster describe partition columns", r)
    mine = [(p["PARTITION"], p["LEADER"], p["EPOCH"], p["REPLICAS"], p["ISR"])
            for p in parts if p["TOPIC"] == topic]
    check_eq(mine, [(str(i), "0", "0", "0", "0") for i in range(3)],
             "broker 0 leads every partition", r)
    check_eq([p["TOPIC"] for p in parts], sorted(p["TOPIC"] for p in parts),
             "topics in name order", r)

    # A single node is a cluster of one: its replicas are where they are asked to be (nothing
    # to do), and no other broker exists to move them to.
    conduit("cluster", "reassign", topic, "0", "--replicas", "0")
    expect_error(conduit("cluster", "reassign", topic, "0", "--replicas", "1", expect=None),
                 "INVALID_ARGUMENT")

    # Only the named topics; an unknown one is NOT_FOUND.
    r = conduit("cluster", "describe", topic)
    check_eq({p["TOPIC"] for p in as_dicts(table_after(r.out, "TOPIC"))}, {topic},
             "cluster describe TOPIC", r)
    expect_error(conduit("cluster", "describe", f"no-such-{SUFFIX}", expect=None), "NOT_FOUND")

    # -o json: the GetMetadata response.
    r = conduit("cluster", "describe", topic, output="json")
    doc = json.loads(r.out)
    check_eq(doc["brokers"], [{"id": 0, "address": ADDR}], "JSON brokers", r)
    check_eq(doc["controllerId"], 0, "JSON controller", r)
    check_eq([(p["partition"], p["leader"], p["replicas"]) for p in doc["topics"][0]["partitions"]],
             [(i, 0, [0]) for i in range(3)], "JSON partitions", r)

    # --addr as a list whose first broker is down: admin calls, produce, consume and group
    # consume all use the one that answers.
    multi = f"{UNREACHABLE},{ADDR}"
    r = conduit("topic", "list", addr=multi)
    check(any(row[0] == topic for row in table(r.out)[1:]), "topic list via a list", r)
    conduit("cluster", "describe", addr=multi)
    r = conduit("produce", topic, "--partition", 2, stdin="a\nb\n", addr=multi)
    check(r.out.startswith(f"produced 2 records to {topic} in "), "produce via a list", r)
    r = conduit("consume", topic, "--partition", 2, addr=multi)
    check_eq([(p, o, v) for p, o, _, v in records(r)], [(2, 0, "a"), (2, 1, "b")],
             "consume via a list", r)
    r = conduit("consume", topic, "--group", f"cli-cluster-{SUFFIX}", addr=multi)
    check_eq([v for *_, v in records(r)], ["a", "b"], "consume --group via a list", r)
    r = conduit("--timeout", 5, "cluster", "describe", addr=f"{UNREACHABLE},127.0.0.1:2",
                expect=None)
    expect_error(r, "UNAVAILABLE")


# ---------------------------------------------------------------------------------------------
# Bad input


def test_bad_input():
    missing = f"no-such-topic-{SUFFIX}"
    expect_error(conduit("topic", "describe", missing, expect=None), "NOT_FOUND")
    expect_error(conduit("consume", missing, expect=None), "NOT_FOUND")
    expect_error(conduit("produce", missing, stdin="x\n", expect=None), "NOT_FOUND")
    expect_error(conduit("topic", "delete", missing, expect=None), "NOT_FOUND")

    # Usage errors: exit 2, message on stderr, nothing on stdout.
    for args in (["frobnicate"], ["topic", "frobnicate"], ["topic"], ["topic", "describe"],
                 ["topic", "create"], ["produce"], ["consume"], ["group", "describe"],
                 ["queue", "enqueue"], ["dlq", "show", "q"], ["topic", "create", "t", "-p", "x"],
                 ["consume", "t", "--no-such-flag"], ["--output", "yaml", "topic", "list"]):
        r = conduit(*args, expect=None)
        expect_usage(r)
        check_eq(r.out, "", "stdout of a usage error", r)
    r = conduit(addr=None, expect=None)
    expect_usage(r)

    # --help is not an error.
    r = conduit("--help", expect=0)
    check("topic" in r.out and "queue" in r.out, "--help lists the commands", r)
    r = conduit("consume", "--help", expect=0)
    check("--from-time" in r.out, "consume --help lists its flags", r)

    # Unreachable server: exit 1, UNAVAILABLE with a hint, and quickly.
    for args, stdin in ((["topic", "list"], None), (["produce", "t"], "x\n"),
                        (["consume", "t"], None), (["group", "list"], None),
                        (["queue", "list"], None)):
        start = time.monotonic()
        r = conduit("--timeout", 5, *args, addr=UNREACHABLE, stdin=stdin, expect=None)
        expect_error(r, "UNAVAILABLE")
        check("--addr" in r.err, "UNAVAILABLE hint mentions --addr", r)
        check(time.monotonic() - start < 10, "unreachable server fails within --timeout", r)

    # CONDUIT_ADDR is the default address.
    env = dict(os.environ, CONDUIT_ADDR=ADDR)
    r = conduit("topic", "list", addr=None, env=env)
    check_eq(table(r.out)[0][:2], ["TOPIC", "PARTITIONS"], "topic list via CONDUIT_ADDR", r)
    # Global options may also follow the command.
    r = subprocess.run([BIN, "topic", "list", "--addr", ADDR], capture_output=True, text=True,
                       timeout=20)
    check(r.returncode == 0 and "TOPIC" in r.stdout, "--addr after the command: " + r.stderr, None)
    # --offset on a topic with several partitions needs --partition; lease --max must be >= 1.
    multi = f"cli-offset-needs-partition-{SUFFIX}"
    conduit("topic", "create", multi, "-p", 2)
    expect_usage(conduit("consume", multi, "--offset", 0, expect=None))
    expect_usage(conduit("queue", "lease", "q", "--max", 0, expect=None))


# ---------------------------------------------------------------------------------------------
# Defects this test found (fixed since)


def test_group_max_commits_only_what_it_printed():
    """consume --group --max N commits the position after the N records it printed, so the
    rest of the batch goes to the group's next reader."""
    topic = f"cli-gmax-{SUFFIX}"
    group = f"cli-gmax-{SUFFIX}"
    conduit("topic", "create", topic)
    conduit("produce", topic, stdin="1\n2\n3\n4\n5\n")
    r = conduit("consume", topic, "--group", group, "--max", 2)
    check_eq([v for *_, v in records(r)], ["1", "2"], "consume --group --max 2", r)
    r = conduit("consume", topic, "--group", group)
    check_eq([v for *_, v in records(r)], ["3", "4", "5"],
             "the next consume --group continues after the printed records", r)


def test_produce_to_a_missing_partition_fails():
    """produce --partition N with N >= the partition count fails and says why."""
    topic = f"cli-ppart-{SUFFIX}"
    conduit("topic", "create", topic)
    r = conduit("produce", topic, "--partition", 7, stdin="x\n", expect=None)
    check(r.rc != 0, "produce to a partition that does not exist fails", r)
    check("partition" in r.err, "and says why on stderr", r)


def test_group_consume_prints_json():
    """-o json consume --group prints JSON records, as the partition mode does."""
    topic = f"cli-gjson-{SUFFIX}"
    conduit("topic", "create", topic)
    conduit("produce", topic, stdin="v\n")
    r = conduit("consume", topic, "--group", f"cli-gjson-{SUFFIX}", output="json")
    try:
        docs = json_stream(r.out)
    except ValueError:
        raise CheckError(f"-o json consume --group output is not JSON\n  {r.describe()}")
    check_eq(len(docs), 1, "one JSON record", r)


def test_consume_rate():
    """consume --rate N prints at most N records a second after a first second's worth, with
    --group (GroupConsumer's max_records_per_second) and without (the same token bucket)."""
    topic = f"cli-rate-{SUFFIX}"
    conduit("topic", "create", topic)
    values = [str(i) for i in range(12)]
    conduit("produce", topic, stdin="".join(v + "\n" for v in values))
    # 4 at once, then 8 more at 4 a second: 2 s at the least.
    t0 = time.monotonic()
    r = conduit("consume", topic, "--group", f"cli-rate-{SUFFIX}", "--rate", 4)
    took = time.monotonic() - t0
    check_eq([v for *_, v in records(r)], values, "consume --group --rate 4 prints everything", r)
    check(took >= 1.9, f"consume --group --rate 4 of 12 records took {took:.2f}s (>= 2 s)", r)
    t0 = time.monotonic()
    r = conduit("consume", topic, "--rate", 4, "--max", 8)
    took = time.monotonic() - t0
    check_eq([v for *_, v in records(r)], values[:8], "consume --rate 4 --max 8", r)
    check(took >= 0.9, f"consume --rate 4 of 8 records took {took:.2f}s (>= 1 s)", r)
    expect_usage(conduit("consume", topic, "--rate", -1, expect=None), "--rate")


def test_acl_and_audit():
    """The server runs open (no ACLs): ACL changes are refused with the reason; the audit trail
    still records admin calls (who, method, resource, outcome), in a table and as JSON."""
    topic = f"cli-audit-{SUFFIX}"
    r = conduit("acl", "add", "allow", "User:bob", "topic", "prefixed", "orders.", "Write",
                expect=None)
    expect_error(r, "FAILED_PRECONDITION")
    check("--authorization" in r.err, "the refusal says how to turn ACLs on", r)
    expect_usage(conduit("acl", "add", "allow", "User:bob", "topic", expect=None), "fields")
    expect_usage(conduit("acl", "rm", expect=None), "--all")
    r = conduit("acl", "ls")
    check_eq(table(r.out), [["SOURCE", "RULE"]], "no ACLs listed", r)

    conduit("topic", "create", topic, "--partitions", 1)
    conduit("topic", "delete", topic)
    r = conduit("audit", "--resource", topic)
    rows = table_after(r.out, "ID")[1:]  # (the CHECKS cells hold spaces: columns by position)
    check_eq([row[4] for row in rows], ["CreateTopic", "DeleteTopic"], "audited calls", r)
    check(all(row[2] == "User:ANONYMOUS" for row in rows), "anonymous callers", r)
    r = conduit("audit", "--resource", topic, output="json")
    entries = json.loads(r.out)["entries"]
    check(all(e.get("statusCode", 0) == 0 for e in entries), "calls that succeeded", r)
    check_eq([e["checks"][0]["operation"] for e in entries],
             ["OPERATION_CREATE", "OPERATION_DELETE"], "checked operations", r)
    check(all(e["peer"].startswith("ipv4:127.0.0.1:") for e in entries), "peer addresses", r)
    r = conduit("audit", "--resource", topic, "--denied")
    check_eq(table(r.out)[1:], [], "nothing refused", r)
    expect_usage(conduit("audit", "--since", "yesterday", expect=None), "--since")


def main():
    print(f"cli_test: {BIN} against {ADDR}", flush=True)
    start = time.monotonic()
    failures = []
    for test in (test_topics, test_produce_consume, test_groups, test_queues,
                 test_queue_bulk_enqueue, test_queue_ack_several, test_bridges,
                 test_cluster,
                 test_bad_input,
                 test_group_max_commits_only_what_it_printed,
                 test_produce_to_a_missing_partition_fails, test_group_consume_prints_json,
                 test_consume_rate, test_acl_and_audit):
        t0 = time.monotonic()
        try:
            test()
            print(f"ok    {test.__name__} ({time.monotonic() - t0:.1f}s)", flush=True)
        except Exception as e:  # noqa: BLE001 - report every section
            failures.append(test.__name__)
            detail = str(e) if isinstance(e, CheckError) else traceback.format_exc()
            print(f"FAIL: {test.__name__}: {detail}", flush=True)
    elapsed = time.monotonic() - start
    if failures:
        print(f"cli_test: {len(failures)} failed: {', '.join(failures)} ({elapsed:.1f}s)")
        return 1
    print(f"cli_test: all passed ({elapsed:.1f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
