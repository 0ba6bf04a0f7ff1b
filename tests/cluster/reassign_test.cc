// Moving a partition's replicas on real processes: etcd and four
// conduit-broker. The new replica copies the log at most at the throttle, joins the in-sync
// set, takes the leadership as the first wanted replica, and the old replica is dropped; every
// acknowledged record is served by the new leader. Preferred-leader rebalancing: a leader
// killed and restarted leads again once it has caught up, with nothing acknowledged lost.

#include <algorithm>
#include <set>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/cluster/cluster_fixture.h"

namespace conduit::testing {
namespace {

class ReassignTest : public ClusterTest {
 protected:
  logpb::PartitionMetadata State(int32_t via) {
    auto parts = Partitions(via, "t");
    return parts.empty() ? logpb::PartitionMetadata() : parts[0];
  }
  grpc::Status Produce(int32_t via, const std::string& value) {
    return ProduceOne(via, "t", 0, value);
  }
  grpc::Status Reassign(int32_t via, const std::vector<int32_t>& replicas, int64_t throttle) {
    grpc::ClientContext ctx;
    LogClient::SetDeadline(&ctx);
    logpb::ReassignPartitionRequest request;
    request.set_topic("t");
    request.set_partition(0);
    for (int32_t b : replicas) request.add_replicas(b);
    request.set_throttle_bytes_per_second(throttle);
    logpb::ReassignPartitionResponse response;
    return client(via).stub()->ReassignPartition(&ctx, request, &response);
  }
};

TEST_F(ReassignTest, APartitionMovesToANewBrokerThrottledAndKeepsEveryRecord) {
  for (int32_t id = 1; id <= 4; ++id) {
    ASSERT_TRUE(StartBroker(id, {"--replica-lag-time", "2s"})) << id;
  }
  ASSERT_TRUE(Eventually([&] { return Metadata(1).brokers_size() == 4; }));
  ASSERT_TRUE(CreateTopic(client(1), "t", 1, 3).ok());
  ASSERT_TRUE(AwaitApplied("t", 1));
  const logpb::PartitionMetadata before = State(1);
  ASSERT_EQ(before.replicas_size(), 3);
  std::set<int32_t> old(before.replicas().begin(), before.replicas().end());
  int32_t spare = 1;
  while (old.contains(spare)) ++spare;
  const int32_t leader = before.leader();
  for (int i = 0; i < 200; ++i) ASSERT_TRUE(Produce(leader, "record-" + std::to_string(i)).ok());

  EXPECT_EQ(Reassign(1, {spare, 0}, 0).error_code(), grpc::StatusCode::INVALID_ARGUMENT)
      << "an unknown broker";
  EXPECT_EQ(Reassign(1, {spare, spare}, 0).error_code(), grpc::StatusCode::INVALID_ARGUMENT)
      << "a broker named twice";
  EXPECT_EQ(State(1).target_replicas_size(), 0) << "a refused reassignment changes nothing";

  // The spare replaces the leader; the two other replicas stay.
  std::vector<int32_t> wanted = {spare};
  for (int32_t b : before.replicas()) {
    if (b != leader) wanted.push_back(b);
  }
  const absl::Time started = absl::Now();
  constexpr int64_t kThrottle = 1000;  // payload bytes/s: the 200 records (~2 KB) take 2 s
  ASSERT_TRUE(Reassign(1, wanted, kThrottle).ok());
  ASSERT_TRUE(Eventually(
      [&] {
        const logpb::PartitionMetadata now = State(1);
        return now.target_replicas_size() == 0 && now.leader() == spare &&
               std::vector<int32_t>(now.replicas().begin(), now.replicas().end()) == wanted;
      },
      absl::Seconds(30)))
      << "moved, and the first wanted replica leads";
  EXPECT_GE(absl::Now() - started, absl::Seconds(1)) << "the copy kept to the throttle";
  EXPECT_THAT(State(1).isr(), ::testing::UnorderedElementsAreArray(wanted));
  EXPECT_GT(State(1).leader_epoch(), before.leader_epoch());

  std::vector<logpb::Record> records;
  ASSERT_TRUE(Eventually([&] {
    records.clear();
    return client(spare).FetchAll("t", 0, &records).ok() && records.size() == 200;
  })) << "the new leader serves every record";
  for (int i = 0; i < 200; ++i) EXPECT_EQ(records[i].value(), "record-" + std::to_string(i));
  EXPECT_TRUE(Eventually([&] { return Produce(spare, "after").ok(); }));
  EXPECT_EQ(Produce(leader, "old").error_code(), grpc::StatusCode::FAILED_PRECONDITION)
      << "the dropped replica names the new leader";
}

TEST_F(ReassignTest, ALeaderKilledAndRestartedLeadsAgainOnceCaughtUp) {
  const std::vector<std::string> flags = {"--replica-lag-time", "2s", "--leader-rebalance-interval",
                                          "1s"};
  for (int32_t id = 1; id <= 3; ++id) ASSERT_TRUE(StartBroker(id, flags)) << id;
  ASSERT_TRUE(Eventually([&] { return Metadata(1).brokers_size() == 3; }));
  ASSERT_TRUE(CreateTopic(client(1), "t", 1, 3).ok());
  ASSERT_TRUE(AwaitApplied("t", 1));
  {
    grpc::ClientContext ctx;
    LogClient::SetDeadline(&ctx);
    logpb::ListTopicsResponse listed;
    ASSERT_TRUE(client(2).stub()->ListTopics(&ctx, logpb::ListTopicsRequest(), &listed).ok());
    ASSERT_EQ(listed.topics_size(), 1);
    EXPECT_EQ(listed.topics(0).replication_factor(), 3) << "ListTopics names the factor";
  }
  const logpb::PartitionMetadata placed = State(1);
  const int32_t preferred = placed.replicas(0);
  ASSERT_EQ(placed.leader(), preferred);
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(Produce(preferred, "a" + std::to_string(i)).ok());

  broker(preferred).Kill(SIGKILL);
  const int32_t other = preferred % 3 + 1;
  int32_t interim = -1;
  ASSERT_TRUE(Eventually([&] {
    interim = State(other).leader();
    return interim != -1 && interim != preferred;
  }));
  ASSERT_TRUE(Eventually([&] { return Produce(interim, "b0").ok(); }));
  for (int i = 1; i < 20; ++i) ASSERT_TRUE(Produce(interim, "b" + std::to_string(i)).ok());

  ASSERT_TRUE(StartBroker(preferred, flags));
  ASSERT_TRUE(Eventually([&] { return State(other).leader() == preferred; }, absl::Seconds(30)))
      << "the preferred replica leads again";
  EXPECT_GE(State(other).leader_epoch(), placed.leader_epoch() + 2) << "two leader changes";
  EXPECT_THAT(State(other).isr(), ::testing::UnorderedElementsAre(1, 2, 3));
  std::vector<logpb::Record> records;
  ASSERT_TRUE(Eventually([&] {
    records.clear();
    return client(preferred).FetchAll("t", 0, &records).ok() && records.size() >= 40;
  })) << "it serves every acknowledged record";
  ASSERT_EQ(records.size(), 40u);
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(records[i].value(), "a" + std::to_string(i));
    EXPECT_EQ(records[20 + i].value(), "b" + std::to_string(i));
  }
  EXPECT_TRUE(Eventually([&] { return Produce(preferred, "after").ok(); }));
  EXPECT_EQ(Produce(interim, "old").error_code(), grpc::StatusCode::FAILED_PRECONDITION)
      << "the interim leader is a follower again";
}

}  // namespace
}  // namespace conduit::testing
