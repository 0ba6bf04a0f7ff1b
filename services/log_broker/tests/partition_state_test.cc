// One partition's own state (domain/partition.h), on a fake store with a fake clock: its
// append clock, the leader epoch stamped on its records and its leader-epoch cache.

#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "services/log_broker/tests/broker_fixture.h"

namespace conduit::log_broker {
namespace {

using ::testing::ElementsAre;
using namespace ::conduit::log_broker::testing;  // NOLINT: test fixture helpers

// Each partition keeps its own append clock: a clock stepped back holds back only the
// partitions appended at the later time (a partition moved from a broker whose clock ran ahead
// does not drag the others along).
TEST_F(LifecycleTest, AppendTimesArePerPartition) {
  ASSERT_TRUE(broker_->CreateTopic("t", 2, {}).ok());
  const absl::Time t0 = clock_.Now();
  ASSERT_TRUE(Produce("t", {To(0, "a")}).ok());
  clock_.Advance(-absl::Hours(1));
  auto other = Produce("t", {To(1, "b")});
  auto same = Produce("t", {To(0, "c")});
  ASSERT_TRUE(other.ok() && same.ok());
  EXPECT_EQ(other->append_time, t0 - absl::Hours(1)) << "partition 1 follows the clock";
  EXPECT_EQ(same->append_time, t0) << "partition 0 never goes back";
  EXPECT_EQ(ReadAll("t", 0).back().append_time, t0);
}

// Appends carry the partition's leader epoch, on disk; the epoch never goes back.
TEST_F(LifecycleTest, LeaderEpochStampsAppendsAndSurvivesRestart) {
  ASSERT_TRUE(broker_->CreateTopic("t", 2, {}).ok());
  ASSERT_TRUE(Produce("t", {To(0, "a")}).ok());
  ASSERT_TRUE(broker_->SetLeaderEpoch("t", 0, LeaderEpoch(3)).ok());
  ASSERT_TRUE(Produce("t", {To(0, "b"), To(1, "c")}).ok());
  EXPECT_EQ(broker_->SetLeaderEpoch("t", 0, LeaderEpoch(2)).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(broker_->SetLeaderEpoch("t", 2, LeaderEpoch(4)).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(broker_->SetLeaderEpoch("nope", 0, LeaderEpoch(4)).code(), absl::StatusCode::kNotFound);
  Reopen();
  EXPECT_EQ(broker_->DescribeTopic("t")->partitions[0].leader_epoch, LeaderEpoch(3));
  EXPECT_EQ(broker_->DescribeTopic("t")->partitions[1].leader_epoch, LeaderEpoch(0));
  std::vector<int32_t> epochs;
  for (const auto& r : ReadAll("t", 0)) epochs.push_back(r.leader_epoch.value());
  EXPECT_THAT(epochs, ElementsAre(0, 3));
  EXPECT_EQ(ReadAll("t", 1).front().leader_epoch, LeaderEpoch(0));
}

// The leader-epoch cache: each epoch's first offset, durable with it; OffsetForLeaderEpoch
// answers where an epoch ends (KIP-101/279), the largest epoch at or below the one asked about.
TEST_F(LifecycleTest, LeaderEpochCacheAnswersWhereEachEpochEnds) {
  ASSERT_TRUE(broker_->CreateTopic("t", 1, {}).ok());
  ASSERT_TRUE(Produce("t", {To(0, "a"), To(0, "b"), To(0, "c")}).ok());  // epoch 0: 0..2
  ASSERT_TRUE(broker_->SetLeaderEpoch("t", 0, LeaderEpoch(3)).ok());
  ASSERT_TRUE(Produce("t", {To(0, "d")}).ok());  // epoch 3: 3
  ASSERT_TRUE(Produce("t", {To(0, "e")}).ok());  // epoch 3: 4
  ASSERT_TRUE(broker_->SetLeaderEpoch("t", 0, LeaderEpoch(5)).ok());
  ASSERT_TRUE(
      broker_->SetLeaderEpoch("t", 0, LeaderEpoch(6)).ok());  // led at 5 and 6, appended only at 6
  ASSERT_TRUE(Produce("t", {To(0, "f")}).ok());          // epoch 6: 5
  for (int pass = 0; pass < 2; ++pass) {                 // the second after a restart
    using E = Broker::EpochEnd;
    EXPECT_EQ(*broker_->OffsetForLeaderEpoch("t", 0, LeaderEpoch(0)), (E{LeaderEpoch(0), 3}))
        << pass;
    EXPECT_EQ(*broker_->OffsetForLeaderEpoch("t", 0, LeaderEpoch(2)), (E{LeaderEpoch(0), 3}))
        << pass;
    EXPECT_EQ(*broker_->OffsetForLeaderEpoch("t", 0, LeaderEpoch(3)), (E{LeaderEpoch(3), 5}))
        << pass;
    EXPECT_EQ(*broker_->OffsetForLeaderEpoch("t", 0, LeaderEpoch(5)), (E{LeaderEpoch(3), 5}))
        << "5 appended nothing";
    EXPECT_EQ(*broker_->OffsetForLeaderEpoch("t", 0, LeaderEpoch(6)), (E{LeaderEpoch(6), 6}))
        << "the current: log end";
    EXPECT_EQ(*broker_->OffsetForLeaderEpoch("t", 0, LeaderEpoch(9)), (E{LeaderEpoch(6), 6}))
        << pass;
    Reopen();
  }
  EXPECT_EQ(broker_->OffsetForLeaderEpoch("t", 1, LeaderEpoch(0)).status().code(),
            absl::StatusCode::kNotFound);
  ASSERT_TRUE(broker_->CreateTopic("empty", 1, {}).ok());
  EXPECT_EQ(*broker_->OffsetForLeaderEpoch("empty", 0, LeaderEpoch(0)), (Broker::EpochEnd{}));
}

}  // namespace
}  // namespace conduit::log_broker
