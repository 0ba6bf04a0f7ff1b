#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "services/work_queue/domain/dead_letter_lane.h"
#include "services/work_queue/domain/job.h"
#include "services/work_queue/domain/lease_book.h"
#include "services/work_queue/domain/tenant_ready_index.h"

namespace conduit::work_queue {

// The jobs of one queue and the state indexes that say what each is doing, so that what is due
// at a time is found without a scan:
// - READY: in lease order by tenant (TenantReadyIndex) and by ready time (oldest ready age);
// - DELAYED: by ready time, until PromoteDue moves those due to READY;
// - LEASED: by deadline (LeaseBook), and counted per tenant (TenantReadyIndex);
// - DEAD: by death time (DeadLetterLane).
//
// Invariant (CheckInvariants): every job is in exactly one state index, the one its state
// names (a queued job in READY or DELAYED), and every index entry is a job of the map. A job
// changes out of the indexes: take it out (Unindex, TakeNextReady, TakeExpiredLease), change
// it, put it back (Index, Requeue, Kill) — or Erase it. Changing an indexed job's state, ready
// time, deadline or death time in place breaks the invariant.
//
// A plain value owned by one queue. Not thread-safe: the queue's mutex guards it.
class JobIndex {
 public:
  const JobsById& jobs() const { return jobs_; }
  Job* Find(uint64_t id);
  const Job* Find(uint64_t id) const;
  // Adds `job` (an id not in the index) and indexes it at `now`.
  void Add(Job job, absl::Time now);
  // Unindexes and forgets job `id` (acked or discarded); it must be in the index.
  void Erase(uint64_t id);

  // Puts `job` (out of the indexes) in the index of its state; a queued job is READY when its
  // ready time is <= now, else DELAYED.
  void Index(const Job& job, absl::Time now);
  // Takes `job` out of its state index.
  void Unindex(const Job& job);
  // `job` (out of the indexes) is queued again, ready at `ready_at`.
  void Requeue(Job& job, absl::Time ready_at, absl::Time now);
  // `job` (out of the indexes) moves to the dead-letter lane, dead since `now` for `reason`.
  void Kill(Job& job, std::string reason, absl::Time now);
  // Moves the lease of `job` (leased, indexed) to `deadline`.
  void ExtendLease(Job& job, absl::Time deadline) { leases_.Extend(job, deadline); }

  // What is due at a time.
  // DELAYED jobs with ready time <= now become READY; true when any did.
  bool PromoteDue(absl::Time now);
  // The next READY job in lease order (TenantReadyIndex::TakeNext), taken out of the indexes;
  // null when no tenant may take one.
  Job* TakeNextReady(const QueueConfig& config);
  // The LEASED job whose deadline passed first (deadline <= now), taken out of the indexes;
  // null when none has.
  Job* TakeExpiredLease(absl::Time now);

  // Jobs per state; oldest times are InfiniteFuture when there is no such job.
  struct Depth {
    int64_t ready = 0, delayed = 0, leased = 0, dead = 0;
    absl::Time oldest_ready = absl::InfiniteFuture();
    absl::Time oldest_dead = absl::InfiniteFuture();
  };
  // As indexed, in constant time: a DELAYED job that came due counts as delayed until
  // PromoteDue.
  Depth Indexed() const;
  // At `now`: DELAYED jobs due by then count as READY (linear in the due jobs).
  Depth At(absl::Time now) const;
  // Jobs that are not dead (what max_depth limits).
  int64_t live() const { return static_cast<int64_t>(jobs_.size() - dead_.size()); }

  const TenantReadyIndex& tenants() const { return ready_; }
  const LeaseBook& leases() const { return leases_; }
  const DeadLetterLane& dead() const { return dead_; }

  // OK when the invariant above holds, else INTERNAL naming the first job or entry that breaks
  // it. Linear in the jobs: for tests.
  absl::Status CheckInvariants() const;

 private:
  using TimeIndex = std::set<std::pair<absl::Time, uint64_t>>;
  absl::Status CheckReady() const;
  absl::Status CheckLeasedCounts() const;

  JobsById jobs_;
  TenantReadyIndex ready_;   // READY jobs in lease order; LEASED counts per tenant
  TimeIndex ready_by_time_;  // READY jobs by ready time
  TimeIndex delayed_;        // DELAYED jobs by ready time
  LeaseBook leases_;         // LEASED jobs by deadline
  DeadLetterLane dead_;      // DEAD jobs by death time
};

}  // namespace conduit::work_queue
