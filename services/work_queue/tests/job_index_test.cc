#include "services/work_queue/domain/job_index.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "services/work_queue/tests/job_index_fixture.h"

namespace conduit::work_queue {
namespace {

using namespace testing_index;  // NOLINT: the fixture of these tests

TEST(JobIndex, EachJobIsIndexedByItsState) {
  IndexedJobs q;
  q.Enqueue(1, kT0, kT0);
  q.Enqueue(2, kT0 + absl::Seconds(5), kT0);
  q.Enqueue(3, kT0, kT0);
  ASSERT_EQ(q.LeaseNext(kT0, absl::Seconds(30)), 1u);
  q.index.AddDead(4, kT0 - absl::Seconds(7));
  // A leased job recovered from the store (no TakeNextReady before it).
  Job recovered;
  recovered.id = 5;
  recovered.tenant = "u";
  LeaseBook::Grant(recovered, "w", kT0, absl::Seconds(30), q.rng);
  q.index.AddLeased(recovered);
  EXPECT_TRUE(q.index.CheckInvariants().ok()) << q.index.CheckInvariants();
  const JobIndex::Depth d = q.index.Indexed();
  EXPECT_EQ(d.ready, 1);
  EXPECT_EQ(d.delayed, 1);
  EXPECT_EQ(d.leased, 2);
  EXPECT_EQ(d.dead, 1);
  EXPECT_EQ(d.oldest_ready, kT0);
  EXPECT_EQ(d.oldest_dead, kT0 - absl::Seconds(7));
  EXPECT_EQ(q.index.live(), 4);
  EXPECT_EQ(q.index.tenants().size(), 1);
  EXPECT_EQ(q.index.tenants().leased(),
            (absl::flat_hash_map<std::string, int32_t>{{"t", 1}, {"u", 1}}));
  EXPECT_EQ(q.index.leases().size(), 2u);
  ASSERT_NE(q.index.FindLeased(5), nullptr);
  EXPECT_EQ(*q.index.FindLeased(5), recovered);
  EXPECT_TRUE(q.index.dead().Contains(4));
  EXPECT_FALSE(q.index.dead().Contains(1));
  EXPECT_NE(q.index.FindLeased(1), nullptr);
  EXPECT_EQ(q.index.FindLeased(3), nullptr) << "ready, not leased";
  EXPECT_EQ(q.index.FindLeased(4), nullptr) << "dead, not leased";
  EXPECT_EQ(q.index.FindLeased(9), nullptr) << "unknown";
}

TEST(JobIndex, AnEmptyIndexHasNoOldestTimes) {
  JobIndex index;
  for (const JobIndex::Depth& d : {index.At(kT0), index.Indexed()}) {
    EXPECT_EQ(Total(d), 0);
    EXPECT_EQ(d.oldest_ready, absl::InfiniteFuture());
    EXPECT_EQ(d.oldest_dead, absl::InfiniteFuture());
  }
  EXPECT_EQ(index.live(), 0);
  EXPECT_FALSE(index.PromoteDue(absl::InfiniteFuture()));
  EXPECT_EQ(index.TakeNextReady(QueueConfig{}), std::nullopt);
  EXPECT_EQ(index.TakeExpiredLease(absl::InfiniteFuture()), std::nullopt);
  EXPECT_EQ(index.TakeLeased(1), std::nullopt);
  EXPECT_FALSE(index.RemoveDead(1));
  EXPECT_TRUE(index.CheckInvariants().ok()) << index.CheckInvariants();
}

TEST(JobIndex, AJobReadyAtNowIsReadyAndOneReadyLaterIsDelayed) {
  IndexedJobs q;
  q.Enqueue(1, kT0, kT0);
  q.Enqueue(2, kT0 + absl::Microseconds(1), kT0);
  q.Enqueue(3, kT0 - absl::Seconds(1), kT0);
  const JobIndex::Depth d = q.index.Indexed();
  EXPECT_EQ(d.ready, 2);
  EXPECT_EQ(d.delayed, 1);
  EXPECT_EQ(d.oldest_ready, kT0 - absl::Seconds(1));
}

TEST(JobIndex, DelayedJobsAreDueAtTheirTimeAndPromotedOnlyThen) {
  IndexedJobs q;
  q.Enqueue(1, kT0 + absl::Seconds(10), kT0, "b", 7);
  q.Enqueue(2, kT0 + absl::Seconds(20), kT0, "a", 0);
  // Before promotion, At(now) counts what is due as ready; Indexed() as the indexes stand.
  JobIndex::Depth at = q.index.At(kT0 + absl::Seconds(10));
  EXPECT_EQ(at.ready, 1);
  EXPECT_EQ(at.delayed, 1);
  EXPECT_EQ(at.oldest_ready, kT0 + absl::Seconds(10));
  EXPECT_EQ(q.index.At(kT0 + absl::Seconds(10) - absl::Microseconds(1)).ready, 0);
  EXPECT_EQ(q.index.At(kT0 + absl::Seconds(20)).ready, 2);
  JobIndex::Depth indexed = q.index.Indexed();
  EXPECT_EQ(indexed.ready, 0);
  EXPECT_EQ(indexed.delayed, 2);
  EXPECT_EQ(indexed.oldest_ready, absl::InfiniteFuture());
  EXPECT_EQ(q.index.live(), 2);
  EXPECT_EQ(q.index.TakeNextReady(QueueConfig{}), std::nullopt) << "delayed jobs are not leasable";

  EXPECT_FALSE(q.index.PromoteDue(kT0 + absl::Seconds(10) - absl::Microseconds(1)));
  EXPECT_TRUE(q.index.PromoteDue(kT0 + absl::Seconds(10)));
  EXPECT_FALSE(q.index.PromoteDue(kT0 + absl::Seconds(10))) << "nothing more is due";
  indexed = q.index.Indexed();
  EXPECT_EQ(indexed.ready, 1);
  EXPECT_EQ(indexed.delayed, 1);
  EXPECT_EQ(indexed.oldest_ready, kT0 + absl::Seconds(10));
  EXPECT_TRUE(q.index.CheckInvariants().ok()) << q.index.CheckInvariants();

  // The promoted job keeps its tenant, priority and ready time.
  auto next = q.index.TakeNextReady(QueueConfig{});
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->first, "b");
  EXPECT_EQ(next->second.id, 1u);
  EXPECT_EQ(next->second.priority, 7);
  EXPECT_EQ(next->second.ready_at, kT0 + absl::Seconds(10));
  EXPECT_EQ(q.index.Indexed().ready, 0);
  // Taken out of READY while its record is read, it still counts, as leased.
  EXPECT_EQ(q.index.live(), 2);
  EXPECT_EQ(q.index.Indexed().leased, 1);
  EXPECT_FALSE(q.index.CheckInvariants().ok()) << "a lease is being started";
  q.Start(*next, kT0 + absl::Seconds(10), absl::Seconds(30));
  EXPECT_EQ(q.index.live(), 2);
  EXPECT_EQ(q.index.Indexed().leased, 1);
  EXPECT_TRUE(q.index.CheckInvariants().ok()) << q.index.CheckInvariants();

