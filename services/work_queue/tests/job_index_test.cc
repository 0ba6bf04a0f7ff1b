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

namespace conduit::work_queue {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1'000'000);

// One queue's job records (what the store holds) and its index, changed together the way the
// queue changes them.
struct IndexedJobs {
  std::map<uint64_t, Job> store;
  JobIndex index;
  std::mt19937_64 rng{3};

  void Enqueue(uint64_t id, absl::Time ready_at, absl::Time now, std::string tenant = "t",
               int32_t priority = 0) {
    Job job;
    job.id = id;
    job.payload = "payload of " + std::to_string(id);
    job.tenant = std::move(tenant);
    job.priority = priority;
    job.enqueued_at = now;
    job.ready_at = ready_at;
    index.AddQueued(id, job.tenant, job.priority, job.ready_at, now);
    store[id] = std::move(job);
  }
  // Leases the job TakeNextReady gave out (its record, read from the store) for `visibility`.
  void Start(const std::pair<std::string, TenantReadyIndex::Entry>& next, absl::Time now,
             absl::Duration visibility) {
    Job& job = store.at(next.second.id);
    EXPECT_EQ(next.first, job.tenant);
    LeaseBook::Grant(job, "w", now, visibility, rng);
    index.StartLease(job);
  }
  // Takes the next job the index would lease and leases it for `visibility`; its id, or
  // nullopt when none may be leased.
  std::optional<uint64_t> LeaseNext(absl::Time now, absl::Duration visibility,
                                    const QueueConfig& config = {}) {
    auto next = index.TakeNextReady(config);
    if (!next) return std::nullopt;
    Start(*next, now, visibility);
    return next->second.id;
  }
  // Leases every job the index would lease now.
  std::vector<uint64_t> LeaseAll(absl::Time now, absl::Duration visibility,
                                 const QueueConfig& config = {}) {
    std::vector<uint64_t> ids;
    while (auto id = LeaseNext(now, visibility, config)) ids.push_back(*id);
    return ids;
  }
};

int64_t Total(const JobIndex::Depth& d) { return d.ready + d.delayed + d.leased + d.dead; }

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
  EXPECT_EQ(q.index.live(), 1) << "a taken job is out of the indexes";
  q.Start(*next, kT0 + absl::Seconds(10), absl::Seconds(30));
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
  EXPECT_EQ(q.index.live(), 1);

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

// Random enqueues, leases (some returned, as when the records cannot be read), acks, nacks,
// expiries, extensions, redrives and discards, with the clock moving on, applied to the store's
// records and the index as the queue applies them.
// After every step the invariants hold and the index agrees with the records.
class RandomQueue {
 public:
  explicit RandomQueue(uint64_t seed) : rng_(seed) { config_.max_in_flight_per_tenant = 2; }

  void Run(int steps) {
    for (int step = 0; step < steps; ++step) {
      SCOPED_TRACE(testing::Message() << "step " << step);
      Step();
      if (testing::Test::HasFatalFailure()) return;
      Verify();
      if (testing::Test::HasFatalFailure()) return;
    }
  }
  int64_t leased_total() const { return leased_total_; }
  int64_t returned_total() const { return returned_total_; }

