#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "services/work_queue/domain/job.h"

namespace conduit::work_queue {

// The work queue's requests and answers, and its observer: what WorkQueue's callers and each
// JobQueue share.

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

}  // namespace conduit::work_queue