  EXPECT_TRUE(q.index.PromoteDue(kT0 + absl::Minutes(1)));
  next = q.index.TakeNextReady(QueueConfig{});
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->first, "a");
  EXPECT_EQ(next->second.id, 2u);
}

TEST(JobIndex, LeasesExpireInDeadlineOrderAndOnlyWhenDue) {
  IndexedJobs q;
  q.Enqueue(1, kT0, kT0);
  ASSERT_EQ(q.LeaseAll(kT0, absl::Seconds(30)), (std::vector<uint64_t>{1}));
  q.Enqueue(2, kT0, kT0);
  ASSERT_EQ(q.LeaseAll(kT0, absl::Seconds(10)), (std::vector<uint64_t>{2}));
  EXPECT_TRUE(q.index.CheckInvariants().ok()) << q.index.CheckInvariants();
  EXPECT_EQ(q.index.Indexed().leased, 2);
  EXPECT_EQ(q.index.tenants().leased().at("t"), 2);

  EXPECT_EQ(q.index.TakeExpiredLease(kT0 + absl::Seconds(10) - absl::Microseconds(1)),
            std::nullopt);
  std::optional<Job> expired = q.index.TakeExpiredLease(kT0 + absl::Seconds(30));
  ASSERT_TRUE(expired.has_value());
  EXPECT_EQ(expired->id, 2u) << "the earlier deadline first";
  EXPECT_EQ(expired->payload, "payload of 2") << "the leased job is held whole";
  EXPECT_EQ(q.index.tenants().leased().at("t"), 1);
  EXPECT_EQ(q.index.live(), 1);
  LeaseBook::EndByExpiry(*expired);
  q.index.Requeue(*expired, kT0 + absl::Seconds(31), kT0 + absl::Seconds(30));
  EXPECT_EQ(expired->state, JobState::kQueued);
  EXPECT_EQ(q.index.Indexed().delayed, 1);
  EXPECT_TRUE(q.index.CheckInvariants().ok()) << q.index.CheckInvariants();

  Job* one = q.index.FindLeased(1);
  ASSERT_NE(one, nullptr);
  q.index.ExtendLease(*one, kT0 + absl::Minutes(5));
  EXPECT_EQ(q.index.FindLeased(1)->lease_deadline, kT0 + absl::Minutes(5));
  EXPECT_EQ(q.index.TakeExpiredLease(kT0 + absl::Seconds(30)), std::nullopt) << "extended";
  EXPECT_TRUE(q.index.CheckInvariants().ok()) << q.index.CheckInvariants();
  expired = q.index.TakeExpiredLease(kT0 + absl::Minutes(5));
  ASSERT_TRUE(expired.has_value()) << "due at its deadline";
  EXPECT_EQ(expired->id, 1u);
  EXPECT_EQ(q.index.TakeExpiredLease(absl::InfiniteFuture()), std::nullopt);
  EXPECT_TRUE(q.index.tenants().leased().empty());
}