 private:
  int64_t Uniform(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng_);
  }
  // A random id of the jobs in `state`; nullopt when there is none.
  std::optional<uint64_t> AnyIn(JobState state) {
    std::vector<uint64_t> ids;
    for (const auto& [id, job] : q_.store) {
      if (job.state == state) ids.push_back(id);
    }
    if (ids.empty()) return std::nullopt;
    return ids[Uniform(0, static_cast<int64_t>(ids.size()) - 1)];
  }
  bool Due(const Job& job) const { return job.state == JobState::kQueued && job.ready_at <= now_; }
  int32_t LeasedOf(const std::string& tenant) const {
    int32_t n = 0;
    for (const auto& [id, job] : q_.store) {
      if (job.state == JobState::kLeased && job.tenant == tenant) ++n;
    }
    return n;
  }
  // Nacked or expired: dead or queued again, as the queue decides.
  void Settle(Job job) {
    if (Uniform(0, 2) == 0) {
      q_.index.Kill(job, "given up", now_);
    } else {
      q_.index.Requeue(job, now_ + absl::Seconds(Uniform(0, 3)), now_);
    }
    q_.store[job.id] = std::move(job);
  }

  void Step() {
    const int64_t op = Uniform(0, 99);
    if (op < 25) {
      // One draw per statement: the order of the draws does not depend on the compiler.
      const int64_t delay_s = Uniform(0, 1) == 0 ? 0 : Uniform(1, 5);
      const std::string tenant = "t" + std::to_string(Uniform(0, 2));
      const auto priority = static_cast<int32_t>(Uniform(-1, 1));
      q_.Enqueue(next_id_++, now_ + absl::Seconds(delay_s), now_, tenant, priority);
    } else if (op < 35) {
      now_ += absl::Seconds(Uniform(0, 3));
    } else if (op < 43) {
      const JobIndex::Depth at = q_.index.At(now_);
      const bool any_due = at.delayed < q_.index.Indexed().delayed;
      ASSERT_EQ(q_.index.PromoteDue(now_), any_due);
    } else if (op < 63) {
      Lease();
    } else if (op < 71) {
      if (auto id = AnyIn(JobState::kLeased)) {
        std::optional<Job> job = q_.index.TakeLeased(*id);  // acked
        ASSERT_TRUE(job.has_value());
        ASSERT_EQ(*job, q_.store.at(*id));
        q_.store.erase(*id);
      }
    } else if (op < 79) {
      if (auto id = AnyIn(JobState::kLeased)) {
        std::optional<Job> job = q_.index.TakeLeased(*id);
        ASSERT_TRUE(job.has_value());
        LeaseBook::EndByNack(*job, "nack", FailureClass::kTransient, now_);
        Settle(*std::move(job));
      }
    } else if (op < 87) {
      Expire();
    } else if (op < 93) {
      if (auto id = AnyIn(JobState::kLeased)) {
        Job* job = q_.index.FindLeased(*id);
        ASSERT_NE(job, nullptr);
        q_.index.ExtendLease(*job, now_ + absl::Seconds(Uniform(1, 20)));
        q_.store[*id] = *job;
      }
    } else if (op < 98) {
      if (auto id = AnyIn(JobState::kDead)) {  // redriven
        ASSERT_TRUE(q_.index.RemoveDead(*id));
        Job& job = q_.store.at(*id);
        q_.index.Requeue(job, now_, now_);
      }
    } else {
      if (auto id = AnyIn(JobState::kDead)) {  // discarded
        ASSERT_TRUE(q_.index.RemoveDead(*id));
        q_.store.erase(*id);
      }
    }
  }

  // Promotes what is due and takes a batch of up to 3 jobs, as a Lease call does; each is the
  // least (higher priority, earlier ready time, lower id) due job of a tenant below its
  // in-flight limit (counting the batch), and none is taken only when no such tenant has a due
  // job. Then the batch is leased, or returned as when its records cannot be read.
  void Lease() {
    q_.index.PromoteDue(now_);
    std::vector<std::pair<std::string, TenantReadyIndex::Entry>> batch;
    std::map<std::string, int32_t> in_batch;
    std::set<uint64_t> taken;
    auto in_flight = [&](const std::string& tenant) { return LeasedOf(tenant) + in_batch[tenant]; };
    auto key = [](const Job& job) {
      return std::tuple(-static_cast<int64_t>(job.priority), job.ready_at, job.id);
    };
    const int64_t max_jobs = Uniform(1, 3);
    while (static_cast<int64_t>(batch.size()) < max_jobs) {
      auto next = q_.index.TakeNextReady(config_);
      if (!next) {
        for (const auto& [id, job] : q_.store) {
          ASSERT_FALSE(Due(job) && !taken.contains(id) &&
                       in_flight(job.tenant) < config_.max_in_flight_per_tenant)
              << "job " << id << " of " << job.tenant << " is due but not taken";
        }
        break;
      }
      const auto& [tenant, entry] = *next;
      ASSERT_LT(in_flight(tenant), config_.max_in_flight_per_tenant) << tenant;
      const Job* want = nullptr;
      for (const auto& [id, job] : q_.store) {
        if (Due(job) && !taken.contains(id) && job.tenant == tenant &&
            (want == nullptr || key(job) < key(*want))) {
          want = &job;
        }
      }
      ASSERT_NE(want, nullptr) << tenant << " has no due job";
      ASSERT_EQ(entry.id, want->id);
      ASSERT_EQ(entry.priority, want->priority);
      ASSERT_EQ(entry.ready_at, want->ready_at);
      ++in_batch[tenant];
      taken.insert(entry.id);
      batch.push_back(*std::move(next));
    }
    if (batch.empty()) return;
    if (Uniform(0, 9) == 0) {  // the records could not be read: nothing is leased
      for (const auto& [tenant, entry] : batch) q_.index.ReturnReady(tenant, entry, now_);
      returned_total_ += static_cast<int64_t>(batch.size());
      return;
    }
    for (const auto& [tenant, entry] : batch) {
      Job& job = q_.store.at(entry.id);
      LeaseBook::Grant(job, "w", now_, absl::Seconds(Uniform(1, 10)), rng_);
      q_.index.StartLease(job);
      ++leased_total_;
    }
  }

  // Expires the lease with the earliest deadline when it is due, as the scheduler does.
  void Expire() {
    const Job* want = nullptr;
    for (const auto& [id, job] : q_.store) {
      if (job.state == JobState::kLeased && job.lease_deadline <= now_ &&
          (want == nullptr ||
           std::pair(job.lease_deadline, job.id) < std::pair(want->lease_deadline, want->id))) {
        want = &job;
      }
    }
    std::optional<Job> job = q_.index.TakeExpiredLease(now_);
    if (want == nullptr) {
      ASSERT_FALSE(job.has_value()) << "job " << job->id;
      return;
    }
    ASSERT_TRUE(job.has_value()) << "job " << want->id << " expired";
    ASSERT_EQ(*job, *want);
    LeaseBook::EndByExpiry(*job);
    Settle(*std::move(job));
  }

  void Verify() {
    ASSERT_TRUE(q_.index.CheckInvariants().ok()) << q_.index.CheckInvariants();
    JobIndex::Depth want;
    std::map<std::string, int32_t> leased_per_tenant;
    for (const auto& [id, job] : q_.store) {
      switch (job.state) {
        case JobState::kQueued:
          if (Due(job)) {
            ++want.ready;
            want.oldest_ready = std::min(want.oldest_ready, job.ready_at);
          } else {
            ++want.delayed;
          }
          break;
        case JobState::kLeased: {
          ++want.leased;
          ++leased_per_tenant[job.tenant];
          const Job* indexed = q_.index.FindLeased(id);
          ASSERT_NE(indexed, nullptr) << id;
          ASSERT_EQ(*indexed, job);
          break;
        }
        case JobState::kDead:
          ++want.dead;
          want.oldest_dead = std::min(want.oldest_dead, job.died_at);
          ASSERT_TRUE(q_.index.dead().Contains(id)) << id;
          break;
      }
    }
    const JobIndex::Depth at = q_.index.At(now_);
    ASSERT_EQ(at.ready, want.ready);
    ASSERT_EQ(at.delayed, want.delayed);
    ASSERT_EQ(at.leased, want.leased);
    ASSERT_EQ(at.dead, want.dead);
    ASSERT_EQ(at.oldest_ready, want.oldest_ready);
    ASSERT_EQ(at.oldest_dead, want.oldest_dead);
    const JobIndex::Depth indexed = q_.index.Indexed();
    ASSERT_EQ(indexed.ready + indexed.delayed, want.ready + want.delayed);
    ASSERT_EQ(q_.index.live(), want.ready + want.delayed + want.leased);
    ASSERT_EQ(q_.index.leases().size(), static_cast<size_t>(want.leased));
    const std::map<std::string, int32_t> counted(q_.index.tenants().leased().begin(),
                                                 q_.index.tenants().leased().end());
    ASSERT_EQ(counted, leased_per_tenant);
  }

  std::mt19937_64 rng_;
  IndexedJobs q_;
  QueueConfig config_;
  absl::Time now_ = kT0;
  uint64_t next_id_ = 1;
  int64_t leased_total_ = 0;
  int64_t returned_total_ = 0;
};

TEST(JobIndex, InvariantsHoldAfterRandomOperations) {
  for (uint64_t seed : {1, 2, 3, 4, 5}) {
    SCOPED_TRACE(testing::Message() << "seed " << seed);
    RandomQueue queue(seed);
    queue.Run(2000);
    if (HasFatalFailure()) return;
    EXPECT_GT(queue.leased_total(), 200) << "the sequence leased jobs";
    EXPECT_GT(queue.returned_total(), 10) << "the sequence returned jobs it could not lease";
  }
}

}  // namespace
}  // namespace conduit::work_queue
