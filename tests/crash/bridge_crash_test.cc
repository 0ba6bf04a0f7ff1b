// A bridge under SIGKILL. A conduit-standalone holds the topic (a backlog of 10,000
// records) and the group; a separate conduit-queue runs the bridge into its queue and is
// SIGKILLed at random moments while it works through the backlog, then restarted on the same
// data directory. At the end every
// record is exactly one job, carrying its source (partition, offset): a crash between the
// durable enqueue and the commit must not enqueue twice, and one before the enqueue must not
// skip.
//
// Cycles: 4 by default; CONDUIT_CRASH_CYCLES=N for more.

#include <stdlib.h>

#include <filesystem>
#include <random>
#include <set>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "common/testing/temp_dir.h"
#include "tests/support/bridge_client.h"
#include "tests/support/server_process.h"

namespace conduit::testing {
namespace {

constexpr int kRecords = 10'000;
constexpr int kPartitions = 4;

std::string Binary(const char* name) {
  const char* dir = std::getenv("CONDUIT_BIN_DIR");
  return std::string(dir ? dir : "build/bin") + "/" + name;
}

TEST(BridgeCrash, EveryRecordBecomesExactlyOneJobAcrossSigkills) {
  const char* cycles_env = std::getenv("CONDUIT_CRASH_CYCLES");
  const int cycles = cycles_env ? std::atoi(cycles_env) : 4;
  TempDir dir;
  std::filesystem::create_directories(dir.Sub("log"));
  std::filesystem::create_directories(dir.Sub("q"));
  ServerProcess log_server(Binary("conduit-standalone"), dir.Sub("log-data"), dir.Sub("log"));
  ASSERT_TRUE(log_server.running()) << "see " << dir.path() << "/log/server.log";
  LogClient log(log_server.address());
  ASSERT_TRUE(log.CreateTopic("events", kPartitions).ok());
  // The backlog first, so that the bridge is busy (poll, enqueue, commit, again) when killed.
  for (int i = 0; i < kRecords; i += 500) {
    logpb::ProduceRequest req;
    req.set_topic("events");
    for (int j = i; j < i + 500; ++j) {
      auto* r = req.add_records();
      r->set_partition(j % kPartitions);
      r->set_value(absl::StrCat("r", j));
    }
    logpb::ProduceResponse resp;
    ASSERT_TRUE(log.Produce(req, &resp).ok()) << i;
  }
  // Most cycles crash exactly between a durable enqueue and its commit: the server kills itself
  // there (CONDUIT_BRIDGE_KILL_AFTER_ENQUEUE=N, its Nth enqueue). The last crashes at a random
  // moment, from outside.
  const std::vector<std::string> queue_args = {"--bridge-bootstrap", log_server.address()};
  std::mt19937 rng(17);
  std::unique_ptr<ServerProcess> queue_server;
  auto start = [&](bool kill_at_the_seam) {
    if (kill_at_the_seam) {
      ::setenv("CONDUIT_BRIDGE_KILL_AFTER_ENQUEUE", std::to_string(1 + rng() % 3).c_str(), 1);
    }
    queue_server = std::make_unique<ServerProcess>(Binary("conduit-queue"), dir.Sub("q-data"),
                                                   dir.Sub("q"), queue_args);
    ::unsetenv("CONDUIT_BRIDGE_KILL_AFTER_ENQUEUE");
    return queue_server->running();
  };
  auto await_self_kill = [&] {
    const absl::Time give_up = absl::Now() + absl::Seconds(30);
    while (!queue_server->Exited() && absl::Now() < give_up) {
      absl::SleepFor(absl::Milliseconds(10));
    }
    return queue_server->Exited();
  };
  ASSERT_TRUE(start(true)) << "see " << dir.path() << "/q/server.log";
  {
    BridgeClient client(queue_server->address());
    ASSERT_TRUE(client.CreateQueue("jobs").ok());
    qpb::BridgeSpec spec;
    spec.set_name("crash");
    spec.set_topic("events");
    spec.set_queue("jobs");
    ASSERT_TRUE(client.CreateBridge(spec).ok());
  }
  ASSERT_TRUE(await_self_kill()) << "the fault point was not reached";
  std::printf("cycle 0: killed between an enqueue and its commit\n");
  for (int cycle = 1; cycle < cycles; ++cycle) {
    const bool at_the_seam = cycle + 1 < cycles;
    ASSERT_TRUE(start(at_the_seam)) << "see " << dir.path() << "/q/server.log";
    if (at_the_seam) {
      ASSERT_TRUE(await_self_kill()) << "cycle " << cycle << ": the fault point was not reached";
    } else {
      absl::SleepFor(absl::Milliseconds(20 + rng() % 80));
      queue_server->Kill(SIGKILL);
    }
    std::printf("cycle %d: killed %s\n", cycle,
                at_the_seam ? "between an enqueue and its commit" : "at a random moment");
  }
  ASSERT_TRUE(start(false)) << "see " << dir.path() << "/q/server.log";

  BridgeClient client(queue_server->address());
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (client.Jobs("jobs") < kRecords && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(100));
  }
  qpb::BridgeInfo info;
  while (absl::Now() < deadline) {
    info = client.Describe("crash");
    if (info.lag_error().empty() && info.lag_records() == 0) break;
    absl::SleepFor(absl::Milliseconds(100));
  }
  EXPECT_EQ(info.lag_records(), 0) << info.ShortDebugString();
  std::set<std::pair<int32_t, int64_t>> sources;
  std::set<std::string> payloads;
  int jobs = 0;
  while (true) {
    const std::vector<qpb::LeasedJob> leased = client.LeaseAll("jobs");
    if (leased.empty()) break;
    for (const qpb::LeasedJob& job : leased) {
      ++jobs;
      EXPECT_TRUE(sources.emplace(job.source().partition(), job.source().offset()).second)
          << "two jobs for " << job.source().partition() << "/" << job.source().offset();
      payloads.insert(job.payload());
    }
  }
  std::printf("bridge crash: %d cycles, %d records, %d jobs, %zu distinct sources\n", cycles,
              kRecords, jobs, sources.size());
  EXPECT_EQ(jobs, kRecords) << "one job per record";
  EXPECT_EQ(payloads.size(), static_cast<size_t>(kRecords)) << "no record skipped";
  for (int p = 0; p < kPartitions; ++p) {
    for (int64_t o = 0; o < kRecords / kPartitions; ++o) {
      if (!sources.contains({p, o})) {
        ADD_FAILURE() << "no job for " << p << "/" << o;
        return;
      }
    }
  }
  queue_server->Kill(SIGTERM);
  log_server.Kill(SIGTERM);
}

}  // namespace
}  // namespace conduit::testing
