// The relay loop's rules against a fake outbox: order, mark only after the ack, the
// acknowledged prefix, the lock, and what happens after a lost session.
#include "tools/outbox_relay/outbox_relay.h"

#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tools/outbox_relay/tests/fake_outbox.h"

namespace conduit::outbox {
namespace {

using ::testing::ElementsAre;
using Step = OutboxRelay::Step;

class OutboxRelayTest : public ::testing::Test {
 protected:
  OutboxRelay MakeRelay(FakeOutboxStore* store, int batch = 3) {
    return OutboxRelay(store, &publisher_, &observer_, &clock_, {.batch = batch});
  }

  time::FakeClock clock_;
  FakeTable table_;
  FakeOutboxStore store_{&table_};
  FakePublisher publisher_{&table_};
  RecordingObserver observer_;
};

TEST_F(OutboxRelayTest, PublishesInSequenceOrderAndMarksEachBatchAfterItsAck) {
  table_.Insert(5, clock_.Now());
  OutboxRelay relay = MakeRelay(&store_);
  EXPECT_EQ(relay.RunOnce(), Step::kPublished);
  EXPECT_EQ(relay.RunOnce(), Step::kPublished);
  EXPECT_EQ(relay.RunOnce(), Step::kIdle);
  EXPECT_THAT(table_.calls, ElementsAre("read", "publish 1", "publish 2", "publish 3", "mark 1 2 3",
                                        "read", "publish 4", "publish 5", "mark 4 5", "read"));
  EXPECT_EQ(observer_.published, 5);
  EXPECT_TRUE(observer_.active);
}

TEST_F(OutboxRelayTest, MarksOnlyTheAcknowledgedPrefixAndRepublishesFromTheFirstFailure) {
  table_.Insert(4, clock_.Now());
  publisher_.fail_event_ids = {"ev-2"};
  OutboxRelay relay = MakeRelay(&store_, 4);
  EXPECT_EQ(relay.RunOnce(), Step::kFailed);
  // ev-3 and ev-4 were acknowledged but follow the failed row: they stay unpublished.
  EXPECT_EQ(table_.published, (std::set<int64_t>{1}));
  EXPECT_EQ(observer_.errors, 1);

  publisher_.fail_event_ids.clear();
  EXPECT_EQ(relay.RunOnce(), Step::kPublished);
  EXPECT_EQ(table_.published, (std::set<int64_t>{1, 2, 3, 4}));
  EXPECT_THAT(publisher_.published,
              ElementsAre("ev-1", "ev-2", "ev-3", "ev-4", "ev-2", "ev-3", "ev-4"));
}

TEST_F(OutboxRelayTest, NothingIsMarkedWhenTheFirstRowFails) {
  table_.Insert(2, clock_.Now());
  publisher_.fail_event_ids = {"ev-1"};
  OutboxRelay relay = MakeRelay(&store_);
  EXPECT_EQ(relay.RunOnce(), Step::kFailed);
  EXPECT_TRUE(table_.published.empty());
  EXPECT_THAT(table_.calls, ElementsAre("read", "publish 1", "publish 2"));
}

TEST_F(OutboxRelayTest, AFailedMarkDropsTheSessionAndTheRowsGoOutAgainUnderANewLock) {
  table_.Insert(2, clock_.Now());
  store_.fail_marks = 1;
  OutboxRelay relay = MakeRelay(&store_);
  EXPECT_EQ(relay.RunOnce(), Step::kFailed);
  EXPECT_FALSE(relay.active());
  EXPECT_EQ(table_.lock_holder, nullptr) << "the session (and its lock) must be dropped";
  EXPECT_TRUE(table_.published.empty());

  EXPECT_EQ(relay.RunOnce(), Step::kPublished);
  EXPECT_EQ(store_.lock_attempts, 2) << "the lock is taken again before the next read";
  // Published twice: the topic's dedup window drops the second (tests/outbox checks it).
  EXPECT_THAT(publisher_.published, ElementsAre("ev-1", "ev-2", "ev-1", "ev-2"));
  EXPECT_EQ(table_.published, (std::set<int64_t>{1, 2}));
}

TEST_F(OutboxRelayTest, ALostSessionOnReadRetakesTheLockFirst) {
  table_.Insert(1, clock_.Now());
  store_.fail_reads = 1;
  OutboxRelay relay = MakeRelay(&store_);
  EXPECT_EQ(relay.RunOnce(), Step::kFailed);
  EXPECT_TRUE(publisher_.published.empty());
  EXPECT_EQ(relay.RunOnce(), Step::kPublished);
  EXPECT_EQ(store_.lock_attempts, 2);
}

TEST_F(OutboxRelayTest, AStandbyNeitherReadsNorPublishesUntilTheLockIsFree) {
  table_.Insert(3, clock_.Now());
  FakeOutboxStore other(&table_);
  FakePublisher other_publisher(&table_);
  RecordingObserver other_observer;
  OutboxRelay active = MakeRelay(&store_);
  OutboxRelay standby(&other, &other_publisher, &other_observer, &clock_, {.batch = 3});
  EXPECT_EQ(active.RunOnce(), Step::kPublished);
  table_.Insert(2, clock_.Now());
  EXPECT_EQ(standby.RunOnce(), Step::kStandby);
  EXPECT_EQ(standby.RunOnce(), Step::kStandby);
  EXPECT_FALSE(other_observer.active);
  EXPECT_TRUE(other_publisher.published.empty());

  store_.Reset();  // the active relay's session ends (the process died)
  EXPECT_EQ(standby.RunOnce(), Step::kPublished);
  EXPECT_TRUE(other_observer.active);
  EXPECT_THAT(other_publisher.published, ElementsAre("ev-4", "ev-5"));
}

TEST_F(OutboxRelayTest, AnUnreachableDatabaseIsAFailedRoundNotACrash) {
  store_.fail_connect = true;
  OutboxRelay relay = MakeRelay(&store_);
  EXPECT_EQ(relay.RunOnce(), Step::kFailed);
  EXPECT_EQ(observer_.errors, 1);
  store_.fail_connect = false;
  EXPECT_EQ(relay.RunOnce(), Step::kIdle);
}

TEST_F(OutboxRelayTest, ReportsTheAgeOfTheOldestUnpublishedRow) {
  table_.Insert(4, clock_.Now());
  clock_.Advance(absl::Seconds(30));
  OutboxRelay relay = MakeRelay(&store_, 2);
  EXPECT_EQ(relay.RunOnce(), Step::kPublished);
  EXPECT_EQ(observer_.age, absl::Seconds(30));
  EXPECT_EQ(relay.RunOnce(), Step::kPublished);
  EXPECT_EQ(relay.RunOnce(), Step::kIdle);
  EXPECT_EQ(observer_.age, absl::ZeroDuration());
}

TEST_F(OutboxRelayTest, AStandbyRetriesOnTheClockAndStopEndsItsWait) {
  int someone_else;
  table_.lock_holder = &someone_else;
  OutboxRelay relay(&store_, &publisher_, &observer_, &clock_,
                    {.batch = 3, .standby_retry = absl::Seconds(5)});
  std::thread runner([&] { relay.Run(); });
  while (store_.lock_attempts.load() < 3) {
    clock_.Advance(absl::Seconds(1));  // only the fake clock moves the standby on
    absl::SleepFor(absl::Milliseconds(1));
  }
  relay.Stop();  // the relay waits for a clock that stands still: only Stop can end the wait
  runner.join();
  EXPECT_TRUE(publisher_.published.empty());
  EXPECT_FALSE(observer_.active);
}

}  // namespace
}  // namespace conduit::outbox
