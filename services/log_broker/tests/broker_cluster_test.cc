// The broker in cluster mode: it follows the applied view and serves only what it leads. The
// view comes from a fake ClusterMetadata here (the rule under test is the broker's; the etcd
// implementation has its own tests against a real etcd).

#include <atomic>
#include <map>
#include <memory>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "services/log_broker/domain/not_leader.h"
#include "services/log_broker/tests/broker_fixture.h"

namespace conduit::log_broker {

void PrintTo(const FollowerLag& f, std::ostream* os) {
  *os << "{broker " << f.broker << ", end " << f.log_end_offset << ", lag " << f.lag_records
      << ", since caught up " << f.since_caught_up << (f.in_sync ? ", in sync}" : "}");
}

namespace {

using ::testing::ElementsAre;
using namespace ::conduit::log_broker::testing;  // NOLINT: test fixture helpers

class FakeCluster : public ClusterMetadata {
 public:
  int32_t self() const override { return 1; }
  const std::string& cluster_name() const override { return name_; }
  std::shared_ptr<const ClusterView> View() const override { return view; }
  bool LeaseValid() const override { return lease_valid; }
  int64_t RegistrationRevision() const override { return registration_revision; }
  absl::StatusOr<TopicAssignment> CreateTopic(const TopicMeta& meta, int32_t rf) override {
    created.push_back(meta);
    TopicAssignment t;
    t.meta = meta;
    return t;
  }
  absl::Status DeleteTopic(const std::string& name) override { return absl::OkStatus(); }
  absl::StatusOr<ProducerInfo> InitProducer(const std::string& name) override {
    return ProducerInfo{ProducerId(++producers), 0, name};
  }
  absl::StatusOr<TopicMeta> UpdateTopicConfig(
      const std::string& name,
      const std::function<absl::StatusOr<TopicConfig>(const TopicConfig&)>& change) override {
    return absl::UnimplementedError("not in this test");
  }
  absl::StatusOr<int64_t> UpdatePartitionState(TopicId, int32_t, int64_t,
                                               const PartitionAssignment&) override {
    return 0;
  }

  std::shared_ptr<ClusterView> view = std::make_shared<ClusterView>();
  std::atomic<bool> lease_valid{true};
  std::atomic<int64_t> registration_revision{0};
  std::vector<TopicMeta> created;
  int64_t producers = 100;

 private:
  std::string name_ = "test";
};

class BrokerClusterTest : public LifecycleTest {
 protected:
  BrokerClusterTest() {
    cluster_ = &fake_;
    Reopen();
    for (int32_t id : {1, 2}) {
      fake_.view->brokers[id] = BrokerRegistration{id, absl::StrCat("127.0.0.1:10", id), "i"};
    }
  }

  // Topic `name` with id `id`; partition p led by leaders[p] (kNoBroker: offline) at `epoch`.
  void SetTopic(const std::string& name, uint64_t id, std::vector<int32_t> leaders, int32_t epoch) {
    TopicAssignment t;
    t.meta = TopicMeta{TopicId(id), name, static_cast<int32_t>(leaders.size()), TopicConfig{},
                       absl::UnixEpoch()};
    for (int32_t leader : leaders) {
      t.partitions.push_back(PartitionAssignment{leader, epoch, {leader}, {leader}});
      t.partition_revisions.push_back(1);
    }
    fake_.view->topics[name] = t;
  }
  absl::Status Apply() {
    auto next = std::make_shared<ClusterView>(*fake_.view);
    next->revision = ++revision_;
    fake_.view = next;
    return broker_->ApplyView(next);
  }

  // A follower's fetch of partition 0 of topic "r" (id 5) from `offset` at leader epoch 2.
  void FetchAsFollower(int32_t follower, int64_t offset) {
    absl::Notification done;
    ReplicaFetchItem item{"r", TopicId(5), 0, offset, 2, 2};
    ASSERT_TRUE(broker_
                    ->ReplicaFetch(follower, {item}, 1 << 20, absl::ZeroDuration(),
                                   [&](std::vector<ReplicaFetchData> answers) {
                                     EXPECT_TRUE(answers.at(0).status.ok()) << answers[0].status;
                                     done.Notify();
                                   })
                    .ok());
    done.WaitForNotification();
  }

