// Group coordinator benchmark: prints figures, asserts nothing.
//
//   coordinator_bench [--members=50] [--leavers=10] [--partitions=120] [--heartbeat_ms=100]
//                     [--session_ms=1000] [--seconds=3]
//
// Over real gRPC to an in-process server on 127.0.0.1:0 hosting the log broker and the
// coordinator (which asks the broker over gRPC, as in conduit-standalone). Members are threads
// that heartbeat at the interval the coordinator gives them (--heartbeat_ms) and always report
// what they own. "Converged" means the group is STABLE: every member at the group epoch, owning
// exactly its target, nothing pending; it is polled every 2 ms.
// 1. Rebalance convergence as members join one at a time, 1 → --members (each join waits for
//    the previous convergence), and as --members join at once.
// 2. As --leavers leave at once (LeaveGroup), and as --leavers crash (stop heartbeating: their
//    sessions, --session_ms, must expire first).
// 3. Offset commits per second (durable, fsynced, group-committed) with 1, 8 and 32 members each
//    committing one of its partitions per request, p50/p99 latency.

#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/time/clock.h"
#include "bench/histogram.h"
#include "common/grpc/server_runner.h"
#include "common/runtime/runtime.h"
#include "common/testing/temp_dir.h"
#include "services/coordinator/coordinator_node.h"
#include "services/log_broker/log_broker_node.h"
#include "tests/support/coordinator_client.h"
#include "tests/support/log_client.h"

ABSL_FLAG(int, members, 50, "members that join");
ABSL_FLAG(int, leavers, 10, "members that leave (and that crash)");
ABSL_FLAG(int, partitions, 120, "partitions of the subscribed topic");
ABSL_FLAG(int, heartbeat_ms, 100, "heartbeat interval the coordinator gives members");
ABSL_FLAG(int, session_ms, 1000, "members' session timeout");
ABSL_FLAG(double, seconds, 3, "measured seconds per commit run");

namespace conduit::bench {
namespace {

using testing::CoordinatorClient;
using testing::cpb::HeartbeatResponse;
namespace co = ::conduit::coordinator;

struct Server {
  testing::TempDir dir;
  prometheus::Registry registry;
  runtime::Runtime runtime;
  std::unique_ptr<log_broker::LogBrokerNode> broker;
  std::unique_ptr<co::CoordinatorNode> node;
  std::unique_ptr<grpc_util::RunningServer> server;

  Server() {
    broker = *log_broker::LogBrokerNode::Open(dir.Sub("data"), registry, &runtime);
    co::CoordinatorNodeOptions options;
    options.coordinator.heartbeat_interval = absl::Milliseconds(absl::GetFlag(FLAGS_heartbeat_ms));
    options.coordinator.min_session_timeout = absl::Milliseconds(100);
    options.sweep_interval = absl::Milliseconds(50);
    options.lag_interval = absl::Hours(1);
    node = *co::CoordinatorNode::Open(dir.Sub("data"), registry, &runtime, options);
    server = *grpc_util::StartServer({}, {broker->service(), node->service()});
    node->SetBrokerAddress(server->address());
    testing::LogClient log(server->address());
    if (!log.CreateTopic("events", absl::GetFlag(FLAGS_partitions)).ok()) std::abort();
  }
  ~Server() {
    broker->BeginShutdown();
    server->Shutdown();
  }
};

// A member on its own thread: heartbeats at the given interval, reporting its assignment.
class Member {
 public:
  Member(const std::string& address, const std::string& group) : client_(address), group_(group) {
    const absl::Duration session = absl::Milliseconds(absl::GetFlag(FLAGS_session_ms));
    if (!client_.Join(group_, {"events"}, &last_, session).ok()) std::abort();
    thread_ = std::thread([this] { Loop(); });
  }
  ~Member() {
    Silence();
    if (thread_.joinable()) thread_.join();
  }
  // Stops heartbeating at once (a crash, as the coordinator sees it).
  void Silence() { stop_.store(true); }
  // Leaves the group now (LeaveGroup), and stops heartbeating.
  void Leave() {
    Silence();
    testing::cpb::LeaveGroupRequest req;
    req.set_group_id(group_);
    req.set_member_id(last().member_id());
    testing::cpb::LeaveGroupResponse resp;
    (void)client_.Call(&testing::cpb::GroupCoordinator::Stub::LeaveGroup, req, &resp);
  }
  HeartbeatResponse last() {
    absl::MutexLock lock(&mu_);
    return last_;
  }
  CoordinatorClient& client() { return client_; }

 private:
  void Loop() {
    while (!stop_.load()) {
      absl::SleepFor(absl::Seconds(last_.heartbeat_interval().seconds()) +
                     absl::Nanoseconds(last_.heartbeat_interval().nanos()));
      if (stop_.load()) return;
      HeartbeatResponse next;
      if (!client_.Beat(group_, last_, &next).ok()) return;
      absl::MutexLock lock(&mu_);
      last_ = next;
    }
  }

