#include <set>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/hash/murmur2.h"
#include "services/log_broker/tests/broker_fixture.h"

namespace conduit::log_broker {
namespace {

using ::testing::ElementsAre;
using namespace ::conduit::log_broker::testing;  // NOLINT: test fixture helpers

TEST_F(BrokerTest, CreateListDescribeDelete) {
  ASSERT_TRUE(broker_->CreateTopic("b", 2, {}).ok());
  ASSERT_TRUE(broker_->CreateTopic("a", 1, {}).ok());
  EXPECT_EQ(broker_->CreateTopic("a", 1, {}).status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(broker_->CreateTopic("bad name", 1, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(broker_->CreateTopic("c", 0, {}).status().code(), absl::StatusCode::kInvalidArgument);
  auto topics = broker_->ListTopics();
  ASSERT_EQ(topics.size(), 2u);
  EXPECT_EQ(topics[0].meta.name, "a");
  EXPECT_EQ(topics[0].replication_factor, 1);
  auto described = broker_->DescribeTopic("b");
  ASSERT_TRUE(described.ok());
  EXPECT_EQ(described->partitions.size(), 2u);
  EXPECT_EQ(described->replication_factor, 1);
  const ReplicationDescription& r = described->partitions[0].replication;
  EXPECT_EQ(r.role, ReplicaRole::kSole) << "a single node is broker 0, the one replica";
  EXPECT_THAT(r.replicas, ElementsAre(0));
  EXPECT_THAT(r.isr, ElementsAre(0));
  EXPECT_TRUE(r.followers.empty());
  // A cluster of one: every partition held alone, in sync with itself.
  const std::vector<PartitionReplication> held = broker_->replicas().ReplicationSnapshot();
  ASSERT_EQ(held.size(), 3u) << "a: 1 partition, b: 2";
  for (const PartitionReplication& p : held) {
    EXPECT_EQ(p.replication.role, ReplicaRole::kSole);
    EXPECT_THAT(p.replication.isr, ElementsAre(0));
  }
  EXPECT_EQ(broker_->DescribeTopic("zzz").status().code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(broker_->DeleteTopic("a").ok());
  EXPECT_EQ(broker_->DeleteTopic("a").code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(broker_->ListTopics().size(), 1u);
}

TEST_F(BrokerTest, OffsetsAreDensePerPartitionInRequestOrder) {
  ASSERT_TRUE(broker_->CreateTopic("t", 2, {}).ok());
  auto first = Produce("t", {To(0, "a"), To(1, "b"), To(0, "c")});
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_THAT(first->positions, ElementsAre(RecordPosition{0, 0}, RecordPosition{1, 0},
                                            RecordPosition{0, 1}));
  auto second = Produce("t", {To(0, "d")});
  ASSERT_TRUE(second.ok());
  EXPECT_THAT(second->positions, ElementsAre(RecordPosition{0, 2}));
  auto fetched = Fetch({"t", 0, 0});
  ASSERT_TRUE(fetched.ok());
  ASSERT_EQ(fetched->records.size(), 3u);
  EXPECT_EQ(*fetched->records[2].data.value, "d");
  EXPECT_EQ(fetched->high_watermark, 3);
}

TEST_F(BrokerTest, KeyedRecordsFollowKafkasPartitionerAndKeylessStickPerRequest) {
  ASSERT_TRUE(broker_->CreateTopic("t", 12, {}).ok());
  auto result = Produce("t", {Keyed("foobar", "1"), Keyed("abc", "2"), Keyed("foobar", "3")});
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->positions[0].partition, hash::PartitionForKey("foobar", 12));
  EXPECT_EQ(result->positions[0].partition, 6);  // Kafka: toPositive(-790332482) % 12
  EXPECT_EQ(result->positions[1].partition, 3);  // Kafka: toPositive(479470107) % 12
  EXPECT_EQ(result->positions[2].partition, 6);
  EXPECT_EQ(result->positions[2].offset, result->positions[0].offset + 1);

  // Keyless: every record of one request on one partition; successive requests rotate.
  std::set<int32_t> used;
  for (int i = 0; i < 12; ++i) {
    auto batch = Produce("t", {Keyless("x"), Keyless("y"), Keyless("z")});
    ASSERT_TRUE(batch.ok());
    EXPECT_EQ(batch->positions[0].partition, batch->positions[1].partition);
    EXPECT_EQ(batch->positions[1].partition, batch->positions[2].partition);
    used.insert(batch->positions[0].partition);
  }
  EXPECT_EQ(used.size(), 12u) << "round-robin covers every partition";
}

TEST_F(BrokerTest, BadProduceChangesNothing) {
  ASSERT_TRUE(broker_->CreateTopic("t", 2, MaxRecordBytes(16)).ok());
  EXPECT_EQ(Produce("nope", {Keyless("x")}).status().code(), absl::StatusCode::kNotFound);
  // No topic named at all is a malformed request, not an unknown topic.
  EXPECT_EQ(Produce("", {Keyless("x")}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Produce("t", {}).status().code(), absl::StatusCode::kInvalidArgument);
  // One bad record fails the whole request: the good one before it is not appended.
  EXPECT_EQ(Produce("t", {To(0, "ok"), To(5, "bad")}).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(Produce("t", {To(0, "ok"), Keyless(std::string(17, 'x'))}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store_.record_count(), 0u);
  auto ok = Produce("t", {To(0, "ok")});
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->positions[0].offset, 0) << "refused requests consumed no offsets";
}

TEST_F(BrokerTest, RequestOverTheSizeLimitIsRefusedWhole) {
  ASSERT_TRUE(broker_->CreateTopic("t", 1, MaxRecordBytes(8 << 20)).ok());
  std::vector<ProduceRecordArgs> records;
  for (int i = 0; i < 5; ++i) records.push_back(To(0, std::string(7 << 20, 'x')));  // 35 MiB
  auto status = Produce("t", std::move(records)).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("produce request is"), std::string::npos) << status;
  EXPECT_EQ(store_.record_count(), 0u);
}

TEST_F(BrokerTest, FetchValidatesAndNamesTheValidRange) {
  ASSERT_TRUE(broker_->CreateTopic("t", 1, {}).ok());
  ASSERT_TRUE(Produce("t", {To(0, "a"), To(0, "b")}).ok());
  EXPECT_EQ(Fetch({"t", 0, -1}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Fetch({"t", 1, 0}).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(Fetch({"x", 0, 0}).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(Fetch({"", 0, 0}).status().code(), absl::StatusCode::kInvalidArgument);
  FetchArgs zero_bytes{"t", 0, 0};
  zero_bytes.max_bytes = 0;
  EXPECT_EQ(Fetch(zero_bytes).status().code(), absl::StatusCode::kInvalidArgument);
  auto out_of_range = Fetch({"t", 0, 3});
  EXPECT_EQ(out_of_range.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_NE(out_of_range.status().message().find("0..2"), std::string::npos)
      << out_of_range.status();
  auto at_end = Fetch({"t", 0, 2});
  ASSERT_TRUE(at_end.ok());
  EXPECT_TRUE(at_end->records.empty());
  EXPECT_EQ(at_end->high_watermark, 2);
}

TEST_F(BrokerTest, FetchLimitsRecordsAndBytesButReturnsAtLeastOne) {
  ASSERT_TRUE(broker_->CreateTopic("t", 1, {}).ok());
  ASSERT_TRUE(Produce("t", {To(0, std::string(100, 'a')), To(0, std::string(100, 'b')),
                            To(0, std::string(100, 'c'))})
                  .ok());
  FetchArgs two{"t", 0, 0};
  two.max_records = 2;
  EXPECT_EQ(Fetch(two)->records.size(), 2u);
  FetchArgs tiny{"t", 0, 1};
  tiny.max_bytes = 10;
  auto one = Fetch(tiny);
  ASSERT_EQ(one->records.size(), 1u);
  EXPECT_EQ(one->records[0].offset, 1);
}

TEST_F(BrokerTest, LongPollWakesOnAppendNotOnTimeout) {
  ASSERT_TRUE(broker_->CreateTopic("t", 1, {}).ok());
  absl::Notification done;
  absl::StatusOr<FetchResult> result;
  FetchArgs args{"t", 0, 0};
  args.max_wait = absl::Seconds(30);
  const absl::Time started = absl::Now();
  ASSERT_TRUE(broker_->Fetch(args, [&](auto r) {
    result = std::move(r);
    done.Notify();
  }).ok());
  EXPECT_FALSE(done.HasBeenNotified());
  ASSERT_TRUE(Produce("t", {To(0, "wake")}).ok());
  done.WaitForNotification();
  EXPECT_LT(absl::Now() - started, absl::Seconds(10)) << "woken by the append, not the 30 s wait";
  ASSERT_TRUE(result.ok());
  ASSERT_EQ(result->records.size(), 1u);
  EXPECT_EQ(*result->records[0].data.value, "wake");
}

TEST_F(BrokerTest, LongPollTimesOutEmptyWhenItsWaitHasPassedOnTheClock) {
  ASSERT_TRUE(broker_->CreateTopic("t", 1, {}).ok());
  FetchArgs args{"t", 0, 0};
  args.max_wait = absl::Milliseconds(20);
  absl::Notification done;
  absl::StatusOr<FetchResult> result;
  ASSERT_TRUE(broker_->Fetch(args, [&](auto r) {
    result = std::move(r);
    done.Notify();
  }).ok());
  clock_.Set(clock_.Now() + absl::Hours(1));  // a wall-clock step does not end the wait
  clock_.Advance(absl::Milliseconds(19));
  EXPECT_FALSE(done.WaitForNotificationWithTimeout(absl::Milliseconds(50)));
  clock_.Advance(absl::Milliseconds(1));
  done.WaitForNotification();
  ASSERT_TRUE(result.ok());
  EXPECT_TRUE(result->records.empty());
}

// The broker owns no timer thread: its long-poll deadlines sit on the runtime's scheduler. When
// the broker goes, a waiting fetch is answered at once (empty), not left to a timer that would
// fire into a destroyed broker.
TEST_F(BrokerTest, DestroyingTheBrokerAnswersAWaitingLongPoll) {
  ASSERT_TRUE(broker_->CreateTopic("t", 1, {}).ok());
  FetchArgs args{"t", 0, 0};
  args.max_wait = absl::Seconds(20);
  absl::Notification done;
  absl::StatusOr<FetchResult> result;
  ASSERT_TRUE(broker_->Fetch(args, [&](auto r) {
    result = std::move(r);
    done.Notify();
  }).ok());
  EXPECT_FALSE(done.WaitForNotificationWithTimeout(absl::Milliseconds(20)));
  broker_.reset();
  ASSERT_TRUE(done.HasBeenNotified()) << "the long-poll was stranded";
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(result->records.empty());
}

TEST_F(BrokerTest, CancelEndsALongPollAtOnce) {
  ASSERT_TRUE(broker_->CreateTopic("t", 1, {}).ok());
  FetchArgs args{"t", 0, 0};
  args.max_wait = absl::Seconds(30);
  absl::Notification done;
  absl::StatusOr<FetchResult> result;
  std::shared_ptr<PendingFetch> pending;
  ASSERT_TRUE(broker_->Fetch(args, [&](auto r) {
    result = std::move(r);
    done.Notify();
  }, [&](std::shared_ptr<PendingFetch> p) { pending = std::move(p); }).ok());
  ASSERT_NE(pending, nullptr);
  EXPECT_FALSE(done.HasBeenNotified());
  pending->Cancel();
  EXPECT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  ASSERT_TRUE(result.ok());
  EXPECT_TRUE(result->records.empty());
  pending->Cancel();  // a second cancel is harmless
  // A later append does not complete the fetch twice (Notification would abort).
  ASSERT_TRUE(Produce("t", {To(0, "late")}).ok());
}

TEST_F(BrokerTest, DeletingATopicEndsItsLongPolls) {
  ASSERT_TRUE(broker_->CreateTopic("t", 1, {}).ok());
  FetchArgs args{"t", 0, 0};
  args.max_wait = absl::Seconds(30);
  absl::Notification done;
  absl::StatusOr<FetchResult> result;
  ASSERT_TRUE(broker_->Fetch(args, [&](auto r) {
    result = std::move(r);
    done.Notify();
  }).ok());
  ASSERT_TRUE(broker_->DeleteTopic("t").ok());
  done.WaitForNotification();
  EXPECT_EQ(result.status().code(), absl::StatusCode::kNotFound);
}

TEST_F(BrokerTest, AppendTimeNeverGoesBackwards) {
  ASSERT_TRUE(broker_->CreateTopic("t", 1, {}).ok());
  auto first = Produce("t", {To(0, "a")});
  clock_.Advance(-absl::Hours(1));  // the wall clock steps back
  auto second = Produce("t", {To(0, "b")});
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_GE(second->append_time, first->append_time);
  clock_.Advance(absl::Hours(2));
  auto third = Produce("t", {To(0, "c")});
  EXPECT_EQ(third->append_time, clock_.Now());
}

TEST_F(BrokerTest, RecoveryResumesOffsetsAndAppendTime) {
  ASSERT_TRUE(broker_->CreateTopic("t", 2, {}).ok());
  ASSERT_TRUE(Produce("t", {To(0, "a"), To(0, "b"), To(1, "c")}).ok());
  const absl::Time before = clock_.Now();
  Reopen();
  clock_.Advance(-absl::Minutes(1));
  auto next = Produce("t", {To(0, "d"), To(1, "e")});
  ASSERT_TRUE(next.ok());
  EXPECT_THAT(next->positions, ElementsAre(RecordPosition{0, 2}, RecordPosition{1, 1}));
  EXPECT_GE(next->append_time, before);
}

TEST_F(BrokerTest, ConcurrentRequestsShareOneWrite) {
  ASSERT_TRUE(broker_->CreateTopic("t", 1, {}).ok());
  ASSERT_TRUE(Produce("t", {To(0, "warm")}).ok());
  store_.HoldWrites(true);  // the writer blocks inside its next Append
  std::atomic<int> acked{0};
  ASSERT_TRUE(broker_->Produce("t", {To(0, "first")}, std::nullopt, [&](auto r) { acked++; }).ok());
  store_.WaitForWritesEntered(2);  // the writer is blocked in Append with "first"

  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(broker_->Produce("t", {To(0, "x"), To(0, "y")}, std::nullopt, [&](auto r) { acked++; }).ok());
  }
  store_.HoldWrites(false);
  while (acked.load() < 11) absl::SleepFor(absl::Milliseconds(1));  // acks are asynchronous
  // warm-up write, the held write (1 record), then the ten queued requests in one write.
  EXPECT_THAT(store_.write_calls(), ElementsAre(1, 1, 20));
}

TEST_F(BrokerTest, FailedWriteAssignsNoOffsetsAndStopsProduce) {
  ASSERT_TRUE(broker_->CreateTopic("t", 1, {}).ok());
  ASSERT_TRUE(Produce("t", {To(0, "a")}).ok());
  store_.FailWrites(absl::UnavailableError("disk on fire"));
  EXPECT_EQ(Produce("t", {To(0, "b")}).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(Produce("t", {To(0, "c")}).status().code(), absl::StatusCode::kUnavailable);
  auto described = broker_->DescribeTopic("t");
  EXPECT_EQ(described->partitions[0].meta.next_offset, 1) << "nothing past the failure is visible";
  // After a restart on a healthy store the next offset is the one after the last durable record.
  store_.FailWrites(absl::OkStatus());
  Reopen();
  auto next = Produce("t", {To(0, "d")});
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(next->positions[0].offset, 1);
}

// The race window of a full disk: the space check at Submit passed, then the store refused the
// write for space. Nothing is acknowledged, no offset is used up, and produce is not stopped.
TEST_F(BrokerTest, AWriteRefusedForSpaceAssignsNoOffsetsAndProduceGoesOn) {
  ASSERT_TRUE(broker_->CreateTopic("t", 1, {}).ok());
  ASSERT_TRUE(Produce("t", {To(0, "a")}).ok());
  store_.FailWrites(absl::ResourceExhaustedError("disk full: test"));
  EXPECT_EQ(Produce("t", {To(0, "b")}).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(broker_->DescribeTopic("t")->partitions[0].meta.next_offset, 1);
  store_.FailWrites(absl::OkStatus());  // space freed: no restart needed
  auto next = Produce("t", {To(0, "c")});
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(next->positions[0].offset, 1) << "the refused record used up no offset";
}

TEST_F(BrokerTest, IntervalTopicsAreSyncedInTheBackground) {
  ASSERT_TRUE(broker_->CreateTopic("t", 1,
                                   TopicConfigPatch{.durability = Durability::kInterval,
                                                    .flush_interval = absl::Milliseconds(5)})
                  .ok());
  const int syncs_before = store_.syncs();
  const int sync_writes_before = store_.sync_writes();
  ASSERT_TRUE(Produce("t", {To(0, "a")}).ok());
  EXPECT_EQ(store_.sync_writes(), sync_writes_before) << "interval produce does not fsync inline";
  // The fsync pass is periodic work on the injected clock: none before the period has passed.
  clock_.Advance(absl::Milliseconds(4));
  absl::SleepFor(absl::Milliseconds(20));  // a chance to sync early, if it would
  EXPECT_EQ(store_.syncs(), syncs_before);
  clock_.Advance(absl::Milliseconds(1));
  for (int i = 0; i < 2000 && store_.syncs() == syncs_before; ++i) absl::SleepFor(absl::Milliseconds(1));
  EXPECT_GT(store_.syncs(), syncs_before);
}

TEST_F(BrokerTest, ListOffsetsEarliestLatestAndByTime) {
  ASSERT_TRUE(broker_->CreateTopic("t", 2, {}).ok());
  const absl::Time t0 = clock_.Now();
  ASSERT_TRUE(Produce("t", {To(0, "a"), To(0, "b")}).ok());  // t0
  clock_.Advance(absl::Seconds(10));
  ASSERT_TRUE(Produce("t", {To(0, "c")}).ok());  // t0+10
  clock_.Advance(absl::Seconds(10));
  ASSERT_TRUE(Produce("t", {To(0, "d")}).ok());  // t0+20

  auto latest = broker_->ListOffsets("t", {}, OffsetQuery::kLatest, {});
  EXPECT_THAT(*latest, ElementsAre(RecordPosition{0, 4}, RecordPosition{1, 0}));
  auto earliest = broker_->ListOffsets("t", {0}, OffsetQuery::kEarliest, {});
  EXPECT_THAT(*earliest, ElementsAre(RecordPosition{0, 0}));
  auto at = [&](absl::Time t) {
    return (*broker_->ListOffsets("t", {0}, OffsetQuery::kTimestamp, t))[0].offset;
  };
  EXPECT_EQ(at(t0 - absl::Seconds(1)), 0);
  EXPECT_EQ(at(t0), 0);
  EXPECT_EQ(at(t0 + absl::Seconds(5)), 2);
  EXPECT_EQ(at(t0 + absl::Seconds(10)), 2);
  EXPECT_EQ(at(t0 + absl::Seconds(11)), 3);
  EXPECT_EQ(at(t0 + absl::Seconds(21)), 4) << "after the newest record: the high watermark";
  EXPECT_EQ(broker_->ListOffsets("t", {2}, OffsetQuery::kLatest, {}).status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace conduit::log_broker