  // Topic "r" (id 5), one partition led here at epoch 2 with replicas and in-sync set {1, 2, 3},
  // acks all and min in-sync 2: an append is answered once both followers have fetched past it.
  void SetReplicatedTopic() {
    TopicAssignment t;
    t.meta = TopicMeta{TopicId(5), "r", 1, TopicConfig{}, absl::UnixEpoch()};
    t.meta.config.min_insync_replicas = 2;
    t.partitions.push_back(PartitionAssignment{1, 2, {1, 2, 3}, {1, 2, 3}});
    t.partition_revisions = {1};
    t.replication_factor = 3;
    fake_.view->topics["r"] = t;
  }

  // A produce whose answer is awaited later (acks all waits for the followers).
  struct Pending {
    absl::Notification done;
    absl::StatusOr<ProduceResult> result;
    bool Answered(absl::Duration wait = absl::Milliseconds(200)) {
      return done.WaitForNotificationWithTimeout(wait);
    }
  };
  // Returns once the records are appended at the leader (not yet answered: acks all).
  std::unique_ptr<Pending> ProduceAsync(std::vector<ProduceRecordArgs> records) {
    const int64_t end = Describe("r").meta.next_offset + static_cast<int64_t>(records.size());
    auto pending = std::make_unique<Pending>();
    Pending* p = pending.get();
    const absl::Status queued =
        broker_->Produce("r", std::move(records), std::nullopt, [p](auto r) {
          p->result = std::move(r);
          p->done.Notify();
        });
    EXPECT_TRUE(queued.ok()) << queued;
    for (int i = 0; i < 1000 && Describe("r").meta.next_offset < end; ++i) {
      absl::SleepFor(absl::Milliseconds(10));
    }
    EXPECT_EQ(Describe("r").meta.next_offset, end) << "appended";
    return pending;
  }

