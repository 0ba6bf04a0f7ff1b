// replication_bench: replicated partitions (issue 16) side by side with NATS JetStream R3, on
// this machine, in one run (scripts/bench-peers.sh renders its lines into docs/BENCHMARKS.md).
//
//   replication_bench [--seconds=3] [--kills=20] [--lease_ttl=2s] [--only=conduit|nats|failover]
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

#include <atomic>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "bench/broker_cluster.h"
#include "bench/peers/conduit_peer.h"
#include "bench/peers/peer.h"
#include "bench/peers/socket.h"
#include "bench/replication_nats.h"
#include "client/cluster_router.h"
#include "client/producer.h"
#include "common/testing/temp_dir.h"

ABSL_FLAG(double, seconds, 3, "measured seconds per workload (after a 200 ms warm-up)");
ABSL_FLAG(int, value_bytes, 100, "record / message payload bytes");
ABSL_FLAG(int, window, 5000, "producer-batched: records (messages) outstanding at once");
ABSL_FLAG(int, kills, 20, "failover: leaders killed per system");
ABSL_FLAG(std::string, lease_ttl, "2s", "brokers' --etcd-lease-ttl");
ABSL_FLAG(std::string, replica_lag_time, "2s", "failover cluster's --replica-lag-time");
ABSL_FLAG(std::string, only, "", "run one part: conduit | nats | failover");

