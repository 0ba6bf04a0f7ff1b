#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/random/random.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/commit/commit_log.h"
#include "common/runtime/runtime.h"
#include "common/time/clock.h"
#include "services/work_queue/domain/job.h"
#include "services/work_queue/domain/job_index.h"
#include "services/work_queue/domain/queue_store.h"
#include "services/work_queue/domain/rate_window.h"
#include "services/work_queue/domain/record_publisher.h"

namespace conduit::work_queue {

struct NewJob {
  std::string payload;
  std::vector<Header> headers;
  std::string idempotency_key;
  std::optional<absl::Duration> delay;
  std::optional<absl::Time> not_before;
  int32_t priority = 0;
  std::string tenant;
  std::optional<JobSource> source;
};

// A job that failed elsewhere (a log consumer's retries ran out), for the dead-letter lane.
struct NewDeadLetter {
  NewJob job;
  std::string reason;
  std::vector<Attempt> attempts;  // oldest first
};

struct EnqueuedJob {
  uint64_t id = 0;
  bool duplicate = false;
  friend bool operator==(const EnqueuedJob&, const EnqueuedJob&) = default;
};

struct LeaseArgs {
  std::string queue;
  std::string worker;
  int32_t max_jobs = 1;
  std::optional<absl::Duration> visibility_timeout;
  absl::Duration max_wait = absl::ZeroDuration();
};

// One job of an AckBatch.
struct AckEntry {
  uint64_t job_id = 0;
  LeaseToken lease_token;
};
inline constexpr size_t kMaxAckBatch = 1000;

struct NackArgs {
  std::string reason;
  FailureClass failure_class = FailureClass::kTransient;
  std::optional<absl::Duration> retry_after;
};

struct NackResult {
  bool dead = false;
  absl::Time retry_at;
};

struct QueueStats {
  int64_t ready = 0, delayed = 0, leased = 0, dead = 0;
  absl::Duration oldest_ready_age = absl::ZeroDuration();
  absl::Duration oldest_dead_age = absl::ZeroDuration();
  // Per second over the last minute.
  double enqueue_rate = 0, ack_rate = 0, nack_rate = 0, expiry_rate = 0;
};

struct RedriveResult {
  std::vector<uint64_t> moved;
  std::vector<uint64_t> refused;  // reached max_redrives
};

template <typename T>
using Callback = std::function<void(absl::StatusOr<T>)>;

enum class QueueEvent {
  kEnqueued,
  kLeased,
  kAcked,
  kNacked,
  kExpired,
  kDead,
  kRedriven,
  kDiscarded
};

// What became of job records read ahead for batch leases (README, Threading): kept for the next
// lease, served to a lease, or not read because the store's read failed (the lease then reads
// them itself and meets the error there).
enum class ReadAheadOutcome { kKept, kServed, kFailed };

// Hooks for metrics; the default does nothing. Called under the domain's lock: must not block
// or call back.
class QueueObserver {
 public:
  virtual ~QueueObserver() = default;
  virtual void OnEvents(const std::string& queue, QueueEvent event, int64_t count) {}
  // The queue's depth after a change.
  virtual void OnDepth(const std::string& queue, const QueueStats& stats) {}
  virtual void OnQueueDeleted(const std::string& queue) {}
  virtual void OnReadAhead(const std::string& queue, ReadAheadOutcome outcome, int64_t records) {}
  // Ready and leased jobs of the busiest tenants (at most kMaxTenantsObserved; the rest are
  // summed under kOtherTenants), each scheduler pass: per-tenant metrics with bounded labels.
  struct TenantDepth {
    std::string tenant;
    int64_t ready = 0;
    int64_t leased = 0;
  };
  virtual void OnTenantDepth(const std::string& queue, const std::vector<TenantDepth>& tenants) {}
  static constexpr size_t kMaxTenantsObserved = 20;
  static constexpr char kOtherTenants[] = "_other";
};

struct WorkQueueOptions {
  // Period of the background pass that makes delayed jobs ready and expires leases (periodic
  // work on the runtime). Zero: none; call RunScheduler() (tests, with a FakeClock).
  absl::Duration scheduler_interval = absl::Milliseconds(100);
};

// The work queue's rules, orchestrated over plain per-queue types: each queue's jobs and state
// indexes (JobIndex, with its TenantReadyIndex, LeaseBook and DeadLetterLane), its idempotency
// keys, rates and long-poll waiters, all in memory under one mutex. Each change is applied in
// memory and handed to the CommitLog in the same critical section; callers are answered once it
// is durable. Memory holds the compact JobIndex: payloads and histories of queued and dead jobs
// are read back from the store when needed (leasing, listing, redriving).
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
  struct Queue {
    QueueMeta meta;
    JobIndex index;  // the jobs and their state indexes
    RateWindow enqueues, acks, nacks, expiries;
    absl::flat_hash_map<std::string, std::pair<uint64_t, absl::Time>> keys;
    std::deque<std::pair<absl::Time, std::string>> key_order;
    absl::flat_hash_map<uint64_t, std::function<void()>> waiters;  // long-polling Leases
    // The latest record of each job whose write (seq) is still in the commit log; nullopt for
    // a delete. ReadJobs reads these before the store.
    struct Pending {
      uint64_t seq = 0;
      std::optional<Job> job;
    };
    absl::flat_hash_map<uint64_t, Pending> pending;
    // Records of jobs read ahead for the next batch Lease (PlanReadAhead; the README's
    // Threading section). Never older than the store or `pending`: a write of a job drops its
    // record here and, while a read-ahead is in flight, marks it, and a marked record is not
    // kept when the read lands.
    struct ReadAhead {
      absl::flat_hash_map<uint64_t, Job> records;
      int64_t bytes = 0;                      // their payloads
      bool reading = false;                   // a read-ahead is in flight
      absl::flat_hash_set<uint64_t> written;  // jobs written since it started
      int32_t jobs = 0;  // as many as the last Lease asked for, if a batch (else 0: none)
      void Written(uint64_t id) {
        if (auto node = records.extract(id)) {
          bytes -= static_cast<int64_t>(node.mapped().payload.size());
        }
        if (reading) written.insert(id);
      }
    } ahead;
  };

