#!/usr/bin/env python3
"""Renders docs/BENCHMARKS.md from scripts/bench-peers.sh's measurements.

Usage: bench_peers_report.py RESULTS.tsv RSS.tsv SECONDS [EXTRA.txt [REPLICATION.tsv]]
RESULTS.tsv: label, workload, ops/s, p50 ms, p99 ms, errors. RSS.tsv: label, peak RSS MB.
EXTRA.txt: lines printed verbatim under "Other figures" (e2e latency, idle partitions).
REPLICATION.tsv: build/bin/replication_bench's output (CONFIG, RESULT and FAILOVER lines).
"""
import collections
import datetime
import os
import platform
import subprocess
import sys

results_path, rss_path, seconds = sys.argv[1], sys.argv[2], sys.argv[3]
extra_path = sys.argv[4] if len(sys.argv) > 4 else None
replication_path = sys.argv[5] if len(sys.argv) > 5 else None

rows = collections.OrderedDict()  # workload -> label -> (ops, p50, p99, errors)
labels = []
for line in open(results_path):
    label, workload, ops, p50, p99, errors = line.rstrip("\n").split("\t")
    if label not in labels:
        labels.append(label)
    rows.setdefault(workload, {})[label] = (float(ops), float(p50), float(p99), int(errors))
rss = dict(line.rstrip("\n").split("\t") for line in open(rss_path) if line.strip())


def ops(label, workload):
    v = rows.get(workload, {}).get(label)
    return v[0] if v else None


def sh(cmd):
    try:
        return subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=10).stdout.strip()
    except Exception:  # noqa: BLE001
        return "?"


def fmt_ops(v):
    return "-" if v is None else f"{v:,.0f}"


def ratio(a, b):
    return "-" if not a or not b else f"{a / b:.2f}×"


WORKLOADS = {
    "ping-1": "Conduit only: ListTopics, answered on gRPC's own thread — the floor of one gRPC round trip here",
    "append-1x1": "append, 1 client, 1 record per request, wait for each ack",
    "append-8x1": "append, 8 clients, 1 record per request",
    "append-1x100": "append, 1 client, 100 requests in flight (pipelined / async publish)",
    "append-stream-1": "Conduit only: 1 caller, one record per message on one ProduceStream, through the generated stub's callback API (not the C++ `Producer`); at most 1024 unanswered, 99 of every 100 written with gRPC's buffer hint so that they leave in one write, as the Redis peer pipelines 100 XADDs: compare with the peers' `append-1x100`",
    "producer-1": "append through the C++ client `Producer` (one-record sends with a callback, batched, 1 ms linger)",
    "fetch-1": "read back, 1 client, 1000 records per Fetch",
    "tail-1": "read back through one Tail stream from offset 0 (5000 records per message) until caught up",
    "cycle-1": "consume cycle, 1 worker (lease+ack / XREADGROUP+XACK / pull+ack / reserve+delete)",
    "cycle-8": "consume cycle, 8 workers",
    "cycle-stream-1": "Conduit only: the consume cycle on one Consume stream, one job pushed and one ack per message (64 credits, the ack carrying one more), the generated stub's synchronous stream: compare with the peers' `cycle-1`",
    "cycle-stream-8": "the same, 8 workers, one stream each: compare with the peers' `cycle-8`",
    "batch-cycle-1": "consume cycle taking up to 100 jobs per round, 1 worker: Lease(max_jobs=100) + one AckBatch / "
                     "XREADGROUP COUNT 100 + one XACK / pull batch 100 + pipelined AckSyncs / "
                     "100 pipelined reserves + deletes (beanstalkd has no batch commands)",
    "batch-cycle-8": "the same, 8 workers",
    "worker-1": "Conduit only: the C++ client `Worker`, 1 thread leasing up to 100 jobs, acks sent together",
    "ceiling-b1": "RocksDB alone: 1 record per WriteBatch, one entry per record",
    "ceiling-b100": "RocksDB alone: 100 records per WriteBatch, one entry per record (Conduit "
                    "itself now stores a chunk of a partition's records per entry: "
                    "services/log_broker/README.md; the ceiling is RocksDB used key-per-record, "
                    "as Conduit used it before)",
}

