// SIGKILL a conduit-broker process under sync produce load, restart it on the same data
// directory, and check the durability contract: every acknowledged record is present at the
// offset it was acknowledged with, and every partition's offsets are dense (no gaps).
//
// A second test does the same while retention and compaction run every 20 ms: nothing that
// should survive is lost, and nothing they removed comes back.
//
// Cycles: 3 by default; CONDUIT_CRASH_CYCLES=N for more (e.g. 50 in a soak run).

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <thread>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/testing/temp_dir.h"
#include "tests/crash/log_durability.h"
#include "tests/support/log_client.h"
#include "tests/support/server_process.h"

extern char** environ;

namespace conduit::testing {
namespace {

constexpr int kProducers = 8;

// Both durabilities promise that a process crash loses nothing acknowledged: `sync` fsyncs
// before the ack, `interval` acks once the write is in the OS (which outlives the process).
class AckedRecordsSurviveSigkill : public ::testing::TestWithParam<logpb::Durability> {};

TEST_P(AckedRecordsSurviveSigkill, AtTheirAckedOffsetsWithoutGaps) {
  ASSERT_NE(std::getenv("CONDUIT_BIN_DIR"), nullptr) << "CONDUIT_BIN_DIR is set by CTest";
  const std::string binary = BrokerBinary();
  const int cycles = Cycles();
  TempDir dir;
  const std::string data = dir.Sub("data");
  Acked acked;
  std::mt19937 rng(20261129);

  for (int cycle = 0; cycle < cycles; ++cycle) {
    ServerProcess broker(binary, data, dir.path());
    ASSERT_TRUE(broker.running()) << "broker did not start; see " << dir.path() << "/server.log";
    LogClient client(broker.address());
    if (cycle == 0) {
      ASSERT_TRUE(client.CreateTopic(kTopic, kPartitions, GetParam()).ok());
    }
    const int64_t present = VerifyLog(client, acked);
    ASSERT_GE(present, 0);

    std::atomic<bool> stop{false};
    std::atomic<int64_t> acked_this_cycle{0};
    std::vector<std::thread> producers;
    for (int t = 0; t < kProducers; ++t) {
      producers.emplace_back([&, t] {
        LogClient own(broker.address());
        for (int seq = 0; !stop.load(); ++seq) {
          logpb::ProduceRequest request;
          request.set_topic(kTopic);
          const int n = 1 + (seq % 5);
          for (int i = 0; i < n; ++i) {
            std::string key = absl::StrCat("key-", t, "-", (seq + i) % 17);
            AddRecord(&request, absl::StrCat("c", cycle, "-t", t, "-s", seq, "-i", i), &key);
          }
          logpb::ProduceResponse response;
          if (!own.Produce(request, &response, absl::Seconds(5)).ok()) break;  // killed
          std::lock_guard<std::mutex> lock(acked.mu);
          for (int i = 0; i < response.positions_size(); ++i) {
            const auto& pos = response.positions(i);
            auto [it, inserted] =
                acked.records.emplace(std::make_pair(pos.partition(), pos.offset()),
                                      request.records(i).value());
            EXPECT_TRUE(inserted) << "offset acked twice: partition " << pos.partition()
                                  << " offset " << pos.offset();
          }
          acked_this_cycle += response.positions_size();
        }
      });
    }
    // Let load build up, then kill at a random moment.
    absl::SleepFor(absl::Milliseconds(std::uniform_int_distribution<int>(300, 900)(rng)));
    broker.Kill(SIGKILL);
    stop.store(true);
    for (auto& p : producers) p.join();
    EXPECT_GT(acked_this_cycle.load(), 0) << "cycle " << cycle << " acknowledged nothing";
  }

  ServerProcess broker(binary, data, dir.path());
  ASSERT_TRUE(broker.running());
  LogClient client(broker.address());
  const int64_t present = VerifyLog(client, acked);
  std::lock_guard<std::mutex> lock(acked.mu);
  EXPECT_GE(present, static_cast<int64_t>(acked.records.size()));
  std::printf("%s crash cycles: %d, records acked: %zu, records present: %lld\n",
              logpb::Durability_Name(GetParam()).c_str(), cycles, acked.records.size(),
              static_cast<long long>(present));
  const int status = broker.Kill(SIGTERM);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "clean shutdown on SIGTERM";
}

INSTANTIATE_TEST_SUITE_P(Durability, AckedRecordsSurviveSigkill,
                         ::testing::Values(logpb::DURABILITY_SYNC, logpb::DURABILITY_INTERVAL));


// What the maintenance test knows, across restarts.
struct MaintenanceModel {
  std::mutex mu;
  // retained topic: acked (partition, offset) → value; highest log start seen per partition.
  std::map<std::pair<int, int64_t>, std::string> retained_acked;
  std::map<int, int64_t> retained_start;
  // compacted topic: highest acked sequence per key (and whether it was a tombstone); offsets
  // seen removed per partition.
  std::map<std::string, std::pair<int64_t, bool>> compacted_acked;
  // Highest tombstone sequence sent per key, acked or not: a tombstone that became durable
  // without its ack may still remove the key.
  std::map<std::string, int64_t> compacted_tombstone_sent;
  std::map<int, std::set<int64_t>> compacted_removed;
};

int64_t SeqOf(const logpb::Record& r) {
  for (const auto& h : r.headers()) {
    if (h.key() == "seq") return std::stoll(h.value());
  }
  return -1;
}

void VerifyMaintenance(LogClient& client, MaintenanceModel& model) {
  std::lock_guard<std::mutex> lock(model.mu);
  auto describe = [&](int p) {
    grpc::ClientContext ctx;
    LogClient::SetDeadline(&ctx);
    logpb::DescribeTopicRequest request;
    request.set_name("retained");
    logpb::DescribeTopicResponse described;
    EXPECT_TRUE(client.stub()->DescribeTopic(&ctx, request, &described).ok());
    return described.partitions(p);
  };
  for (int p = 0; p < 2; ++p) {
    // Retained: the log start only moves forward, the rest is dense, acked records are there.
    // Retention keeps running while we look: retry until a read sees one stable log start.
    logpb::PartitionInfo info;
    std::vector<logpb::Record> records;
    for (int attempt = 0; attempt < 50; ++attempt) {
      info = describe(p);
      records.clear();
      grpc::Status read = client.FetchAll("retained", p, &records, info.log_start_offset());
      if (read.ok() && describe(p).log_start_offset() == info.log_start_offset()) break;
      ASSERT_TRUE(read.ok() || read.error_code() == grpc::StatusCode::OUT_OF_RANGE)
          << read.error_message();
    }
    EXPECT_GE(info.log_start_offset(), model.retained_start[p]) << "removed records came back";
    model.retained_start[p] = info.log_start_offset();
    for (size_t i = 0; i < records.size(); ++i) {
      ASSERT_EQ(records[i].offset(), info.log_start_offset() + static_cast<int64_t>(i)) << "gap";
    }
    EXPECT_EQ(info.record_count(), static_cast<int64_t>(records.size())) << "bookkeeping agrees";
    for (const auto& [pos, value] : model.retained_acked) {
      if (pos.first != p || pos.second < info.log_start_offset()) continue;
      const int64_t i = pos.second - info.log_start_offset();
      ASSERT_LT(i, static_cast<int64_t>(records.size())) << "acked record lost at " << pos.second;
      EXPECT_EQ(records[i].value(), value);
    }
  }
  // Compacted: every key's newest record is at least as new as the newest acked, and no offset
  // compaction removed is back.
  std::map<std::string, int64_t> newest;
  for (int p = 0; p < 2; ++p) {
    std::vector<logpb::Record> records;
    ASSERT_TRUE(client.FetchAll("compacted", p, &records).ok());
    std::set<int64_t> present;
    int64_t hw = 0;
    for (const auto& r : records) {
      present.insert(r.offset());
      newest[r.key()] = std::max(newest[r.key()], SeqOf(r));
      hw = r.offset() + 1;
    }
    for (int64_t gone : model.compacted_removed[p]) {
      EXPECT_FALSE(present.contains(gone)) << "compacted record resurrected at offset " << gone;
    }
    for (int64_t o = 0; o < hw; ++o) {
      if (!present.contains(o)) model.compacted_removed[p].insert(o);
    }
  }
  for (const auto& [key, acked] : model.compacted_acked) {
    const auto [seq, tombstone] = acked;
    // A key may be gone if a tombstone at or after its newest acked record was sent (tombstone
    // retention is 1 ms).
    auto sent = model.compacted_tombstone_sent.find(key);
    const bool may_be_gone = sent != model.compacted_tombstone_sent.end() && sent->second >= seq;
    if (may_be_gone && !newest.contains(key)) continue;
    EXPECT_GE(newest[key], seq) << "latest value of " << key << " lost";
  }
}

TEST(BrokerCrash, RetentionAndCompactionSurviveSigkill) {
  TempDir dir;
  const std::string data = dir.Sub("data");
  MaintenanceModel model;
  std::mt19937 rng(1129);
  const std::vector<std::string> fast_maintenance = {"--log-maintenance-interval", "20ms"};

  for (int cycle = 0; cycle < Cycles(); ++cycle) {
    ServerProcess broker(BrokerBinary(), data, dir.path(), fast_maintenance);
    ASSERT_TRUE(broker.running()) << "see " << dir.path() << "/server.log";
    LogClient client(broker.address());
    if (cycle == 0) {
      for (const char* name : {"retained", "compacted"}) {
        grpc::ClientContext ctx;
        LogClient::SetDeadline(&ctx);
        logpb::CreateTopicRequest create;
        create.set_name(name);
        create.set_partitions(2);
        if (std::string(name) == "retained") {
          create.mutable_config()->set_retention_bytes(20'000);
        } else {
          create.mutable_config()->set_cleanup_policy(logpb::CLEANUP_POLICY_COMPACT);
          create.mutable_config()->mutable_tombstone_retention()->set_nanos(1'000'000);
        }
        logpb::CreateTopicResponse created;
        ASSERT_TRUE(client.stub()->CreateTopic(&ctx, create, &created).ok());
      }
    }
    VerifyMaintenance(client, model);
    if (::testing::Test::HasFatalFailure()) return;

    std::atomic<bool> stop{false};
    std::vector<std::thread> producers;
    for (int t = 0; t < 4; ++t) {
      producers.emplace_back([&, t] {
        LogClient own(broker.address());
        for (int64_t seq = cycle * 1'000'000; !stop.load(); ++seq) {
          logpb::ProduceRequest retained;
          retained.set_topic("retained");
          std::string value = absl::StrCat("c", cycle, "t", t, "s", seq, std::string(100, 'x'));
          AddRecord(&retained, value, nullptr, static_cast<int>(seq % 2));
          logpb::ProduceResponse r1;
          if (!own.Produce(retained, &r1, absl::Seconds(5)).ok()) break;
          {
            std::lock_guard<std::mutex> lock(model.mu);
            model.retained_acked[{r1.positions(0).partition(), r1.positions(0).offset()}] = value;
          }
          logpb::ProduceRequest compacted;
          compacted.set_topic("compacted");
          const std::string key = absl::StrCat("k", t, "-", seq % 40);
          auto* record = compacted.add_records();
          record->set_key(key);
          if (seq % 7 != 0) {
            record->set_value(absl::StrCat("v", seq));
          } else {  // a tombstone
            std::lock_guard<std::mutex> lock(model.mu);
            model.compacted_tombstone_sent[key] = seq;
          }
          auto* header = record->add_headers();
          header->set_key("seq");
          header->set_value(std::to_string(seq));
          logpb::ProduceResponse r2;
          if (!own.Produce(compacted, &r2, absl::Seconds(5)).ok()) break;
          std::lock_guard<std::mutex> lock(model.mu);
          model.compacted_acked[key] = std::max(model.compacted_acked[key],
                                                std::make_pair(seq, seq % 7 == 0));
        }
      });
    }
    absl::SleepFor(absl::Milliseconds(std::uniform_int_distribution<int>(400, 1200)(rng)));
    broker.Kill(SIGKILL);
    stop.store(true);
    for (auto& p : producers) p.join();
  }
  ServerProcess broker(BrokerBinary(), data, dir.path(), fast_maintenance);
  ASSERT_TRUE(broker.running());
  LogClient client(broker.address());
  VerifyMaintenance(client, model);
  std::lock_guard<std::mutex> lock(model.mu);
  std::printf("maintenance crash cycles: %d, retained log starts %lld/%lld, compacted holes %zu/%zu\n",
              Cycles(), static_cast<long long>(model.retained_start[0]),
              static_cast<long long>(model.retained_start[1]), model.compacted_removed[0].size(),
              model.compacted_removed[1].size());
  EXPECT_GT(model.retained_start[0] + model.retained_start[1], 0) << "retention ran";
  EXPECT_GT(model.compacted_removed[0].size() + model.compacted_removed[1].size(), 0u)
      << "compaction ran";
  broker.Kill(SIGTERM);
}

}  // namespace
}  // namespace conduit::testing
