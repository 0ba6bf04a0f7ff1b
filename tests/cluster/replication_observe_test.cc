// Replication made visible on a cluster of real processes: etcd and
// three conduit-broker, RF 3, min in-sync 2, 2 s leases, a 2 s replica lag time. DescribeTopic at
// the leader, its /metrics and `conduit topic describe` follow a follower that stops (SIGSTOP)
// and comes back (SIGCONT).

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <regex>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "tests/cluster/cluster_fixture.h"
#include "tests/support/http_metrics.h"

namespace conduit::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kLagTime[] = "2s";

// The value of the first sample of `name` whose labels include every one of `labels`
// (`key="value"` each); -1 when there is none.
double Sample(const std::string& text, const std::string& name,
              const std::vector<std::string>& labels = {}) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (!absl::StartsWith(line, name) || line.size() <= name.size()) continue;
    const char next = line[name.size()];
    if (next != ' ' && next != '{') continue;
    bool all = true;
    for (const std::string& l : labels) all = all && absl::StrContains(line, l);
    double value = 0;
    if (all && absl::SimpleAtod(line.substr(line.rfind(' ') + 1), &value)) return value;
  }
  return -1;
}

class ReplicationObserveTest : public ClusterTest {
 protected:
  void StartReplicatedCluster() {
    for (int32_t id = 1; id <= 3; ++id) {
      ASSERT_TRUE(
          StartBroker(id, {"--replica-lag-time", kLagTime, "--metrics-listen", "127.0.0.1:0"}))
          << "broker " << id;
    }
    ASSERT_TRUE(Eventually([&] { return Metadata(1).brokers_size() == 3; }));
    ASSERT_TRUE(CreateTopic(client(1), "t", 1, 3).ok());
    ASSERT_TRUE(AwaitApplied("t", 1));
  }

  int32_t Leader(int32_t via) {
    auto parts = Partitions(via, "t");
    return parts.empty() ? -1 : parts[0].leader();
  }

  grpc::Status Produce(int32_t via, const std::string& value) {
    return ProduceOne(via, "t", 0, value);
  }

  // DescribeTopic's view of partition 0 at broker `id`.
  logpb::PartitionInfo Described(int32_t id) { return ClusterTest::Described(id, "t", 0); }
  static const logpb::FollowerStatus* Follower(const logpb::PartitionInfo& p, int32_t broker) {
    for (const auto& f : p.followers()) {
      if (f.broker() == broker) return &f;
    }
    return nullptr;
  }
  static double SinceCaughtUp(const logpb::FollowerStatus& f) {
    return absl::ToDoubleSeconds(absl::Seconds(f.since_caught_up().seconds()) +
                                 absl::Nanoseconds(f.since_caught_up().nanos()));
  }

  // Broker `id`'s /metrics, at the address it logged at start.
  std::string Metrics(int32_t id) {
    static const std::regex kServing("metrics on http://127\\.0\\.0\\.1:([0-9]+)/metrics");
    std::smatch m;
    const std::string text = log(id);
    if (!std::regex_search(text, m, kServing)) return "";
    return HttpGetMetrics(std::stoi(m[1]));
  }
  double Gauge(int32_t id, const std::string& name, const std::vector<std::string>& labels = {}) {
    return Sample(Metrics(id), name, labels);
  }
};