TEST(JobIndex, TakeLeasedAndFindLeasedSeeOnlyLeasedJobs) {
  IndexedJobs q;
  q.Enqueue(1, kT0, kT0);
  q.Enqueue(2, kT0, kT0);
  ASSERT_EQ(q.LeaseNext(kT0, absl::Seconds(30)), 1u);
  const Job leased = q.store.at(1);
  Job* found = q.index.FindLeased(1);
  ASSERT_NE(found, nullptr);
  EXPECT_EQ(*found, leased);
  EXPECT_EQ(q.index.TakeLeased(2), std::nullopt) << "ready, not leased";
  EXPECT_EQ(q.index.Indexed().ready, 1);

  std::optional<Job> taken = q.index.TakeLeased(1);  // acked
  ASSERT_TRUE(taken.has_value());
  EXPECT_EQ(*taken, leased) << "token, deadline, attempts and payload";
  EXPECT_EQ(q.index.FindLeased(1), nullptr);
  EXPECT_EQ(q.index.TakeLeased(1), std::nullopt) << "taken once";
  EXPECT_EQ(q.index.Indexed().leased, 0);
  EXPECT_EQ(q.index.leases().size(), 0u);
  EXPECT_EQ(q.index.TakeExpiredLease(absl::InfiniteFuture()), std::nullopt);
  EXPECT_TRUE(q.index.tenants().leased().empty());
  EXPECT_TRUE(q.index.CheckInvariants().ok()) << q.index.CheckInvariants();
}

