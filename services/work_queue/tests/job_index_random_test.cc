// JobIndex under random operations, checked against the job records after every step.

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

#include "services/work_queue/domain/job_index.h"
#include "services/work_queue/tests/job_index_fixture.h"

namespace conduit::work_queue {
namespace {

using namespace testing_index;  // NOLINT: the fixture of these tests

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
