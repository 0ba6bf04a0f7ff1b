#!/usr/bin/env python3
"""Renders docs/BENCHMARKS.md from scripts/bench-peers.sh's measurements.

Usage: bench_peers_report.py RESULTS.tsv RSS.tsv SECONDS [EXTRA.txt [REPLICATION.tsv [ROUNDS.tsv
       [REPLICATION_ROUNDS.tsv]]]]
RESULTS.tsv: label, workload, ops/s, p50 ms, p99 ms, errors. RSS.tsv: label, peak RSS MB.
EXTRA.txt: lines printed verbatim under "Other figures" (e2e latency, idle partitions).
REPLICATION.tsv: build/bin/replication_bench's output (CONFIG, RESULT and FAILOVER lines).
ROUNDS.tsv: the paired rounds, as RESULTS.tsv with the label prefixed by the round's number.
REPLICATION_ROUNDS.tsv: paired rounds of replication_bench (round number, then its RESULT line).
"""
import collections
import datetime
import os
import platform
import subprocess
import sys

from bench_peers_replication import judged_by_rounds, replication_section

results_path, rss_path, seconds = sys.argv[1], sys.argv[2], sys.argv[3]
extra_path = sys.argv[4] if len(sys.argv) > 4 else None
replication_path = sys.argv[5] if len(sys.argv) > 5 else None
rounds_path = sys.argv[6] if len(sys.argv) > 6 else None
replication_rounds_path = sys.argv[7] if len(sys.argv) > 7 else None

rows = collections.OrderedDict()  # workload -> label -> (ops, p50, p99, errors)
labels = []
for line in open(results_path):
    label, workload, ops, p50, p99, errors = line.rstrip("\n").split("\t")
    if label not in labels:
        labels.append(label)
    rows.setdefault(workload, {})[label] = (float(ops), float(p50), float(p99), int(errors))
rss = dict(line.rstrip("\n").split("\t") for line in open(rss_path) if line.strip())
rounds = collections.OrderedDict()  # round -> (label, workload) -> ops
if rounds_path and os.path.exists(rounds_path):
    for line in open(rounds_path):
        label, workload, value = line.rstrip("\n").split("\t")[:3]
        n, label = label.split(" ", 1)
        rounds.setdefault(n, {})[(label, workload)] = float(value)


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
    "producer-1": "append through the C++ client `Producer` (one-record sends with a callback, batched, 1 ms linger; every 1000 sends wait for their acks)",
    "producer-steady-1": "the same without waiting: one thread sends for the whole run, held back only by the `Producer`'s 32 MiB buffer (as kafka-producer-perf-test); latency per record, send to ack, the wait in the buffer included",
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
  "(Debian's gRPC 1.51) gives one-record requests and messages on this machine; its WorkQueue "
  "answers Enqueue, Lease (made-up jobs with 100-byte payloads) and AckBatch at once the same "
  "way, for `batch-cycle-1`.")
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
p("## Targets")
p("")


def best_append(label, of=ops):
    vals = [of(label, w) for w in ("append-1x100", "producer-1", "producer-steady-1") if of(label, w)]
    return max(vals) if vals else None


def quotient(a, b):
    return a / b if a and b else None


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
p("## Targets: one-at-a-time callers on streams")
p("")
if rounds:
    p(f"Each target is judged by the median of {len(rounds)} paired rounds: in a round both sides "
      "of every target below run back to back on fresh servers, within about a minute, after the "
      "pass above (whose own ratio is shown too). This VM's speed swings by up to 2× within "
      "minutes, which a ratio of two figures taken minutes apart cannot tell from a difference "
      "between the systems.")
    p("")


def paired_target(name, of_ratio, goal):
    """A target judged by the median of the paired rounds (or the pass above, without rounds)."""
    single = of_ratio(ops)
    per_round = [of_ratio(lambda label, w, r=r: rounds[r].get((label, w))) for r in rounds]
    per_round = [v for v in per_round if v is not None]
    if not per_round:
        return target(name, single, goal)
    judged_by_rounds(p, name, per_round, single, goal)


for c, redis in (("conduit sync", "redis always"), ("conduit interval", "redis everysec")):
    paired_target(f"{c} `append-stream-1` ÷ Redis XADD pipelined ({redis} `append-1x100`)",
                  lambda of, c=c, redis=redis: quotient(of(c, "append-stream-1"),
                                                        of(redis, "append-1x100")), 1.0)
paired_target("conduit interval `append-stream-1` ÷ NATS JetStream async publish",
              lambda of: quotient(of("conduit interval", "append-stream-1"),
                                  of("nats jetstream", "append-1x100")), 1.5)
a = ops("conduit interval", "append-stream-1")
floor = ops("grpc floor", "append-stream-1")
if a and floor:
    p(f"- For scale: gRPC alone (`grpc floor`, nothing stored, one response per 100 answers) reads "
      f"{floor:,.0f} one-record messages/s from the same caller; Conduit interval reaches "
      f"{a / floor:.2f} of that (the pass above).")
paired_target("conduit interval `cycle-stream-8` ÷ NATS work-queue pull+ack `cycle-8`",
              lambda of: quotient(of("conduit interval", "cycle-stream-8"),
                                  of("nats jetstream", "cycle-8")), 1.0)
paired_target("conduit interval `batch-cycle-1` ÷ NATS `batch-cycle-1`",
              lambda of: quotient(of("conduit interval", "batch-cycle-1"),
                                  of("nats jetstream", "batch-cycle-1")), 1.0)
a, n = ops("conduit interval", "batch-cycle-1"), ops("nats jetstream", "batch-cycle-1")
floor = ops("grpc floor", "batch-cycle-1")
if a and n and floor:
    p(f"- For scale: gRPC alone (`grpc floor`: a Lease answered at once with 100 made-up jobs, an "
      f"AckBatch with OK) takes {floor:,.0f} jobs/s from the same worker; Conduit interval reaches "
      f"{a / floor:.2f} of that, and the target needs {n / floor:.2f}.")
paired_target("conduit interval: best produce ÷ RocksDB ceiling, 100 records per batch",
              lambda of: quotient(best_append("conduit interval", of),
                                  of("rocksdb ceiling interval", "ceiling-b100")), 0.5)
if rounds:
    p("")
    p("Paired rounds, operations per second:")
    p("")
    p("| system | workload | " + " | ".join(f"round {r}" for r in rounds) + " |")
    p("|" + "---|" * (2 + len(rounds)))
    measured = list(dict.fromkeys(key for by_key in rounds.values() for key in by_key))
    for label, workload in measured:
        cells = [fmt_ops(rounds[r].get((label, workload))) for r in rounds]
        p(f"| {label} | `{workload}` | " + " | ".join(cells) + " |")
if replication_path and os.path.exists(replication_path):
    replication_section(p, target, ops("grpc floor", "append-1x100"), replication_path, seconds,
                        replication_rounds_path)
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
