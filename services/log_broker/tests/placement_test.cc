// The controller's rules (domain/placement.h) on hand-built views: no etcd needed.

#include "services/log_broker/domain/placement.h"

#include <map>
#include <string>
#include <utility>
#include <vector>

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
    EXPECT_EQ(c.next.leader_epoch, LeaderEpoch(1));
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
  EXPECT_EQ(offline[0].next.leader_epoch, LeaderEpoch(2));
  EXPECT_EQ(offline[0].read_revision, view.topics["t"].partition_revisions[p_of_2])
      << "guarded by the revision the controller read";
  Apply(&view, offline);
  EXPECT_TRUE(PlanPartitionChanges(view).empty()) << "no live in-sync replica: stays offline";

  view.brokers[2] = BrokerRegistration{2, "127.0.0.1:2", "restarted"};
  auto back = PlanPartitionChanges(view);
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0].next.leader, 2);
  EXPECT_EQ(back[0].next.leader_epoch, LeaderEpoch(3));
}

// One partition of "t" placed with replication factor 3 on brokers 1, 2 and 3, all in sync.
ClusterView ReplicatedPartition(bool unclean_leader_election = false) {
  ClusterView view = Brokers({1, 2, 3});
  AddTopic(&view, "t", 1, 1);
  view.topics["t"].replication_factor = 3;
  view.topics["t"].meta.config.unclean_leader_election = unclean_leader_election;
  Apply(&view, PlanPartitionChanges(view));
  return view;
}

// The in-sync set the partition's leader would write, as the etcd store would apply it.
void SetIsr(ClusterView* view, std::vector<int32_t> isr) {
  view->topics.at("t").partitions[0]->isr = std::move(isr);
  view->topics.at("t").partition_revisions[0] = ++view->revision;
}

TEST(Placement, KillingTheLeaderElectsALiveInSyncReplicaWithTheLiveMembersInSync) {
  ClusterView view = ReplicatedPartition();
  const PartitionAssignment before = *view.FindPartition("t", 0);
  ASSERT_THAT(before.isr, ::testing::UnorderedElementsAre(1, 2, 3));
  view.brokers.erase(before.leader);
  auto changes = PlanPartitionChanges(view);
  ASSERT_EQ(changes.size(), 1u);
  const PartitionAssignment& next = changes[0].next;
  EXPECT_NE(next.leader, before.leader);
  EXPECT_TRUE(view.brokers.contains(next.leader));
  EXPECT_THAT(before.isr, ::testing::Contains(next.leader));
  std::vector<int32_t> live_isr;
  for (int32_t b : before.isr)
    if (b != before.leader) live_isr.push_back(b);
  EXPECT_EQ(next.isr, live_isr) << "the in-sync set becomes its live members";
  EXPECT_EQ(next.leader, next.isr.front());
  EXPECT_EQ(next.leader_epoch, NextEpoch(before.leader_epoch));
  EXPECT_EQ(next.replicas, before.replicas) << "an election does not move replicas";
  EXPECT_EQ(changes[0].read_revision, view.topics["t"].partition_revisions[0]);
  Apply(&view, changes);
  EXPECT_TRUE(PlanPartitionChanges(view).empty()) << "a live leader needs nothing";
}

// An election rests on the old leader being gone, so the controller's write requires that;
// a preferred-leader move away from a live leader assumes nothing.
TEST(Placement, AnElectionNamesTheLeaderItTakesAsGone) {
  ClusterView view = ReplicatedPartition();
  const int32_t old_leader = view.FindPartition("t", 0)->leader;
  view.brokers.erase(old_leader);
  auto election = PlanPartitionChanges(view);
  ASSERT_EQ(election.size(), 1u);
  EXPECT_THAT(LeadersTakenAsGone(view, election), ::testing::ElementsAre(old_leader));
  Apply(&view, election);
  view.brokers[old_leader] = BrokerRegistration{old_leader, "127.0.0.1:1", "back"};
  SetIsr(&view, {election[0].next.isr.front(), old_leader});
  auto preferred = PlanPreferredLeaders(view);
  ASSERT_EQ(preferred.size(), 1u) << "the returned preferred replica leads again";
  EXPECT_TRUE(LeadersTakenAsGone(view, preferred).empty());
}

