// replication_bench: replicated partitions side by side with NATS JetStream R3, on
// this machine, in one run (scripts/bench-peers.sh renders its lines into docs/BENCHMARKS.md).
//
//   replication_bench [--seconds=3] [--kills=20] [--lease_ttl=2s] [--only=conduit|nats|failover]
//                     [--config=LABEL] [--workload=PREFIX]
//
// 1. Throughput and latency, each configuration on a fresh cluster of three conduit-broker
//    processes + etcd (or three clustered nats-server processes), a 1-partition topic (like one
//    stream), 100 B records:
//      producer-batched  the C++ client Producer (idempotent, 1 ms linger), up to --window
//                        records outstanding; latency per record, send to ack (queueing in the
//                        window included), as NATS' async publish with --window acks pending
//      append-1x100      one record per Produce, 100 in flight (bench/peers' ConduitAppend: the
//                        generated stub; latency per round of 100) / NATS async publish, 100
//                        acks pending (latency per message)
//      append-1x1        one record per Produce, one at a time / NATS synchronous publish: the
//                        latency replication adds to one write, without queueing
// 2. Failover: SIGKILL the partition's (stream's) leader under acks-all produce; time until the
//    first acknowledged write sent after the kill; the killed process restarted and the
//    replicas back in sync between kills.
//
// CONFIG <tab> name <tab> value       (lease_ttl, replica_lag_time, window)
// RESULT <tab> label <tab> workload <tab> records/s <tab> p50 ms <tab> p99 ms <tab> errors
// CPU <tab> label <tab> workload <tab> servers' CPU µs per record
// FAILOVER <tab> label <tab> kills <tab> measured <tab> p50 s <tab> p99 s <tab> max s
// A benchmark prints figures; it asserts nothing.

#include <signal.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "bench/broker_cluster.h"
#include "bench/peers/conduit_peer.h"
#include "bench/peers/peer.h"
#include "bench/peers/socket.h"
#include "bench/replication_conduit.h"
#include "bench/replication_nats.h"
#include "client/producer.h"
#include "common/testing/temp_dir.h"

ABSL_FLAG(double, seconds, 3, "measured seconds per workload (after a 200 ms warm-up)");
ABSL_FLAG(int, value_bytes, 100, "record / message payload bytes");
ABSL_FLAG(int, window, 5000, "producer-batched: records (messages) outstanding at once");
ABSL_FLAG(int, batch_records, 0,
          "producer-batched: the Producer's max_batch_records (0: the Producer's default)");
ABSL_FLAG(int, kills, 20, "failover: leaders killed per system");
ABSL_FLAG(std::string, lease_ttl, "2s", "brokers' --etcd-lease-ttl");
ABSL_FLAG(std::string, replica_lag_time, "2s", "failover cluster's --replica-lag-time");
ABSL_FLAG(std::string, only, "", "run one part: conduit | nats | failover");
ABSL_FLAG(std::string, config, "",
          "conduit part: run only the configuration with this label (e.g. \"conduit RF 1\")");
ABSL_FLAG(std::string, workload, "", "run only the workloads whose name starts with this");

