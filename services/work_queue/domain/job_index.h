#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/btree_map.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "services/work_queue/domain/dead_letter_lane.h"
#include "services/work_queue/domain/job.h"
#include "services/work_queue/domain/lease_book.h"
#include "services/work_queue/domain/tenant_ready_index.h"

namespace conduit::work_queue {

// The state indexes of one queue's jobs, so that what is due at a time is found without a scan
// and without holding what the store holds (payloads, history):
// - READY: in lease order by tenant (TenantReadyIndex: 16 bytes a job) and oldest ready time;
// - DELAYED: by ready time with tenant and priority (24 bytes a job), until PromoteDue moves
//   those due to READY;
// - LEASED: whole jobs (payload included: what the worker holds), by deadline (LeaseBook), and
//   counted per tenant;
// - DEAD: by death time (DeadLetterLane, 40 bytes a job).
// Queued and dead jobs are known by id and a few numbers only; their records are in the store.
//
// Invariant (CheckInvariants): every job is in exactly one state index. A job changes state by
// being taken out (TakeNextReady, TakeLeased, TakeExpiredLease, RemoveDead), changed, and added
// again (AddQueued, AddLeased, StartLease, ReturnReady, Requeue, Kill) — or dropped. A job that
// TakeNextReady gave out is in no index until StartLease or ReturnReady (while its record is
// read): it counts as leased meanwhile, in the depths and in live().
//
// A plain value owned by one queue. Not thread-safe: the queue's mutex guards it.
class JobIndex {
 public:
  // Job `id` of `tenant` is queued, ready at `ready_at`: READY when that is <= now, else DELAYED.
  void AddQueued(uint64_t id, const std::string& tenant, int32_t priority, absl::Time ready_at,
                 absl::Time now);
  // `job` (leased: token, deadline, its attempt last) is held until it is settled or expires.
  // AddLeased counts it against its tenant's in-flight limit; StartLease is for a job that
  // TakeNextReady gave out, which counted it already.
  void AddLeased(Job job);
  void StartLease(Job job);
  // Undoes TakeNextReady for a job that could not be leased: ready again, in the same place
  // among its tenant's jobs (the round-robin turn has moved on).
  void ReturnReady(const std::string& tenant, const TenantReadyIndex::Entry& entry, absl::Time now);
  // Job `id` died at `died_at`.
  void AddDead(uint64_t id, absl::Time died_at) { dead_.Add(id, died_at); }

  // `job` (taken out) is queued again, ready at `ready_at`.
  void Requeue(Job& job, absl::Time ready_at, absl::Time now);
  // `job` (taken out) moves to the dead-letter lane, dead since `now` for `reason`.
  void Kill(Job& job, std::string reason, absl::Time now);

  // The leased job `id`, or null.
  Job* FindLeased(uint64_t id);
  bool IsLeased(uint64_t id) const { return leased_.contains(id); }
  // Takes the leased job `id` out of the indexes (ack, nack); nullopt when it is not leased.
  std::optional<Job> TakeLeased(uint64_t id);
  // Moves the lease of `job` (leased, indexed) to `deadline`.
  void ExtendLease(Job& job, absl::Time deadline) { leases_.Extend(job, deadline); }
  // False when `id` is not a dead letter.
  bool RemoveDead(uint64_t id) { return dead_.Remove(id); }

  // What is due at a time.
  // DELAYED jobs with ready time <= now become READY; true when any did.
  bool PromoteDue(absl::Time now);
  // The next READY job in lease order (TenantReadyIndex::TakeNext), taken out of the index
  // and counted as leased by its tenant (so a batch honours the in-flight limit), with its
  // tenant; nullopt when no tenant may take one. Follow with StartLease or ReturnReady.
  std::optional<std::pair<std::string, TenantReadyIndex::Entry>> TakeNextReady(
      const QueueConfig& config);
  // The LEASED job whose deadline passed first (deadline <= now), taken out of the indexes;
  // nullopt when none has.
  std::optional<Job> TakeExpiredLease(absl::Time now);

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
  int64_t live() const {
    return ready_.size() + static_cast<int64_t>(delayed_.size() + leased_.size()) + starting_;
  }

  const TenantReadyIndex& tenants() const { return ready_; }
  const LeaseBook& leases() const { return leases_; }
  const DeadLetterLane& dead() const { return dead_; }

  // OK when the invariant above holds and no lease is being started, else INTERNAL naming what
  // breaks it. Linear: for tests.
  absl::Status CheckInvariants() const;

 private:
  // A delayed job: (ready µs, id) → (tenant number, priority).
  using DelayedKey = std::pair<int64_t, uint64_t>;
  uint32_t TenantNumber(const std::string& tenant);
  void Hold(Job job);  // into LEASED

  TenantReadyIndex ready_;
  absl::btree_map<DelayedKey, std::pair<uint32_t, int32_t>> delayed_;
  std::vector<std::string> tenant_names_;  // by tenant number, for delayed jobs
  absl::flat_hash_map<std::string, uint32_t> tenant_numbers_;
  absl::flat_hash_map<uint64_t, Job> leased_;
  LeaseBook leases_;  // LEASED jobs by deadline
  int64_t starting_ = 0;  // given out by TakeNextReady, not yet StartLease'd or ReturnReady'd
  DeadLetterLane dead_;
};

}  // namespace conduit::work_queue
