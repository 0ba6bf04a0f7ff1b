#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/random/random.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/commit/commit_log.h"
#include "common/runtime/runtime.h"
#include "common/time/clock.h"
#include "services/work_queue/domain/interval_sync.h"
#include "services/work_queue/domain/job_queue.h"
#include "services/work_queue/domain/queue_map.h"
#include "services/work_queue/domain/queue_requests.h"
#include "services/work_queue/domain/queue_store.h"
#include "services/work_queue/domain/record_publisher.h"

namespace conduit::work_queue {

struct WorkQueueOptions {
  // Period of the background pass that makes delayed jobs ready and expires leases (periodic
  // work on the runtime). Zero: none; call RunScheduler() (tests, with a FakeClock).
  absl::Duration scheduler_interval = absl::Milliseconds(100);
};

// The work queue service's domain: a thin map of queues (JobQueue: one queue's jobs, indexes,
// keys, waiters and the rules of each change) and what they share — one mutex, the CommitLog
// that makes every change durable (group commit across queues), job ids, the random source,
// the scheduler pass and the interval fsync. Each request is checked here, applied to its
// JobQueue in memory and handed to the CommitLog in the same critical section; callers are
// answered once it is durable. Memory holds the compact JobIndex: payloads and histories of
// queued and dead jobs are read back from the store when needed (leasing, listing, redriving).
//
// Thread-safe. Owns no threads but the commit log's: lease waits and the scheduler pass run on
// the runtime (one Scope). Callbacks run on the commit log's thread (or inline for errors) and
// must not block.
class WorkQueue {
 public:
  // `runtime` (and its clock) must outlive the queue.
  WorkQueue(QueueStore* store, runtime::Runtime* runtime, WorkQueueOptions options = {},
            QueueObserver* observer = nullptr);
  ~WorkQueue();

  // Loads queues and jobs and rebuilds the indexes. Call once, first.
  absl::Status Recover();

  void CreateQueue(const std::string& name, const QueueConfigPatch& config,
                   Callback<QueueMeta> done);
  void DeleteQueue(const std::string& name, Callback<bool> done);
  std::vector<QueueMeta> ListQueues() const;
  absl::StatusOr<QueueStats> Stats(const std::string& queue) const;

  // NOT_FOUND, INVALID_ARGUMENT, RESOURCE_EXHAUSTED (max_depth; says when to retry).
  void Enqueue(const std::string& queue, std::vector<NewJob> jobs,
               Callback<std::vector<EnqueuedJob>> done);
  // Each letter straight into the dead-letter lane (not live: no depth or age limit applies), its
  // attempts kept as the evidence. Idempotency keys as for Enqueue. NOT_FOUND, INVALID_ARGUMENT.
  void AddDeadLetters(const std::string& queue, std::vector<NewDeadLetter> letters,
                      Callback<std::vector<EnqueuedJob>> done);
  // Jobs come back in state kLeased with their new token and deadline.
  void Lease(const LeaseArgs& args, Callback<std::vector<Job>> done);
  // FAILED_PRECONDITION for a stale token or an expired lease; NOT_FOUND unknown job.
  void ExtendLease(const std::string& queue, uint64_t job_id, const LeaseToken& token,
                   absl::Duration extension, Callback<absl::Time> done);
  void Ack(const std::string& queue, uint64_t job_id, const LeaseToken& token, Callback<bool> done);
  // Acks 1..kMaxAckBatch jobs (each at most once) with one durable write. Each job succeeds
  // or fails on its own, as Ack would (NOT_FOUND, FAILED_PRECONDITION), in request order; the
  // call fails as a whole for an unknown queue, bad input or a storage failure.
  void AckBatch(const std::string& queue, const std::vector<AckEntry>& entries,
                Callback<std::vector<absl::Status>> done);
  void Nack(const std::string& queue, uint64_t job_id, const LeaseToken& token,
            const NackArgs& args, Callback<NackResult> done);

  absl::StatusOr<DeadLetterPage> ListDeadLetters(const std::string& queue,
                                                 const DeadLetterFilter& filter, int32_t page_size,
                                                 const std::string& page_token) const;
  absl::StatusOr<Job> GetDeadLetter(const std::string& queue, uint64_t job_id) const;
  // `rate` > 0 paces the moved jobs: they become ready `rate` per second.
  void Redrive(const std::string& queue, const DeadLetterSelection& selection,
               std::optional<std::string> replacement_payload, double rate,
               Callback<RedriveResult> done);
  // Re-produces the selected letters to `topic` (each one's source topic when empty) through the
  // publisher, and removes them from the lane once all are acknowledged (audited). A letter with
  // no topic to go to is refused. FAILED_PRECONDITION without a publisher.
  void RedriveToTopic(const std::string& queue, const DeadLetterSelection& selection,
                      std::optional<std::string> replacement_payload, const std::string& topic,
                      Callback<RedriveResult> done);
  // Where RedriveToTopic produces (null: nowhere); must outlive the calls it is given to.
  void SetPublisher(RecordPublisher* publisher);
  void Discard(const std::string& queue, const DeadLetterSelection& selection,
               const std::string& reason, Callback<std::vector<uint64_t>> done);

