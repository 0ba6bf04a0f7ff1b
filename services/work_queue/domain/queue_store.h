#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "services/work_queue/domain/job.h"

namespace conduit::work_queue {

// A live lease, kept apart from its job so that leasing, extending and settling never rewrite
// the job (payload and history): the job's record stays as it was queued while this exists.
struct LeaseRecord {
  uint64_t job_id = 0;
  LeaseToken token;
  absl::Time deadline;
  Attempt attempt;  // the delivery in progress (not yet in the job's history)
  friend bool operator==(const LeaseRecord&, const LeaseRecord&) = default;

  static LeaseRecord Of(const Job& leased) {
    return LeaseRecord{leased.id, leased.lease_token, leased.lease_deadline,
                       leased.attempts.back()};
  }
};

// What the in-memory indexes need of a job, stored beside it so that a restart reads these
// instead of every payload.
struct JobIndexEntry {
  uint64_t job_id = 0;
  JobState state = JobState::kQueued;  // kQueued or kDead (a lease is a LeaseRecord)
  std::string tenant;
  int32_t priority = 0;
  absl::Time ready_at;
  absl::Time died_at;
  friend bool operator==(const JobIndexEntry&, const JobIndexEntry&) = default;

  static JobIndexEntry Of(const Job& job) {
    return JobIndexEntry{job.id, job.state, job.tenant, job.priority, job.ready_at, job.died_at};
  }
};

// One atomic change: jobs written or deleted, idempotency keys written or deleted, audit lines.
struct QueueWrite {
  struct KeyEntry {
    QueueId queue_id;
    std::string key;
    uint64_t job_id;
    absl::Time at;
  };
  struct AuditEntry {
    QueueId queue_id;
    absl::Time at;
    std::string text;
  };
  QueueId queue_id;
  std::optional<QueueMeta> create_queue;  // persist this queue's metadata
  bool drop_queue = false;                // remove the queue, its jobs, keys and audit
  // Persist the job id high-water mark: ids are never reused, even after acked jobs are gone.
  std::optional<uint64_t> next_job_id;
  // Jobs written whole (payload, history) with their index entry: queued or dead, never leased.
  std::vector<Job> puts;
  // Jobs gone (acked, discarded): record, index entry and lease.
  std::vector<uint64_t> deletes;
  std::vector<LeaseRecord> lease_puts;  // leased or extended
  std::vector<uint64_t> lease_deletes;  // the lease ended (the job is in `puts` or `deletes`)
  std::vector<KeyEntry> key_puts;
  std::vector<std::string> key_deletes;
  std::vector<AuditEntry> audit;
  // False for changes a crash may lose (a lease: losing it equals its expiry). A batch is
  // fsynced when any write in it asks, and later synced writes cover the earlier ones.
  bool sync = true;

  // What the write adds to the commit queue, for its byte cap.
  static int64_t ApproxBytes(const QueueWrite& w) {
    int64_t bytes = 64;
    for (const Job& job : w.puts) {
      bytes += 128 +
               static_cast<int64_t>(job.payload.size() + job.tenant.size() +
                                    job.idempotency_key.size() + job.death_reason.size()) +
               64 * static_cast<int64_t>(job.attempts.size());
    }
    bytes += 64 * static_cast<int64_t>(w.lease_puts.size() + w.lease_deletes.size());
    for (const KeyEntry& k : w.key_puts) bytes += 32 + static_cast<int64_t>(k.key.size());
    for (const AuditEntry& a : w.audit) bytes += 32 + static_cast<int64_t>(a.text.size());
    return bytes + 16 * static_cast<int64_t>(w.deletes.size() + w.key_deletes.size());
  }
};

// Persistence for queues and jobs. The domain (WorkQueueService) owns every rule; a QueueStore
// stores what it is given, each Write atomically. Thread-safe.
class QueueStore {
 public:
  virtual ~QueueStore() = default;
  virtual absl::StatusOr<std::vector<QueueMeta>> LoadQueues() = 0;
  // The highest next_job_id written (0 if none).
  virtual absl::StatusOr<uint64_t> LoadNextJobId() = 0;
  // Calls `fn` for the index entry of every job of the queue, in job id order; stops at the
  // first error `fn` returns and returns it.
  virtual absl::Status ScanIndex(QueueId queue_id,
                                 const std::function<absl::Status(const JobIndexEntry&)>& fn) = 0;
  virtual absl::StatusOr<std::vector<LeaseRecord>> LoadLeases(QueueId queue_id) = 0;
  // The jobs `ids` as stored (without their leases), in the same order; nullopt where there is
  // none.
  virtual absl::StatusOr<std::vector<std::optional<Job>>> ReadJobs(
      QueueId queue_id, const std::vector<uint64_t>& ids) = 0;
  virtual absl::StatusOr<std::vector<QueueWrite::KeyEntry>> LoadKeys(QueueId queue_id) = 0;
  // Applies all writes as one atomic write (group commit), in order; fsynced unless no write
  // asks for it.
  virtual absl::Status Write(const std::vector<const QueueWrite*>& writes) = 0;
  // Fsyncs the write-ahead log: every write before it is durable (the interval fsync of
  // QueueDurability::kInterval queues).
  virtual absl::Status SyncWal() = 0;
  // RESOURCE_EXHAUSTED "disk full" while the volume is below its free-space reserve: writes
  // that add data would be refused (the domain refuses the change before making it).
  virtual absl::Status CheckSpace() const { return absl::OkStatus(); }
};

}  // namespace conduit::work_queue