def replication_section(p, path, seconds):
    """Issue 16's rows: replication_bench's RESULT / FAILOVER / CONFIG lines."""
    config, rows, failover, labels, cpu = {}, {}, {}, [], {}
    for line in open(path):
        f = line.rstrip("\n").split("\t")
        if f[0] == "CONFIG":
            config[f[1]] = f[2]
        elif f[0] == "RESULT":
            if f[1] not in labels:
                labels.append(f[1])
            rows.setdefault(f[1], {})[f[2]] = (float(f[3]), float(f[4]), float(f[5]), int(f[6]))
        elif f[0] == "CPU":
            cpu[(f[1], f[2])] = float(f[3])
        elif f[0] == "FAILOVER":
            failover[f[1]] = (int(f[2]), int(f[3]), float(f[4]), float(f[5]), float(f[6]))
    ttl = config.get("lease_ttl", "?")
    p("")
    p("## Replicated partitions (issue 16)")
    p("")
    p(f"`build/bin/replication_bench --seconds={seconds}` (run by `scripts/bench-peers.sh`). Each "
      "configuration on a fresh cluster: three `conduit-broker` processes and one etcd "
      f"(`--etcd-lease-ttl {ttl}`), or three clustered `nats-server` processes (JetStream, file "
      "storage, one stream with `num_replicas: 3`), all on loopback on this machine's cores "
      "together with the client. One partition (one stream), 100 B records, "
      f"{seconds} s per workload after a 200 ms warm-up.")
    p("")
    p(f"- `producer-batched`: Conduit's C++ `Producer` (idempotent, 1 ms linger, batches of up to "
      f"500) / NATS async publish, {config.get('window', '?')} records outstanding; latency per "
      "record, send to ack, including the wait in the window.")
    p("- `append-1x100`: one record per request, 100 in flight: Conduit's generated stub to the "
      "partition's leader (`ConduitAppend`, latency per round of 100), NATS async publish with 100 "
      "PubAcks pending (latency per message).")
    p("")
    p("What is on disk when the write is acknowledged:")
    p("- `conduit RF 3 acks all` (min in-sync 2, `sync`): the leader has fsynced its WAL and every "
      "in-sync follower has fsynced its copy before reporting it (the high watermark counts only "
      "durable follower ends): all in-sync replicas (3 while all are up) on disk.")
    p("- `conduit RF 3 acks leader` (`sync`): the leader's fsync only; followers copy afterwards.")
    p("- `conduit RF 1` (`sync`): one copy, fsynced.")
    p("- `conduit RF 3 acks all interval`: every in-sync replica has the batch in its OS page cache "
      "(written, not yet fsynced; each WAL is fsynced within 100 ms).")
    p("- `nats R3`: a PubAck means the stream's Raft group stored the message on a quorum (2 of 3) "
      "— written to their files, not fsynced: nats-server 2.9.10 (Debian 12) has no sync option "
      "(a config file with `jetstream { sync_interval: always }` is refused, `unknown field "
      "\"sync_interval\"`, checked on this machine; the option came in 2.10), and its file store "
      "fsyncs on a timer (the 2.9 default is 2 minutes). So no `nats R3 sync always` row could be "
      "run. The matched-durability comparison is `conduit RF 3 acks all interval` vs `nats R3` "
      "(neither fsyncs before the ack; Conduit still waits for all in-sync replicas, NATS for 2 of "
      "3); `conduit RF 3 acks all` (sync) is stronger than anything NATS 2.9 offers.")
    p("")
    p("| configuration | producer-batched rec/s | p50 ms | p99 ms | append-1x100 rec/s | p50 ms | p99 ms |")
    p("|---|---|---|---|---|---|---|")
    for label in labels:
        cells = []
        for w in ("producer-batched", "append-1x100"):
            v = rows[label].get(w)
            if not v:
                cells += ["-", "-", "-"]
            else:
                cells += [f"{v[0]:,.0f}" + (f" ({v[3]} errors)" if v[3] else ""), f"{v[1]:.2f}",
                          f"{v[2]:.2f}"]
        p(f"| {label} | " + " | ".join(cells) + " |")
    p("")
    p("Where the time goes: `append-1x1` (one record per request, one at a time; NATS: synchronous "
      "publish) is the latency replication adds to a single write without queueing; servers' CPU "
      "per record is every broker's (nats-server's) user + system time over the workload ÷ its "
      "records (an estimate: set-up and warm-up included), on the 2 cores the client shares.")
    p("")
    p("| configuration | append-1x1 rec/s | p50 ms | p99 ms | CPU µs/rec producer-batched | CPU µs/rec append-1x100 |")
    p("|---|---|---|---|---|---|")
    for label in labels:
        v = rows[label].get("append-1x1")
        cells = ["-", "-", "-"] if not v else [f"{v[0]:,.0f}", f"{v[1]:.2f}", f"{v[2]:.2f}"]
        for w in ("producer-batched", "append-1x100"):
            c = cpu.get((label, w))
            cells.append("-" if c is None else f"{c:.1f}")
        p(f"| {label} | " + " | ".join(cells) + " |")
    p("")
    if any("append-stream-1" in rows[label] for label in labels):
        p("One caller, one record per message on a `ProduceStream` to the leader (`append-stream-1`, "
          "as in the single-node table: at most 1024 unanswered, 99 of every 100 messages written "
          "with gRPC's buffer hint): what a generated-stub caller gets with replication. NATS R3's "
          "nearest is its `append-1x100` (async publish, 100 PubAcks pending). No target; shown "
          "because unary requests (`append-1x100`) pay a gRPC call per record.")
        p("")
        p("| configuration | workload | rec/s | p50 ms | p99 ms | CPU µs/rec |")
        p("|---|---|---|---|---|---|")
        for label in labels:
            w = "append-1x100" if label.startswith("nats") else "append-stream-1"
            v = rows[label].get(w)
            if not v:
                continue
            c = cpu.get((label, w))
            p(f"| {label} | `{w}` | {v[0]:,.0f}" + (f" ({v[3]} errors)" if v[3] else "") +
              f" | {v[1]:.2f} | {v[2]:.2f} | " + ("-" if c is None else f"{c:.1f}") + " |")
        p("")
    if failover:
        p(f"Failover: SIGKILL of the partition's (stream's) leader under acks-all produce, time to "
          "the first acknowledged write sent after the kill; the killed process restarted and "
          "every replica back in sync (Conduit: GetMetadata in-sync set of 3; NATS: both followers "
          "`current` in `$JS.API.STREAM.INFO`) before the next kill. Conduit: RF 3, acks all, min "
          f"in-sync 2, sync, etcd lease TTL {ttl}, replica lag time "
          f"{config.get('replica_lag_time', '?')}; the client is a loop of one-record Produce "
          "calls (1 s deadline) routed by `client::ClusterRouter` (the not-leader hint at once, else "
          "GetMetadata and a 5 ms pause). NATS: a publish every 1 ms from a connection to a server "
          "that survives the kill (so no client reconnect is timed), PubAcks read on another "
          "connection; nats-server's own Raft election timing (not configurable in 2.9).")
        p("")
        p("| system | kills | acknowledged after | p50 s | p99 s | max s |")
        p("|---|---|---|---|---|---|")
        for label, (kills, measured, p50, p99, mx) in failover.items():
            p(f"| {label} | {kills} | {measured} | {p50:.2f} | {p99:.2f} | {mx:.2f} |")
        p("")
        p("p99 of 20 or fewer samples is the slowest one (the histogram's ceil(0.99 n)-th).")
        p("")

    def get(label, w):
        v = rows.get(label, {}).get(w)
        return v[0] if v else None

    p("Targets (issue 16):")
    p("")
    for w in ("producer-batched", "append-1x100"):
        a, b = get("conduit RF 3 acks all", w), get("conduit RF 1", w)
        target(f"`{w}`: RF 3 acks all ÷ RF 1", a / b if a and b else None, 0.5)
    for w in ("producer-batched", "append-1x100"):
        a, n = get("conduit RF 3 acks all interval", w), get("nats R3", w)
        target(f"`{w}`: RF 3 acks all interval ÷ NATS R3 (matched: neither fsyncs before the ack)",
               a / n if a and n else None, 1.5)
        a = get("conduit RF 3 acks all", w)
        target(f"`{w}`: RF 3 acks all sync ÷ NATS R3 (Conduit at stronger durability)",
               a / n if a and n else None, 1.5)
    floor, n = ops("grpc floor", "append-1x100"), get("nats R3", "append-1x100")
    if floor and n:
        bound = (f"- Bound on `append-1x100`: a LogService that stores nothing and answers every "
                 f"Produce at once on gRPC's thread (`grpc floor` in the first table, "
                 f"`bench/grpc_floor.cc`) takes {floor:,.0f} one-record calls/s with 100 in flight "
                 f"from the same client code: {floor / n:.2f}× NATS R3. A Conduit broker cannot "
                 "answer faster than that over unary gRPC on this machine")
        if floor / n < 1.5:
            bound += (", so the 1.5× NATS R3 target for one record per request is out of reach "
                      "here whatever the brokers do")
        else:
            a = get("conduit RF 3 acks all", "append-1x100")
            bound += (f"; in this run the floor is above 1.5× NATS R3, and Conduit RF 3 acks all "
                      f"reaches {a / floor:.2f} of it" if a else "")
        p(bound + "; `append-stream-1` (one record per message on a stream) is the way such a "
          "caller gets batch speed.")
    fo = failover.get("conduit RF 3 acks all")
    goal = None
    try:
        goal = float(ttl.rstrip("s")) + 1.0
    except ValueError:
        pass
    if fo and goal and fo[1] > 0:
        met = fo[3] <= goal and fo[1] == fo[0]
        p(f"- Conduit failover p99: **{fo[3]:.2f} s** over {fo[1]} of {fo[0]} kills (target ≤ lease "
          f"TTL + 1 s = {goal:.0f} s) — {'met' if met else 'NOT met'}")
    else:
        p("- Conduit failover p99: not measured")


