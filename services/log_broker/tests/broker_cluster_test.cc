// The broker in cluster mode: it follows the applied view and serves only what it leads. The
// view comes from a fake ClusterMetadata (broker_cluster_fixture.h).

#include "services/log_broker/tests/broker_cluster_fixture.h"

namespace conduit::log_broker {
namespace {

using ::testing::ElementsAre;
using namespace ::conduit::log_broker::testing;  // NOLINT: test fixture helpers

TEST_F(BrokerClusterTest, ServesOnlyWhatItLeadsAndNamesTheLeaderOtherwise) {
  SetTopic("t", 42, {1, 2, kNoBroker}, 5);
  ASSERT_TRUE(Apply().ok());
  auto led = Produce("t", {To(0, "a")});
  ASSERT_TRUE(led.ok()) << led.status();
  EXPECT_EQ(ReadAll("t", 0).front().leader_epoch, LeaderEpoch(5))
      << "appends carry the view's epoch";

  const absl::Status other = Produce("t", {To(1, "b")}).status();
  EXPECT_EQ(other.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(other.message()),
              ::testing::HasSubstr("its leader is broker 2 at 127.0.0.1:102 (epoch 5)"));
  EXPECT_EQ(LeaderHintOf(other), (LeaderHint{2, "127.0.0.1:102", LeaderEpoch(5)}));
  EXPECT_EQ(Fetch({"t", 1, 0}).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(broker_->ListOffsets("t", {1}, OffsetQuery::kLatest, absl::Now()).status().code(),
            absl::StatusCode::kFailedPrecondition);

  const absl::Status offline = Produce("t", {To(2, "c")}).status();
  EXPECT_EQ(offline.code(), absl::StatusCode::kUnavailable);
  EXPECT_FALSE(LeaderHintOf(offline).has_value());
  EXPECT_EQ(broker_->DescribeTopic("t")->meta.id, TopicId(42)) << "the view's topic id";
}

// Between etcd's view having a new topic and this broker applying it, requests for it are
// UNAVAILABLE (retry), never NOT_FOUND (give up); GetMetadata names only what is applied.
TEST_F(BrokerClusterTest, ATopicNotAppliedHereYetIsUnavailableNotNotFound) {
  SetTopic("t", 1, {1}, 1);  // in the cluster's latest view, not applied
  EXPECT_EQ(Produce("t", {To(0, "a")}).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(Fetch({"t", 0, 0}).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(broker_->Metadata("").topics.empty()) << "GetMetadata answers from the applied view";
  EXPECT_EQ(Produce("nope", {To(0, "a")}).status().code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(Apply().ok());
  EXPECT_TRUE(Produce("t", {To(0, "a")}).ok());
  EXPECT_EQ(broker_->Metadata("").topics.size(), 1u);
}

TEST_F(BrokerClusterTest, WithoutAConfirmedLeaseItRefusesWritesButStillServesReads) {
  SetTopic("t", 1, {1}, 1);
  ASSERT_TRUE(Apply().ok());
  ASSERT_TRUE(Produce("t", {To(0, "a")}).ok());
  fake_.lease_valid = false;
  EXPECT_EQ(Produce("t", {To(0, "b")}).status().code(), absl::StatusCode::kUnavailable);
  auto read = Fetch({"t", 0, 0});
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(read->records.size(), 1u);
}

TEST_F(BrokerClusterTest, KeylessRecordsGoToPartitionsItLeads) {
  SetTopic("t", 1, {2, 1, 2, 1}, 1);
  ASSERT_TRUE(Apply().ok());
  for (int i = 0; i < 8; ++i) {
    auto r = Produce("t", {Keyless("x")});
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_THAT(r->positions[0].partition, ::testing::AnyOf(1, 3));
  }
}

TEST_F(BrokerClusterTest, TopicsFollowTheViewIncludingARecreatedName) {
  SetTopic("t", 7, {1}, 1);
  ASSERT_TRUE(Apply().ok());
  ASSERT_TRUE(Produce("t", {To(0, "old")}).ok());
  SetTopic("t", 8, {1}, 1);  // deleted and created again through another broker
  ASSERT_TRUE(Apply().ok());
  EXPECT_EQ(broker_->DescribeTopic("t")->meta.id, TopicId(8));
  EXPECT_TRUE(ReadAll("t", 0).empty()) << "the new topic never sees the old one's records";
  fake_.view->topics.erase("t");
  ASSERT_TRUE(Apply().ok());
  EXPECT_EQ(broker_->DescribeTopic("t").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(BrokerClusterTest, LeaderEpochsNeverGoBackAndStaleViewsAreIgnored) {
  SetTopic("t", 1, {1}, 4);
  ASSERT_TRUE(Apply().ok());
  auto stale = std::make_shared<ClusterView>(*fake_.view);
  stale->revision = 0;
  stale->topics.erase("t");
  EXPECT_TRUE(broker_->ApplyView(stale).ok());
  EXPECT_TRUE(broker_->DescribeTopic("t").ok()) << "an older view changes nothing";
  SetTopic("t", 1, {1}, 3);  // an epoch going back would be a metadata bug: refused
  EXPECT_EQ(Apply().code(), absl::StatusCode::kFailedPrecondition);
}

// A producer initialised through another broker (an id this broker never saw) is served, and
// once a newer epoch of it has appended, the older is fenced, also after a restart.
TEST_F(BrokerClusterTest, IdempotentProducersInitialisedElsewhereAreServedAndFenced) {
  SetTopic("t", 1, {1}, 1);
  ASSERT_TRUE(Apply().ok());
  const ProducerInfo elsewhere{ProducerId(77), 3, "relay"};
  ASSERT_TRUE(Produce("t", {To(0, "a")}, Stamp(elsewhere, {{0, 0}})).ok());
  auto retry = Produce("t", {To(0, "a")}, Stamp(elsewhere, {{0, 0}}));
  ASSERT_TRUE(retry.ok());
  EXPECT_TRUE(retry->positions[0].duplicate);
  Reopen();
  ASSERT_TRUE(Apply().ok());
  const ProducerInfo zombie{ProducerId(77), 2, "relay"};
  EXPECT_EQ(Produce("t", {To(0, "z")}, Stamp(zombie, {{0, 1}})).status().code(),
            absl::StatusCode::kFailedPrecondition)
      << "the partition's own producer state fences an older epoch";
  auto init = broker_->InitProducer("");
  ASSERT_TRUE(init.ok());
  EXPECT_EQ(init->id, ProducerId(101)) << "ids come from the cluster";
}

TEST_F(BrokerClusterTest, CreateTopicChecksTheReplicationFactorAgainstLiveBrokers) {
  EXPECT_EQ(broker_->CreateTopic("t", 3, {}, 3).status().code(),
            absl::StatusCode::kInvalidArgument);
  TopicConfigPatch too_many_in_sync;
  too_many_in_sync.min_insync_replicas = 3;
  EXPECT_EQ(broker_->CreateTopic("t", 3, too_many_in_sync, 2).status().code(),
            absl::StatusCode::kInvalidArgument)
      << "min_insync_replicas above the replication factor";
  ASSERT_TRUE(broker_->CreateTopic("t", 3, {}, 2).ok());
  ASSERT_EQ(fake_.created.size(), 1u);
  EXPECT_EQ(fake_.created[0].partitions, 3);
  EXPECT_EQ(fake_.created[0].config.min_insync_replicas, 1) << "the default below RF 3";
  SetTopic("u", 9, {1}, 1);
  EXPECT_EQ(broker_->CreateTopic("u", 1, {}, 1).status().code(), absl::StatusCode::kAlreadyExists);
}

// At the leader, DescribeTopic names the replicas, the in-sync set and
// each follower's durable end, lag and time since it was caught up (on the injected clock);
// ReplicationSnapshot, the replication metrics' source, lists only what this broker leads.

}  // namespace
}  // namespace conduit::log_broker
