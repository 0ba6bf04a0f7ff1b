#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "absl/random/bit_gen_ref.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "services/work_queue/domain/job.h"

namespace conduit::work_queue {

// The leases of one queue: who may settle a leased job, and when a lease runs out.
// - Grant gives a job a fresh token (job id, attempt number, 64 random bits), a deadline and a
//   new attempt; a later grant makes every earlier token stale.
// - Check lets a token through only while it is the job's live lease: a stale token, a job no
//   longer leased, or a lease at or past its deadline is FAILED_PRECONDITION. Ack, ExtendLease
//   and Nack change a job only after Check passes.
// - The book orders the leased jobs by deadline; FirstExpired picks the next one to expire,
//   with the same rule as Check (deadline <= now), so a lease is never both expired by the
//   scheduler and settled by its worker.
//
// The static functions change one Job; the index holds (deadline, id) of leased jobs and is
// changed only through JobIndex, which keeps it in step with each job's state. Not thread-safe:
// the queue's mutex guards it.
class LeaseBook {
 public:
  // Leases `job` (taken out of the indexes) to `worker` until now + `visibility`: state
  // kLeased, a fresh token, a new attempt. The caller indexes it again.
  static void Grant(Job& job, const std::string& worker, absl::Time now, absl::Duration visibility,
                    absl::BitGenRef rng);
  // OK while `token` is the live lease of `job` at `now`. FAILED_PRECONDITION when the token is
  // stale (the job was redelivered or settled) or the lease expired (deadline <= now).
  static absl::Status Check(const Job& job, const LeaseToken& token, absl::Time now);
  // The FAILED_PRECONDITION of Check for a token that is not the job's live lease.
  static absl::Status Stale(uint64_t job_id);
  // Ends the lease of `job` (out of the indexes) as expired at its deadline: the attempt says
  // so, the job counts one more expiry, the token is void.
  static void EndByExpiry(Job& job);
  // Ends the lease of `job` (out of the indexes) by a nack at `now`: the attempt keeps the
  // reason and class, the job counts one more failure, the token is void.
  static void EndByNack(Job& job, const std::string& reason, FailureClass failure_class,
                        absl::Time now);

  // The index. Add: `job` is leased and not in the book. Remove: false when it was not in it.
  void Add(const Job& job) { by_deadline_.emplace(job.lease_deadline, job.id); }
  bool Remove(const Job& job) { return by_deadline_.erase({job.lease_deadline, job.id}) > 0; }
  // Moves the lease of `job` (in the book) to `deadline`.
  void Extend(Job& job, absl::Time deadline);
  // The id of the leased job with the earliest deadline if that deadline is <= now.
  std::optional<uint64_t> FirstExpired(absl::Time now) const;
  bool Contains(const Job& job) const {
    return by_deadline_.contains({job.lease_deadline, job.id});
  }
  size_t size() const { return by_deadline_.size(); }

 private:
  std::set<std::pair<absl::Time, uint64_t>> by_deadline_;
};

}  // namespace conduit::work_queue