out = []
p = out.append
p("# Benchmarks: Conduit side by side with its peers")
p("")
p(f"Generated by `make bench-peers` (`scripts/bench-peers.sh {seconds}`) on "
  f"{datetime.datetime.utcnow():%Y-%m-%d %H:%M} UTC. Regenerate with that one command; the "
  "numbers below are from the run that wrote this file, nothing is edited by hand.")
p("")
p("## Machine")
p("")
cpu = sh("lscpu | sed -n 's/^Model name: *//p'")
disk = sh("df -hT ${TMPDIR:-/tmp} | tail -1 | awk '{print $2, $1}'")
redis_version = sh("redis-server --version | cut -d' ' -f1-3")
nats_version = sh("nats-server --version")
beanstalkd_version = sh("beanstalkd -v")
commit = sh("git rev-parse --short HEAD")
mem = sh("awk '/^MemTotal:/ {printf \"%.0f GiB\", $2 / 1048576}' /proc/meminfo")
p(f"- CPU: {cpu}, {os.cpu_count()} cores, {mem} RAM; kernel {platform.release()}")
p(f"- Data dirs on: {disk}")
p(f"- Versions: {redis_version}; nats-server {nats_version}; {beanstalkd_version}; "
  f"Conduit {commit}")
p("- Client and server share the machine (2 cores here): every figure includes the client's "
  "own CPU cost. Loopback TCP, no TLS.")
