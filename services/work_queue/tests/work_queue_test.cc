// The work queue's rules, on the real RocksDB store in a temp dir, with a fake clock.

#include "services/work_queue/domain/work_queue.h"

#include <set>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/synchronization/notification.h"
#include "common/testing/temp_dir.h"
#include "services/work_queue/domain/queue_rules.h"
#include "services/work_queue/storage/rocksdb_queue_store.h"

namespace conduit::work_queue {
namespace {

template <typename T>
absl::StatusOr<T> Wait(const std::function<void(Callback<T>)>& call) {
  absl::Notification done;
  absl::StatusOr<T> result = absl::UnknownError("no answer");
  call([&](absl::StatusOr<T> r) {
    result = std::move(r);
    done.Notify();
  });
  done.WaitForNotification();
  return result;
}

NewJob JobFor(std::string payload, std::string tenant = "", int32_t priority = 0) {
  NewJob j;
  j.payload = std::move(payload);
  j.tenant = std::move(tenant);
  j.priority = priority;
  return j;
}

class WorkQueueTest : public ::testing::Test {
 protected:
  WorkQueueTest() { Reopen(); }

  void Reopen() {
    queue_.reset();
    store_.reset();
    store_ = *RocksDbQueueStore::Open(dir_.path());
    WorkQueueOptions options;
    options.scheduler_interval = absl::ZeroDuration();
    queue_ = std::make_unique<WorkQueue>(store_.get(), &clock_, options);
    ASSERT_TRUE(queue_->Recover().ok());
  }

  void Create(const std::string& name, QueueConfigPatch config = {}) {
    auto created = Wait<QueueMeta>([&](auto cb) { queue_->CreateQueue(name, config, cb); });
    ASSERT_TRUE(created.ok()) << created.status();
  }
  absl::StatusOr<std::vector<EnqueuedJob>> Enqueue(const std::string& q, std::vector<NewJob> jobs) {
    return Wait<std::vector<EnqueuedJob>>(
        [&](auto cb) { queue_->Enqueue(q, std::move(jobs), cb); });
  }
  absl::StatusOr<std::vector<Job>> Lease(const std::string& q, int32_t max_jobs = 1,
                                         std::string worker = "w1") {
    LeaseArgs args{q, worker, max_jobs, std::nullopt, absl::ZeroDuration()};
    return Wait<std::vector<Job>>([&](auto cb) { queue_->Lease(args, cb); });
  }
  absl::Status Ack(const Job& job) {
    return Wait<bool>([&](auto cb) { queue_->Ack("q", job.id, job.lease_token, cb); }).status();
  }
  absl::StatusOr<NackResult> Nack(const Job& job, std::string reason,
                                  FailureClass klass = FailureClass::kTransient) {
    NackArgs args{std::move(reason), klass, std::nullopt};
    return Wait<NackResult>([&](auto cb) { queue_->Nack("q", job.id, job.lease_token, args, cb); });
  }
  QueueStats Stats() { return *queue_->Stats("q"); }