  // Makes due delayed jobs ready, expires overdue leases (retry after backoff, or dead).
  void RunScheduler();

 private:
  absl::StatusOr<JobQueue*> Find(const std::string& name) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Find, for a change: UNAVAILABLE after a storage failure (memory must not move on from
  // what the disk has), NOT_FOUND for an unknown queue.
  absl::StatusOr<JobQueue*> FindForChange(const std::string& name)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Leases the taken jobs whose records were read (`jobs`) and queues the lease's write; on a
  // read failure or a failed log returns them to READY and answers the error. Null `q`: the
  // queue was deleted meanwhile (NOT_FOUND).
  absl::StatusOr<std::vector<Job>> FinishLease(JobQueue* q, const LeaseArgs& args,
                                               const JobQueue::TakenJobs& taken,
                                               absl::StatusOr<std::vector<Job>> jobs)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void LeaseUntil(LeaseArgs args, absl::Duration deadline, Callback<std::vector<Job>> done);
  // Reads the records a batch Lease will take next (JobRecords::PlanReadAhead's `ids`) without
  // mu_, then keeps them in the queue's records.
  void ReadAhead(QueueId queue_id, const std::vector<uint64_t>& ids) ABSL_LOCKS_EXCLUDED(mu_);
  // Queues `write` on the commit log; the records it writes stay readable from memory (the
  // queue's JobRecords) until the store has them. `done` runs once it is durable.
  void Commit(QueueWrite write, std::function<void(absl::Status)> done)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The clock, truncated to the microseconds that are persisted, so memory and disk agree.
  absl::Time Now() const;
  // Answers `value` once `*write` is durable (the log's error if it fails); an error `value` is
  // answered through ReplyAfterLog and `*write` is dropped (a refused change describes nothing).
  // `write` is moved from here, after `value` (which may have filled it) is computed.
  template <typename T>
  void CommitAndReply(QueueWrite* write, Callback<T> done,
                      absl::StatusOr<std::type_identity_t<T>> value)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!value.ok()) return ReplyAfterLog(std::move(done), value.status());
    Commit(std::move(*write),
           [done = std::move(done), value = *std::move(value)](absl::Status s) mutable {
             if (!s.ok()) return done(s);
             done(std::move(value));
           });
  }
  // Answers `status` through the commit log: after every earlier change is durable, and outside
  // the domain's lock (a reply that depends on state must not outrun that state).
  template <typename T>
  void ReplyAfterLog(Callback<T> done, absl::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    // A refusal for the log's health (disk or write queue full, storage failed) rests on no
    // change in flight: answered at once, since waiting behind a held write only times out.
    if (absl::IsResourceExhausted(status) || absl::IsUnavailable(status)) {
      return done(std::move(status));
    }
    Commit(QueueWrite{},
           [done = std::move(done), status](absl::Status s) { done(s.ok() ? status : s); });
  }

  QueueStore* const store_;
  const time::Clock* const clock_;
  const WorkQueueOptions options_;
  QueueObserver default_observer_;
  QueueObserver* const observer_;

  mutable absl::Mutex mu_;
  QueueMap queues_ ABSL_GUARDED_BY(mu_);
  uint64_t next_queue_id_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t next_job_id_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t next_waiter_id_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t commit_seq_ ABSL_GUARDED_BY(mu_) = 0;  // numbers the writes that leave records pending
  absl::BitGen rng_ ABSL_GUARDED_BY(mu_);
  RecordPublisher* publisher_ ABSL_GUARDED_BY(mu_) = nullptr;

  // Declared before log_, so it goes after it: its destructor fsyncs what the log wrote since
  // the last interval fsync, and a clean stop leaves nothing only in the OS.
  IntervalSync interval_sync_{store_, &scope_};
  commit::CommitLog<QueueWrite> log_;
  std::atomic<bool> shutting_down_{false};
  runtime::Scope scope_;  // before log_ goes: runs pending lease waits, which may reply through it
  runtime::Scope::PeriodicId scheduler_ = 0;  // 0 when scheduler_interval is 0
};

}  // namespace conduit::work_queue