p("")
p("## Method")
p("")
p(f"Each system is started fresh on a free 127.0.0.1 port with an empty data dir, loaded by "
  f"`build/bin/peer_bench` for {seconds} s per workload after a 200 ms warm-up, then stopped. "
  "Payloads are 100 bytes. The peers' clients speak their protocols directly (RESP, the NATS "
  "text protocol with JetStream's request/reply API, beanstalkd's text protocol; "
  "`bench/peers/`), so no client library of any registry is involved. Conduit is "
  "`conduit-standalone` over gRPC, a 1-partition topic (like one stream), and a work queue. "
  "`grpc floor` is `bench/grpc_floor.cc`: the same Conduit client code against a LogService that "
  "stores nothing and answers every Produce at once (default `grpc::ServerBuilder`, no "
  "interceptors; on ProduceStream one response per 100 answers), the most a gRPC C++ server "
  "(Debian's gRPC 1.51) gives one-record requests and messages on this machine.")
p("")
p("Matched durability:")
p("- **fsync before ack**: Conduit `sync` (WAL fsync, group-committed); Redis "
  "`appendfsync always`; beanstalkd `-f 0`; the RocksDB ceiling with `sync=true`.")
p("- **fsync on a timer** (a process crash loses nothing, a machine crash loses the last "
  "interval): Conduit `interval` (100 ms); Redis `appendfsync everysec`; beanstalkd `-f 100`; "
  "NATS JetStream file storage — which is weaker: nats-server 2.9 (Debian 12) has no sync "
  "option at all (`sync_interval` came in 2.10) and fsyncs its stream files every 2 minutes, "
  "so a PubAck promises less than Conduit's 100 ms; the ceiling with unsynced writes and a "
  "SyncWAL every 100 ms.")