TEST(Placement, WithNoLiveInSyncReplicaAPartitionStaysOfflineKeepingItsInSyncSet) {
  ClusterView view = ReplicatedPartition();
  const PartitionAssignment before = *view.FindPartition("t", 0);
  const int32_t leader = before.leader;
  SetIsr(&view, {leader});  // its followers fell behind
  view.brokers.erase(leader);
  auto offline = PlanPartitionChanges(view);
  ASSERT_EQ(offline.size(), 1u);
  EXPECT_EQ(offline[0].next.leader, kNoBroker)
      << "the two live replicas are out of sync: electing one would lose acknowledged records";
  EXPECT_THAT(offline[0].next.isr, ::testing::ElementsAre(leader));
  EXPECT_EQ(offline[0].next.leader_epoch, NextEpoch(before.leader_epoch));
  Apply(&view, offline);
  EXPECT_TRUE(PlanPartitionChanges(view).empty()) << "offline until an in-sync replica returns";

  view.brokers[leader] = BrokerRegistration{leader, "127.0.0.1:1", "restarted"};
  auto back = PlanPartitionChanges(view);
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0].next.leader, leader);
  EXPECT_THAT(back[0].next.isr, ::testing::ElementsAre(leader));
  EXPECT_EQ(back[0].next.leader_epoch, NextEpoch(NextEpoch(before.leader_epoch)));
}

TEST(Placement, AnyInSyncReplicaReturningToAnOfflinePartitionLeadsIt) {
  ClusterView view = ReplicatedPartition();
  const PartitionAssignment before = *view.FindPartition("t", 0);
  ASSERT_EQ(before.replicas.size(), 3u);
  const int32_t a = before.replicas[0], b = before.replicas[1], out = before.replicas[2];
  SetIsr(&view, {a, b});
  view.brokers.erase(a);
  view.brokers.erase(b);
  auto offline = PlanPartitionChanges(view);
  ASSERT_EQ(offline.size(), 1u);
  EXPECT_EQ(offline[0].next.leader, kNoBroker) << out << " is live but out of sync";
  EXPECT_THAT(offline[0].next.isr, ::testing::ElementsAre(a, b));
  Apply(&view, offline);

  view.brokers[b] = BrokerRegistration{b, "127.0.0.1:2", "restarted"};  // not the first in sync
  auto back = PlanPartitionChanges(view);
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0].next.leader, b);
  EXPECT_THAT(back[0].next.isr, ::testing::ElementsAre(b)) << "its live members only";
  EXPECT_EQ(back[0].next.leader_epoch, NextEpoch(NextEpoch(before.leader_epoch)));
}

TEST(Placement, UncleanElectionElectsTheFirstLiveReplicaAloneInSync) {
  ClusterView view = ReplicatedPartition(/*unclean_leader_election=*/true);
  const PartitionAssignment before = *view.FindPartition("t", 0);
  const int32_t leader = before.leader;
  SetIsr(&view, {leader});
  view.brokers.erase(leader);
  int32_t first_live = kNoBroker;
  for (int32_t r : before.replicas) {
    if (view.brokers.contains(r)) {
      first_live = r;
      break;
    }
  }
  auto changes = PlanPartitionChanges(view);
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].next.leader, first_live);
  EXPECT_THAT(changes[0].next.isr, ::testing::ElementsAre(first_live));
  EXPECT_EQ(changes[0].next.leader_epoch, NextEpoch(before.leader_epoch));
  EXPECT_EQ(changes[0].next.replicas, before.replicas);
}

TEST(Placement, TurningUncleanElectionOnBringsAnOfflinePartitionBack) {
  ClusterView view = ReplicatedPartition();
  const PartitionAssignment before = *view.FindPartition("t", 0);
  SetIsr(&view, {before.leader});
  view.brokers.erase(before.leader);
  Apply(&view, PlanPartitionChanges(view));
  ASSERT_EQ(view.FindPartition("t", 0)->leader, kNoBroker);
  view.topics["t"].meta.config.unclean_leader_election = true;
  auto changes = PlanPartitionChanges(view);
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_NE(changes[0].next.leader, kNoBroker);
  EXPECT_TRUE(view.brokers.contains(changes[0].next.leader));
  EXPECT_THAT(changes[0].next.isr, ::testing::ElementsAre(changes[0].next.leader));
  EXPECT_EQ(changes[0].next.leader_epoch, NextEpoch(NextEpoch(before.leader_epoch)));
}

