#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/random/bit_gen_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/runtime/runtime.h"
#include "services/work_queue/domain/job.h"
#include "services/work_queue/domain/job_index.h"
#include "services/work_queue/domain/job_records.h"
#include "services/work_queue/domain/queue_requests.h"
#include "services/work_queue/domain/queue_store.h"
#include "services/work_queue/domain/rate_window.h"

namespace conduit::work_queue {

// One queue's idempotency keys: key → (job id, enqueue time), expired in enqueue order once
// older than the queue's idempotency_window.
class IdempotencyKeys {
 public:
  void Load(std::vector<QueueWrite::KeyEntry> keys);
  // The job `key` already names, answered as a duplicate; nullopt for a new or empty key.
  std::optional<EnqueuedJob> Known(const std::string& key) const;
  // The jobs a request adds: those without a key, and one per key neither known nor seen
  // earlier in the request.
  int64_t CountNew(const std::vector<NewJob>& jobs) const;
  // Records the new job's key (if any) here and in `write`.
  void Remember(const Job& job, absl::Time now, QueueWrite* write);
  // Forgets keys given at or before `cutoff`, adding their deletes to `write`.
  void Expire(absl::Time cutoff, QueueWrite* write);

 private:
  absl::flat_hash_map<std::string, std::pair<uint64_t, absl::Time>> keys_;
  std::deque<std::pair<absl::Time, std::string>> order_;
};

// One queue: its jobs and their state indexes (JobIndex, with its TenantReadyIndex, LeaseBook
// and DeadLetterLane), its idempotency keys, rates, long-poll waiters and records (JobRecords),
// and the rules of every change to them. A change is applied here and described in a
// QueueWrite, which the owner makes durable before it answers; times and random draws come in
// from the caller. The unit a queue is kept and recovered as (and the one to replicate per queue).
//
// Not thread-safe: WorkQueue holds its lock around every call, except where a method says.
class JobQueue {
 public:
  // Everything given must outlive the queue; `scope` runs woken lease waits.
  JobQueue(QueueMeta meta, QueueStore* store, QueueObserver* observer, runtime::Scope* scope);

  const QueueMeta& meta() const { return meta_; }
  QueueId id() const { return meta_.id; }
  // Pending records and read-ahead (the commit log's side of this queue's records).
  JobRecords& records() { return records_; }
  // After an AckBatch: the next ready jobs to read ahead (JobRecords::PlanReadAhead), and
  // keeping what was read (JobRecords::FinishReadAhead), over this queue's index.
  std::optional<std::vector<uint64_t>> PlanReadAhead() { return records_.PlanReadAhead(index_); }
  void FinishReadAhead(JobRecords::ReadAheadResult read) {
    records_.FinishReadAhead(std::move(read), index_);
  }

  // Rebuilds the indexes and keys from the store (index entries and leases, not payloads);
  // raises `*next_job_id` past every job id met.
  absl::Status Recover(absl::Time now, uint64_t* next_job_id);

  // Adds the jobs (ids from `*next_job_id`), duplicates of a known key answered as such.
  // RESOURCE_EXHAUSTED for max_depth or max_ready_age (saying when to retry).
  absl::StatusOr<std::vector<EnqueuedJob>> Enqueue(std::vector<NewJob>& jobs, absl::Time now,
                                                   uint64_t* next_job_id, QueueWrite* write);
  // Each letter straight into the dead-letter lane, its attempts kept as the evidence.
  std::vector<EnqueuedJob> AddDeadLetters(std::vector<NewDeadLetter>& letters, absl::Time now,
                                          uint64_t* next_job_id, QueueWrite* write);

