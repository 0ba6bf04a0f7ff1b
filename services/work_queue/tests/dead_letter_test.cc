// The dead-letter lane: how jobs get there with their evidence, listing, redrive and discard.

#include <map>
#include <set>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "services/work_queue/domain/queue_rules.h"
#include "services/work_queue/tests/queue_fixture.h"

namespace conduit::work_queue {
namespace {

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