TEST_F(ReplicationObserveTest, DescribeMetricsAndCliFollowAFollowerLeavingAndRejoining) {
  StartReplicatedCluster();
  const int32_t leader = Leader(1);
  ASSERT_NE(leader, -1);
  const int32_t f1 = leader % 3 + 1, f2 = f1 % 3 + 1;
  const std::string f1_label = absl::StrCat("follower=\"", f1, "\"");
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(Produce(leader, absl::StrCat("v", i)).ok()) << i;

  // In sync: both followers hold the whole log.
  logpb::PartitionInfo p;
  ASSERT_TRUE(Eventually([&] {
    p = Described(leader);
    return p.followers_size() == 2 && p.followers(0).lag_records() == 0 &&
           p.followers(1).lag_records() == 0;
  })) << p.DebugString();
  EXPECT_EQ(p.role(), logpb::REPLICA_ROLE_LEADER);
  EXPECT_THAT(p.replicas(), ::testing::UnorderedElementsAre(1, 2, 3));
  EXPECT_THAT(p.isr(), ::testing::UnorderedElementsAre(1, 2, 3));
  for (const auto& f : p.followers()) {
    EXPECT_TRUE(f.in_sync()) << f.broker();
    EXPECT_EQ(f.log_end_offset(), 5) << f.broker();
  }
  const logpb::PartitionInfo at_follower = Described(f1);
  EXPECT_EQ(at_follower.role(), logpb::REPLICA_ROLE_FOLLOWER);
  EXPECT_EQ(at_follower.followers_size(), 0) << "only the leader knows its followers' progress";
  EXPECT_THAT(at_follower.isr(), ::testing::UnorderedElementsAre(1, 2, 3));
  ASSERT_TRUE(Eventually([&] {
    const std::string m = Metrics(leader);
    return Sample(m, "conduit_cluster_under_replicated_partitions") == 0 &&
           Sample(m, "conduit_log_follower_lag_records", {f1_label}) == 0;
  })) << Metrics(leader);
  EXPECT_GE(Gauge(leader, "conduit_cluster_leader_elections_total"), 1)
      << "placing the partition on it counts";

  // One follower stops: past the lag time it leaves the in-sync set, and its lag grows.
  broker(f1).Signal(SIGSTOP);
  ASSERT_TRUE(Eventually([&] { return Described(leader).isr_size() == 2; }));
  ASSERT_TRUE(Produce(leader, "while-stopped").ok()) << "two in sync meet min_insync_replicas";
  p = Described(leader);
  EXPECT_THAT(p.isr(), ::testing::Not(::testing::Contains(f1)));
  ASSERT_NE(Follower(p, f1), nullptr);
  EXPECT_FALSE(Follower(p, f1)->in_sync());
  EXPECT_GE(Follower(p, f1)->lag_records(), 1);
  const double first = SinceCaughtUp(*Follower(p, f1));
  EXPECT_GE(first, 2.0) << "behind for longer than the lag time";
  EXPECT_TRUE(Eventually([&] {
    const logpb::FollowerStatus* f = Follower(Described(leader), f1);
    return f != nullptr && SinceCaughtUp(*f) >= first + 0.5;
  })) << "seconds since caught up keep growing";
  EXPECT_TRUE(Eventually([&] {
    const std::string m = Metrics(leader);
    return Sample(m, "conduit_cluster_under_replicated_partitions") == 1 &&
           Sample(m, "conduit_cluster_under_min_isr_partitions") == 0 &&
           Sample(m, "conduit_log_isr_changes_total", {"kind=\"shrink\"", "result=\"ok\""}) >= 1 &&
           Sample(m, "conduit_log_follower_lag_seconds", {f1_label}) >= 2;
  })) << Metrics(leader);

  // `conduit topic describe` at the leader: the replication columns and a lag line per
  // follower.
  const std::string cli =
      std::string(std::getenv("CONDUIT_BIN_DIR") ? std::getenv("CONDUIT_BIN_DIR") : "build/bin") +
      "/conduit --addr " + address(leader) + " topic describe t 2>&1";
  std::string out;
  if (FILE* pipe = ::popen(cli.c_str(), "r")) {
    char buf[4096];
    for (size_t n; (n = std::fread(buf, 1, sizeof(buf), pipe)) > 0;) out.append(buf, n);
    EXPECT_EQ(::pclose(pipe), 0) << out;
  }
  EXPECT_THAT(out, HasSubstr("replication factor 3"));
  EXPECT_THAT(out, ::testing::ContainsRegex("PARTITION +LEADER +EPOCH +REPLICAS +ISR"));
  EXPECT_THAT(out, HasSubstr("1,2,3"));
  EXPECT_THAT(out,
              HasSubstr(absl::StrCat("followers of the partitions broker ", leader, " leads")));
  EXPECT_THAT(out, ::testing::ContainsRegex(absl::StrCat("\n0 +", f1, " +no +")));
  EXPECT_THAT(out, ::testing::ContainsRegex(absl::StrCat("\n0 +", f2, " +yes +")));

  // The second stops too: below min in-sync.
  broker(f2).Signal(SIGSTOP);
  ASSERT_TRUE(Eventually([&] { return Described(leader).isr_size() == 1; }));
  EXPECT_TRUE(Eventually([&] {
    return Gauge(leader, "conduit_cluster_under_min_isr_partitions") == 1;
  })) << Metrics(leader);

  // Both come back: in sync again once caught up.
  broker(f1).Signal(SIGCONT);
  broker(f2).Signal(SIGCONT);
  ASSERT_TRUE(Eventually([&] {
    p = Described(leader);
    return p.isr_size() == 3 && p.followers_size() == 2 && p.followers(0).in_sync() &&
           p.followers(1).in_sync() && p.followers(0).lag_records() == 0 &&
           p.followers(1).lag_records() == 0;
  })) << p.DebugString();
  EXPECT_TRUE(Eventually([&] {
    const std::string m = Metrics(leader);
    return Sample(m, "conduit_cluster_under_replicated_partitions") == 0 &&
           Sample(m, "conduit_cluster_under_min_isr_partitions") == 0 &&
           Sample(m, "conduit_log_isr_changes_total", {"kind=\"expand\"", "result=\"ok\""}) >= 2;
  })) << Metrics(leader);
}

}  // namespace
}  // namespace conduit::testing
