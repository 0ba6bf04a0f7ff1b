// Retention, compaction and partition statistics, on a fake store with a fake clock: the rules,
// without RocksDB or gRPC.

#include <map>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "services/log_broker/tests/broker_fixture.h"

namespace conduit::log_broker {
namespace {

using ::testing::ElementsAre;
using namespace ::conduit::log_broker::testing;  // NOLINT: test fixture helpers

TopicConfigPatch Retention(absl::Duration time, int64_t bytes = -1) {
  TopicConfigPatch patch;
  patch.retention_time = time;
  patch.retention_bytes = bytes;
  return patch;
}

TopicConfigPatch Compacted(absl::Duration tombstone_retention) {
  TopicConfigPatch patch;
  patch.cleanup_policy = CleanupPolicy::kCompact;
  patch.tombstone_retention = tombstone_retention;
  return patch;
}

ProduceRecordArgs Tombstone(std::string key) {
  ProduceRecordArgs r;
  r.data.key = std::move(key);
  return r;
}
// --- retention ---------------------------------------------------------------------------

TEST_F(LifecycleTest, RetentionByTimeRemovesOldRecordsAndMovesTheLogStart) {
  ASSERT_TRUE(broker_->CreateTopic("t", 1, Retention(absl::Hours(1))).ok());
  const absl::Time t0 = clock_.Now();
  ASSERT_TRUE(Produce("t", {To(0, "a"), To(0, "b"), To(0, "c")}).ok());  // t0
  clock_.Advance(absl::Minutes(30));
  ASSERT_TRUE(Produce("t", {To(0, "d"), To(0, "e")}).ok());  // t0+30m
  clock_.Advance(absl::Minutes(31));                         // cutoff t0+1m: a, b, c expire
  broker_->RunMaintenance();

  PartitionDescription p = Describe("t");
  EXPECT_EQ(p.meta.log_start_offset, 3);
  EXPECT_EQ(p.meta.next_offset, 5);
  EXPECT_EQ(p.meta.record_count, 2);
  EXPECT_EQ(p.meta.bytes, 2);
  EXPECT_EQ(p.oldest_append_time, t0 + absl::Minutes(30));
  auto below = Fetch({"t", 0, 1});
  EXPECT_EQ(below.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_NE(below.status().message().find("valid offsets are 3..5"), std::string::npos)
      << below.status();
  auto rest = ReadAll("t", 0);
  ASSERT_EQ(rest.size(), 2u);
  EXPECT_EQ(*rest[0].data.value, "d");
  EXPECT_EQ(store_.record_count(), 2u) << "the store really dropped them";

  broker_->RunMaintenance();  // nothing more is due
  EXPECT_EQ(Describe("t").meta.log_start_offset, 3);
}

TEST_F(LifecycleTest, RetentionBySizeKeepsTheNewestWithinTheLimit) {
  ASSERT_TRUE(broker_->CreateTopic("t", 1, Retention(absl::InfiniteDuration(), 250)).ok());
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(Produce("t", {To(0, std::string(100, 'a' + i))}).ok());
  broker_->RunMaintenance();
  PartitionDescription p = Describe("t");
  EXPECT_EQ(p.meta.log_start_offset, 3);
  EXPECT_EQ(p.meta.bytes, 200);
  auto rest = ReadAll("t", 0);
  ASSERT_EQ(rest.size(), 2u);
  EXPECT_EQ(rest[0].data.value->front(), 'd');
}

TEST_F(LifecycleTest, FullyExpiredPartitionKeepsItsOffsetsAcrossRestart) {
  ASSERT_TRUE(broker_->CreateTopic("t", 1, Retention(absl::Minutes(10))).ok());
  ASSERT_TRUE(Produce("t", {To(0, "a"), To(0, "b")}).ok());
  clock_.Advance(absl::Hours(1));
  broker_->RunMaintenance();
  EXPECT_EQ(Describe("t").meta.log_start_offset, 2);
  EXPECT_EQ(Describe("t").meta.record_count, 0);
  EXPECT_EQ(store_.record_count(), 0u);
  Reopen();
  EXPECT_EQ(Describe("t").meta.log_start_offset, 2) << "log start is durable";
  auto next = Produce("t", {To(0, "c")});
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(next->positions[0].offset, 2) << "offsets are never reused";
}

TEST_F(LifecycleTest, LongerRetentionSetLaterStopsRemoval) {
  ASSERT_TRUE(broker_->CreateTopic("t", 1, Retention(absl::Minutes(10))).ok());
  ASSERT_TRUE(Produce("t", {To(0, "a")}).ok());
  clock_.Advance(absl::Minutes(20));
  ASSERT_TRUE(broker_->UpdateTopicConfig("t", Retention(absl::Hours(1))).ok());
  broker_->RunMaintenance();
  EXPECT_EQ(Describe("t").meta.log_start_offset, 0);
  EXPECT_EQ(broker_->DescribeTopic("t")->meta.config.retention_time, absl::Hours(1));
  EXPECT_EQ(broker_->UpdateTopicConfig("t", Retention(absl::ZeroDuration())).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(broker_->UpdateTopicConfig("nope", {}).status().code(), absl::StatusCode::kNotFound);
}

// --- compaction --------------------------------------------------------------------------

TEST_F(LifecycleTest, CompactionKeepsTheLatestPerKeyAtItsOffset) {
  ASSERT_TRUE(broker_->CreateTopic("t", 1, Compacted(absl::Hours(1))).ok());
  ASSERT_TRUE(Produce("t", {Keyed("k1", "v1"), Keyed("k2", "v1"), Keyed("k1", "v2"),
                            Keyed("k3", "v1"), Tombstone("k2"), Keyed("k1", "v3")})
                  .ok());
  broker_->RunMaintenance();
  auto survivors = ReadAll("t", 0);
  std::vector<std::pair<int64_t, std::string>> got;
  for (const auto& r : survivors) got.emplace_back(r.offset, *r.data.key);
  EXPECT_THAT(got, ElementsAre(std::pair<int64_t, std::string>{3, "k3"},
                               std::pair<int64_t, std::string>{4, "k2"},
                               std::pair<int64_t, std::string>{5, "k1"}));
  EXPECT_FALSE(survivors[1].data.value.has_value()) << "the tombstone stays within its retention";
  EXPECT_EQ(Describe("t").meta.record_count, 3);
  EXPECT_EQ(Describe("t").meta.log_start_offset, 0) << "compaction does not move the log start";

  clock_.Advance(absl::Hours(2));
  broker_->RunMaintenance();
  got.clear();
  for (const auto& r : ReadAll("t", 0)) got.emplace_back(r.offset, *r.data.key);
  EXPECT_THAT(got, ElementsAre(std::pair<int64_t, std::string>{3, "k3"},
                               std::pair<int64_t, std::string>{5, "k1"}));
  EXPECT_EQ(Describe("t").meta.record_count, 2);

  // New values for a key supersede the old survivor in a later round.
  ASSERT_TRUE(Produce("t", {Keyed("k3", "v2")}).ok());
  broker_->RunMaintenance();
  got.clear();
  for (const auto& r : ReadAll("t", 0)) got.emplace_back(r.offset, *r.data.value);
  EXPECT_THAT(got, ElementsAre(std::pair<int64_t, std::string>{5, "v3"},
                               std::pair<int64_t, std::string>{6, "v2"}));
}

TEST_F(LifecycleTest, FetchStepsOverACompactedGapAtTheEnd) {
  ASSERT_TRUE(broker_->CreateTopic("t", 1, Compacted(absl::ZeroDuration())).ok());
  ASSERT_TRUE(Produce("t", {Keyed("a", "1"), Keyed("b", "1"), Tombstone("b")}).ok());
  clock_.Advance(absl::Seconds(1));
  broker_->RunMaintenance();  // b's value and its tombstone go: offsets 1 and 2 are holes
  auto fetched = Fetch({"t", 0, 1});
  ASSERT_TRUE(fetched.ok()) << fetched.status();
  EXPECT_TRUE(fetched->records.empty());
  EXPECT_EQ(fetched->next_offset, 3) << "skip to the high watermark";
}

TEST_F(LifecycleTest, CompactionWithConcurrentAppendsKeepsEachKeysLatestValue) {
  ASSERT_TRUE(broker_->CreateTopic("t", 2, Compacted(absl::Hours(1))).ok());
  std::map<std::string, std::string> latest;  // what the producer last had acked per key
  std::atomic<bool> done{false};
  std::thread producer([&] {
    for (int round = 0; round < 60; ++round) {
      std::vector<ProduceRecordArgs> batch;
      for (int k = 0; k < 20; ++k) {
        batch.push_back(Keyed("key-" + std::to_string(k), "v" + std::to_string(round)));
      }
      ASSERT_TRUE(Produce("t", std::move(batch)).ok());
      for (int k = 0; k < 20; ++k) latest["key-" + std::to_string(k)] = "v" + std::to_string(round);
    }
    done = true;
  });
  while (!done.load()) broker_->RunMaintenance();
  producer.join();
  broker_->RunMaintenance();  // a final round over everything appended

  std::map<std::string, std::string> replayed;
  int64_t records = 0;
  for (int32_t p = 0; p < 2; ++p) {
    for (const auto& r : ReadAll("t", p)) {
      EXPECT_FALSE(replayed.contains(*r.data.key)) << "one record per key: " << *r.data.key;
      replayed[*r.data.key] = *r.data.value;
      ++records;
    }
    EXPECT_EQ(Describe("t", p).meta.record_count, static_cast<int64_t>(ReadAll("t", p).size()));
  }
  EXPECT_EQ(replayed, latest) << "replay from the earliest offset gives the latest value per key";
  EXPECT_EQ(records, 20);
}
// --- description -------------------------------------------------------------------------

TEST_F(LifecycleTest, DescribeReportsCountsBytesTimesAndTheEventTimeWatermark) {
  ASSERT_TRUE(broker_->CreateTopic("t", 1, {}).ok());
  const absl::Time t0 = clock_.Now();
  ProduceRecordArgs late = To(0, "12345");
  late.data.event_time = t0 - absl::Minutes(5);
  ProduceRecordArgs early = To(0, "678");
  early.data.event_time = t0 - absl::Minutes(9);
  ASSERT_TRUE(Produce("t", {late, early}).ok());
  clock_.Advance(absl::Seconds(30));
  ASSERT_TRUE(Produce("t", {To(0, "9")}).ok());
  PartitionDescription p = Describe("t");
  EXPECT_EQ(p.meta.record_count, 3);
  EXPECT_EQ(p.meta.bytes, 9);
  EXPECT_EQ(p.oldest_append_time, t0);
  EXPECT_EQ(p.newest_append_time, t0 + absl::Seconds(30));
  EXPECT_EQ(p.meta.max_event_time, t0 - absl::Minutes(5));
  Reopen();
  EXPECT_EQ(Describe("t").meta.max_event_time, t0 - absl::Minutes(5));
  EXPECT_EQ(Describe("t").oldest_append_time, t0);
}
}  // namespace
}  // namespace conduit::log_broker