TEST(JobIndex, ATakenJobCountsAgainstItsTenantUntilStartedOrReturned) {
  IndexedJobs q;
  QueueConfig config;
  config.max_in_flight_per_tenant = 1;
  q.Enqueue(1, kT0, kT0, "a");
  q.Enqueue(2, kT0, kT0, "a");
  q.Enqueue(3, kT0 - absl::Seconds(1), kT0, "b");
  // One batch: a's second job is held back by the limit before any of the batch is leased.
  auto first = q.index.TakeNextReady(config);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->second.id, 1u);
  EXPECT_EQ(q.index.tenants().leased().at("a"), 1);
  auto second = q.index.TakeNextReady(config);
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(second->second.id, 3u);
  EXPECT_EQ(q.index.TakeNextReady(config), std::nullopt) << "a and b are at their limit";
  EXPECT_EQ(q.index.live(), 3) << "taken jobs count, as leased";
  EXPECT_EQ(q.index.Indexed().leased, 2);

  // The records could not be read: both are ready again, and nothing counts as leased.
  q.index.ReturnReady(first->first, first->second, kT0);
  q.index.ReturnReady(second->first, second->second, kT0);
  EXPECT_TRUE(q.index.tenants().leased().empty());
  JobIndex::Depth d = q.index.Indexed();
  EXPECT_EQ(d.ready, 3);
  EXPECT_EQ(d.leased, 0);
  EXPECT_EQ(d.oldest_ready, kT0 - absl::Seconds(1));
  EXPECT_TRUE(q.index.CheckInvariants().ok()) << q.index.CheckInvariants();

  // Taken again in the same order within a tenant, and leased: counted once.
  EXPECT_EQ(q.LeaseAll(kT0, absl::Seconds(30), config), (std::vector<uint64_t>{1, 3}));
  EXPECT_EQ(q.index.tenants().leased(),
            (absl::flat_hash_map<std::string, int32_t>{{"a", 1}, {"b", 1}}));
  EXPECT_EQ(q.index.Indexed().leased, 2);
  EXPECT_TRUE(q.index.CheckInvariants().ok()) << q.index.CheckInvariants();
}

TEST(JobIndex, KillMovesATakenLeasedJobToTheLane) {
  IndexedJobs q;
  q.Enqueue(1, kT0, kT0);
  q.Enqueue(2, kT0, kT0);
  q.LeaseAll(kT0, absl::Seconds(30));
  std::optional<Job> job = q.index.TakeLeased(1);
  ASSERT_TRUE(job.has_value());
  LeaseBook::EndByNack(*job, "bad input", FailureClass::kPermanent, kT0 + absl::Seconds(1));
  q.index.Kill(*job, "permanent failure: bad input", kT0 + absl::Seconds(1));
  EXPECT_EQ(job->state, JobState::kDead);
  EXPECT_EQ(job->died_at, kT0 + absl::Seconds(1));
  EXPECT_EQ(job->death_reason, "permanent failure: bad input");
  EXPECT_TRUE(job->lease_token.value().empty());
  EXPECT_TRUE(q.index.dead().Contains(1));
  EXPECT_EQ(q.index.FindLeased(1), nullptr);
  JobIndex::Depth d = q.index.Indexed();
  EXPECT_EQ(d.dead, 1);
  EXPECT_EQ(d.leased, 1);
  EXPECT_EQ(d.oldest_dead, kT0 + absl::Seconds(1));
  EXPECT_EQ(q.index.live(), 1);
  EXPECT_EQ(q.index.tenants().leased().at("t"), 1);
  EXPECT_TRUE(q.index.CheckInvariants().ok()) << q.index.CheckInvariants();

  EXPECT_TRUE(q.index.RemoveDead(1));  // discarded
  EXPECT_FALSE(q.index.RemoveDead(1));
  EXPECT_TRUE(q.index.TakeLeased(2).has_value());  // acked
  d = q.index.Indexed();
  EXPECT_EQ(Total(d), 0);
  EXPECT_EQ(d.oldest_dead, absl::InfiniteFuture());
  EXPECT_TRUE(q.index.tenants().leased().empty());
  EXPECT_TRUE(q.index.CheckInvariants().ok()) << q.index.CheckInvariants();
}

