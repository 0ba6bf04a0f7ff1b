// cluster_bench: what a cluster costs and how fast it reacts, on this machine, in one run.
//   1. Produce through the C++ Producer (idempotent, keyed, 100 B values) to a 12-partition
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
#include <fstream>
#include <future>
#include <memory>
#include <sstream>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "bench/histogram.h"
#include "client/producer.h"
#include "common/testing/etcd_process.h"
#include "common/testing/temp_dir.h"
#include "tests/support/log_client.h"
#include "tests/support/server_process.h"

ABSL_FLAG(int, records, 200000, "records per produce run");
ABSL_FLAG(int, partitions, 12, "partitions of the topic");
ABSL_FLAG(std::string, lease_ttl, "2s", "brokers' etcd lease TTL for the failover run");
ABSL_FLAG(int, metadata_calls, 2000, "GetMetadata calls to time");

namespace conduit::bench {
namespace {

using testing::LogClient;
using testing::ServerProcess;

std::string Bin(const std::string& name) {
  const char* dir = std::getenv("CONDUIT_BIN_DIR");
  return std::string(dir ? dir : "build/bin") + "/" + name;
}

// user + system CPU of a process so far.
absl::Duration ProcessCpu(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string line;
  std::getline(in, line);
  std::istringstream fields(line.substr(line.rfind(')') + 2));
  std::string skip;
  for (int i = 0; i < 11; ++i) fields >> skip;  // state .. cmajflt
  long utime = 0, stime = 0;
  fields >> utime >> stime;
  return absl::Seconds(static_cast<double>(utime + stime) / sysconf(_SC_CLK_TCK));
}

absl::Duration SelfCpu() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return absl::DurationFromTimeval(u.ru_utime) + absl::DurationFromTimeval(u.ru_stime);
}

struct Cluster {
  testing::TempDir dir;
  std::unique_ptr<testing::EtcdProcess> etcd;
  std::vector<std::unique_ptr<ServerProcess>> brokers;

  // `n` brokers; without etcd when `cluster` is false (a single node).
  bool Start(int n, bool cluster) {
    if (cluster) {
      etcd = std::make_unique<testing::EtcdProcess>(dir.path());
      if (!etcd->Start().ok()) return false;
    }
    for (int id = 1; id <= n; ++id) {
      const std::string work = dir.Sub(absl::StrCat("b", id));
      std::filesystem::create_directories(work);
      std::vector<std::string> args;
      if (cluster) {
        args = {"--etcd-endpoints", etcd->endpoint(),   "--broker-id",
                std::to_string(id), "--etcd-lease-ttl", absl::GetFlag(FLAGS_lease_ttl)};
      }
      brokers.push_back(
          std::make_unique<ServerProcess>(Bin("conduit-broker"), work + "/data", work, args));
      if (!brokers.back()->running()) return false;
    }
    if (!cluster) return true;
    LogClient c(brokers[0]->address());
    for (int i = 0; i < 200; ++i) {
      grpc::ClientContext ctx;
      LogClient::SetDeadline(&ctx);
      conduit::log::v1::GetMetadataResponse m;
      if (c.stub()->GetMetadata(&ctx, {}, &m).ok() && m.brokers_size() == n) return true;
      absl::SleepFor(absl::Milliseconds(50));
    }
    return false;
  }
  // The bench topic (12 partitions by default) through broker 1; whether it was created.
  bool CreateTopic() const {
    LogClient admin(brokers[0]->address());
    conduit::log::v1::CreateTopicRequest create;
    create.set_name("bench");
    create.set_partitions(absl::GetFlag(FLAGS_partitions));
    conduit::log::v1::CreateTopicResponse created;
    grpc::ClientContext ctx;
    LogClient::SetDeadline(&ctx, absl::Seconds(20));
    return admin.stub()->CreateTopic(&ctx, create, &created).ok();
  }
  absl::Duration BrokersCpu() const {
    absl::Duration d;
    for (const auto& b : brokers) d += ProcessCpu(b->pid());
    return d;
  }
};

void ProduceRun(const char* label, int brokers, bool cluster) {
  Cluster c;
  if (!c.Start(brokers, cluster)) {
    std::printf("%-22s could not start\n", label);
    return;
  }
  if (!c.CreateTopic()) return;
  client::ProducerOptions options;
  options.address = c.brokers[0]->address();
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
  Cluster c;
  if (!c.Start(3, true) || !c.CreateTopic()) return;
  LogClient via(c.brokers[0]->address());
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
  c.brokers[2]->Kill(SIGKILL);
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
