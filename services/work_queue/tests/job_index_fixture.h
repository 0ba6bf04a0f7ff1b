#pragma once

// Shared by the JobIndex tests: job records and their index, changed together as the queue
// changes them.

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "services/work_queue/domain/job_index.h"

namespace conduit::work_queue::testing_index {

inline const absl::Time kT0 = absl::FromUnixSeconds(1'000'000);

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

inline int64_t Total(const JobIndex::Depth& d) { return d.ready + d.delayed + d.leased + d.dead; }

}  // namespace conduit::work_queue::testing_index