TEST(JobIndex, RequeuePutsATakenJobBackReadyOrDelayed) {
  IndexedJobs q;
  q.Enqueue(1, kT0, kT0, "acme", 4);
  q.Enqueue(2, kT0, kT0, "acme", 4);
  q.LeaseAll(kT0, absl::Seconds(30));
  const absl::Time now = kT0 + absl::Seconds(5);

  std::optional<Job> one = q.index.TakeLeased(1);
  ASSERT_TRUE(one.has_value());
  LeaseBook::EndByNack(*one, "retry", FailureClass::kTransient, now);
  q.index.Requeue(*one, now, now);  // retry now
  EXPECT_EQ(one->state, JobState::kQueued);
  EXPECT_EQ(one->ready_at, now);
  std::optional<Job> two = q.index.TakeLeased(2);
  ASSERT_TRUE(two.has_value());
  LeaseBook::EndByNack(*two, "retry", FailureClass::kTransient, now);
  q.index.Requeue(*two, now + absl::Seconds(10), now);  // retry later
  EXPECT_EQ(two->ready_at, now + absl::Seconds(10));
  EXPECT_TRUE(q.index.CheckInvariants().ok()) << q.index.CheckInvariants();

  JobIndex::Depth d = q.index.Indexed();
  EXPECT_EQ(d.ready, 1);
  EXPECT_EQ(d.delayed, 1);
  EXPECT_EQ(d.leased, 0);
  EXPECT_EQ(d.oldest_ready, now);
  EXPECT_EQ(q.index.live(), 2);
  EXPECT_TRUE(q.index.tenants().leased().empty());
  auto next = q.index.TakeNextReady(QueueConfig{});
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->first, "acme");
  EXPECT_EQ(next->second.id, 1u);
  EXPECT_EQ(next->second.priority, 4);
  EXPECT_EQ(next->second.ready_at, now);
  EXPECT_EQ(q.index.TakeNextReady(QueueConfig{}), std::nullopt) << "job 2 is delayed";
  EXPECT_EQ(q.index.At(now + absl::Seconds(10)).ready, 1);
  EXPECT_TRUE(q.index.PromoteDue(now + absl::Seconds(10)));
  next = q.index.TakeNextReady(QueueConfig{});
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->second.id, 2u);
  EXPECT_EQ(next->second.priority, 4);
}

TEST(JobIndex, LeasedJobsAreCountedPerTenantAndLimitTheirTenant) {
  IndexedJobs q;
  QueueConfig config;
  config.max_in_flight_per_tenant = 2;
  for (uint64_t id = 1; id <= 3; ++id) q.Enqueue(id, kT0, kT0, "a");
  q.Enqueue(4, kT0, kT0, "b");
  EXPECT_EQ(q.LeaseAll(kT0, absl::Seconds(30), config), (std::vector<uint64_t>{1, 4, 2}));
  EXPECT_EQ(q.index.tenants().leased(),
            (absl::flat_hash_map<std::string, int32_t>{{"a", 2}, {"b", 1}}));
  EXPECT_EQ(q.index.Indexed().ready, 1) << "job 3 waits for one of a's leases to end";

  ASSERT_TRUE(q.index.TakeLeased(1).has_value());
  EXPECT_EQ(q.index.tenants().leased(),
            (absl::flat_hash_map<std::string, int32_t>{{"a", 1}, {"b", 1}}));
  EXPECT_EQ(q.LeaseNext(kT0, absl::Seconds(60), config), 3u);
  EXPECT_EQ(q.index.tenants().leased().at("a"), 2);

  std::optional<Job> expired = q.index.TakeExpiredLease(kT0 + absl::Seconds(30));
  ASSERT_TRUE(expired.has_value());
  EXPECT_EQ(expired->id, 2u);
  expired = q.index.TakeExpiredLease(kT0 + absl::Seconds(30));
  ASSERT_TRUE(expired.has_value());
  EXPECT_EQ(expired->id, 4u);
  EXPECT_EQ(q.index.tenants().leased(), (absl::flat_hash_map<std::string, int32_t>{{"a", 1}}));
  EXPECT_TRUE(q.index.CheckInvariants().ok()) << q.index.CheckInvariants();
}

}  // namespace
}  // namespace conduit::work_queue
