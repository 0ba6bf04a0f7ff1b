// A queue's durability: SYNC fsyncs every change before answering, INTERVAL answers once the
// write reaches the OS and fsyncs the WAL each flush_interval — on the real RocksDB store, with a
// fake clock and FlakyQueueStore counting fsyncs.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/time/clock.h"
#include "services/work_queue/tests/queue_fixture.h"

namespace conduit::work_queue {
namespace {

TEST_F(WorkQueueTest, AnIntervalQueueAnswersWithoutAnFsyncAndSyncsTheWalEachFlushInterval) {
  QueueConfigPatch interval;
  interval.durability = QueueDurability::kInterval;
  interval.flush_interval = absl::Milliseconds(200);
  Create("q", interval);
  const int synced = flaky_->synced_writes.load();
  EXPECT_EQ(synced, 1) << "the queue's creation is fsynced";
  auto jobs = Enqueue("q", {JobFor("a"), JobFor("b")});
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  auto leased = Lease("q", 2);
  ASSERT_TRUE(leased.ok() && leased->size() == 2);
  ASSERT_TRUE(Ack((*leased)[0]).ok());
  ASSERT_TRUE(Nack((*leased)[1], "later").ok());
  EXPECT_EQ(flaky_->synced_writes.load(), synced) << "no change was fsynced on its own";
  EXPECT_GE(flaky_->unsynced_writes.load(), 3);  // enqueue, ack, nack (and the lease)
  EXPECT_EQ(flaky_->wal_syncs.load(), 0) << "not before the interval is over";

  clock_.Advance(absl::Milliseconds(200));
  EXPECT_TRUE(Eventually([&] { return flaky_->wal_syncs.load() == 1; }));
  // Nothing written since: the next period has nothing to sync.
  clock_.Advance(absl::Milliseconds(200));
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_EQ(flaky_->wal_syncs.load(), 1);

  // The durability is the queue's, kept across a restart, and so is the interval fsync.
  Reopen();
  EXPECT_EQ(queue_->ListQueues().at(0).config.durability, QueueDurability::kInterval);
  EXPECT_EQ(queue_->ListQueues().at(0).config.flush_interval, absl::Milliseconds(200));
  const int synced_at_start = flaky_->synced_writes.load();
  ASSERT_TRUE(Enqueue("q", {JobFor("c")}).ok());
  EXPECT_EQ(flaky_->synced_writes.load(), synced_at_start);
  clock_.Advance(absl::Milliseconds(200));
  EXPECT_TRUE(Eventually([&] { return flaky_->wal_syncs.load() == 1; }));
  const QueueStats stats = Stats();
  EXPECT_EQ(stats.ready + stats.delayed, 2);  // b (nacked: after its backoff) and c
}

TEST_F(WorkQueueTest, ASyncQueueFsyncsEveryChangeAndHasNoIntervalFsync) {
  Create("q");
  auto jobs = Enqueue("q", {JobFor("a")});
  ASSERT_TRUE(jobs.ok());
  auto leased = Lease("q");
  ASSERT_TRUE(leased.ok() && leased->size() == 1);
  ASSERT_TRUE(Ack((*leased)[0]).ok());
  EXPECT_EQ(flaky_->synced_writes.load(), 3);  // creation, enqueue, ack (the lease is not)
  clock_.Advance(absl::Seconds(5));
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_EQ(flaky_->wal_syncs.load(), 0);
}

TEST_F(WorkQueueTest, DurabilityAndFlushIntervalAreChecked) {
  QueueConfigPatch bad;
  bad.durability = static_cast<QueueDurability>(7);
  auto refused = Wait<QueueMeta>([&](auto cb) { queue_->CreateQueue("q", bad, cb); });
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  for (absl::Duration d : {absl::ZeroDuration(), absl::Minutes(2)}) {
    QueueConfigPatch patch;
    patch.flush_interval = d;
    refused = Wait<QueueMeta>([&](auto cb) { queue_->CreateQueue("q", patch, cb); });
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument) << d;
    EXPECT_THAT(refused.status().message(), ::testing::HasSubstr("flush_interval"));
  }
  EXPECT_TRUE(queue_->ListQueues().empty());
}

}  // namespace
}  // namespace conduit::work_queue
