// cluster_bench: what a cluster costs and how fast it reacts, on this machine, in one run.
//   1. Produce through the C++ Producer (idempotent, keyed, 100 B values) to a 12-partition RF 1
//      topic: a single node (no etcd), a cluster of 1 and a cluster of 3 brokers. Records/s and
//      CPU per record (the brokers' user+system time from /proc, and this client's).
//   2. GetMetadata latency (sequential calls to one broker).
//   3. SIGKILL of a broker: time until another broker's GetMetadata shows its partitions
//      offline (the controller's reaction: lease TTL, then the watch and the guarded write).
// Real processes (conduit-broker, etcd) on free loopback ports, temp data dirs, all stopped at
// the end. A benchmark prints figures; it asserts nothing.

#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <future>
#include <memory>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "bench/broker_cluster.h"
#include "bench/histogram.h"
#include "client/producer.h"
#include "tests/support/log_client.h"

ABSL_FLAG(int, records, 200000, "records per produce run");
ABSL_FLAG(int, partitions, 12, "partitions of the topic");
ABSL_FLAG(std::string, lease_ttl, "2s", "brokers' etcd lease TTL for the failover run");
ABSL_FLAG(int, metadata_calls, 2000, "GetMetadata calls to time");

namespace conduit::bench {
namespace {

using testing::LogClient;

absl::Duration SelfCpu() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return absl::DurationFromTimeval(u.ru_utime) + absl::DurationFromTimeval(u.ru_stime);
}

// The bench topic (12 partitions by default, one replica each: replication has its own
// benchmark, replication_bench) through broker 1; whether it was created.
bool CreateTopic(BrokerCluster& c) {
  conduit::log::v1::CreateTopicRequest create;
  create.set_name("bench");
  create.set_partitions(absl::GetFlag(FLAGS_partitions));
  create.set_replication_factor(1);
  return c.CreateTopic(create);
}

void ProduceRun(const char* label, int brokers, bool cluster) {
  BrokerCluster c;
  std::vector<std::string> args;
  if (cluster) args = {"--etcd-lease-ttl", absl::GetFlag(FLAGS_lease_ttl)};
  if (!c.Start(brokers, cluster, args)) {
    std::printf("%-22s could not start\n", label);
    return;
  }
  if (!CreateTopic(c)) return;
  client::ProducerOptions options;
  options.address = c.address(1);
  options.topic = "bench";
  auto producer = client::Producer::Create(options);
  if (!producer.ok()) return;
  const int n = absl::GetFlag(FLAGS_records);
  const std::string value(100, 'x');
  const absl::Duration broker_cpu0 = c.BrokersCpu(), self_cpu0 = SelfCpu();
  const absl::Time start = absl::Now();
  std::vector<std::future<absl::StatusOr<client::RecordPosition>>> acks;
  acks.reserve(n);
  for (int i = 0; i < n; ++i) {
    acks.push_back((*producer)->Send(
        client::ProducerRecord{.key = absl::StrCat("k", i % 1000), .value = value}));
  }
  (void)(*producer)->Flush();
  int ok = 0;
  for (auto& a : acks) ok += a.get().ok();
  const absl::Duration wall = absl::Now() - start;
  const double broker_us = absl::ToDoubleMicroseconds(c.BrokersCpu() - broker_cpu0) / n;
  const double client_us = absl::ToDoubleMicroseconds(SelfCpu() - self_cpu0) / n;
  std::printf(
      "%-22s %9.0f rec/s  broker CPU %5.2f µs/rec  client CPU %5.2f µs/rec  (%d/%d acked)\n", label,
      n / absl::ToDoubleSeconds(wall), broker_us, client_us, ok, n);
}

void MetadataAndFailoverRun() {
  BrokerCluster c;
  if (!c.Start(3, true, {"--etcd-lease-ttl", absl::GetFlag(FLAGS_lease_ttl)}) || !CreateTopic(c)) {
    return;
  }
  LogClient via(c.address(1));
  LatencyHistogram h;
  for (int i = 0; i < absl::GetFlag(FLAGS_metadata_calls); ++i) {
    grpc::ClientContext ctx;
    LogClient::SetDeadline(&ctx);
    conduit::log::v1::GetMetadataResponse m;
    const absl::Time t0 = absl::Now();
    (void)via.stub()->GetMetadata(&ctx, {}, &m);
    h.Record(static_cast<uint64_t>(absl::ToInt64Nanoseconds(absl::Now() - t0)));
  }
  std::printf("GetMetadata (3 brokers, 1 topic x %d): p50 %.0f µs  p99 %.0f µs  max %.0f µs\n",
              absl::GetFlag(FLAGS_partitions), h.Quantile(0.5) / 1e3, h.Quantile(0.99) / 1e3,
              h.Quantile(1.0) / 1e3);
  // SIGKILL broker 3; watch broker 1's metadata until none of the partitions leads on it.
  const absl::Time killed = absl::Now();
  c.Kill(3);
  while (absl::Now() - killed < absl::Seconds(30)) {
    grpc::ClientContext ctx;
    LogClient::SetDeadline(&ctx);
    conduit::log::v1::GetMetadataResponse m;
    bool still_led = false;
    if (via.stub()->GetMetadata(&ctx, {}, &m).ok()) {
      for (const auto& t : m.topics())
        for (const auto& p : t.partitions()) still_led |= p.leader() == 3;
    }
    if (!still_led) break;
    absl::SleepFor(absl::Milliseconds(5));
  }
  std::printf("SIGKILL -> partitions offline in metadata: %.2f s (lease TTL %s)\n",
              absl::ToDoubleSeconds(absl::Now() - killed), absl::GetFlag(FLAGS_lease_ttl).c_str());
}

}  // namespace
}  // namespace conduit::bench

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  std::printf("cluster_bench: %d records of 100 B, %d partitions, idempotent Producer, sync\n",
              absl::GetFlag(FLAGS_records), absl::GetFlag(FLAGS_partitions));
  conduit::bench::ProduceRun("single node", 1, false);
  conduit::bench::ProduceRun("cluster of 1 broker", 1, true);
  conduit::bench::ProduceRun("cluster of 3 brokers", 3, true);
  conduit::bench::MetadataAndFailoverRun();
  return 0;
}
