// A Lease reads its jobs' records from the store without the WorkQueue's lock: a read that goes
// to disk (a backlog beyond memory) holds up no other call, of its own queue or another; the
// jobs being leased count as leased meanwhile; a queue deleted meanwhile is answered NOT_FOUND;
// jobs whose read failed are ready again, for a Lease waiting meanwhile too; a job whose lease
// expired is read as the expiry left it.

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "services/work_queue/tests/queue_fixture.h"

namespace conduit::work_queue {
namespace {

class LeaseReadTest : public WorkQueueTest {
 protected:
  // Starts a Lease of one job of `queue` on its own thread; returns once its store read is held
  // (which then fails if `then_fail`).
  void StartHeldLease(const std::string& queue, bool then_fail = false) {
    flaky_->HoldNextRead(then_fail);
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

TEST_F(LeaseReadTest, JobsBeingLeasedCountAgainstMaxDepth) {
  QueueConfigPatch config;
  config.max_depth = 1;
  Create("q", config);
  ASSERT_TRUE(Enqueue("q", {JobFor("only")}).ok());
  StartHeldLease("q");

  const bool in_time = FinishWhileHeld([&] {
    auto refused = Enqueue("q", {JobFor("one too many")});
    EXPECT_TRUE(absl::IsResourceExhausted(refused.status())) << refused.status();
  });
  EXPECT_TRUE(in_time) << "calls waited for another lease's store read";
  ASSERT_TRUE(held_.ok()) << held_.status();
  EXPECT_EQ(Stats().leased, 1);
  EXPECT_EQ(Stats().ready, 0);
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

TEST_F(LeaseReadTest, JobsWhoseReadFailedAreReadyAgainForALeaseThatWaitedMeanwhile) {
  Create("q");
  ASSERT_TRUE(Enqueue("q", {JobFor("retried")}).ok());
  StartHeldLease("q", /*then_fail=*/true);
  // A long-poll finds nothing ready (the one job is being leased) and waits: on the fake clock,
  // which does not move here, it would wait for good unless woken.
  struct Answer {
    absl::Notification done;
    absl::StatusOr<std::vector<Job>> jobs;
  };
  // Shared with the callback: if the test fails, the queue answers it when it goes, later.
  auto answer = std::make_shared<Answer>();
  queue_->Lease(LeaseArgs{"q", "w2", 1, std::nullopt, absl::Seconds(30)},
                [answer](absl::StatusOr<std::vector<Job>> r) {
                  answer->jobs = std::move(r);
                  answer->done.Notify();
                });
  EXPECT_FALSE(answer->done.HasBeenNotified());
  flaky_->ReleaseReads();
  leaser_.join();

  EXPECT_TRUE(absl::IsUnavailable(held_.status())) << held_.status();
  ASSERT_TRUE(answer->done.WaitForNotificationWithTimeout(absl::Seconds(5)))
      << "the waiting lease was not woken when the job was ready again";
  const absl::StatusOr<std::vector<Job>>& waited = answer->jobs;
  ASSERT_TRUE(waited.ok()) << waited.status();
  ASSERT_EQ(waited->size(), 1u);
  EXPECT_EQ(waited->front().payload, "retried");
  EXPECT_EQ(waited->front().attempts.size(), 1u) << "the failed lease left no attempt";
}

TEST_F(LeaseReadTest, AJobWhoseLeaseExpiredIsLeasedAgainWithItsHistory) {
  QueueConfigPatch config;
  config.visibility_timeout = absl::Seconds(1);
  config.backoff_initial = absl::ZeroDuration();  // ready again as soon as the lease expires
  config.backoff_max = absl::ZeroDuration();
  Create("q", config);
  ASSERT_TRUE(Enqueue("q", {JobFor("again")}).ok());
  auto first = Lease("q");
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_EQ(first->size(), 1u);

  // No scheduler pass runs in this fixture: the next Lease finds the expiry itself, requeues the
  // job and takes it again in the same call.
  clock_.Advance(absl::Seconds(2));
  auto again = Lease("q");
  ASSERT_TRUE(again.ok()) << again.status();
  ASSERT_EQ(again->size(), 1u);
  const Job& job = again->front();
  EXPECT_EQ(job.expiries, 1);
  ASSERT_EQ(job.attempts.size(), 2u) << "the expired attempt is kept";
  EXPECT_EQ(job.attempts[0].outcome, Outcome::kExpired);
  EXPECT_EQ(job.attempts[1].number, 2u);
  EXPECT_NE(job.lease_token, first->front().lease_token);
}

}  // namespace
}  // namespace conduit::work_queue
