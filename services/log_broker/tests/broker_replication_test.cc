// The broker as a partition's leader in a cluster: followers' lag, acks all, the high watermark
// and when it may lead at all, on views from a fake ClusterMetadata (broker_cluster_fixture.h).

#include "services/log_broker/tests/broker_cluster_fixture.h"

namespace conduit::log_broker {

void PrintTo(const FollowerLag& f, std::ostream* os) {
  *os << "{broker " << f.broker << ", end " << f.log_end_offset << ", lag " << f.lag_records
      << ", since caught up " << f.since_caught_up << (f.in_sync ? ", in sync}" : "}");
}

namespace {

using ::testing::ElementsAre;
using namespace ::conduit::log_broker::testing;  // NOLINT: test fixture helpers

TEST_F(BrokerClusterTest, DescribeShowsReplicasTheInSyncSetAndEachFollowersLag) {
  TopicAssignment t;
  t.meta = TopicMeta{TopicId(5), "r", 2, TopicConfig{}, absl::UnixEpoch()};
  t.meta.config.acks = Acks::kLeader;  // appends here are answered without the followers
  t.meta.config.min_insync_replicas = 2;
  t.partitions.push_back(PartitionAssignment{1, LeaderEpoch(2), {1, 2, 3}, {1, 2, 3}});  // led here
  t.partitions.push_back(
      PartitionAssignment{2, LeaderEpoch(4), {2, 3}, {2, 3}});  // not a replica here
  t.partition_revisions = {1, 1};
  t.replication_factor = 3;
  fake_.view->topics["r"] = t;
  ASSERT_TRUE(Apply().ok());
  ASSERT_TRUE(Produce("r", {To(0, "a"), To(0, "b"), To(0, "c")}).ok());

  EXPECT_EQ(broker_->DescribeTopic("r")->replication_factor, 3);
  ReplicationDescription r = Describe("r", 0).replication;
  EXPECT_EQ(r.role, ReplicaRole::kLeader);
  EXPECT_EQ(r.leader_epoch, LeaderEpoch(2));
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

  const std::vector<PartitionReplication> led = broker_->replicas().ReplicationSnapshot();
  ASSERT_EQ(led.size(), 1u) << "partition 1 is not led here";
  EXPECT_EQ(led[0].topic, "r");
  EXPECT_EQ(led[0].partition, 0);
  EXPECT_EQ(led[0].min_insync_replicas, 2);
  EXPECT_EQ(led[0].replication.followers, described.replication.followers);
}

// Acks all: a follower that never fetches keeps the high watermark below the
// batch, so the produce is answered DEADLINE_EXCEEDED once ack_timeout passes on the injected
// clock, and never as success; the record stays invisible. Both followers fetching past a
// later batch acknowledge it (the control that the wait can end well).
// An empty follower log is one whose last epoch is below 0, however far below (the follower's
// own number, taken as sent): its fetch from the log start is served, not taken for divergence.
TEST_F(BrokerClusterTest, AFollowerWithAnEmptyLogFetchesFromTheStartWhateverNegativeEpochItSends) {
  TopicAssignment t;
  t.meta = TopicMeta{TopicId(5), "r", 1, TopicConfig{}, absl::UnixEpoch()};
  t.meta.config.acks = Acks::kLeader;
  t.partitions.push_back(PartitionAssignment{1, LeaderEpoch(2), {1, 2}, {1, 2}});
  t.partition_revisions = {1};
  t.replication_factor = 2;
  fake_.view->topics["r"] = t;
  ASSERT_TRUE(Apply().ok());
  ASSERT_TRUE(Produce("r", {To(0, "a"), To(0, "b")}).ok());
  for (const LeaderEpoch empty : {kNoLeaderEpoch, LeaderEpoch(-2)}) {
    const ReplicaFetchData a = FetchAs(2, /*offset=*/0, empty, LeaderEpoch(2));
    EXPECT_TRUE(a.status.ok()) << empty << ": " << a.status;
    EXPECT_FALSE(a.truncate_to.has_value()) << empty;
  }
}

// Fencing: a follower whose view names an older leader epoch is refused as stale, one that names
// a newer epoch than the leader has reached is told to wait; neither counts as progress, so the
// high watermark stays where it was.
TEST_F(BrokerClusterTest, FollowerFetchesAtAnotherLeaderEpochAreFencedAndMoveNothing) {
  ASSERT_NO_FATAL_FAILURE(LeadReplicatedTopic(3));
  ASSERT_EQ(Describe("r", 0).high_watermark, 0);
  const ReplicaFetchData stale = FetchAs(2, 3, LeaderEpoch(2), LeaderEpoch(1));
  EXPECT_EQ(stale.status.code(), absl::StatusCode::kFailedPrecondition) << stale.status;
  EXPECT_THAT(std::string(stale.status.message()), ::testing::HasSubstr("fenced"));
  const ReplicaFetchData ahead = FetchAs(3, 3, LeaderEpoch(2), LeaderEpoch(3));
  EXPECT_EQ(ahead.status.code(), absl::StatusCode::kUnavailable) << ahead.status;
  EXPECT_EQ(Describe("r", 0).high_watermark, 0) << "a refused fetch is no follower's progress";

  FetchAsFollower(2, 3);
  FetchAsFollower(3, 3);
  EXPECT_EQ(Describe("r", 0).high_watermark, 3);
}

// The high watermark never goes back: a follower that then reports a shorter log (a fetch from
// an earlier offset) lowers its own progress, not what readers were already shown.
TEST_F(BrokerClusterTest, TheHighWatermarkNeverGoesBackWhenAFollowerReportsLess) {
  ASSERT_NO_FATAL_FAILURE(LeadReplicatedTopic(3));
  FetchAsFollower(2, 3);
  FetchAsFollower(3, 3);
  ASSERT_EQ(Describe("r", 0).high_watermark, 3);
  FetchAsFollower(2, 1);
  EXPECT_EQ(Describe("r", 0).high_watermark, 3);
}

// A follower whose log diverges from the leader's (its last epoch ends earlier here than its
// fetch offset) is told where to cut its log back to.
TEST_F(BrokerClusterTest, ADivergentFollowerIsToldWhereToTruncate) {
  ASSERT_NO_FATAL_FAILURE(LeadReplicatedTopic(2));
  // Epoch 1 never appended here: the follower's records of it are not the leader's.
  const ReplicaFetchData a = FetchAs(2, 5, LeaderEpoch(1), LeaderEpoch(2));
  EXPECT_EQ(a.status.code(), absl::StatusCode::kOutOfRange) << a.status;
  ASSERT_TRUE(a.truncate_to.has_value());
  EXPECT_EQ(*a.truncate_to, 0);
}

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
  // Between the high watermark and the log end a reader waits (a new leader's watermark can
  // trail the one a reader saw at the old leader): no records, not OUT_OF_RANGE. Past the log
  // end is out of range.
  auto between = Fetch({"r", 0, 1});
  ASSERT_TRUE(between.ok()) << between.status();
  EXPECT_TRUE(between->records.empty());
  EXPECT_EQ(between->next_offset, 1);
  auto past = Fetch({"r", 0, 2});
  EXPECT_EQ(past.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(std::string(past.status().message()), ::testing::HasSubstr("valid offsets are 0..1"));

  auto replicated = ProduceAsync({To(0, "b")});
  FetchAsFollower(2, 2);
  EXPECT_FALSE(replicated->Answered());
  FetchAsFollower(3, 2);
  ASSERT_TRUE(replicated->Answered(absl::Seconds(10)));
  ASSERT_TRUE(replicated->result.ok()) << replicated->result.status();
  EXPECT_EQ(replicated->result->positions[0].offset, 1);
  EXPECT_EQ(Describe("r").high_watermark, 2);
}

// Grouped produce parts (ProduceStream's plain messages) meet acks all part by part: each is
// answered once both followers have fetched past its own records. A part with a bad record is
// refused alone, at once.
TEST_F(BrokerClusterTest, AcksAllAnswersEachGroupedProducePartOnceTheFollowersHaveIt) {
  SetReplicatedTopic();
  ASSERT_TRUE(Apply().ok());
  std::vector<std::unique_ptr<Pending>> answers;
  std::vector<Broker::ProducePart> parts;
  for (std::vector<ProduceRecordArgs> records :
       {std::vector{To(0, "a"), To(0, "b")}, std::vector{To(7, "bad")}, std::vector{To(0, "c")}}) {
    answers.push_back(std::make_unique<Pending>());
    parts.push_back({std::move(records), [p = answers.back().get()](auto r) {
                       p->result = std::move(r);
                       p->done.Notify();
                     }});
  }
  broker_->ProduceParts("r", std::move(parts));
  ASSERT_TRUE(answers[1]->done.HasBeenNotified())
      << "the bad part is refused before the call returns";
  EXPECT_EQ(answers[1]->result.status().code(), absl::StatusCode::kNotFound);
  for (int i = 0; i < 1000 && Describe("r").meta.next_offset < 3; ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_EQ(Describe("r").meta.next_offset, 3) << "the good parts appended at the leader";
  FetchAsFollower(2, 3);
  FetchAsFollower(3, 2);  // follower 3 has only the first part
  ASSERT_TRUE(answers[0]->Answered(absl::Seconds(10))) << "the first part is replicated";
  ASSERT_TRUE(answers[0]->result.ok()) << answers[0]->result.status();
  EXPECT_EQ(answers[0]->result->positions.size(), 2u);
  EXPECT_EQ(answers[0]->result->positions[1].offset, 1);
  EXPECT_FALSE(answers[2]->Answered()) << "the last part waits for follower 3";
  FetchAsFollower(3, 3);
  ASSERT_TRUE(answers[2]->Answered(absl::Seconds(10)));
  ASSERT_TRUE(answers[2]->result.ok()) << answers[2]->result.status();
  EXPECT_EQ(answers[2]->result->positions.at(0).offset, 2);
  EXPECT_EQ(Describe("r").high_watermark, 3);
}

// In a cluster each part is checked for its own partitions: a part for a partition led by
// another broker gets the not-leader answer naming it, and the parts around it are appended.
TEST_F(BrokerClusterTest, AProducePartForAPartitionLedElsewhereIsRefusedAlone) {
  SetTopic("m", 7, {1, 2}, 1);
  ASSERT_TRUE(Apply().ok());
  std::vector<std::unique_ptr<Pending>> answers;
  std::vector<Broker::ProducePart> parts;
  for (int32_t partition : {0, 1, 0}) {
    answers.push_back(std::make_unique<Pending>());
    parts.push_back({{To(partition, "v")}, [p = answers.back().get()](auto r) {
                       p->result = std::move(r);
                       p->done.Notify();
                     }});
  }
  broker_->ProduceParts("m", std::move(parts));
  for (auto& a : answers) ASSERT_TRUE(a->Answered(absl::Seconds(10)));
  EXPECT_EQ(answers[1]->result.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(answers[1]->result.status().message()),
              ::testing::HasSubstr("its leader is broker 2"));
  ASSERT_TRUE(answers[0]->result.ok()) << answers[0]->result.status();
  ASSERT_TRUE(answers[2]->result.ok()) << answers[2]->result.status();
  EXPECT_EQ(answers[0]->result->positions.at(0).offset, 0);
  EXPECT_EQ(answers[2]->result->positions.at(0).offset, 1);
}

// A produce made from inside the answer of an acks-all produce that failed because leadership
// moved runs while the new view is being applied: the partition already follows, the applied
// view still names this broker. It is refused, and nothing is appended to the follower's log.
// (ProduceStream hands queued messages over from such answers.)
TEST_F(BrokerClusterTest, AProduceMadeWhileLeadershipMovesIsRefused) {
  SetReplicatedTopic();
  ASSERT_TRUE(Apply().ok());
  absl::Notification answered;
  absl::Status first, second;
  ASSERT_TRUE(broker_
                  ->Produce("r", {To(0, "a")}, std::nullopt,
                            [&](auto r) {
                              first = r.status();
                              second =
                                  broker_->Produce("r", {To(0, "late")}, std::nullopt, [](auto) {});
                              answered.Notify();
                            })
                  .ok());
  for (int i = 0; i < 1000 && Describe("r").meta.next_offset < 1; ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  // Time for the completion thread to register the produce's wait for its followers, so that
  // the move fails it from inside ApplyView. (Were it later, the produce would be failed by the
  // new view, which the checks below accept too: this sleep can only make the test weaker.)
  absl::SleepFor(absl::Milliseconds(100));
  fake_.view->topics["r"].partitions[0] = PartitionAssignment{2, LeaderEpoch(3), {1, 2, 3}, {2, 3}};
  ASSERT_TRUE(Apply().ok());
  ASSERT_TRUE(answered.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_EQ(first.code(), absl::StatusCode::kUnavailable) << first;
  EXPECT_FALSE(second.ok()) << "a produce on a partition that now follows is refused";
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_EQ(Describe("r").meta.next_offset, 1) << "nothing appended after the move";
}

// A produce queued while this broker led but staged only once it follows (ApplyView changes the
// role before the follower's truncation is queued) is refused and appends nothing: staged, it
// could be overtaken by a truncation in the same batch, and its records outlive the cut.
TEST_F(BrokerClusterTest, AProduceQueuedBeforeLeadershipMovedIsRefusedWhenStaged) {
  SetReplicatedTopic();
  ASSERT_TRUE(Apply().ok());
  store_.HoldWrites(true);
  Pending first, queued;
  auto answer = [](Pending* p) {
    return [p](absl::StatusOr<ProduceResult> r) {
      p->result = std::move(r);
      p->done.Notify();
    };
  };
  ASSERT_TRUE(broker_->Produce("r", {To(0, "a")}, std::nullopt, answer(&first)).ok());
  store_.WaitForWritesEntered(1);
  // Checked while this broker leads; waits behind the held write.
  ASSERT_TRUE(broker_->Produce("r", {To(0, "queued")}, std::nullopt, answer(&queued)).ok());
  fake_.view->topics["r"].partitions[0] = PartitionAssignment{2, LeaderEpoch(3), {1, 2, 3}, {2, 3}};
  ASSERT_TRUE(Apply().ok());
  store_.HoldWrites(false);
  ASSERT_TRUE(queued.Answered(absl::Seconds(10)));
  EXPECT_EQ(queued.result.status().code(), absl::StatusCode::kUnavailable)
      << queued.result.status();
  EXPECT_THAT(std::string(queued.result.status().message()),
              ::testing::HasSubstr("no longer leads r/0"));
  ASSERT_TRUE(first.Answered(absl::Seconds(10)));
  EXPECT_EQ(Describe("r").meta.next_offset, 1) << "only the record written before the move";
}

// A batch waiting for its followers when leadership moves is answered UNAVAILABLE ("outcome
// unknown": the new leader may or may not have it), at once, not at the timeout.
TEST_F(BrokerClusterTest, WaitingAcksAreAnsweredUnavailableWhenLeadershipMoves) {
  SetReplicatedTopic();
  ASSERT_TRUE(Apply().ok());
  auto waiting = ProduceAsync({To(0, "a"), To(0, "b")});
  FetchAsFollower(2, 1);  // part of the batch reached one follower
  EXPECT_FALSE(waiting->Answered());
  fake_.view->topics["r"].partitions[0] = PartitionAssignment{2, LeaderEpoch(3), {1, 2, 3}, {2, 3}};
  ASSERT_TRUE(Apply().ok());
  ASSERT_TRUE(waiting->Answered(absl::Seconds(10))) << "answered when the new view applies";
  EXPECT_EQ(waiting->result.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(waiting->result.status().message()),
              ::testing::HasSubstr("leadership moved to broker 2 at epoch 3"));
  EXPECT_EQ(Produce("r", {To(0, "c")}).status().code(), absl::StatusCode::kFailedPrecondition)
      << "a follower now: produce names the new leader";
}

// A leader that cannot confirm its etcd lease may already be deposed, so
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