  conduit::testing::TempDir dir_;
  time::FakeClock clock_;
  std::unique_ptr<RocksDbQueueStore> store_;
  std::unique_ptr<WorkQueue> queue_;
};

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
  EXPECT_EQ(BackoffCap(config, 1), absl::Seconds(1));
  EXPECT_EQ(BackoffCap(config, 2), absl::Seconds(2));
  EXPECT_EQ(BackoffCap(config, 5), absl::Seconds(16));
  EXPECT_EQ(BackoffCap(config, 6), absl::Seconds(30));
  EXPECT_EQ(BackoffCap(config, 500), absl::Seconds(30));
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

TEST_F(WorkQueueTest, MaxAttemptsSendsTheJobToTheDeadLetterLaneWithItsHistory) {
  QueueConfigPatch config;
  config.max_attempts = 3;
  config.backoff_initial = absl::ZeroDuration();
  config.backoff_max = absl::ZeroDuration();
  Create("q", config);
  NewJob j = JobFor("payload", "acme", 7);
  j.headers = {Header{"trace", "t1"}};
  j.idempotency_key = "order-9";
  ASSERT_TRUE(Enqueue("q", {j}).ok());
  for (int i = 1; i <= 3; ++i) {
    auto leased = Lease("q", 1, "worker-" + std::to_string(i));
    ASSERT_EQ(leased->size(), 1u) << "attempt " << i;
    auto nacked = Nack((*leased)[0], "smtp 451 try " + std::to_string(i));
    ASSERT_TRUE(nacked.ok());
    EXPECT_EQ(nacked->dead, i == 3);
  }
  EXPECT_TRUE(Lease("q")->empty());
  EXPECT_EQ(Stats().dead, 1);
  auto page = queue_->ListDeadLetters("q", {}, 10, "");
  ASSERT_EQ(page->jobs.size(), 1u);
  const Job& dead = page->jobs[0];
  EXPECT_EQ(dead.payload, "payload");
  EXPECT_EQ(dead.tenant, "acme");
  EXPECT_EQ(dead.priority, 7);
  EXPECT_EQ(dead.idempotency_key, "order-9");
  EXPECT_EQ(dead.headers, j.headers);
  EXPECT_THAT(dead.death_reason, ::testing::HasSubstr("max attempts (3)"));
  EXPECT_THAT(dead.death_reason, ::testing::HasSubstr("smtp 451 try 3"));
  ASSERT_EQ(dead.attempts.size(), 3u);
  EXPECT_EQ(dead.attempts[1].worker, "worker-2");
  EXPECT_EQ(dead.attempts[1].outcome, Outcome::kNacked);
  EXPECT_EQ(dead.attempts[1].reason, "smtp 451 try 2");
  Reopen();
  EXPECT_EQ(*queue_->GetDeadLetter("q", dead.id), dead) << "the evidence is durable";
}

TEST_F(WorkQueueTest, PermanentNackAndMaxExpiriesGoStraightToDead) {
  QueueConfigPatch config;
  config.max_lease_expiries = 2;
  config.backoff_initial = absl::ZeroDuration();
  config.backoff_max = absl::ZeroDuration();
  Create("q", config);
  ASSERT_TRUE(Enqueue("q", {JobFor("poison"), JobFor("orphan")}).ok());
  auto poison = (*Lease("q"))[0];
  auto result = Nack(poison, "schema violation", FailureClass::kPermanent);
  EXPECT_TRUE(result->dead);
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(Lease("q")->size(), 1u);
    clock_.Advance(absl::Seconds(31));
    queue_->RunScheduler();
  }
  EXPECT_EQ(Stats().dead, 2);
  auto expired = queue_->ListDeadLetters("q", DeadLetterFilter{"lease expiries", {}, {}, {}}, 10, "");
  ASSERT_EQ(expired->jobs.size(), 1u);
  EXPECT_EQ(expired->jobs[0].payload, "orphan");
  EXPECT_EQ(expired->jobs[0].attempts.back().outcome, Outcome::kExpired);
}

TEST_F(WorkQueueTest, RedriveByFilterWithDryRunReplacementAndLoopGuard) {
  QueueConfigPatch config;
  config.max_redrives = 1;
  Create("q", config);
  ASSERT_TRUE(Enqueue("q", {JobFor("a", "t1"), JobFor("b", "t2")}).ok());
  for (int i = 0; i < 2; ++i) {
    auto job = (*Lease("q"))[0];
    ASSERT_TRUE(Nack(job, "bad address", FailureClass::kPermanent).ok());
  }
  DeadLetterSelection by_tenant;
  by_tenant.filter.tenant = "t1";
  auto dry = Wait<RedriveResult>([&](auto cb) { queue_->Redrive("q", by_tenant, {}, 0, cb); });
  ASSERT_EQ(dry->moved.size(), 1u);
  EXPECT_EQ(Stats().dead, 2) << "a dry run moves nothing";
  by_tenant.dry_run = false;
  auto moved = Wait<RedriveResult>([&](auto cb) { queue_->Redrive("q", by_tenant, {}, 0, cb); });
  ASSERT_EQ(moved->moved.size(), 1u);
  EXPECT_EQ(Stats().dead, 1);
  auto again = (*Lease("q"))[0];
  EXPECT_EQ(again.tenant, "t1");
  EXPECT_EQ(again.redrives, 1);
  ASSERT_TRUE(Nack(again, "still bad", FailureClass::kPermanent).ok());
  auto guard = Wait<RedriveResult>([&](auto cb) { queue_->Redrive("q", by_tenant, {}, 0, cb); });
  EXPECT_TRUE(guard->moved.empty());
  EXPECT_EQ(guard->refused.size(), 1u) << "max_redrives stops the loop";

  // Repair and replay: a new payload for an explicit id.
  DeadLetterSelection b;
  b.ids = {dry->moved[0] == 1 ? 2u : 1u};
  b.dry_run = false;
  auto repaired = Wait<RedriveResult>([&](auto cb) { queue_->Redrive("q", b, "fixed", 0, cb); });
  ASSERT_TRUE(repaired.ok()) << repaired.status();
  EXPECT_EQ((*Lease("q"))[0].payload, "fixed");
  DeadLetterSelection filter_with_payload;
  EXPECT_EQ(Wait<RedriveResult>([&](auto cb) {
              queue_->Redrive("q", filter_with_payload, "x", 0, cb);
            }).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(WorkQueueTest, DiscardNeedsAReasonAndIsAudited) {
  Create("q");
  ASSERT_TRUE(Enqueue("q", {JobFor("a")}).ok());
  auto job = (*Lease("q"))[0];
  ASSERT_TRUE(Nack(job, "bad", FailureClass::kPermanent).ok());
  DeadLetterSelection all;
  all.dry_run = false;
  EXPECT_EQ(Wait<std::vector<uint64_t>>([&](auto cb) { queue_->Discard("q", all, "", cb); })
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  auto discarded = Wait<std::vector<uint64_t>>(
      [&](auto cb) { queue_->Discard("q", all, "customer closed the account", cb); });
  ASSERT_EQ(discarded->size(), 1u);
  EXPECT_EQ(Stats().dead, 0);
  auto audit = store_->LoadAudit(queue_->ListQueues()[0].id);
  ASSERT_EQ(audit->size(), 1u);
  EXPECT_THAT((*audit)[0], ::testing::HasSubstr("customer closed the account"));
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

TEST_F(WorkQueueTest, DeadLetterListingPagesAndFiltersByTime) {
  Create("q");
  std::vector<NewJob> jobs;
  for (int i = 0; i < 25; ++i) jobs.push_back(JobFor("j" + std::to_string(i)));
  ASSERT_TRUE(Enqueue("q", std::move(jobs)).ok());
  const absl::Time start = clock_.Now();
  for (int i = 0; i < 25; ++i) {
    auto job = (*Lease("q"))[0];
    ASSERT_TRUE(Nack(job, i % 2 ? "odd" : "even", FailureClass::kPermanent).ok());
    clock_.Advance(absl::Seconds(1));
  }
  std::set<uint64_t> seen;
  std::string token;
  int pages = 0;
  do {
    auto page = queue_->ListDeadLetters("q", {}, 10, token);
    ASSERT_TRUE(page.ok());
    for (const Job& j : page->jobs) EXPECT_TRUE(seen.insert(j.id).second);
    token = page->next_page_token;
    ++pages;
  } while (!token.empty());
  EXPECT_EQ(seen.size(), 25u);
  EXPECT_EQ(pages, 3);
  DeadLetterFilter window{"odd", std::nullopt, start + absl::Seconds(10), start + absl::Seconds(20)};
  auto filtered = queue_->ListDeadLetters("q", window, 100, "");
  EXPECT_EQ(filtered->jobs.size(), 5u);  // odd i in [10, 20)
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
  TenantRecorder recorder;
  WorkQueueOptions options;
  options.scheduler_interval = absl::ZeroDuration();
  WorkQueue queue(store.get(), &clock, options, &recorder);
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

TEST_F(WorkQueueTest, RepeatedIdsInASelectionCountOnce) {
  Create("q");
  ASSERT_TRUE(Enqueue("q", {JobFor("a")}).ok());
  auto job = (*Lease("q"))[0];
  ASSERT_TRUE(Nack(job, "bad", FailureClass::kPermanent).ok());
  DeadLetterSelection twice;
  twice.ids = {job.id, job.id};
  twice.dry_run = false;
  auto redriven = Wait<RedriveResult>([&](auto cb) { queue_->Redrive("q", twice, {}, 0, cb); });
  ASSERT_TRUE(redriven.ok());
  EXPECT_EQ(redriven->moved.size(), 1u);
  EXPECT_EQ((*Lease("q"))[0].redrives, 1);
  DeadLetterSelection discard;
  discard.ids = {job.id, job.id};
  discard.dry_run = false;
  // Not dead any more (it was redriven): a clear NOT_FOUND, and the server does not crash.
  EXPECT_EQ(Wait<std::vector<uint64_t>>([&](auto cb) { queue_->Discard("q", discard, "r", cb); })
                .status()
                .code(),
            absl::StatusCode::kNotFound);
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

TEST_F(WorkQueueTest, RedriveAtARatePacesTheJobsAndSourceIsKept) {
  Create("q");
  std::vector<NewJob> jobs;
  for (int i = 0; i < 4; ++i) {
    NewJob j = JobFor("j");
    j.source = JobSource{"orders", 3, 1000 + i};
    jobs.push_back(j);
  }
  ASSERT_TRUE(Enqueue("q", std::move(jobs)).ok());
  auto leased = Lease("q", 4);
  for (const Job& job : *leased) ASSERT_TRUE(Nack(job, "x", FailureClass::kPermanent).ok());
  auto dead = queue_->ListDeadLetters("q", {}, 10, "");
  ASSERT_EQ(dead->jobs.size(), 4u);
  EXPECT_EQ(dead->jobs[2].source, (JobSource{"orders", 3, 1002}));
  DeadLetterSelection all;
  all.dry_run = false;
  ASSERT_TRUE(Wait<RedriveResult>([&](auto cb) { queue_->Redrive("q", all, {}, 2.0, cb); }).ok());
  EXPECT_EQ(Stats().ready, 1);
  EXPECT_EQ(Stats().delayed, 3);
  clock_.Advance(absl::Seconds(1));
  EXPECT_EQ(Stats().ready, 3) << "two per second";
  Reopen();
  EXPECT_EQ((*Lease("q"))[0].source->topic, "orders") << "the source survives a restart";
}

}  // namespace
}  // namespace conduit::work_queue