  // Up to `max_jobs` ready jobs, taken out of READY (weighted round-robin by tenant) to be leased
  // once their records are read, with the read planned.
  struct TakenJobs {
    std::vector<std::pair<std::string, TenantReadyIndex::Entry>> entries;  // tenant, entry
    JobRecords::PlannedRead read;
  };
  TakenJobs TakeReady(int32_t max_jobs);
  // Nothing was leased: the taken jobs are ready again, in the same order.
  void ReturnReady(const TakenJobs& taken, absl::Time now);
  // Leases the taken jobs whose records were read.
  void GrantLeases(std::vector<Job>& jobs, const LeaseArgs& args, absl::Time now,
                   absl::BitGenRef rng, QueueWrite* write);
  // The new deadline. NOT_FOUND unknown job, FAILED_PRECONDITION stale token or expired lease.
  absl::StatusOr<absl::Time> ExtendLease(uint64_t job_id, const LeaseToken& token,
                                         absl::Duration extension, absl::Time now,
                                         QueueWrite* write);
  // Each job's outcome, in order (as ExtendLease's errors); returns how many were acked.
  int64_t AckBatch(const std::vector<AckEntry>& entries, absl::Time now, QueueWrite* write,
                   std::vector<absl::Status>* results);
  // Back to the queue after a backoff (drawn from `rng` unless the worker named one), or dead.
  absl::StatusOr<NackResult> Nack(uint64_t job_id, const LeaseToken& token, const NackArgs& args,
                                  absl::Time now, absl::BitGenRef rng, QueueWrite* write);
  // Lease long-polls: woken (on the scope, never inline) when a job may have become ready.
  void AddWaiter(uint64_t id, std::function<void()> retry) {
    waiters_.emplace(id, std::move(retry));
  }
  void RemoveWaiter(uint64_t id) { waiters_.erase(id); }
  void WakeWaiters();

  // The scheduler's pass: due delayed jobs → ready, overdue leases → expired (retry after a
  // backoff, or dead), idempotency keys past their window forgotten.
  void RunDue(absl::Time now, absl::BitGenRef rng, QueueWrite* write);
  void ExpireKeys(absl::Time now, QueueWrite* write);

  absl::StatusOr<DeadLetterPage> ListDeadLetters(const DeadLetterFilter& filter, int32_t page_size,
                                                 std::optional<DeadLetterLane::Cursor> after) const;
  absl::StatusOr<Job> GetDeadLetter(uint64_t job_id) const;
  // Moves the selected letters back to the queue (paced `rate` per second when > 0), refusing
  // those at max_redrives; nothing changes on a dry run.
  absl::StatusOr<RedriveResult> Redrive(const DeadLetterSelection& selection,
                                        const std::optional<std::string>& replacement_payload,
                                        double rate, absl::Time now, QueueWrite* write);
  // Removes the selected letters (audited with `reason`); nothing changes on a dry run.
  absl::StatusOr<std::vector<uint64_t>> Discard(const DeadLetterSelection& selection,
                                                const std::string& reason, absl::Time now,
                                                QueueWrite* write);
  // The selected letters' records (a redrive to a topic reads them, publishes, then removes).
  absl::StatusOr<std::vector<Job>> ReadDeadLetters(const DeadLetterSelection& selection) const;
  // Removes letters redriven to `topic` (those still dead), audited.
  void RemoveRedriven(const std::vector<uint64_t>& moved, const std::string& topic, absl::Time now,
                      QueueWrite* write);

  // Stats at `now` (delayed jobs whose time has come count as ready).
  QueueStats Stats(absl::Time now) const;
  // Reports depth (after every change) and the busiest tenants (each scheduler pass).
  void Observe(absl::Time now) const;
  void ObserveTenants() const;

 private:
  // The job `job_id` leased with `token`: NOT_FOUND unknown job, FAILED_PRECONDITION from
  // LeaseBook::Check (stale token, expired lease).
  absl::StatusOr<Job*> LeasedJob(uint64_t job_id, const LeaseToken& token, absl::Time now);
  // The dead letters a redrive or discard acts on; NOT_FOUND naming the first listed id that is
  // not a dead letter.
  absl::StatusOr<std::vector<uint64_t>> ChooseDead(const DeadLetterSelection& selection) const;
  void Count(QueueEvent event, int64_t n) const;

  const QueueMeta meta_;
  QueueStore* const store_;
  QueueObserver* const observer_;
  runtime::Scope* const scope_;
  JobIndex index_;
  JobRecords records_;
  IdempotencyKeys keys_;
  RateWindow enqueues_, acks_, nacks_, expiries_;
  absl::flat_hash_map<uint64_t, std::function<void()>> waiters_;
};

}  // namespace conduit::work_queue