namespace conduit::bench {
namespace {

namespace lpb = ::conduit::log::v1;

const absl::Duration kWarmup = absl::Milliseconds(200);
const absl::Duration kFailoverLimit = absl::Seconds(30);

bool Wanted(const std::string& part) {
  const std::string only = absl::GetFlag(FLAGS_only);
  return only.empty() || only == part;
}

void Report(const std::string& label, const std::string& workload, const peers::Figures& f) {
  std::printf("RESULT\t%s\t%s\t%.0f\t%.3f\t%.3f\t%llu\n", label.c_str(), workload.c_str(),
              f.ops_per_s, f.latency.Quantile(0.5) / 1e6, f.latency.Quantile(0.99) / 1e6,
              static_cast<unsigned long long>(f.errors));
  if (!f.error.empty())
    std::fprintf(stderr, "%s %s: %s\n", label.c_str(), workload.c_str(), f.error.c_str());
  std::fflush(stdout);
}

void ReportFailover(const std::string& label, const FailoverFigures& f) {
  std::printf("FAILOVER\t%s\t%d\t%d\t%.3f\t%.3f\t%.3f\n", label.c_str(), f.kills, f.measured,
              f.seconds_ns.Quantile(0.5) / 1e9, f.seconds_ns.Quantile(0.99) / 1e9,
              f.seconds_ns.max() / 1e9);
  if (!f.error.empty()) std::fprintf(stderr, "%s failover: %s\n", label.c_str(), f.error.c_str());
  std::fflush(stdout);
}

// Runs `workload` and reports it, with the servers' CPU (`cpu()`: user + system so far) per
// record: CPU over the whole call (warm-up, stream set-up) ÷ records/s × (warm-up + run), an
// estimate that leans high by the set-up's share.
template <typename Cpu, typename Workload>
void Measure(const std::string& label, const std::string& workload, Cpu cpu, Workload run) {
  if (!absl::StartsWith(workload, absl::GetFlag(FLAGS_workload))) return;
  const absl::Duration cpu0 = cpu();
  const peers::Figures f = run();
  const double records =
      f.ops_per_s * absl::ToDoubleSeconds(kWarmup + absl::Seconds(absl::GetFlag(FLAGS_seconds)));
  Report(label, workload, f);
  if (records > 0) {
    std::printf("CPU\t%s\t%s\t%.2f\n", label.c_str(), workload.c_str(),
                absl::ToDoubleMicroseconds(cpu() - cpu0) / records);
  }
}

// One-record sends through client::Producer keeping up to `window` unanswered; latency per
// record from Send to its callback. Acks in the measured window [warm-up, warm-up + run) count.
peers::Figures ProducerWindow(const std::string& bootstrap, const std::string& topic, int window,
                              int value_bytes, absl::Duration run) {
  client::ProducerOptions options;
  options.address = bootstrap;
  options.topic = topic;
  options.linger = absl::Milliseconds(1);
  if (absl::GetFlag(FLAGS_batch_records) > 0) {
    options.max_batch_records = absl::GetFlag(FLAGS_batch_records);
  }
  auto producer = client::Producer::Create(options);
  peers::Figures f;
  if (!producer.ok()) return peers::FailedFigures(producer.status().ToString());
  struct Window {
    absl::Mutex mu;
    int limit = 0;
    int outstanding ABSL_GUARDED_BY(mu) = 0;
    uint64_t acked ABSL_GUARDED_BY(mu) = 0;
    uint64_t errors ABSL_GUARDED_BY(mu) = 0;
    std::string error ABSL_GUARDED_BY(mu);
    LatencyHistogram latency ABSL_GUARDED_BY(mu);
    bool HasRoom() const ABSL_SHARED_LOCKS_REQUIRED(mu) { return outstanding < limit; }
  } w;
  w.limit = window;
  const std::string value(static_cast<size_t>(value_bytes), 'v');
  const absl::Time from = absl::Now() + kWarmup, until = from + run;
  while (absl::Now() < until) {
    {
      absl::MutexLock lock(&w.mu);
      w.mu.Await(absl::Condition(&w, &Window::HasRoom));
      ++w.outstanding;
    }
    const absl::Time sent = absl::Now();
    (*producer)->Send(client::ProducerRecord{.value = value},
                      [&w, sent, from, until](absl::StatusOr<client::RecordPosition> r) {
                        const absl::Time now = absl::Now();
                        absl::MutexLock lock(&w.mu);
                        --w.outstanding;
                        if (!r.ok()) {
                          if (w.errors++ == 0) w.error = r.status().ToString();
                        } else if (now >= from && now < until) {
                          ++w.acked;
                          w.latency.Record(absl::ToInt64Nanoseconds(now - sent));
                        }
                      });
  }
  (void)(*producer)->Flush();
  absl::MutexLock lock(&w.mu);
  f.ops_per_s = static_cast<double>(w.acked) / absl::ToDoubleSeconds(run);
  f.latency = w.latency;
  f.errors = w.errors;
  f.error = w.error;
  return f;
}

void ConduitRows(const absl::Duration run, int bytes) {
  const ConduitConfig configs[] = {
      {"conduit RF 3 acks all", 3, lpb::ACKS_ALL, lpb::DURABILITY_SYNC},
      {"conduit RF 3 acks leader", 3, lpb::ACKS_LEADER, lpb::DURABILITY_SYNC},
      {"conduit RF 1", 1, lpb::ACKS_ALL, lpb::DURABILITY_SYNC},
      {"conduit RF 3 acks all interval", 3, lpb::ACKS_ALL, lpb::DURABILITY_INTERVAL},
  };
  for (const ConduitConfig& cfg : configs) {
    if (!absl::GetFlag(FLAGS_config).empty() && absl::GetFlag(FLAGS_config) != cfg.label) continue;
    const absl::Time t0 = absl::Now();
    BrokerCluster c;
    if (!c.Start(3, true, {"--etcd-lease-ttl", absl::GetFlag(FLAGS_lease_ttl)})) {
      Report(cfg.label, "producer-batched", peers::FailedFigures("cluster did not start"));
      continue;
    }
    const int leader = CreateReplicatedTopic(c, "bench", cfg);
    if (leader < 0) {
      Report(cfg.label, "producer-batched", peers::FailedFigures("topic not served in 30 s"));
      continue;
    }
    std::fprintf(stderr, "== %s (leader broker %d, served %.1f s after the cluster start)\n",
                 cfg.label, leader, absl::ToDoubleSeconds(absl::Now() - t0));
    Measure(
        cfg.label, "producer-batched", [&] { return c.BrokersCpu(); },
        [&] {
          return ProducerWindow(c.address(1), "bench", absl::GetFlag(FLAGS_window), bytes, run);
        });
    Measure(
        cfg.label, "append-1x100", [&] { return c.BrokersCpu(); },
        [&] { return peers::ConduitAppend(c.port(leader), "bench", 1, 100, bytes, run); });
    Measure(
        cfg.label, "append-1x1", [&] { return c.BrokersCpu(); },
        [&] { return peers::ConduitAppend(c.port(leader), "bench", 1, 1, bytes, run); });
    Measure(
        cfg.label, "append-stream-1", [&] { return c.BrokersCpu(); },
        [&] { return peers::ConduitAppendStream(c.port(leader), "bench", bytes, run); });
  }
}

void NatsRows(const absl::Duration run, int bytes) {
  testing::TempDir dir;
  NatsCluster nats(dir.path());
  const std::string error = nats.Start();
  if (!error.empty()) {
    Report("nats R3", "producer-batched", peers::FailedFigures(error));
    return;
  }
  std::fprintf(stderr, "== nats R3\n");
  auto cpu = [&] {
    absl::Duration d;
    for (int i = 0; i < 3; ++i) d += ProcessCpu(nats.pid(i));
    return d;
  };
  for (const auto& [workload, w] : {std::pair{"producer-batched", absl::GetFlag(FLAGS_window)},
                                    {"append-1x100", 100},
                                    {"append-1x1", 1}}) {
    const int window = w;  // a copy: lambdas may not capture a structured binding (clang)
    Measure("nats R3", workload, cpu,
            [&] { return peers::NatsPublish(nats.port(0), 1, window, bytes, run, 3); });
  }
}

}  // namespace
}  // namespace conduit::bench

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  // A reader that goes away (`| head`) must not kill the bench before its destructors stop the
  // brokers: they would live on, holding whatever the bench inherited (a flock'd file).
  signal(SIGPIPE, SIG_IGN);
  // Debian's Abseil leaves mutex deadlock detection on; the brokers turn it off, so does the
  // client here (as peer_bench).
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  using namespace conduit::bench;  // NOLINT: a benchmark's main
  const absl::Duration run = absl::Seconds(absl::GetFlag(FLAGS_seconds));
  const int bytes = absl::GetFlag(FLAGS_value_bytes);
  std::fprintf(stderr,
               "replication_bench: %d B records, 1 partition / 1 stream, %.1f s per workload, "
               "etcd lease TTL %s, %d kills\n",
               bytes, absl::ToDoubleSeconds(run), absl::GetFlag(FLAGS_lease_ttl).c_str(),
               absl::GetFlag(FLAGS_kills));
  std::printf("CONFIG\tlease_ttl\t%s\nCONFIG\treplica_lag_time\t%s\nCONFIG\twindow\t%d\n",
              absl::GetFlag(FLAGS_lease_ttl).c_str(), absl::GetFlag(FLAGS_replica_lag_time).c_str(),
              absl::GetFlag(FLAGS_window));
  if (Wanted("conduit")) ConduitRows(run, bytes);
  if (Wanted("nats")) NatsRows(run, bytes);
  if (Wanted("failover")) {
    ReportFailover("conduit RF 3 acks all",
                   ConduitFailover(absl::GetFlag(FLAGS_kills),
                                   {"--etcd-lease-ttl", absl::GetFlag(FLAGS_lease_ttl),
                                    "--replica-lag-time", absl::GetFlag(FLAGS_replica_lag_time)},
                                   kFailoverLimit));
    conduit::testing::TempDir dir;
    NatsCluster nats(dir.path());
    const std::string error = nats.Start();
    FailoverFigures f;
    if (error.empty()) {
      f = NatsFailover(nats, absl::GetFlag(FLAGS_kills), absl::Milliseconds(1), absl::Seconds(30));
    } else {
      f.error = error;
    }
    ReportFailover("nats R3", f);
  }
  return 0;
}
