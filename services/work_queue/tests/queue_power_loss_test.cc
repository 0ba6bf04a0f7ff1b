// A queue's durability across a simulated power failure, on the real RocksDB store over
// PowerLossFileSystem (the disk keeps only what was fsynced): a SYNC queue keeps every change it
// answered; an INTERVAL queue keeps what its last interval fsync covered and loses what came after
// it — which is also the negative control that shows these tests can see a loss.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "common/testing/power_loss_fs.h"
#include "services/work_queue/tests/queue_fixture.h"

namespace conduit::work_queue {
namespace {

using conduit::testing::PowerLossFileSystem;
using ::testing::ElementsAreArray;

// Built before WorkQueueTest (a base listed earlier), so the store opens over it.
struct PowerLossDisk {
  std::shared_ptr<PowerLossFileSystem> fs = std::make_shared<PowerLossFileSystem>();
};

std::vector<std::string> Names(int from, int to) {
  std::vector<std::string> out;
  for (int i = from; i < to; ++i) out.push_back(absl::StrFormat("j%02d", i));
  return out;
}

class QueuePowerLoss : private PowerLossDisk,
                       public WorkQueueTest,
                       public ::testing::WithParamInterface<uint64_t> {
 protected:
  QueuePowerLoss() : WorkQueueTest({.file_system = fs}) {}

  // The power goes now, the process dies (the queue and store are destroyed, but nothing they do
  // on the way out reaches the disk), the disk keeps what was synced plus GetParam() bytes of each
  // unsynced tail (a torn WAL record), and the queue restarts.
  void PowerFailure() {
    fs->Crash();
    PowerLossAfterShutdown();
  }
  // The queue and store shut down cleanly, then the power goes, and the queue restarts.
  void PowerLossAfterShutdown() {
    queue_.reset();
    flaky_.reset();
    store_.reset();
    auto summary = fs->SimulatePowerLoss(/*torn_tail_bytes=*/GetParam());
    ASSERT_TRUE(summary.ok()) << summary.status();
    Reopen();
  }

  void EnqueueNames(int from, int to) {
    std::vector<NewJob> jobs;
    for (const std::string& name : Names(from, to)) jobs.push_back(JobFor(name));
    auto enqueued = Enqueue("q", std::move(jobs));
    ASSERT_TRUE(enqueued.ok()) << enqueued.status();
  }
  // Leases the next `n` ready jobs and acks them.
  void LeaseAndAck(int n) {
    auto leased = Lease("q", n);
    ASSERT_TRUE(leased.ok()) << leased.status();
    ASSERT_EQ(leased->size(), static_cast<size_t>(n));
    for (const Job& job : *leased) ASSERT_TRUE(Ack(job).ok()) << job.payload;
  }
  // Queue "q" at INTERVAL durability with jobs j00..j09, of which j00 leased and acked.
  void CreateIntervalQueueWithTenJobsOneAcked(absl::Duration flush_interval) {
    QueueConfigPatch interval;
    interval.durability = QueueDurability::kInterval;
    interval.flush_interval = flush_interval;
    Create("q", interval);
    EnqueueNames(0, 10);
    LeaseAndAck(1);
  }
  // The payloads of every ready job, sorted (leases them: call last).
  std::vector<std::string> ReadyPayloads() {
    auto leased = Lease("q", 1000);
    EXPECT_TRUE(leased.ok()) << leased.status();
    std::vector<std::string> out;
    for (const Job& job : leased.value_or(std::vector<Job>{})) out.push_back(job.payload);
    std::sort(out.begin(), out.end());
    return out;
  }
};

TEST_P(QueuePowerLoss, ASyncQueueKeepsEveryChangeItAnswered) {
  Create("q");
  for (int batch = 0; batch < 4; ++batch) EnqueueNames(batch * 5, batch * 5 + 5);
  LeaseAndAck(4);  // j00..j03
  auto leased = Lease("q");
  ASSERT_TRUE(leased.ok() && leased->size() == 1);
  ASSERT_TRUE(Nack(leased->front(), "later").ok());  // j04, delayed by its backoff

  PowerFailure();

  ASSERT_EQ(queue_->ListQueues().size(), 1u) << "the queue's creation is kept";
  const QueueStats stats = Stats();
  EXPECT_EQ(stats.ready, 15);
  EXPECT_EQ(stats.delayed, 1) << "the nack of j04 (with its backoff) is kept";
  EXPECT_EQ(stats.leased, 0);
  EXPECT_THAT(ReadyPayloads(), ElementsAreArray(Names(5, 20)))
      << "every enqueue kept, every ack kept";
}

TEST_P(QueuePowerLoss, AnIntervalQueueKeepsWhatItsIntervalFsyncCoveredAndLosesTheRest) {
  CreateIntervalQueueWithTenJobsOneAcked(absl::Milliseconds(100));
  clock_.Advance(absl::Milliseconds(100));
  ASSERT_TRUE(Eventually([&] { return flaky_->wal_syncs.load() == 1; }));

  // Answered, but written only to the OS: a power failure before the next interval loses them.
  EnqueueNames(10, 20);
  LeaseAndAck(1);  // j01
  ASSERT_EQ(flaky_->wal_syncs.load(), 1);

  PowerFailure();

  EXPECT_EQ(queue_->ListQueues().at(0).config.durability, QueueDurability::kInterval);
  EXPECT_EQ(Stats().leased, 0);
  EXPECT_THAT(ReadyPayloads(), ElementsAreArray(Names(1, 10)))
      << "the queue is as the interval fsync left it: j00's ack and j01..j09 kept; j10..j19 and "
         "j01's ack (after the fsync) lost";
}

TEST_P(QueuePowerLoss, AnIntervalQueueFsyncsItsLastChangesAtACleanShutdown) {
  CreateIntervalQueueWithTenJobsOneAcked(absl::Seconds(10));
  ASSERT_EQ(flaky_->wal_syncs.load(), 0) << "no interval has passed";

  PowerLossAfterShutdown();

  EXPECT_THAT(ReadyPayloads(), ElementsAreArray(Names(1, 10)))
      << "a stopped server has nothing unsynced: a power loss afterwards loses nothing";
}

// 0: the unsynced WAL tail is lost whole; 100: part of it reached the disk (a torn record).
INSTANTIATE_TEST_SUITE_P(TornTail, QueuePowerLoss, ::testing::Values(0, 100));

}  // namespace
}  // namespace conduit::work_queue
