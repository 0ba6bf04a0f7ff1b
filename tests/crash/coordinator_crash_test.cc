// SIGKILL conduit-standalone while a group member and a memberless (manual) group commit offsets,
// restart it on the same data directory, and check after every cycle that no acknowledged commit
// was lost: each partition's committed offset is at least the last one acknowledged (and at most
// the last one sent), and the member resumes with the same id, epoch and partitions.
//
// Cycles: 3 by default; CONDUIT_CRASH_CYCLES=N for more.

#include <atomic>
#include <mutex>
#include <thread>

#include <gtest/gtest.h>

#include "common/testing/temp_dir.h"
#include "tests/support/coordinator_client.h"
#include "tests/support/log_client.h"
#include "tests/support/server_process.h"

namespace conduit::testing {
namespace {

constexpr int kPartitions = 4;
constexpr int kRecordsPerCycle = 4000;  // per partition; commits stay below the high watermark

struct Progress {
  std::mutex mu;
  int64_t sent[2][kPartitions] = {};   // [group][partition]: highest offset sent
  int64_t acked[2][kPartitions] = {};  // highest offset acknowledged OK
};

void Produce(LogClient& log, int records_per_partition) {
  for (int p = 0; p < kPartitions; ++p) {
    for (int done = 0; done < records_per_partition; done += 500) {
      logpb::ProduceRequest req;
      req.set_topic("events");
      for (int i = 0; i < 500; ++i) {
        auto* r = req.add_records();
        r->set_partition(p);
        r->set_value("x");
      }
      logpb::ProduceResponse resp;
      ASSERT_TRUE(log.Produce(req, &resp).ok());
    }
  }
}

TEST(CoordinatorCrash, AcknowledgedCommitsAndMembershipSurviveSigkill) {
  const char* bin_dir = std::getenv("CONDUIT_BIN_DIR");
  ASSERT_NE(bin_dir, nullptr);
  const std::string binary = std::string(bin_dir) + "/conduit-standalone";
  const char* cycles_env = std::getenv("CONDUIT_CRASH_CYCLES");
  const int cycles = cycles_env ? std::atoi(cycles_env) : 3;
  TempDir dir;
  Progress progress;
  cpb::HeartbeatResponse member;
  const char* kGroups[2] = {"members", "manual"};
  int64_t total_acked = 0;

  for (int cycle = 0; cycle <= cycles; ++cycle) {
    ServerProcess server(binary, dir.Sub("data"), dir.path());
    ASSERT_TRUE(server.running()) << "see " << dir.path() << "/server.log";
    LogClient log(server.address());
    CoordinatorClient groups(server.address());
    if (cycle == 0) {
      ASSERT_TRUE(log.CreateTopic("events", kPartitions).ok());
      ASSERT_TRUE(groups.Join("members", {"events"}, &member, absl::Minutes(5)).ok());
      ASSERT_EQ(member.assignment(0).partitions_size(), kPartitions);
    } else {
      // Check what the last cycle acknowledged.
      for (int g = 0; g < 2; ++g) {
        cpb::FetchOffsetsResponse offsets;
        ASSERT_TRUE(groups.FetchOffsets(kGroups[g], &offsets).ok());
        ASSERT_EQ(offsets.offsets_size(), kPartitions) << kGroups[g];
        std::lock_guard<std::mutex> lock(progress.mu);
        for (const cpb::CommittedOffset& o : offsets.offsets()) {
          EXPECT_GE(o.offset(), progress.acked[g][o.partition()])
              << kGroups[g] << " partition " << o.partition() << " lost an acknowledged commit";
          EXPECT_LE(o.offset(), progress.sent[g][o.partition()]);
          progress.acked[g][o.partition()] = o.offset();
        }
      }
      // The member carries on where it was: same id, same epoch, same partitions.
      cpb::HeartbeatResponse next;
      grpc::Status s = groups.Beat("members", member, &next);
      ASSERT_TRUE(s.ok()) << s.error_message();
      EXPECT_EQ(next.member_epoch(), member.member_epoch());
      EXPECT_EQ(next.assignment(0).partitions_size(), kPartitions);
      member = next;
    }
    if (cycle == cycles) {
      std::printf("coordinator crash cycles: %d, commits acknowledged: %lld\n", cycles,
                  static_cast<long long>(total_acked));
      EXPECT_GT(total_acked, 0);
      server.Kill(SIGTERM);
      break;
    }
    Produce(log, kRecordsPerCycle);

    std::atomic<bool> stop{false};
    std::atomic<int64_t> acked_this_cycle{0};
    std::vector<std::thread> threads;
    for (int g = 0; g < 2; ++g) {
      for (int p = 0; p < kPartitions; ++p) {
        threads.emplace_back([&, g, p] {
          CoordinatorClient own(server.address());
          while (!stop.load()) {
            int64_t offset;
            {
              std::lock_guard<std::mutex> lock(progress.mu);
              offset = ++progress.sent[g][p];
            }
            const std::string member_id = g == 0 ? member.member_id() : "";
            const int32_t epoch = g == 0 ? member.member_epoch() : -1;
            grpc::Status s = own.Commit(kGroups[g], member_id, epoch, "events", p, offset);
            if (!s.ok()) break;  // the server is gone
            std::lock_guard<std::mutex> lock(progress.mu);
            progress.acked[g][p] = std::max(progress.acked[g][p], offset);
            acked_this_cycle.fetch_add(1);
          }
        });
      }
    }
    absl::SleepFor(absl::Milliseconds(700));
    server.Kill(SIGKILL);
    stop.store(true);
    for (auto& t : threads) t.join();
    total_acked += acked_this_cycle.load();
    EXPECT_GT(acked_this_cycle.load(), 0) << "cycle " << cycle;
  }
}

}  // namespace
}  // namespace conduit::testing