p("- The work queue's queues take the run's durability too (`QueueConfig.durability`: "
  "`sync` fsyncs every enqueue and ack, group-committed, before replying; `interval` fsyncs "
  "the WAL every 100 ms). A lease is never fsynced on its own in either.")
p("- Latency columns: per request for request/response workloads; for `append-1x100` Redis "
  "reports per pipelined round of 100, NATS per message (publish to its PubAck, including time "
  "waiting in the window), Conduit per request (the same, per message).")
p("")
p("## Results: operations per second (p99 latency in ms)")
p("")
header = "| workload | " + " | ".join(labels) + " |"
p(header)
p("|" + "---|" * (len(labels) + 1))
for workload, by_label in rows.items():
    cells = []
    for label in labels:
        v = by_label.get(label)
        if not v:
            cells.append("-")
        else:
            cell = f"{v[0]:,.0f}" + (f" ({v[2]:.2f})" if v[2] > 0 else "")  # 0: not measured
            if v[3]:
                cell += f" {v[3]} errors"
            cells.append(cell)
    p(f"| `{workload}` | " + " | ".join(cells) + " |")
p("")
for w, text in WORKLOADS.items():
    if w in rows:
        p(f"- `{w}`: {text}")
p("")
p("## Ratios at matched durability (Conduit ÷ peer)")
p("")
pairs = [("conduit sync", ["redis always", "beanstalkd fsync 0ms"]),
         ("conduit interval", ["redis everysec", "nats jetstream", "beanstalkd fsync 100ms"])]
p("| workload | " + " | ".join(f"{c} ÷ {peer}" for c, peers in pairs for peer in peers) + " |")
p("|" + "---|" * (1 + sum(len(x[1]) for x in pairs)))
for workload in ["append-1x1", "append-8x1", "append-1x100", "cycle-1", "cycle-8",
                 "batch-cycle-1", "batch-cycle-8"]:
    cells = []
    for c, peers in pairs:
        for peer in peers:
            cells.append(ratio(ops(c, workload), ops(peer, workload)))
    p(f"| `{workload}` | " + " | ".join(cells) + " |")
p("")
p("## Targets (issue 8)")
p("")


def best_append(label):
    vals = [ops(label, w) for w in ("append-1x100", "producer-1") if ops(label, w)]
    return max(vals) if vals else None


def target(name, value, goal):
    if value is None:
        p(f"- {name}: not measured")
    else:
        p(f"- {name}: **{value:.2f}** (target ≥ {goal}) — {'met' if value >= goal else 'NOT met'}")


