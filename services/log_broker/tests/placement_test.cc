// The controller's rules (domain/placement.h) on hand-built views: no etcd needed.

#include "services/log_broker/domain/placement.h"

#include <map>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace conduit::log_broker {
namespace {

ClusterView Brokers(std::vector<int32_t> ids) {
  ClusterView view;
  for (int32_t id : ids) view.brokers[id] = BrokerRegistration{id, "127.0.0.1:1", "x"};
  return view;
}

void AddTopic(ClusterView* view, const std::string& name, uint64_t id, int32_t partitions) {
  TopicAssignment t;
  t.meta = TopicMeta{TopicId(id), name, partitions, TopicConfig{}, absl::UnixEpoch()};
  t.partitions.resize(partitions);
  t.partition_revisions.resize(partitions, 0);
  view->topics[name] = t;
}

// Applies changes as the etcd store would (each key's revision moves on).
void Apply(ClusterView* view, const std::vector<PartitionChange>& changes) {
  for (const auto& c : changes) {
    TopicAssignment& t = view->topics.at(c.topic);
    t.partitions[c.partition] = c.next;
    t.partition_revisions[c.partition] = ++view->revision;
  }
}

std::map<int32_t, int> Leaders(const ClusterView& view) {
  std::map<int32_t, int> out;
  for (const auto& [name, t] : view.topics)
    for (const auto& p : t.partitions)
      if (p) ++out[p->leader];
  return out;
}

TEST(Placement, TwelvePartitionsOverThreeBrokersLeadFourEach) {
  ClusterView view = Brokers({1, 2, 3});
  AddTopic(&view, "t", 7, 12);
  auto changes = PlanPartitionChanges(view);
  ASSERT_EQ(changes.size(), 12u);
  for (const auto& c : changes) {
    EXPECT_EQ(c.next.leader_epoch, 1);
    EXPECT_EQ(c.read_revision, 0) << "the partition key must not exist yet";
    EXPECT_THAT(c.next.replicas, ::testing::ElementsAre(c.next.leader));
    EXPECT_EQ(c.next.isr, c.next.replicas);
    EXPECT_EQ(c.topic_id, TopicId(7));
  }
  Apply(&view, changes);
  EXPECT_THAT(Leaders(view), ::testing::ElementsAre(::testing::Pair(1, 4), ::testing::Pair(2, 4),
                                                    ::testing::Pair(3, 4)));
  EXPECT_TRUE(PlanPartitionChanges(view).empty()) << "a placed, healthy cluster needs nothing";
}

TEST(Placement, NewTopicsFillTheLeastLoadedBrokersFirst) {
  ClusterView view = Brokers({1, 2});
  AddTopic(&view, "a", 1, 3);
  Apply(&view, PlanPartitionChanges(view));  // 1 leads 2, 2 leads 1
  view.brokers[3] = BrokerRegistration{3, "127.0.0.1:3", "y"};
  AddTopic(&view, "b", 2, 3);
  Apply(&view, PlanPartitionChanges(view));
  auto leaders = Leaders(view);
  EXPECT_EQ(leaders[1] + leaders[2] + leaders[3], 6);
  for (const auto& [id, n] : leaders) EXPECT_EQ(n, 2) << "broker " << id;
}

TEST(Placement, ReplicasAreDistinctLiveBrokers) {
  ClusterView view = Brokers({4, 5, 6});
  AddTopic(&view, "t", 1, 6);
  view.topics["t"].replication_factor = 3;
  for (const auto& c : PlanPartitionChanges(view)) {
    EXPECT_THAT(c.next.replicas, ::testing::UnorderedElementsAre(4, 5, 6));
    EXPECT_EQ(c.next.replicas.front(), c.next.leader);
  }
}

TEST(Placement, ALeaderThatIsGoneGoesOfflineThenComesBackAtEachTimeANewEpoch) {
  ClusterView view = Brokers({1, 2});
  AddTopic(&view, "t", 1, 2);
  Apply(&view, PlanPartitionChanges(view));
  const int32_t p_of_2 = view.topics["t"].partitions[0]->leader == 2 ? 0 : 1;
  view.brokers.erase(2);  // its lease expired
  auto offline = PlanPartitionChanges(view);
  ASSERT_EQ(offline.size(), 1u);
  EXPECT_EQ(offline[0].partition, p_of_2);
  EXPECT_EQ(offline[0].next.leader, kNoBroker);
  EXPECT_EQ(offline[0].next.leader_epoch, 2);
  EXPECT_EQ(offline[0].read_revision, view.topics["t"].partition_revisions[p_of_2])
      << "guarded by the revision the controller read";
  Apply(&view, offline);
  EXPECT_TRUE(PlanPartitionChanges(view).empty()) << "no live in-sync replica: stays offline";

  view.brokers[2] = BrokerRegistration{2, "127.0.0.1:2", "restarted"};
  auto back = PlanPartitionChanges(view);
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0].next.leader, 2);
  EXPECT_EQ(back[0].next.leader_epoch, 3);
}

TEST(Placement, NoLiveBrokersPlansNothing) {
  ClusterView view;
  AddTopic(&view, "t", 1, 3);
  EXPECT_TRUE(PlanPartitionChanges(view).empty());
}

TEST(Placement, ReplicationFactorMustFitTheLiveBrokers) {
  const ClusterView view = Brokers({1, 2, 3});
  EXPECT_TRUE(CheckReplicationFactor(view, 3).ok());
  const absl::Status above = CheckReplicationFactor(view, 4);
  EXPECT_EQ(above.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(above.message()), ::testing::HasSubstr("1..3"));
  EXPECT_EQ(CheckReplicationFactor(view, 0).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace conduit::log_broker
