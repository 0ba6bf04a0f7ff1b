// A single node is a cluster of one: LocalClusterMetadata's rules, alone (the Broker on it is
// every other test of this binary).
#include "services/log_broker/domain/local_cluster.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <vector>

namespace conduit::log_broker {
namespace {

using ::testing::ElementsAre;

TopicMeta Meta(const std::string& name, int32_t partitions) {
  return TopicMeta{TopicId(7), name, partitions, TopicConfig{}, absl::FromUnixSeconds(1)};
}

class LocalClusterTest : public ::testing::Test {
 protected:
  LocalClusterTest() {
    cluster_.Attach([this](std::shared_ptr<const ClusterView> view) {
      applied_.push_back(view);
      return fail_next_ ? absl::InternalError("the store refused") : absl::OkStatus();
    });
  }
  LocalClusterMetadata cluster_{nullptr};
  std::vector<std::shared_ptr<const ClusterView>> applied_;
  bool fail_next_ = false;
};

// One broker, 0, the controller; every partition led there alone, at epoch 0; each change a new
// view, one revision on, applied before the change returns.
TEST_F(LocalClusterTest, EveryChangeIsANewViewAppliedBeforeItReturns) {
  ASSERT_TRUE(cluster_.Seed({}).ok());
  EXPECT_EQ(cluster_.View()->revision, 1);
  EXPECT_EQ(cluster_.View()->controller, 0);
  EXPECT_THAT(cluster_.View()->brokers.size(), 1u);
  EXPECT_TRUE(cluster_.LeaseValid());

  auto created = cluster_.CreateTopic(Meta("t", 2), 1);
  ASSERT_TRUE(created.ok()) << created.status();
  ASSERT_EQ(applied_.size(), 2u);
  EXPECT_EQ(applied_.back(), cluster_.View()) << "applied before CreateTopic returned";
  EXPECT_EQ(cluster_.View()->revision, 2);
  const PartitionAssignment* p = cluster_.View()->FindPartition("t", 1);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->leader, 0);
  EXPECT_EQ(p->leader_epoch, LeaderEpoch(0));
  EXPECT_THAT(p->replicas, ElementsAre(0));
  EXPECT_THAT(p->isr, ElementsAre(0));

  EXPECT_EQ(cluster_.CreateTopic(Meta("t", 2), 1).status().code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(cluster_.CreateTopic(Meta("u", 1), 3).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(cluster_.View()->revision, 2) << "refused changes make no view";

  auto updated = cluster_.UpdateTopicConfig("t", [](const TopicConfig& c) {
    TopicConfig next = c;
    next.retention_bytes = 1000;
    return absl::StatusOr<TopicConfig>(next);
  });
  ASSERT_TRUE(updated.ok());
  EXPECT_EQ(cluster_.View()->FindTopic("t")->meta.config.retention_bytes, 1000);

  ASSERT_TRUE(cluster_.DeleteTopic("t").ok());
  EXPECT_EQ(cluster_.View()->FindTopic("t"), nullptr);
  EXPECT_EQ(cluster_.DeleteTopic("t").code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(
      cluster_.UpdatePartitionState(TopicId(7), 0, 0, LocalClusterMetadata::Sole(LeaderEpoch(1)))
          .status()
          .code(),
      absl::StatusCode::kFailedPrecondition);
}

// Leader epochs move forward only; a view the broker cannot apply is not kept.
TEST_F(LocalClusterTest, EpochsGoForwardAndAFailedApplyKeepsThePreviousView) {
  ASSERT_TRUE(cluster_.Seed({}).ok());
  ASSERT_TRUE(cluster_.CreateTopic(Meta("t", 1), 1).ok());
  ASSERT_TRUE(cluster_.SetLeaderEpoch("t", 0, LeaderEpoch(4)).ok());
  EXPECT_EQ(cluster_.View()->FindPartition("t", 0)->leader_epoch, LeaderEpoch(4));
  EXPECT_EQ(cluster_.SetLeaderEpoch("t", 0, LeaderEpoch(3)).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(cluster_.SetLeaderEpoch("t", 1, LeaderEpoch(5)).code(), absl::StatusCode::kNotFound);

  const std::shared_ptr<const ClusterView> before = cluster_.View();
  fail_next_ = true;
  EXPECT_EQ(cluster_.CreateTopic(Meta("u", 1), 1).status().code(), absl::StatusCode::kInternal);
  EXPECT_EQ(cluster_.View(), before) << "the view the broker could not apply is gone";
  EXPECT_EQ(cluster_.View()->FindTopic("u"), nullptr);
}

}  // namespace
}  // namespace conduit::log_broker