  CoordinatorClient client_;
  const std::string group_;
  absl::Mutex mu_;
  HeartbeatResponse last_;  // written by the member's thread under mu_ (read there without)
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// Waits until `group` is STABLE with `members` members; returns how long that took from `since`.
absl::Duration Converge(co::GroupCoordinator* coordinator, const std::string& group, int members,
                        absl::Time since) {
  while (absl::Now() - since < absl::Seconds(60)) {
    for (const co::GroupListing& g : coordinator->List()) {
      if (g.group_id == group && g.members == members && g.state == co::GroupState::kStable) {
        return absl::Now() - since;
      }
    }
    absl::SleepFor(absl::Milliseconds(2));
  }
  std::printf("  (did not converge within 60 s)\n");
  return absl::InfiniteDuration();
}

double Ms(absl::Duration d) { return absl::ToDoubleMilliseconds(d); }

void Rebalances(Server& s) {
  const int n = absl::GetFlag(FLAGS_members), leavers = absl::GetFlag(FLAGS_leavers);
  const double hb = absl::GetFlag(FLAGS_heartbeat_ms);
  co::GroupCoordinator* coordinator = s.node->coordinator();
  std::printf("rebalance convergence (%d partitions, heartbeat %.0f ms, session %d ms)\n",
              absl::GetFlag(FLAGS_partitions), hb, absl::GetFlag(FLAGS_session_ms));

  std::vector<std::unique_ptr<Member>> members;
  std::vector<double> per_join;
  for (int i = 1; i <= n; ++i) {
    const absl::Time start = absl::Now();
    members.push_back(std::make_unique<Member>(s.server->address(), "one-by-one"));
    per_join.push_back(Ms(Converge(coordinator, "one-by-one", i, start)));
    if (i == 1 || i == 2 || i == 10 || i == 25 || i == n) {
      std::printf("  join %2d -> %2d members: %8.1f ms (%.1f heartbeats)\n", i - 1, i,
                  per_join.back(), per_join.back() / hb);
    }
  }
  std::sort(per_join.begin(), per_join.end());
  std::printf("  joins 1..%d: median %.1f ms, max %.1f ms\n", n, per_join[per_join.size() / 2],
              per_join.back());

  absl::Time start = absl::Now();
  for (int i = 0; i < leavers; ++i) members[i]->Leave();
  absl::Duration took = Converge(coordinator, "one-by-one", n - leavers, start);
  std::printf("  %d leave at once (%d -> %d): %8.1f ms (%.1f heartbeats)\n", leavers, n,
              n - leavers, Ms(took), Ms(took) / hb);
  members.erase(members.begin(), members.begin() + leavers);

  start = absl::Now();
  for (int i = 0; i < leavers; ++i) members[i]->Silence();
  took = Converge(coordinator, "one-by-one", n - 2 * leavers, start);
  std::printf("  %d crash at once (%d -> %d): %8.1f ms (session %d ms + %.1f heartbeats)\n",
              leavers, n - leavers, n - 2 * leavers, Ms(took), absl::GetFlag(FLAGS_session_ms),
              (Ms(took) - absl::GetFlag(FLAGS_session_ms)) / hb);
  members.clear();

  start = absl::Now();
  std::vector<std::thread> joiners;
  std::vector<std::unique_ptr<Member>> burst(n);
  for (int i = 0; i < n; ++i) {
    joiners.emplace_back([&, i] {
      burst[i] = std::make_unique<Member>(s.server->address(), "burst");
    });
  }
  for (auto& t : joiners) t.join();
  took = Converge(coordinator, "burst", n, start);
  std::printf("  %d join at once (0 -> %d): %8.1f ms (%.1f heartbeats)\n", n, n, Ms(took),
              Ms(took) / hb);
  burst.clear();
}

void Commits(Server& s, int clients) {
  const std::string group = "commits-" + std::to_string(clients);
  std::vector<std::unique_ptr<Member>> members;
  for (int i = 0; i < clients; ++i) {
    members.push_back(std::make_unique<Member>(s.server->address(), group));
  }
  Converge(s.node->coordinator(), group, clients, absl::Now());
  // Every member's assignment after convergence (a heartbeat later, each has its own).
  absl::SleepFor(absl::Milliseconds(3 * absl::GetFlag(FLAGS_heartbeat_ms)));
  std::atomic<bool> stop{false};
  std::atomic<int64_t> rejected{0};
  std::vector<LatencyHistogram> histograms(clients);
  std::vector<std::thread> threads;
  const absl::Time start = absl::Now();
  for (int i = 0; i < clients; ++i) {
    threads.emplace_back([&, i] {
      Member& m = *members[i];
      CoordinatorClient own(s.server->address());
      int64_t offset = 0;
      while (!stop.load()) {
        const HeartbeatResponse last = m.last();
        if (last.assignment_size() == 0) continue;
        const auto& tp = last.assignment(0);
        const absl::Time t0 = absl::Now();
        grpc::Status st = own.Commit(group, last.member_id(), last.member_epoch(), tp.topic(),
                                     tp.partitions(offset % tp.partitions_size()), 0);
        histograms[i].Record(absl::ToInt64Nanoseconds(absl::Now() - t0));
        if (!st.ok()) rejected.fetch_add(1);
        ++offset;
      }
    });
  }
  absl::SleepFor(absl::Seconds(absl::GetFlag(FLAGS_seconds)));
  stop.store(true);
  for (auto& t : threads) t.join();
  const double secs = absl::ToDoubleSeconds(absl::Now() - start);
  LatencyHistogram all;
  for (auto& h : histograms) all.Merge(h);
  std::printf("  %2d members: %8.0f commits/s  p50 %6.2f ms  p99 %6.2f ms  rejected %lld\n",
              clients, all.count() / secs, all.Quantile(0.5) / 1e6, all.Quantile(0.99) / 1e6,
              static_cast<long long>(rejected.load()));
}

}  // namespace
}  // namespace conduit::bench

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  using namespace conduit::bench;
  {
    Server s;
    Rebalances(s);
  }
  {
    Server s;
    std::printf("offset commits (one partition per request, sync durability)\n");
    for (int clients : {1, 8, 32}) Commits(s, clients);
  }
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  std::printf("peak RSS %.0f MB\n", usage.ru_maxrss / 1024.0);
  return 0;
}