  FakeCluster fake_;
  int64_t revision_ = 0;
};

TEST_F(BrokerClusterTest, ServesOnlyWhatItLeadsAndNamesTheLeaderOtherwise) {
  SetTopic("t", 42, {1, 2, kNoBroker}, 5);
  ASSERT_TRUE(Apply().ok());
  auto led = Produce("t", {To(0, "a")});
  ASSERT_TRUE(led.ok()) << led.status();
  EXPECT_EQ(ReadAll("t", 0).front().leader_epoch, 5) << "appends carry the view's epoch";

  const absl::Status other = Produce("t", {To(1, "b")}).status();
  EXPECT_EQ(other.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(other.message()),
              ::testing::HasSubstr("its leader is broker 2 at 127.0.0.1:102 (epoch 5)"));
  EXPECT_EQ(LeaderHintOf(other), (LeaderHint{2, "127.0.0.1:102", 5}));
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

// Issue 16 items 9 and 10: at the leader, DescribeTopic names the replicas, the in-sync set and
// each follower's durable end, lag and time since it was caught up (on the injected clock);
// ReplicationSnapshot, the replication metrics' source, lists only what this broker leads.
TEST_F(BrokerClusterTest, DescribeShowsReplicasTheInSyncSetAndEachFollowersLag) {
  TopicAssignment t;
  t.meta = TopicMeta{TopicId(5), "r", 2, TopicConfig{}, absl::UnixEpoch()};
  t.meta.config.acks = Acks::kLeader;  // appends here are answered without the followers
  t.meta.config.min_insync_replicas = 2;
  t.partitions.push_back(PartitionAssignment{1, 2, {1, 2, 3}, {1, 2, 3}});  // led here
  t.partitions.push_back(PartitionAssignment{2, 4, {2, 3}, {2, 3}});        // not a replica here
  t.partition_revisions = {1, 1};
  t.replication_factor = 3;
  fake_.view->topics["r"] = t;
  ASSERT_TRUE(Apply().ok());
  ASSERT_TRUE(Produce("r", {To(0, "a"), To(0, "b"), To(0, "c")}).ok());

  EXPECT_EQ(broker_->DescribeTopic("r")->replication_factor, 3);
  ReplicationDescription r = Describe("r", 0).replication;
  EXPECT_EQ(r.role, ReplicaRole::kLeader);
  EXPECT_EQ(r.leader_epoch, 2);
  EXPECT_THAT(r.replicas, ElementsAre(1, 2, 3));
  EXPECT_THAT(r.isr, ElementsAre(1, 2, 3));
  EXPECT_THAT(r.followers, ElementsAre(FollowerLag{2, -1, 3, absl::ZeroDuration(), true},
                                       FollowerLag{3, -1, 3, absl::ZeroDuration(), true}))
      << "not fetched yet at this epoch: the whole log behind";

  clock_.Advance(absl::Seconds(1));
  FetchAsFollower(2, 3);  // caught up
  FetchAsFollower(3, 1);  // two records behind
  clock_.Advance(absl::Seconds(2));
  const PartitionDescription described = Describe("r", 0);
  EXPECT_THAT(described.replication.followers,
              ElementsAre(FollowerLag{2, 3, 0, absl::Seconds(2), true},
                          FollowerLag{3, 1, 2, absl::Seconds(3), true}));
  EXPECT_EQ(described.high_watermark, 1) << "the least durable end over the in-sync set";

  r = Describe("r", 1).replication;
  EXPECT_EQ(r.role, ReplicaRole::kNone);
  EXPECT_THAT(r.replicas, ElementsAre(2, 3));
  EXPECT_TRUE(r.followers.empty()) << "only a leader knows its followers";

  const std::vector<PartitionReplication> led = broker_->ReplicationSnapshot();
  ASSERT_EQ(led.size(), 1u) << "partition 1 is not led here";
  EXPECT_EQ(led[0].topic, "r");
  EXPECT_EQ(led[0].partition, 0);
  EXPECT_EQ(led[0].min_insync_replicas, 2);
  EXPECT_EQ(led[0].replication.followers, described.replication.followers);
}

// Acks all (issue 16 item 4): a follower that never fetches keeps the high watermark below the
// batch, so the produce is answered DEADLINE_EXCEEDED once ack_timeout passes on the injected
// clock, and never as success; the record stays invisible. Both followers fetching past a
// later batch acknowledge it (the control that the wait can end well).
TEST_F(BrokerClusterTest, AcksAllAnswersDeadlineExceededWhenAFollowerNeverFetches) {
  SetReplicatedTopic();
  ASSERT_TRUE(Apply().ok());
  auto stuck = ProduceAsync({To(0, "a")});
  FetchAsFollower(2, 1);  // follower 3 never fetches
  EXPECT_FALSE(stuck->Answered()) << "one in-sync follower has not got the record";
  clock_.Advance(BrokerOptions{}.ack_timeout - absl::Seconds(1));
  EXPECT_FALSE(stuck->Answered()) << "before ack_timeout";
  clock_.Advance(absl::Seconds(1));
  ASSERT_TRUE(stuck->Answered(absl::Seconds(10))) << "answered at ack_timeout";
  EXPECT_EQ(stuck->result.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(stuck->result.status().message()),
              ::testing::HasSubstr("the outcome is unknown"));
  EXPECT_EQ(Describe("r").high_watermark, 0) << "nothing above the high watermark is visible";
  EXPECT_TRUE(ReadAll("r", 0).empty());

  auto replicated = ProduceAsync({To(0, "b")});
  FetchAsFollower(2, 2);
  EXPECT_FALSE(replicated->Answered());
  FetchAsFollower(3, 2);
  ASSERT_TRUE(replicated->Answered(absl::Seconds(10)));
  ASSERT_TRUE(replicated->result.ok()) << replicated->result.status();
  EXPECT_EQ(replicated->result->positions[0].offset, 1);
  EXPECT_EQ(Describe("r").high_watermark, 2);
}

// A batch waiting for its followers when leadership moves is answered UNAVAILABLE ("outcome
// unknown": the new leader may or may not have it), at once, not at the timeout.
TEST_F(BrokerClusterTest, WaitingAcksAreAnsweredUnavailableWhenLeadershipMoves) {
  SetReplicatedTopic();
  ASSERT_TRUE(Apply().ok());
  auto waiting = ProduceAsync({To(0, "a"), To(0, "b")});
  FetchAsFollower(2, 1);  // part of the batch reached one follower
  EXPECT_FALSE(waiting->Answered());
  fake_.view->topics["r"].partitions[0] = PartitionAssignment{2, 3, {1, 2, 3}, {2, 3}};
  ASSERT_TRUE(Apply().ok());
  ASSERT_TRUE(waiting->Answered(absl::Seconds(10))) << "answered when the new view applies";
  EXPECT_EQ(waiting->result.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(waiting->result.status().message()),
              ::testing::HasSubstr("leadership moved to broker 2 at epoch 3"));
  EXPECT_EQ(Produce("r", {To(0, "c")}).status().code(), absl::StatusCode::kFailedPrecondition)
      << "a follower now: produce names the new leader";
}

// Issue 16 item 8: a leader that cannot confirm its etcd lease may already be deposed, so
// followers' fetches do not advance its high watermark (nothing it holds becomes visible or
// acknowledged) until the lease is confirmed again.
TEST_F(BrokerClusterTest, TheHighWatermarkHoldsWhileTheLeaseIsUnconfirmed) {
  SetReplicatedTopic();
  ASSERT_TRUE(Apply().ok());
  auto waiting = ProduceAsync({To(0, "a")});
  fake_.lease_valid = false;
  FetchAsFollower(2, 1);
  FetchAsFollower(3, 1);
  EXPECT_FALSE(waiting->Answered()) << "both followers have it, but the lease is unconfirmed";
  EXPECT_EQ(Describe("r").high_watermark, 0);
  fake_.lease_valid = true;
  FetchAsFollower(2, 1);
  ASSERT_TRUE(waiting->Answered(absl::Seconds(10)));
  ASSERT_TRUE(waiting->result.ok()) << waiting->result.status();
  EXPECT_EQ(Describe("r").high_watermark, 1);
}

// A leader whose lease lapsed registers again (a new lease, confirmed) before it has applied
// the views written meanwhile, which may have deposed it. Under an applied view older than the
// registration it takes no write, even acks LEADER, and moves no high watermark, though that
// view names it leader; a view at least as recent decides (here: it still leads).
TEST_F(BrokerClusterTest, RegisteredAgainItLeadsOnlyUnderAViewAtLeastAsRecent) {
  SetReplicatedTopic();
  ASSERT_TRUE(Apply().ok());  // revision 1
  auto waiting = ProduceAsync({To(0, "a")});
  auto acks_leader = [&](const std::string& value) {
    absl::Notification done;
    absl::Status result;
    absl::Status queued = broker_->Produce(
        "r", {To(0, value)}, std::nullopt,
        [&](absl::StatusOr<ProduceResult> r) {
          result = r.status();
          done.Notify();
        },
        Acks::kLeader);
    if (!queued.ok()) return queued;
    done.WaitForNotification();
    return result;
  };
  fake_.registration_revision = 3;
  const absl::Status refused = acks_leader("b");
  EXPECT_EQ(refused.code(), absl::StatusCode::kUnavailable) << refused;
  EXPECT_THAT(std::string(refused.message()), ::testing::HasSubstr("joining the cluster again"));
  FetchAsFollower(2, 1);
  FetchAsFollower(3, 1);
  EXPECT_FALSE(waiting->Answered()) << "both followers have it, but the view may be stale";
  EXPECT_EQ(Describe("r").high_watermark, 0);
  ASSERT_TRUE(Apply().ok());  // revision 2: still older than the registration
  EXPECT_EQ(acks_leader("b").code(), absl::StatusCode::kUnavailable);

  ASSERT_TRUE(Apply().ok());  // revision 3: it still leads r/0 at epoch 2
  FetchAsFollower(2, 1);
  FetchAsFollower(3, 1);
  ASSERT_TRUE(waiting->Answered(absl::Seconds(10)));
  ASSERT_TRUE(waiting->result.ok()) << waiting->result.status();
  EXPECT_EQ(Describe("r").high_watermark, 1);
  EXPECT_TRUE(acks_leader("b").ok());
}

}  // namespace
}  // namespace conduit::log_broker