for c, redis, ceiling in (("conduit sync", "redis always", "rocksdb ceiling sync"),
                          ("conduit interval", "redis everysec", "rocksdb ceiling interval")):
    b = best_append(c)
    target(f"{c}: best append ÷ Redis XADD pipelined ({redis})",
           b / ops(redis, "append-1x100") if b and ops(redis, "append-1x100") else None, 1.0)
    target(f"{c}: best append ÷ RocksDB ceiling, 100 records per batch",
           b / ops(ceiling, "ceiling-b100") if b and ops(ceiling, "ceiling-b100") else None, 0.6)
    f = max([v for v in (ops(c, "fetch-1"), ops(c, "tail-1")) if v] or [0]) or None
    target(f"{c}: best consume (fetch or tail) ÷ best append", f / b if f and b else None, 3.0)
b = best_append("conduit interval")
n = ops("nats jetstream", "append-1x100")
target("conduit interval: best append ÷ NATS JetStream async publish", b / n if b and n else None, 1.0)
CYCLES = ("cycle-1", "cycle-8", "batch-cycle-1", "batch-cycle-8", "worker-1")


def best_cycle(label):
    vals = [ops(label, w) for w in CYCLES if ops(label, w)]
    return max(vals) if vals else None


for c, peer, what in (("conduit sync", "beanstalkd fsync 0ms", "beanstalkd reserve+delete"),
                      ("conduit interval", "nats jetstream", "NATS work-queue pull+ack")):
    a, b = best_cycle(c), best_cycle(peer)
    target(f"{c}: best queue cycle ÷ best {what} ({peer})", a / b if a and b else None, 1.0)
    for workers in CYCLES[:4]:
        a, b = ops(c, workers), ops(peer, workers)
        target(f"{c} `{workers}` ÷ {what} `{workers}`", a / b if a and b else None, 1.0)
p("")
p("## Targets (issue 18: one-at-a-time callers on streams)")
p("")
for c, redis in (("conduit sync", "redis always"), ("conduit interval", "redis everysec")):
    a, r = ops(c, "append-stream-1"), ops(redis, "append-1x100")
    target(f"{c} `append-stream-1` ÷ Redis XADD pipelined ({redis} `append-1x100`)",
           a / r if a and r else None, 1.0)
a, n = ops("conduit interval", "append-stream-1"), ops("nats jetstream", "append-1x100")
target("conduit interval `append-stream-1` ÷ NATS JetStream async publish", a / n if a and n else None, 1.5)
floor = ops("grpc floor", "append-stream-1")
if a and floor:
    p(f"- For scale: gRPC alone (`grpc floor`, nothing stored, one response per 100 answers) reads "
      f"{floor:,.0f} one-record messages/s from the same caller; Conduit interval reaches "
      f"{a / floor:.2f} of that.")
a, n = ops("conduit interval", "cycle-stream-8"), ops("nats jetstream", "cycle-8")
target("conduit interval `cycle-stream-8` ÷ NATS work-queue pull+ack `cycle-8`", a / n if a and n else None, 1.0)
a, n = ops("conduit interval", "batch-cycle-1"), ops("nats jetstream", "batch-cycle-1")
target("conduit interval `batch-cycle-1` ÷ NATS `batch-cycle-1`", a / n if a and n else None, 1.0)
if replication_path and os.path.exists(replication_path):
    replication_section(p, replication_path, seconds)
p("")
p("## Peak RSS of each server over its run (MB)")
p("")
p("| server | peak RSS |")
p("|---|---|")
for label in labels:
    if label in rss:
        p(f"| {label} | {rss[label]} |")
if extra_path and os.path.exists(extra_path):
    p("")
    p("## Other figures")
    p("")
    p("```")
    for line in open(extra_path):
        p(line.rstrip("\n"))
    p("```")
p("")
p("Profiles, the reasons behind the misses and what is left: `docs/PERFORMANCE-NOTES.md` "
  "(written by hand).")
print("\n".join(out))