TEST(Placement, AReassignmentAddsTheNewReplicasThenHandsOverOnceAllAreInSync) {
  ClusterView view = ReplicatedPartition();  // replicas 1,2,3 led by 1
  view.brokers[4] = BrokerRegistration{4, "127.0.0.1:4", "x"};
  PartitionAssignment& p = *view.topics["t"].partitions[0];
  ASSERT_EQ(p.leader, 1);
  const LeaderEpoch epoch = p.leader_epoch;
  p.target_replicas = {4, 2, 3};
  p.throttle_bytes_per_second = 1000;
  auto add = PlanPartitionChanges(view);
  ASSERT_EQ(add.size(), 1u);
  EXPECT_THAT(add[0].next.replicas, ::testing::ElementsAre(4, 2, 3, 1)) << "4 joins as a follower";
  EXPECT_EQ(add[0].next.leader, 1) << "no leader change while 4 catches up";
  EXPECT_EQ(add[0].next.leader_epoch, epoch);
  EXPECT_THAT(add[0].next.isr, ::testing::ElementsAre(1, 2, 3)) << "4 is not in sync yet";
  Apply(&view, add);
  EXPECT_TRUE(PlanPartitionChanges(view).empty()) << "waits while 4 is out of sync";

  view.topics["t"].partitions[0]->isr = {1, 2, 3, 4};  // the leader added it once caught up
  auto hand_over = PlanPartitionChanges(view);
  ASSERT_EQ(hand_over.size(), 1u);
  const PartitionAssignment& done = hand_over[0].next;
  EXPECT_EQ(done.leader, 4) << "the first wanted replica leads";
  EXPECT_EQ(done.leader_epoch, NextEpoch(epoch)) << "a leader change bumps the epoch";
  EXPECT_THAT(done.replicas, ::testing::ElementsAre(4, 2, 3)) << "1 is dropped";
  EXPECT_THAT(done.isr, ::testing::UnorderedElementsAre(2, 3, 4));
  EXPECT_TRUE(done.target_replicas.empty()) << "done";
  EXPECT_EQ(done.throttle_bytes_per_second, 0);
  Apply(&view, hand_over);
  EXPECT_TRUE(PlanPartitionChanges(view).empty());
}

TEST(Placement, TheCurrentReplicasInAnotherOrderElectThePreferredLeader) {
  ClusterView view = ReplicatedPartition();
  PartitionAssignment& p = *view.topics["t"].partitions[0];
  const LeaderEpoch epoch = p.leader_epoch;
  p.target_replicas = {2, 1, 3};
  auto changes = PlanPartitionChanges(view);
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].next.leader, 2);
  EXPECT_EQ(changes[0].next.leader_epoch, NextEpoch(epoch));
  EXPECT_THAT(changes[0].next.replicas, ::testing::ElementsAre(2, 1, 3));
  EXPECT_THAT(changes[0].next.isr, ::testing::UnorderedElementsAre(1, 2, 3));

  view.topics["t"].partitions[0]->isr = {1, 3};  // 2 fell behind first: it may not lead
  EXPECT_TRUE(PlanPartitionChanges(view).empty()) << "waits until the preferred one is in sync";
}

// A leader killed and back: the controller moves leadership back to it only once it is in sync
// again, only while it is live, and not while a reassignment is under way.
TEST(Placement, PreferredLeadersLeadAgainOnceBackInSync) {
  ClusterView view = ReplicatedPartition();
  const PartitionAssignment placed = *view.FindPartition("t", 0);
  const int32_t preferred = placed.replicas.front();
  ASSERT_EQ(placed.leader, preferred) << "placement leads from the preferred replica";
  EXPECT_TRUE(PlanPreferredLeaders(view).empty()) << "already balanced";

  view.brokers.erase(preferred);
  Apply(&view, PlanPartitionChanges(view));
  const PartitionAssignment failed_over = *view.FindPartition("t", 0);
  ASSERT_NE(failed_over.leader, preferred);
  EXPECT_TRUE(PlanPreferredLeaders(view).empty()) << "the preferred replica is not live";

  view.brokers[preferred] = BrokerRegistration{preferred, "127.0.0.1:1", "x"};
  EXPECT_TRUE(PlanPartitionChanges(view).empty());
  EXPECT_TRUE(PlanPreferredLeaders(view).empty()) << "back, but not in sync yet";

  std::vector<int32_t> isr = failed_over.isr;
  isr.push_back(preferred);  // caught up: the leader adds it
  SetIsr(&view, isr);
  view.topics["t"].partitions[0]->target_replicas = {2, 3, 1};
  EXPECT_TRUE(PlanPreferredLeaders(view).empty()) << "a reassignment decides the leader itself";
  view.topics["t"].partitions[0]->target_replicas.clear();

  const auto changes = PlanPreferredLeaders(view);
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].next.leader, preferred);
  EXPECT_EQ(changes[0].next.leader_epoch, NextEpoch(failed_over.leader_epoch));
  EXPECT_EQ(changes[0].next.isr, isr) << "the in-sync set is unchanged";
  EXPECT_EQ(changes[0].read_revision, view.topics["t"].partition_revisions[0]);
  Apply(&view, changes);
  EXPECT_TRUE(PlanPreferredLeaders(view).empty());
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
