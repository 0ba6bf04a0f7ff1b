// The work queue's rules — enqueue, leases, retries, fairness, backpressure, restart — on the
// real RocksDB store with a fake clock.

#include <map>
#include <set>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/synchronization/notification.h"

#include "services/work_queue/domain/queue_rules.h"
#include "services/work_queue/tests/queue_fixture.h"

namespace conduit::work_queue {
namespace {

TEST_F(WorkQueueTest, EnqueueLeaseAckMovesAJobThroughItsStates) {
  Create("q");
  auto enqueued = Enqueue("q", {JobFor("a"), JobFor("b")});
  ASSERT_TRUE(enqueued.ok());
  EXPECT_EQ(Stats().ready, 2);
  auto leased = Lease("q");
  ASSERT_EQ(leased->size(), 1u);
  const Job& job = (*leased)[0];
  EXPECT_EQ(job.payload, "a") << "FIFO within a priority";
  EXPECT_EQ(job.attempts.size(), 1u);
  EXPECT_EQ(job.lease_deadline, clock_.Now() + absl::Seconds(30));
  EXPECT_EQ(Stats().leased, 1);
  ASSERT_TRUE(Ack(job).ok());
  EXPECT_EQ(Stats().leased, 0);
  EXPECT_EQ(Ack(job).code(), absl::StatusCode::kNotFound) << "acked jobs are gone";
  EXPECT_EQ(Stats().ready, 1);
}


TEST_F(WorkQueueTest, ExpiredLeaseReturnsTheJobAfterBackoffAndTheOldTokenIsStale) {
  QueueConfigPatch config;
  config.backoff_initial = absl::Seconds(10);
  config.backoff_max = absl::Seconds(10);
  Create("q", config);
  ASSERT_TRUE(Enqueue("q", {JobFor("a")}).ok());
  const Job first = (*Lease("q"))[0];
  clock_.Advance(absl::Seconds(29));
  auto extended = Wait<absl::Time>([&](auto cb) {
    queue_->ExtendLease("q", first.id, first.lease_token, absl::Seconds(60), cb);
  });
  ASSERT_TRUE(extended.ok());
  EXPECT_EQ(*extended, clock_.Now() + absl::Seconds(60));
  clock_.Advance(absl::Seconds(59));
  queue_->RunScheduler();
  EXPECT_EQ(Stats().leased, 1) << "the extension holds";
  clock_.Advance(absl::Seconds(2));
  queue_->RunScheduler();
  EXPECT_EQ(Stats().leased, 0);
  EXPECT_EQ(Ack(first).code(), absl::StatusCode::kFailedPrecondition) << "expired";
  clock_.Advance(absl::Seconds(10));  // past the (jittered, at most 10 s) backoff
  const Job second = (*Lease("q", 1, "w2"))[0];
  EXPECT_EQ(second.id, first.id);
  EXPECT_NE(second.lease_token, first.lease_token) << "a new token on every delivery";
  ASSERT_EQ(second.attempts.size(), 2u);
  EXPECT_EQ(second.attempts[0].outcome, Outcome::kExpired);
  EXPECT_EQ(second.attempts[0].worker, "w1");
  EXPECT_EQ(second.expiries, 1);
  // The first worker wakes up: its token changes nothing.
  EXPECT_EQ(Ack(first).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Nack(first, "late").status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Stats().leased, 1);
  EXPECT_TRUE(Ack(second).ok());
}


TEST_F(WorkQueueTest, BackoffGrowsExponentiallyWithFullJitterUpToTheCap) {
  QueueConfig config;
  config.backoff_initial = absl::Seconds(1);
  config.backoff_multiplier = 2;
  config.backoff_max = absl::Seconds(30);
  // The policy's own rules are backoff_test's; here, that the queue's fields reach it.
  absl::BitGen rng;
  absl::Duration lo = absl::InfiniteDuration(), hi = absl::ZeroDuration();
  for (int i = 0; i < 2000; ++i) {
    const absl::Duration d = Backoff(config, 5, rng);
    ASSERT_GE(d, absl::ZeroDuration());
    ASSERT_LE(d, absl::Seconds(16));
    lo = std::min(lo, d);
    hi = std::max(hi, d);
  }
  EXPECT_LT(lo, absl::Seconds(2)) << "full jitter reaches near zero";
  EXPECT_GT(hi, absl::Seconds(14)) << "and near the cap";
}


TEST_F(WorkQueueTest, IdempotencyKeyWithinTheWindowReturnsTheSameJob) {
  QueueConfigPatch config;
  config.idempotency_window = absl::Minutes(10);
  Create("q", config);
  NewJob j = JobFor("send email");
  j.idempotency_key = "welcome-42";
  auto first = Enqueue("q", {j, j});
  ASSERT_TRUE(first.ok());
  EXPECT_FALSE((*first)[0].duplicate);
  EXPECT_TRUE((*first)[1].duplicate);
  EXPECT_EQ((*first)[1].id, (*first)[0].id);
  Reopen();
  EXPECT_TRUE((*Enqueue("q", {j}))[0].duplicate) << "keys survive a restart";
  clock_.Advance(absl::Minutes(11));
  auto later = Enqueue("q", {j});
  EXPECT_FALSE((*later)[0].duplicate);
  EXPECT_NE((*later)[0].id, (*first)[0].id);
  EXPECT_EQ(Stats().ready, 2);
}


TEST_F(WorkQueueTest, TenantsAreServedRoundRobin) {
  Create("q");
  std::vector<NewJob> a;
  for (int i = 0; i < 10'000; ++i) a.push_back(JobFor("a", "big"));
  ASSERT_TRUE(Enqueue("q", std::move(a)).ok());
  std::vector<NewJob> b;
  for (int i = 0; i < 10; ++i) b.push_back(JobFor("b", "small"));
  ASSERT_TRUE(Enqueue("q", std::move(b)).ok());
  int small = 0;
  for (int i = 0; i < 20; ++i) {
    auto leased = Lease("q");
    for (const Job& job : *leased) small += job.tenant == "small";
  }
  EXPECT_EQ(small, 10) << "the small tenant's ten jobs come within the first 20 leases";
}


TEST_F(WorkQueueTest, PriorityDelayAndBackpressure) {
  QueueConfigPatch config;
  config.max_depth = 3;
  Create("q", config);
  NewJob later = JobFor("later");
  later.delay = absl::Minutes(5);
  ASSERT_TRUE(Enqueue("q", {JobFor("low", "", 1), JobFor("high", "", 9), later}).ok());
  auto full = Enqueue("q", {JobFor("x")});
  EXPECT_EQ(full.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(full.status().message(), ::testing::HasSubstr("retry after"));
  EXPECT_EQ(Stats().delayed, 1);
  auto two = Lease("q", 10);
  ASSERT_EQ(two->size(), 2u);
  EXPECT_EQ((*two)[0].payload, "high");
  clock_.Advance(absl::Minutes(5));
  auto third = Lease("q", 10);
  ASSERT_EQ(third->size(), 1u);
  EXPECT_EQ((*third)[0].payload, "later");
}


TEST_F(WorkQueueTest, BadInputGetsAClearStatus) {
  EXPECT_EQ(Wait<QueueMeta>([&](auto cb) { queue_->CreateQueue("bad name", {}, cb); })
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  QueueConfigPatch bad;
  bad.max_attempts = 0;
  EXPECT_EQ(Wait<QueueMeta>([&](auto cb) { queue_->CreateQueue("q", bad, cb); }).status().code(),
            absl::StatusCode::kInvalidArgument);
  Create("q");
  EXPECT_EQ(Wait<QueueMeta>([&](auto cb) { queue_->CreateQueue("q", {}, cb); }).status().code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(Enqueue("nope", {JobFor("a")}).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(Enqueue("q", {}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Lease("q", 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Lease("q", 1, "").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(queue_->GetDeadLetter("q", 99).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(queue_->ListDeadLetters("q", {}, 10, "garbage").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Stats().ready, 0);
}


TEST_F(WorkQueueTest, StateSurvivesRestartExactly) {
  Create("q");
  ASSERT_TRUE(Enqueue("q", {JobFor("a"), JobFor("b"), JobFor("c")}).ok());
  const Job leased = (*Lease("q"))[0];
  auto dead = (*Lease("q"))[0];
  ASSERT_TRUE(Nack(dead, "bad", FailureClass::kPermanent).ok());
  Reopen();
  QueueStats stats = Stats();
  EXPECT_EQ(stats.ready, 1);
  EXPECT_EQ(stats.leased, 1);
  EXPECT_EQ(stats.dead, 1);
  EXPECT_TRUE(Ack(leased).ok()) << "the lease and its token survive";
  auto next = Lease("q");
  EXPECT_EQ((*next)[0].payload, "c");
  EXPECT_GT((*next)[0].id, leased.id);
  ASSERT_TRUE(Enqueue("q", {JobFor("d")}).ok());
  Reopen();
  EXPECT_EQ(Stats().ready, 1);
}


class TenantRecorder : public QueueObserver {
 public:
  void OnTenantDepth(const std::string& queue, const std::vector<TenantDepth>& tenants) override {
    last = tenants;
  }
  std::vector<TenantDepth> last;
};


TEST(WorkQueueMetrics, TenantDepthIsBoundedToTheBusiestTenants) {
  conduit::testing::TempDir dir;
  auto store = *RocksDbQueueStore::Open(dir.path());
  time::FakeClock clock;
  runtime::Runtime runtime(&clock);
  TenantRecorder recorder;
  WorkQueueOptions options;
  options.scheduler_interval = absl::ZeroDuration();
  WorkQueue queue(store.get(), &runtime, options, &recorder);
  ASSERT_TRUE(queue.Recover().ok());
  ASSERT_TRUE(Wait<QueueMeta>([&](auto cb) { queue.CreateQueue("q", {}, cb); }).ok());
  std::vector<NewJob> jobs;
  for (int t = 0; t < 30; ++t) {
    for (int i = 0; i <= t; ++i) jobs.push_back(JobFor("x", "tenant-" + std::to_string(t)));
  }
  ASSERT_TRUE(Wait<std::vector<EnqueuedJob>>([&](auto cb) { queue.Enqueue("q", jobs, cb); }).ok());
  queue.RunScheduler();
  ASSERT_EQ(recorder.last.size(), QueueObserver::kMaxTenantsObserved + 1);
  EXPECT_EQ(recorder.last[0].tenant, "tenant-29");
  EXPECT_EQ(recorder.last[0].ready, 30);
  EXPECT_EQ(recorder.last.back().tenant, QueueObserver::kOtherTenants);
  EXPECT_EQ(recorder.last.back().ready, 1 + 2 + 3 + 4 + 5 + 6 + 7 + 8 + 9 + 10);
}


TEST_F(WorkQueueTest, JobIdsAreNeverReusedAfterRestart) {
  Create("q");
  NewJob j = JobFor("a");
  j.idempotency_key = "k";
  auto first = (*Enqueue("q", {j}))[0];
  ASSERT_TRUE(Ack((*Lease("q"))[0]).ok());
  Reopen();  // no job left on disk
  auto other = (*Enqueue("q", {JobFor("b")}))[0];
  EXPECT_GT(other.id, first.id);
  auto again = (*Enqueue("q", {j}))[0];
  EXPECT_TRUE(again.duplicate);
  EXPECT_EQ(again.id, first.id) << "the key still names the first (done) job, not a new one";
}


TEST_F(WorkQueueTest, WeightsAndInFlightLimitsShapeTheRoundRobin) {
  QueueConfigPatch config;
  config.tenant_weights = std::map<std::string, int32_t>{{"gold", 3}};
  config.max_in_flight_per_tenant = 4;
  Create("q", config);
  std::vector<NewJob> jobs;
  for (int i = 0; i < 10; ++i) jobs.push_back(JobFor("g", "gold"));
  for (int i = 0; i < 10; ++i) jobs.push_back(JobFor("s", "silver"));
  ASSERT_TRUE(Enqueue("q", std::move(jobs)).ok());
  std::string order;
  auto leased = Lease("q", 8);
  for (const Job& job : *leased) order += job.tenant == "gold" ? "G" : "S";
  EXPECT_EQ(order, "GGGSGSSS") << "3 gold per turn, 1 silver; each stops at 4 in flight";
  EXPECT_EQ(Lease("q")->size(), 0u) << "both tenants are at their in-flight limit";
}


TEST_F(WorkQueueTest, OldestReadyAgeLimitsEnqueueAndRatesAreReported) {
  QueueConfigPatch config;
  config.max_ready_age = absl::Minutes(1);
  Create("q", config);
  ASSERT_TRUE(Enqueue("q", {JobFor("a"), JobFor("b")}).ok());
  EXPECT_NEAR(Stats().enqueue_rate, 2.0 / 60, 1e-9);
  clock_.Advance(absl::Minutes(2));  // nobody leases
  auto refused = Enqueue("q", {JobFor("c")});
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(refused.status().message(), ::testing::HasSubstr("oldest ready job"));
  ASSERT_TRUE(Ack((*Lease("q"))[0]).ok());
  ASSERT_TRUE(Ack((*Lease("q"))[0]).ok());
  EXPECT_NEAR(Stats().ack_rate, 2.0 / 60, 1e-9);
  EXPECT_EQ(Stats().enqueue_rate, 0) << "enqueues were over a minute ago";
  EXPECT_TRUE(Enqueue("q", {JobFor("c")}).ok()) << "caught up";
}


TEST_F(WorkQueueTest, AfterAStorageFailureNothingChangesUntilRestart) {
  Create("q");
  ASSERT_TRUE(Enqueue("q", {JobFor("a")}).ok());
  flaky_->fail = true;
  EXPECT_EQ(Enqueue("q", {JobFor("b")}).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(Lease("q").status().code(), absl::StatusCode::kUnavailable)
      << "memory must not move on from what the disk has";
  flaky_->fail = false;
  EXPECT_EQ(Lease("q").status().code(), absl::StatusCode::kUnavailable) << "until restart";
  Reopen();
  EXPECT_EQ(Stats().ready, 1) << "the unacknowledged enqueue is gone; the acknowledged one is not";
  auto leased = Lease("q");
  ASSERT_EQ(leased->size(), 1u);
  EXPECT_EQ((*leased)[0].payload, "a");
}

// Lease waits sit on the runtime's scheduler, not on a thread of the queue's: when the queue
// goes, a waiting Lease is answered at once instead of being stranded.
TEST_F(WorkQueueTest, DestroyingTheQueueAnswersAWaitingLease) {
  Create("q");
  LeaseArgs args{"q", "w1", 1, std::nullopt, absl::Seconds(20)};
  absl::Notification done;
  absl::StatusOr<std::vector<Job>> result;
  queue_->Lease(args, [&](absl::StatusOr<std::vector<Job>> r) {
    result = std::move(r);
    done.Notify();
  });
  EXPECT_FALSE(done.WaitForNotificationWithTimeout(absl::Milliseconds(20)));
  queue_.reset();
  ASSERT_TRUE(done.HasBeenNotified()) << "the lease wait was stranded";
  if (result.ok()) {
    EXPECT_TRUE(result->empty());
  }
}

// A lease long-poll waits on the injected clock's monotonic reading: it ends when max_wait has
// passed there, not when the wall clock is stepped, and an enqueue ends it sooner.
TEST_F(WorkQueueTest, ALeaseLongPollEndsWhenItsWaitHasPassedOnTheClock) {
  Create("q");
  LeaseArgs args{"q", "w1", 1, std::nullopt, absl::Seconds(5)};
  absl::Notification done;
  absl::StatusOr<std::vector<Job>> result;
  queue_->Lease(args, [&](absl::StatusOr<std::vector<Job>> r) {
    result = std::move(r);
    done.Notify();
  });
  clock_.Set(clock_.Now() + absl::Hours(2));
  clock_.Advance(absl::Seconds(4));
  EXPECT_FALSE(done.WaitForNotificationWithTimeout(absl::Milliseconds(50)));
  clock_.Advance(absl::Seconds(1));
  done.WaitForNotification();
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(result->empty());

  absl::Notification woken;
  queue_->Lease(args, [&](absl::StatusOr<std::vector<Job>> r) {
    result = std::move(r);
    woken.Notify();
  });
  ASSERT_TRUE(Enqueue("q", {JobFor("wake")}).ok());
  woken.WaitForNotification();  // without advancing the clock
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->size(), 1u);
  EXPECT_EQ((*result)[0].payload, "wake");
}

}  // namespace
}  // namespace conduit::work_queue
