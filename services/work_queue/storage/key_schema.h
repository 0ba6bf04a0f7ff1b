#pragma once

// Every on-disk key of the work queue (see services/work_queue/README.md), built and parsed only
// here. Each column family holds one kind of key, so kinds cannot collide; within a CF keys
// start with BE64(queue id) so that one queue is one contiguous range (DeleteQueue
// range-deletes it).

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/coding/coding.h"
#include "services/work_queue/domain/job.h"

namespace conduit::work_queue::keys {

inline constexpr char kQueuesCf[] = "queues";            // BE64(queue id) → queue
inline constexpr char kJobsCf[] = "jobs";                // BE64(queue) + BE64(job) → job
inline constexpr char kJobIndexCf[] = "job_index";       // BE64(queue) + BE64(job) → index entry
inline constexpr char kLeasesCf[] = "leases";            // BE64(queue) + BE64(job) → lease
inline constexpr char kIdempotencyCf[] = "idempotency";  // BE64(queue) + key → BE64 job, BE64 at
inline constexpr char kAuditCf[] = "audit";  // BE64(queue) + BE64(at µs) + BE64(seq) → text
inline constexpr char kCountersCf[] = "counters";       // name → value, such as:
inline constexpr char kNextJobIdKey[] = "next_job_id";  //   → BE64 next job id
// Present once every job has its job_index entry (stores older than it are indexed at open).
inline constexpr char kJobIndexBuiltKey[] = "job_index_built";
inline constexpr char kBridgesCf[] = "bridges";  // bridge name → bridge
inline constexpr std::array<std::string_view, 8> kColumnFamilies = {
    kQueuesCf, kJobsCf, kIdempotencyCf, kAuditCf, kCountersCf, kBridgesCf, kJobIndexCf, kLeasesCf};
// Where kNextJobIdKey was kept before the counters CF (told from queue keys by its length);
// moved to kCountersCf when such a store is opened.
inline constexpr char kLegacyNextJobIdKey[] = "next_job_id";  // in kQueuesCf

inline std::string QueueKey(QueueId queue_id) {
  std::string key;
  coding::PutBigEndian64(&key, queue_id.value());
  return key;
}
inline std::string JobKey(QueueId queue_id, uint64_t job_id) {
  std::string key = QueueKey(queue_id);
  coding::PutBigEndian64(&key, job_id);
  return key;
}
inline std::string IdempotencyKey(QueueId queue_id, std::string_view key) {
  std::string out = QueueKey(queue_id);
  out.append(key);
  return out;
}
inline constexpr size_t kQueueKeySize = 8;
inline bool IsQueueKey(std::string_view key) { return key.size() == kQueueKeySize; }

// The job id of a kJobsCf key, or nullopt for a key of another shape.
inline std::optional<uint64_t> JobIdOfKey(std::string_view key) {
  if (key.size() != kQueueKeySize + 8) return std::nullopt;
  return coding::ReadBigEndian64(key.data() + kQueueKeySize);
}

// The user's idempotency key of a kIdempotencyCf key, or nullopt for a key of another shape.
inline std::optional<std::string_view> IdempotencyKeyName(std::string_view key) {
  if (key.size() < kQueueKeySize) return std::nullopt;
  return key.substr(kQueueKeySize);
}

inline std::string AuditKey(QueueId queue_id, int64_t at_micros, uint64_t seq) {
  std::string key = QueueKey(queue_id);
  coding::PutBigEndian64(&key, static_cast<uint64_t>(at_micros));
  coding::PutBigEndian64(&key, seq);
  return key;
}

}  // namespace conduit::work_queue::keys
