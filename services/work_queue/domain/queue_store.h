#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "services/work_queue/domain/job.h"

namespace conduit::work_queue {

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
  std::vector<Job> puts;
  std::vector<uint64_t> deletes;
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
      bytes += 128 + static_cast<int64_t>(job.payload.size() + job.tenant.size() +
                                          job.idempotency_key.size() + job.death_reason.size()) +
               64 * static_cast<int64_t>(job.attempts.size());
    }
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
  virtual absl::StatusOr<std::vector<Job>> LoadJobs(QueueId queue_id) = 0;
  virtual absl::StatusOr<std::vector<QueueWrite::KeyEntry>> LoadKeys(QueueId queue_id) = 0;
  // Applies all writes as one atomic write (group commit), in order; fsynced unless no write
  // asks for it.
  virtual absl::Status Write(const std::vector<const QueueWrite*>& writes) = 0;
  // RESOURCE_EXHAUSTED "disk full" while the volume is below its free-space reserve: writes
  // that add data would be refused (the domain refuses the change before making it).
  virtual absl::Status CheckSpace() const { return absl::OkStatus(); }
};

}  // namespace conduit::work_queue