namespace conduit::bench {
namespace {

namespace lpb = ::conduit::log::v1;
using testing::LogClient;

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

struct ConduitConfig {
  const char* label;
  int replication_factor;
  lpb::Acks acks;
  lpb::Durability durability;
};

// Creates `topic` (1 partition) and waits until its leader acknowledges a produce and, with
// more than one replica, every replica is in sync. The leader's broker id, or -1.
int CreateReplicatedTopic(BrokerCluster& c, const std::string& topic, const ConduitConfig& cfg) {
  lpb::CreateTopicRequest create;
  create.set_name(topic);
  create.set_partitions(1);
  create.set_replication_factor(cfg.replication_factor);
  create.mutable_config()->set_durability(cfg.durability);
  create.mutable_config()->set_acks(cfg.acks);
  if (cfg.replication_factor >= 3) create.mutable_config()->set_min_insync_replicas(2);
  if (!c.CreateTopic(create)) return -1;
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (absl::Now() < deadline) {
    for (int via = 1; via <= c.size(); ++via) {
      if (!c.running(via)) continue;
      const lpb::GetMetadataResponse m = c.Metadata(via);
      for (const auto& t : m.topics()) {
        if (t.name() != topic || t.partitions_size() != 1) continue;
        const auto& p = t.partitions(0);
        if (p.leader() <= 0 || p.isr_size() < cfg.replication_factor || !c.running(p.leader())) {
          continue;
        }
        lpb::ProduceRequest probe;
        probe.set_topic(topic);
        auto* record = probe.add_records();
        record->set_partition(0);
        record->set_value("probe");
        lpb::ProduceResponse resp;
        if (LogClient(c.address(p.leader())).Produce(probe, &resp, absl::Seconds(2)).ok()) {
          return p.leader();
        }
      }
      break;  // one broker's view per round
    }
    absl::SleepFor(absl::Milliseconds(50));  // placement, the leader applying its view
  }
  return -1;
}

void ConduitRows(const absl::Duration run, int bytes) {
  const ConduitConfig configs[] = {
      {"conduit RF 3 acks all", 3, lpb::ACKS_ALL, lpb::DURABILITY_SYNC},
      {"conduit RF 3 acks leader", 3, lpb::ACKS_LEADER, lpb::DURABILITY_SYNC},
      {"conduit RF 1", 1, lpb::ACKS_ALL, lpb::DURABILITY_SYNC},
      {"conduit RF 3 acks all interval", 3, lpb::ACKS_ALL, lpb::DURABILITY_INTERVAL},
  };
  for (const ConduitConfig& cfg : configs) {
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

// The partition's leader when it has one that is running and all three replicas are in sync
// (as a running broker's metadata says), else -1.
int HealthyLeader(BrokerCluster& c) {
  for (int via = 1; via <= c.size(); ++via) {
    if (!c.running(via)) continue;
    const lpb::GetMetadataResponse m = c.Metadata(via);
    for (const auto& t : m.topics()) {
      if (t.name() != "fo" || t.partitions_size() != 1) continue;
      const auto& p = t.partitions(0);
      if (p.leader() > 0 && p.isr_size() == 3 && c.running(p.leader())) return p.leader();
    }
    return -1;
  }
  return -1;
}

// Kills the leader of an RF 3, acks all, min in-sync 2, sync topic `kills` times under a
// produce loop that follows the cluster the way a client does (client::ClusterRouter: the
// not-leader hint at once, else GetMetadata and a 5 ms pause), one record per Produce, a 1 s
// deadline per call.
FailoverFigures ConduitFailover(int kills) {
  FailoverFigures out;
  BrokerCluster c;
  if (!c.Start(3, true,
               {"--etcd-lease-ttl", absl::GetFlag(FLAGS_lease_ttl), "--replica-lag-time",
                absl::GetFlag(FLAGS_replica_lag_time)})) {
    out.error = "cluster did not start";
    return out;
  }
  const ConduitConfig cfg{"fo", 3, lpb::ACKS_ALL, lpb::DURABILITY_SYNC};
  if (CreateReplicatedTopic(c, "fo", cfg) < 0) {
    out.error = "topic not served in 30 s";
    return out;
  }
  client::RouterOptions ro;
  for (int id = 1; id <= 3; ++id) ro.bootstrap.push_back(c.address(id));
  ro.request_timeout = absl::Seconds(1);
  auto router = client::ClusterRouter::Create(ro);
  if (!router.ok()) {
    out.error = router.status().ToString();
    return out;
  }
  for (int k = 0; k < kills; ++k) {
    int leader = -1;
    const absl::Time healthy_by = absl::Now() + absl::Seconds(60);
    while ((leader = HealthyLeader(c)) < 0 && absl::Now() < healthy_by) {
      absl::SleepFor(absl::Milliseconds(50));  // the restarted broker catching up, rejoining
    }
    if (leader < 0) {
      out.error = "the partition did not get back to 3 in-sync replicas within 60 s";
      break;
    }
    std::atomic<int64_t> killed_at{INT64_MAX}, acked_at{0};
    std::atomic<bool> stop{false};
    std::thread produce([&] {
      lpb::ProduceRequest request;
      request.set_topic("fo");
      auto* record = request.add_records();
      record->set_partition(0);
      record->set_value(std::string(100, 'f'));
      while (!stop.load()) {
        const int64_t t0 = absl::ToUnixNanos(absl::Now());
        auto route = (*router)->Leader("fo", 0);
        if (!route.ok()) {
          (void)(*router)->Refresh();
          absl::SleepFor(absl::Milliseconds(5));  // the partition offline: ask again shortly
          continue;
        }
        grpc::ClientContext ctx;
        LogClient::SetDeadline(&ctx, absl::Seconds(1));
        lpb::ProduceResponse response;
        const grpc::Status s = route->stub->Produce(&ctx, request, &response);
        if (s.ok()) {
          if (t0 >= killed_at.load()) {
            acked_at.store(absl::ToUnixNanos(absl::Now()));
            stop.store(true);
          }
        } else if (!(*router)->OnNotLeader("fo", 0, *route, ctx, s)) {
          (void)(*router)->Refresh();
          absl::SleepFor(absl::Milliseconds(5));  // leader unreachable or not known yet
        }
      }
    });
    absl::SleepFor(absl::Milliseconds(500));  // steady acks-all producing before the kill
    killed_at.store(absl::ToUnixNanos(absl::Now()));
    c.Kill(leader);
    ++out.kills;
    const absl::Time give_up = absl::Now() + kFailoverLimit;
    while (!stop.load() && absl::Now() < give_up) absl::SleepFor(absl::Milliseconds(1));
    stop.store(true);
    produce.join();
    if (acked_at.load() > 0) {
      const int64_t ns = acked_at.load() - killed_at.load();
      out.seconds_ns.Record(static_cast<uint64_t>(ns));
      ++out.measured;
      std::fprintf(stderr, "  conduit kill %d: leader broker %d, first ack after %.3f s\n", k + 1,
                   leader, ns / 1e9);
    } else {
      std::fprintf(stderr, "  conduit kill %d: leader broker %d, no ack within %.0f s\n", k + 1,
                   leader, absl::ToDoubleSeconds(kFailoverLimit));
    }
    if (!c.StartBroker(leader)) {
      out.error = "restart of a killed broker failed";
      break;
    }
  }
  return out;
}

}  // namespace
}  // namespace conduit::bench

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  // A reader that goes away (`| head`) must not kill the bench before its destructors stop the
  // brokers: they would live on, holding whatever the bench inherited (a flock'd file).
  signal(SIGPIPE, SIG_IGN);
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
    ReportFailover("conduit RF 3 acks all", ConduitFailover(absl::GetFlag(FLAGS_kills)));
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