  absl::StatusOr<Queue*> Find(const std::string& name) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  Queue* FindById(QueueId id) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Adds `q` to queues_ and queues_by_id_, or takes the queue named `name` out of both.
  void AddQueue(std::unique_ptr<Queue> q) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RemoveQueue(const std::string& name) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Rebuilds the indexes of `q` from the store: index entries and leases, not payloads.
  absl::Status RecoverJobs(Queue& q, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Find, for a change: UNAVAILABLE after a storage failure (memory must not move on from
  // what the disk has), NOT_FOUND for an unknown queue.
  absl::StatusOr<Queue*> FindForChange(const std::string& name) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  QueueStats StatsOf(const Queue& q, absl::Time now) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  void Observe(const Queue& q, absl::Time now) ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Starts the interval fsync for a kInterval queue's flush_interval (nothing for kSync).
  void RequestSyncFor(const QueueConfig& config);
  void ObserveTenants(const Queue& q) ABSL_SHARED_LOCKS_REQUIRED(mu_);
  void Count(const Queue& q, QueueEvent event, int64_t n) ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // The job `job_id` leased with `token`: NOT_FOUND unknown job, FAILED_PRECONDITION from
  // LeaseBook::Check (stale token, expired lease).
  absl::StatusOr<Job*> LeasedJob(Queue& q, uint64_t job_id, const LeaseToken& token, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The records of `ids` (of queue `q`), in order: from `pending`, else from the store.
  // INTERNAL when one is missing. ReadJobs is PlanRead and then FinishRead.
  absl::StatusOr<std::vector<Job>> ReadJobs(const Queue& q, const std::vector<uint64_t>& ids) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // A read of records planned under mu_ (what `pending` holds, copied) to finish without it:
  // valid while no one else writes those jobs (the lease they are being given out for).
  struct PlannedRead {
    QueueId queue_id;
    std::string queue_name;
    std::vector<uint64_t> ids;
    std::vector<std::optional<Job>> records;  // by position: copied from `pending`, else empty
    std::vector<size_t> from_store;           // the positions to read from the store
  };
  PlannedRead PlanRead(const Queue& q, std::vector<uint64_t> ids) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Moves the records of `plan`'s store reads that q.ahead holds into it (a lease's read).
  void TakeReadAhead(Queue& q, PlannedRead* plan) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<std::vector<Job>> FinishRead(PlannedRead plan) const;
  // ReadJobs of one job, for DeadLetterLane.
  JobReader ReaderOf(const Queue& q) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // The dead letters a redrive or discard acts on (DeadLetterLane::Select); NOT_FOUND naming
  // the first listed id that is not a dead letter.
  absl::StatusOr<std::vector<uint64_t>> ChooseDead(const Queue& q,
                                                   const DeadLetterSelection& selection) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Whether job `id` of `q` exists in any state (an error path: may read the store).
  bool Exists(const Queue& q, uint64_t id) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Removes the leased job and adds its delete to `write`; Ack's per-job errors otherwise.
  absl::Status AckLocked(Queue& q, uint64_t job_id, const LeaseToken& token, absl::Time now,
                         QueueWrite* write) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Due delayed → ready; overdue leases → expired. Adds changed jobs to `write`.
  void RunDue(Queue& q, absl::Time now, QueueWrite* write) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ExpireKeys(Queue& q, absl::Time now, QueueWrite* write) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Records the new job's idempotency key (if any) in memory and in `write`.
  void RememberKey(Queue& q, const Job& job, absl::Time now, QueueWrite* write)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Up to args.max_jobs ready jobs, taken out of READY (JobIndex::TakeNextReady) to be leased
  // once their records are read, with the read planned.
  struct TakenJobs {
    std::vector<std::pair<std::string, TenantReadyIndex::Entry>> entries;  // tenant, entry
    PlannedRead read;
  };
  TakenJobs TakeReady(Queue& q, const LeaseArgs& args) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Read-ahead (the README's Threading section): after an AckBatch of `q`, whose last Lease
  // asked for a batch, the next ready jobs to read ahead that are not read ahead yet (marking a
  // read-ahead in flight); none when one is in flight or most are read ahead. ReadAhead, without
  // mu_, reads them in slices into q.ahead, stopping at kReadAheadMaxBytes of payload.
  struct ReadAheadPlan {
    QueueId queue_id;
    std::vector<uint64_t> ids;
  };
  // Read-ahead after an AckBatch of this many jobs or more, of a queue whose last Lease asked
  // for as many; at most so many payload bytes held.
  static constexpr int32_t kReadAheadMinJobs = 16;
  static constexpr int64_t kReadAheadMaxBytes = 4 << 20;
  std::optional<ReadAheadPlan> PlanReadAhead(Queue& q) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReadAhead(const ReadAheadPlan& plan) ABSL_LOCKS_EXCLUDED(mu_);
  // Leases the taken jobs whose records were read (`jobs`) and queues the lease's write; on a
  // read failure or a failed log returns them to READY and answers the error. Null `q`: the
  // queue was deleted meanwhile (NOT_FOUND).
  absl::StatusOr<std::vector<Job>> FinishLease(Queue* q, const LeaseArgs& args,
                                               const TakenJobs& taken,
                                               absl::StatusOr<std::vector<Job>> jobs)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void WakeWaiters(Queue& q) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Commit(QueueWrite write, std::function<void(absl::Status)> done)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void LeaseUntil(LeaseArgs args, absl::Duration deadline, Callback<std::vector<Job>> done);
  // The clock, truncated to the microseconds that are persisted, so memory and disk agree.
  absl::Time Now() const;
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
  std::map<std::string, std::unique_ptr<Queue>> queues_ ABSL_GUARDED_BY(mu_);
  // The same queues by id: each write names its queue by id (Commit, twice per write).
  absl::flat_hash_map<QueueId, Queue*> queues_by_id_ ABSL_GUARDED_BY(mu_);
  uint64_t next_queue_id_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t next_job_id_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t next_waiter_id_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t commit_seq_ ABSL_GUARDED_BY(mu_) = 0;  // numbers the writes that leave records pending
  absl::BitGen rng_ ABSL_GUARDED_BY(mu_);
  RecordPublisher* publisher_ ABSL_GUARDED_BY(mu_) = nullptr;

  // Whether a write that was not fsynced reached the store since the last interval fsync (marked
  // on the log's writer thread). Declared before log_, so it goes after it: its destructor fsyncs
  // what the log wrote since the last interval fsync (the log writes what is queued as it goes),
  // and a clean stop leaves nothing only in the OS.
  class UnsyncedWrites {
   public:
    explicit UnsyncedWrites(QueueStore* store) : store_(store) {}
    ~UnsyncedWrites() { SyncIfNeeded(); }
    void Mark() { unsynced_.store(true); }
    // Fsyncs the WAL if a write was marked since the last call; a failed fsync stays marked.
    void SyncIfNeeded() {
      if (!unsynced_.exchange(false)) return;
      if (!store_->SyncWal().ok()) unsynced_.store(true);
    }

   private:
    QueueStore* const store_;
    std::atomic<bool> unsynced_{false};
  };
  UnsyncedWrites unsynced_{store_};
  commit::CommitLog<QueueWrite> log_;
  std::atomic<bool> shutting_down_{false};
  runtime::Scope scope_;  // before log_ goes: runs pending lease waits, which may reply through it
  runtime::Scope::PeriodicId scheduler_ = 0;  // 0 when scheduler_interval is 0
  // The interval fsync: periodic work on scope_ while any queue is kInterval, at the shortest
  // flush_interval seen (restarted when a shorter one comes).
  absl::Mutex sync_task_mu_;
  absl::Duration sync_every_ ABSL_GUARDED_BY(sync_task_mu_) = absl::InfiniteDuration();
  runtime::Scope::PeriodicId sync_task_ ABSL_GUARDED_BY(sync_task_mu_) = 0;
};

}  // namespace conduit::work_queue
