// A Lease reads its jobs' records from the store without the WorkQueue's lock: a read that goes
// to disk (a backlog beyond memory) holds up no other call, of its own queue or another; the
// jobs being leased count as leased meanwhile; a queue deleted meanwhile is answered NOT_FOUND.

#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "services/work_queue/tests/queue_fixture.h"

namespace conduit::work_queue {
namespace {

class LeaseReadTest : public WorkQueueTest {
 protected:
  // Starts a Lease of one job of `queue` on its own thread; returns once its store read is held.
  void StartHeldLease(const std::string& queue) {
    flaky_->HoldNextRead();
    leaser_ = std::thread([this, queue] { held_ = Lease(queue); });
    ASSERT_TRUE(flaky_->AwaitHeldRead()) << "the lease did not read the store";
  }
  // Runs `calls` on their own thread while the lease's read is held, then lets the read go on
  // and waits for both. True when `calls` finished within 5 s, before the read went on.
  bool FinishWhileHeld(const std::function<void()>& calls) {
    absl::Notification done;
    std::thread other([&] {
      calls();
      done.Notify();
    });
    const bool in_time = done.WaitForNotificationWithTimeout(absl::Seconds(5));
    flaky_->ReleaseReads();
    other.join();
    leaser_.join();
    return in_time;
  }

  std::thread leaser_;
  absl::StatusOr<std::vector<Job>> held_ = absl::UnknownError("no answer");
};

TEST_F(LeaseReadTest, OtherCallsGoOnWhileALeaseReadsItsRecords) {
  Create("q");
  Create("other");
  ASSERT_TRUE(Enqueue("q", {JobFor("first")}).ok());
  ASSERT_TRUE(Enqueue("other", {JobFor("elsewhere")}).ok());
  StartHeldLease("q");

  const bool in_time = FinishWhileHeld([&] {
    // Another queue: lease and ack.
    auto other = Lease("other");
    ASSERT_TRUE(other.ok()) << other.status();
    ASSERT_EQ(other->size(), 1u);
    EXPECT_EQ(other->front().payload, "elsewhere");
    const Job& job = other->front();
    EXPECT_TRUE(
        Wait<bool>([&](auto cb) { queue_->Ack("other", job.id, job.lease_token, cb); }).ok());
    // The same queue: an enqueue, and a lease that gets the new job, not the one being leased.
    ASSERT_TRUE(Enqueue("q", {JobFor("second")}).ok());
    auto second = Lease("q", 10);
    ASSERT_TRUE(second.ok()) << second.status();
    ASSERT_EQ(second->size(), 1u);
    EXPECT_EQ(second->front().payload, "second");
    // The job being leased counts as leased.
    const QueueStats stats = Stats();
    EXPECT_EQ(stats.ready, 0);
    EXPECT_EQ(stats.leased, 2);
  });
  EXPECT_TRUE(in_time) << "calls waited for another lease's store read";

  ASSERT_TRUE(held_.ok()) << held_.status();
  ASSERT_EQ(held_->size(), 1u);
  EXPECT_EQ(held_->front().payload, "first");
  EXPECT_TRUE(Ack(held_->front()).ok());
  EXPECT_EQ(Stats().leased, 1);
}

TEST_F(LeaseReadTest, AQueueDeletedWhileALeaseReadsItsRecordsIsAnsweredNotFound) {
  Create("q");
  ASSERT_TRUE(Enqueue("q", {JobFor("dropped")}).ok());
  StartHeldLease("q");

  const bool in_time = FinishWhileHeld([&] {
    EXPECT_TRUE(Wait<bool>([&](auto cb) { queue_->DeleteQueue("q", cb); }).ok());
    Create("q");  // a new queue of the same name
    ASSERT_TRUE(Enqueue("q", {JobFor("new")}).ok());
  });
  EXPECT_TRUE(in_time) << "calls waited for another lease's store read";

  EXPECT_TRUE(absl::IsNotFound(held_.status())) << held_.status();
  // The new queue of that name is untouched: its one job ready, nothing leased.
  EXPECT_EQ(Stats().ready, 1);
  EXPECT_EQ(Stats().leased, 0);
  auto leased = Lease("q");
  ASSERT_TRUE(leased.ok()) << leased.status();
  ASSERT_EQ(leased->size(), 1u);
  EXPECT_EQ(leased->front().payload, "new");
}

}  // namespace
}  // namespace conduit::work_queue
