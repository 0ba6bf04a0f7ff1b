// Idempotent producers and the dedup window, on a fake store with a fake clock.

#include <map>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/cleanup/cleanup.h"
#include "common/hash/murmur2.h"
#include "services/log_broker/tests/broker_fixture.h"

namespace conduit::log_broker {
namespace {

using ::testing::ElementsAre;
using namespace ::conduit::log_broker::testing;  // NOLINT: test fixture helpers

// A produce answered later (a request parked for the reorder wait).
struct Answer {
  absl::Notification done;
  absl::StatusOr<ProduceResult> result;
};

// --- idempotent producer -----------------------------------------------------------------

TEST_F(LifecycleTest, RetriedBatchIsAppendedOnceWithItsOriginalOffsets) {
  ASSERT_TRUE(broker_->CreateTopic("t", 2, {}).ok());
  auto producer = broker_->InitProducer("");
  ASSERT_TRUE(producer.ok());
  EXPECT_EQ(producer->epoch, 0);
  auto batch = [] { return std::vector<ProduceRecordArgs>{To(0, "a"), To(1, "b"), To(0, "c")}; };
  auto first = Produce("t", batch(), Stamp(*producer, {{0, 0}, {1, 0}}));
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_THAT(first->positions, ElementsAre(RecordPosition{0, 0}, RecordPosition{1, 0},
                                            RecordPosition{0, 1}));
  // The response was lost; the producer sends the same batch again.
  auto retry = Produce("t", batch(), Stamp(*producer, {{0, 0}, {1, 0}}));
  ASSERT_TRUE(retry.ok()) << retry.status();
  EXPECT_THAT(retry->positions, ElementsAre(RecordPosition{0, 0, true}, RecordPosition{1, 0, true},
                                            RecordPosition{0, 1, true}));
  EXPECT_EQ(Describe("t", 0).meta.next_offset, 2) << "not appended twice";
  EXPECT_EQ(store_.record_count(), 3u);

  auto next = Produce("t", {To(0, "d")}, Stamp(*producer, {{0, 2}}));
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(next->positions[0].offset, 2);
  auto gap = ProducePastReorderWait("t", {To(0, "e")}, Stamp(*producer, {{0, 9}}));
  EXPECT_EQ(gap.status().code(), absl::StatusCode::kAborted);
  EXPECT_NE(gap.status().message().find("expected sequence 3, got 9"), std::string::npos)
      << gap.status();
}

// The reorder wait: an idempotent batch that reaches the writer ahead of the batch before it.
class ReorderWaitTest : public LifecycleTest {
 protected:
  // Topic "t" and an idempotent producer.
  ProducerInfo TopicWithProducer(int32_t partitions = 1) {
    EXPECT_TRUE(broker_->CreateTopic("t", partitions, {}).ok());
    auto producer = broker_->InitProducer("");
    EXPECT_TRUE(producer.ok()) << producer.status();
    return producer.ok() ? *producer : ProducerInfo{};
  }
  // Record "x" at `sequence` of partition 0, ahead of the sequences before it: once the writer
  // has handled it, it is still unanswered.
  void ProduceEarly(const ProducerInfo& producer, int32_t sequence, Answer* early) {
    ProduceAsync("t", {To(0, "x")}, Stamp(producer, {{0, sequence}}), early);
    WaitForWriter();
    EXPECT_FALSE(early->done.HasBeenNotified())
        << "it waits for the sequences before " << sequence;
  }
};

// A pipelining producer's requests are handled on several gRPC threads, so a batch can reach
// the writer before the one ahead of it: it waits for that one instead of being refused.
TEST_F(ReorderWaitTest, BatchAheadOfItsPredecessorWaitsAndIsAppendedAfterIt) {
  const ProducerInfo producer = TopicWithProducer();
  Answer third, second;
  ProduceAsync("t", {To(0, "e")}, Stamp(producer, {{0, 4}}), &third);
  ProduceAsync("t", {To(0, "c"), To(0, "d")}, Stamp(producer, {{0, 2}}), &second);
  WaitForWriter();
  EXPECT_FALSE(second.done.HasBeenNotified()) << "both wait for sequences 0 and 1";
  EXPECT_FALSE(third.done.HasBeenNotified());
  auto first = Produce("t", {To(0, "a"), To(0, "b")}, Stamp(producer, {{0, 0}}));
  ASSERT_TRUE(first.ok()) << first.status();
  second.done.WaitForNotification();
  third.done.WaitForNotification();
  ASSERT_TRUE(second.result.ok()) << second.result.status();
  ASSERT_TRUE(third.result.ok()) << third.result.status();
  EXPECT_THAT(second.result->positions, ElementsAre(RecordPosition{0, 2}, RecordPosition{0, 3}));
  EXPECT_THAT(third.result->positions, ElementsAre(RecordPosition{0, 4}));
  std::vector<std::string> values;
  for (const StoredRecord& r : ReadAll("t", 0)) values.push_back(*r.data.value);
  EXPECT_THAT(values, ElementsAre("a", "b", "c", "d", "e")) << "in sequence order, each once";

  // Sent again (its answer lost), the second batch is a duplicate, not a gap.
  auto retry = Produce("t", {To(0, "c"), To(0, "d")}, Stamp(producer, {{0, 2}}));
  ASSERT_TRUE(retry.ok()) << retry.status();
  EXPECT_TRUE(retry->positions[0].duplicate);
}

TEST_F(ReorderWaitTest, BatchWhosePredecessorNeverComesIsRefusedAfterTheWait) {
  const ProducerInfo producer = TopicWithProducer();
  Answer early;
  ProduceEarly(producer, 7, &early);
  clock_.Set(clock_.Now() - absl::Hours(1));  // a wall-clock step back does not extend the wait
  clock_.Advance(PipelineOptions{}.reorder_wait);
  ASSERT_TRUE(early.done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_EQ(early.result.status().code(), absl::StatusCode::kAborted);
  EXPECT_NE(early.result.status().message().find("expected sequence 0, got 7"), std::string::npos)
      << early.result.status();
  EXPECT_EQ(Describe("t").meta.next_offset, 0) << "nothing appended";

  // The producer sends from its first unanswered batch again: that goes, then the rest.
  ASSERT_TRUE(Produce("t", {To(0, "a")}, Stamp(producer, {{0, 0}})).ok());
}

TEST_F(ReorderWaitTest, ParkedBatchIsAnsweredWhenTheBrokerStops) {
  const ProducerInfo producer = TopicWithProducer();
  Answer early;
  ProduceEarly(producer, 3, &early);
  Reopen();  // the broker stops (and starts again)
  ASSERT_TRUE(early.done.HasBeenNotified()) << "no caller is left waiting";
  EXPECT_EQ(early.result.status().code(), absl::StatusCode::kAborted) << early.result.status();
  EXPECT_EQ(Describe("t").meta.next_offset, 0);
}

TEST_F(ReorderWaitTest, ParkedBatchOfADeletedTopicIsAnsweredNotFound) {
  const ProducerInfo producer = TopicWithProducer();
  Answer early;
  ProduceEarly(producer, 2, &early);
  ASSERT_TRUE(broker_->DeleteTopic("t").ok());
  clock_.Advance(PipelineOptions{}.reorder_wait);
  ASSERT_TRUE(early.done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_EQ(early.result.status().code(), absl::StatusCode::kNotFound) << early.result.status();
  EXPECT_NE(early.result.status().message().find("topic 't' was deleted"), std::string::npos)
      << early.result.status();
}

// A producer has at most 5 batches of a partition in flight: with one missing, at most 4 can be
// waiting for it, and a fifth is refused at once rather than held.
TEST_F(ReorderWaitTest, AtMostFourBatchesOfAProducerAndPartitionWait) {
  const ProducerInfo producer = TopicWithProducer();
  Answer early[4];
  for (int32_t s = 1; s <= 4; ++s) ProduceEarly(producer, s, &early[s - 1]);
  Answer fifth;
  ProduceAsync("t", {To(0, "x")}, Stamp(producer, {{0, 5}}), &fifth);
  WaitForWriter();
  EXPECT_TRUE(fifth.done.HasBeenNotified()) << "refused without waiting";

  ASSERT_TRUE(Produce("t", {To(0, "x")}, Stamp(producer, {{0, 0}})).ok());
  for (Answer& a : early) {
    a.done.WaitForNotification();
    EXPECT_TRUE(a.result.ok()) << a.result.status();
  }
  fifth.done.WaitForNotification();
  EXPECT_EQ(fifth.result.status().code(), absl::StatusCode::kAborted) << fifth.result.status();
  EXPECT_EQ(Describe("t").meta.next_offset, 5) << "sequences 0 to 4, each once";
}

// Parked requests left the writer's queue accounting, so they have a byte cap of their own (a
// quarter of the queue's): many producers sending early batches cannot hold the broker's memory.
TEST_F(ReorderWaitTest, ParkedBatchesTakeAtMostAQuarterOfTheQueuesBytes) {
  pipeline_options_.max_queued_bytes = 4096;  // parked: at most 1024 bytes
  Reopen();
  const ProducerInfo a = TopicWithProducer();
  auto b = broker_->InitProducer("");
  ASSERT_TRUE(b.ok()) << b.status();
  const std::string big(700, 'x');
  Answer a_early, b_early, b_again;
  // A failed assertion returns with batches still parked: the broker stops (answering them)
  // while the answers they point to still exist.
  absl::Cleanup stop_broker = [this] { broker_.reset(); };
  ProduceAsync("t", {To(0, big)}, Stamp(a, {{0, 1}}), &a_early);
  ProduceAsync("t", {To(0, big)}, Stamp(*b, {{0, 1}}), &b_early);
  WaitForWriter();
  EXPECT_FALSE(a_early.done.HasBeenNotified()) << "the first waits";
  ASSERT_TRUE(b_early.done.HasBeenNotified()) << "the second would pass the cap: refused at once";
  EXPECT_EQ(b_early.result.status().code(), absl::StatusCode::kAborted) << b_early.result.status();

  ASSERT_TRUE(Produce("t", {To(0, "a0")}, Stamp(a, {{0, 0}})).ok());
  ASSERT_TRUE(a_early.done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_TRUE(a_early.result.ok()) << a_early.result.status();
  // The room is free again: b's early batch now waits, and goes after its predecessor.
  ProduceAsync("t", {To(0, big)}, Stamp(*b, {{0, 1}}), &b_again);
  WaitForWriter();
  EXPECT_FALSE(b_again.done.HasBeenNotified()) << "parked once the room was free";
  ASSERT_TRUE(Produce("t", {To(0, "b0")}, Stamp(*b, {{0, 0}})).ok());
  ASSERT_TRUE(b_again.done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_TRUE(b_again.result.ok()) << b_again.result.status();
  EXPECT_EQ(Describe("t").meta.next_offset, 4) << "a0, a1, b0, b1, each once";
}

// Several partitions in one request: no waiting (the Producer sends one partition per
// request; the API allows more), refused at once as before.
TEST_F(ReorderWaitTest, GapInARequestOverSeveralPartitionsIsRefusedAtOnce) {
  const ProducerInfo producer = TopicWithProducer(2);
  auto gap = Produce("t", {To(0, "a"), To(1, "b")}, Stamp(producer, {{0, 3}, {1, 0}}));
  EXPECT_EQ(gap.status().code(), absl::StatusCode::kAborted) << gap.status();
}

TEST_F(LifecycleTest, NewEpochFencesTheZombie) {
  ASSERT_TRUE(broker_->CreateTopic("t", 1, {}).ok());
  auto zombie = broker_->InitProducer("relay");
  ASSERT_TRUE(Produce("t", {To(0, "z0")}, Stamp(*zombie, {{0, 0}})).ok());
  auto fresh = broker_->InitProducer("relay");
  ASSERT_TRUE(fresh.ok());
  EXPECT_EQ(fresh->id, zombie->id);
  EXPECT_EQ(fresh->epoch, zombie->epoch + 1);
  auto fenced = Produce("t", {To(0, "z1")}, Stamp(*zombie, {{0, 1}}));
  EXPECT_EQ(fenced.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(fenced.status().message().find("fenced"), std::string::npos) << fenced.status();
  auto ok = Produce("t", {To(0, "f0")}, Stamp(*fresh, {{0, 0}}));  // a new epoch starts at 0
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->positions[0].offset, 1);
  EXPECT_EQ(broker_->InitProducer("other")->id.value(), fresh->id.value() + 1);
}

TEST_F(LifecycleTest, ProducerStateSurvivesRestart) {
  ASSERT_TRUE(broker_->CreateTopic("t", 1, {}).ok());
  auto producer = broker_->InitProducer("relay");
  ASSERT_TRUE(Produce("t", {To(0, "a"), To(0, "b")}, Stamp(*producer, {{0, 0}})).ok());
  Reopen();
  auto retry = Produce("t", {To(0, "a"), To(0, "b")}, Stamp(*producer, {{0, 0}}));
  ASSERT_TRUE(retry.ok()) << retry.status();
  EXPECT_THAT(retry->positions, ElementsAre(RecordPosition{0, 0, true}, RecordPosition{0, 1, true}));
  auto next = Produce("t", {To(0, "c")}, Stamp(*producer, {{0, 2}}));
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(next->positions[0].offset, 2);
  // The fencing is durable too.
  auto fresh = broker_->InitProducer("relay");
  Reopen();
  EXPECT_EQ(Produce("t", {To(0, "x")}, Stamp(*producer, {{0, 3}})).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(Produce("t", {To(0, "y")}, Stamp(*fresh, {{0, 0}})).ok());
}

TEST_F(LifecycleTest, MalformedProducerFieldsAreRefused) {
  ASSERT_TRUE(broker_->CreateTopic("t", 2, {}).ok());
  auto producer = broker_->InitProducer("");
  EXPECT_EQ(Produce("t", {To(0, "a"), To(1, "b")}, Stamp(*producer, {{0, 0}})).status().code(),
            absl::StatusCode::kInvalidArgument)
      << "partition 1 has no sequence";
  EXPECT_EQ(Produce("t", {To(0, "a")}, Stamp(*producer, {{0, 0}, {1, 0}})).status().code(),
            absl::StatusCode::kInvalidArgument)
      << "sequence for an unused partition";
  EXPECT_EQ(Produce("t", {To(0, "a")}, Stamp(*producer, {{0, 0}, {0, 1}})).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Produce("t", {To(0, "a")}, ProducerArgs{ProducerId(999), 0, {{0, 0}}}).status().code(),
            absl::StatusCode::kFailedPrecondition)
      << "unknown producer";
  EXPECT_EQ(Produce("t", {To(0, "a")}, Stamp(*producer, {{0, -1}})).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store_.record_count(), 0u);
}

// --- dedup window ------------------------------------------------------------------------

TEST_F(LifecycleTest, DedupWindowDropsRepeatsAndExpires) {
  TopicConfigPatch patch;
  patch.dedup_window = absl::Hours(1);
  ASSERT_TRUE(broker_->CreateTopic("t", 1, patch).ok());
  auto first = Produce("t", {WithEventId("a", "order-1"), WithEventId("b", "order-2")});
  ASSERT_TRUE(first.ok());
  // The relay crashed after publishing and sends again, plus one new event.
  auto again = Produce("t", {WithEventId("a", "order-1"), WithEventId("c", "order-3"),
                             WithEventId("c", "order-3")});
  ASSERT_TRUE(again.ok());
  EXPECT_THAT(again->positions, ElementsAre(RecordPosition{0, 0, true}, RecordPosition{0, 2, false},
                                            RecordPosition{0, 2, true}));
  EXPECT_EQ(Describe("t").meta.next_offset, 3);

  Reopen();  // the window survives a restart
  auto after_restart = Produce("t", {WithEventId("b", "order-2")});
  EXPECT_TRUE(after_restart->positions[0].duplicate);

  clock_.Advance(absl::Hours(2));
  broker_->RunMaintenance();
  EXPECT_EQ(store_.dedup_count(), 0u) << "expired entries are removed from the store";
  auto late = Produce("t", {WithEventId("a", "order-1")});
  ASSERT_TRUE(late.ok());
  EXPECT_FALSE(late->positions[0].duplicate) << "outside the window it is a new record";
  EXPECT_EQ(late->positions[0].offset, 3);
  // Records without an event id are never deduplicated.
  EXPECT_FALSE(Produce("t", {To(0, "x")})->positions[0].duplicate);
  EXPECT_FALSE(Produce("t", {To(0, "x")})->positions[0].duplicate);
}

TEST_F(LifecycleTest, DuplicateOfARecordInTheSameBatchIsAckedOnlyWhenItIsDurable) {
  TopicConfigPatch patch;
  patch.dedup_window = absl::Hours(1);
  ASSERT_TRUE(broker_->CreateTopic("t", 1, patch).ok());
  auto producer = broker_->InitProducer("");
  ASSERT_TRUE(Produce("t", {To(0, "warm")}).ok());
  store_.HoldWrites(true);
  std::atomic<int> done{0};
  absl::Mutex mu;
  std::map<std::string, absl::Status> results;  // by request name
  auto submit = [&](std::string name, std::vector<ProduceRecordArgs> records,
                    std::optional<ProducerArgs> stamp) {
    ASSERT_TRUE(broker_->Produce("t", std::move(records), std::move(stamp), [&, name](auto r) {
      absl::MutexLock lock(&mu);
      results[name] = r.status();
      done++;
    }).ok());
  };
  submit("held", {To(0, "held")}, std::nullopt);
  store_.WaitForWritesEntered(2);  // the writer is inside Write with "held"
  // These four land in one batch: an original and its duplicate, twice over.
  submit("event", {WithEventId("a", "evt")}, std::nullopt);
  submit("event again", {WithEventId("a", "evt")}, std::nullopt);
  submit("batch", {To(0, "b")}, Stamp(*producer, {{0, 0}}));
  submit("batch retry", {To(0, "b")}, Stamp(*producer, {{0, 0}}));
  store_.FailWritesAfter(1);  // "held" is written; the batch with the four fails
  store_.HoldWrites(false);
  while (done.load() < 5) absl::SleepFor(absl::Milliseconds(1));  // completions are async
  absl::MutexLock lock(&mu);
  EXPECT_TRUE(results["held"].ok());
  for (const char* name : {"event", "event again", "batch", "batch retry"}) {
    EXPECT_EQ(results[name].code(), absl::StatusCode::kUnavailable)
        << name << ": no duplicate is acknowledged for a write that failed";
  }
}

// The dedup window is per partition (it moves with the partition in a cluster). The same event
// id sent on purpose to another partition is a record of that partition; an idempotent retry
// of that request still answers with its own original.
TEST_F(LifecycleTest, DedupWindowIsPerPartition) {
  TopicConfigPatch patch;
  patch.dedup_window = absl::Hours(1);
  ASSERT_TRUE(broker_->CreateTopic("t", 2, patch).ok());
  auto producer = broker_->InitProducer("");
  ProduceRecordArgs first = WithEventId("x", "evt");
  first.partition = 1;
  ASSERT_TRUE(Produce("t", {first}, Stamp(*producer, {{1, 0}})).ok());
  ProduceRecordArgs other = WithEventId("x", "evt");  // partition 0, same event id
  auto answer = Produce("t", {other}, Stamp(*producer, {{0, 0}}));
  ASSERT_TRUE(answer.ok());
  EXPECT_THAT(answer->positions, ElementsAre(RecordPosition{0, 0, false}));
  auto retry = Produce("t", {other}, Stamp(*producer, {{0, 0}}));
  ASSERT_TRUE(retry.ok()) << retry.status();
  EXPECT_THAT(retry->positions, ElementsAre(RecordPosition{0, 0, true}));
  auto again_in_1 = Produce("t", {first});
  ASSERT_TRUE(again_in_1.ok());
  EXPECT_THAT(again_in_1->positions, ElementsAre(RecordPosition{1, 0, true}));
}

// A keyless record with an event id is placed by the id's hash when the topic deduplicates, so
// a retry lands where the first attempt did and finds it, however the round-robin cursor moved.
TEST_F(LifecycleTest, KeylessRecordWithEventIdIsPlacedByItsIdSoRetriesAreCaught) {
  TopicConfigPatch patch;
  patch.dedup_window = absl::Hours(1);
  ASSERT_TRUE(broker_->CreateTopic("t", 4, patch).ok());
  ProduceRecordArgs keyless;
  keyless.data.value = "v";
  keyless.data.event_id = "evt-42";
  const int32_t home = hash::PartitionForKey("evt-42", 4);
  auto first = Produce("t", {keyless});
  ASSERT_TRUE(first.ok());
  EXPECT_THAT(first->positions, ElementsAre(RecordPosition{home, 0, false}));
  for (int i = 0; i < 5; ++i) {
    ProduceRecordArgs plain;  // keyless, no event id: moves the round-robin cursor
    plain.data.value = "p";
    ASSERT_TRUE(Produce("t", {plain}).ok());
    auto retry = Produce("t", {keyless});
    ASSERT_TRUE(retry.ok());
    EXPECT_THAT(retry->positions, ElementsAre(RecordPosition{home, 0, true})) << i;
  }
}
}  // namespace
}  // namespace conduit::log_broker
