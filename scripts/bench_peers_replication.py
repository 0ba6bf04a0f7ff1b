"""docs/BENCHMARKS.md's replicated-partitions section, from replication_bench's output.

Used by bench_peers_report.py.
"""
import os
import statistics


def judged_by_rounds(p, name, ratios, single, goal):
    """A target line judged by the median of paired rounds' ratios, each round's ratio and the
    single pass's (`single`, or None) shown beside it."""
    median = statistics.median(ratios)
    p(f"- {name}: **{median:.2f}** (target ≥ {goal}) — {'met' if median >= goal else 'NOT met'}; "
      f"the median of {len(ratios)} paired rounds: " + ", ".join(f"{r:.2f}" for r in ratios)
      + "; the single pass " + ("-" if single is None else f"{single:.2f}"))


def round_ratios(rounds_path, workload, numerator, denominator):
    """numerator ÷ denominator for `workload` in each paired round of ROUNDS (replication_bench's
    RESULT lines, each prefixed by its round's number), in round order."""
    by_round = {}
    for line in open(rounds_path):
        f = line.rstrip("\n").split("\t")
        if len(f) > 4 and f[1] == "RESULT" and f[3] == workload:
            by_round.setdefault(f[0], {})[f[2]] = float(f[4])
    ratios = []
    for values in by_round.values():
        a, b = values.get(numerator), values.get(denominator)
        if a and b:
            ratios.append(a / b)
    return ratios


def replication_section(p, target, floor, path, seconds, rounds_path=None):
    """The replicated-partitions rows: replication_bench's RESULT / FAILOVER / CONFIG lines.

    p: appends a line to the report; target(name, value, goal): a target line; floor: the grpc
    floor's append-1x100 records/s (or None); rounds_path: paired rounds of RF 3 acks all and RF 1
    `producer-batched` (or None)."""
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
    p("## Replicated partitions")
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

    p("Targets:")
    p("")
    for w in ("producer-batched", "append-1x100"):
        a, b = get("conduit RF 3 acks all", w), get("conduit RF 1", w)
        single = a / b if a and b else None
        ratios = []
        if w == "producer-batched" and rounds_path and os.path.exists(rounds_path):
            ratios = round_ratios(rounds_path, w, "conduit RF 3 acks all", "conduit RF 1")
        if not ratios:
            target(f"`{w}`: RF 3 acks all ÷ RF 1", single, 0.5)
            continue
        # The two clusters of the table above ran about a minute apart; each paired round runs
        # a fresh RF 3 cluster and a fresh RF 1 cluster back to back.
        judged_by_rounds(p, f"`{w}`: RF 3 acks all ÷ RF 1", ratios, single, 0.5)
    for w in ("producer-batched", "append-1x100"):
        a, n = get("conduit RF 3 acks all interval", w), get("nats R3", w)
        target(f"`{w}`: RF 3 acks all interval ÷ NATS R3 (matched: neither fsyncs before the ack)",
               a / n if a and n else None, 1.5)
        a = get("conduit RF 3 acks all", w)
        target(f"`{w}`: RF 3 acks all sync ÷ NATS R3 (Conduit at stronger durability)",
               a / n if a and n else None, 1.5)
    n = get("nats R3", "append-1x100")
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
