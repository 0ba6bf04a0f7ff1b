#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "common/ids/strong_id.h"

namespace conduit::work_queue {

// The capability a lease hands its worker: only the live token acks, nacks or extends. A type
// of its own, so it cannot be passed where a queue name (or any other string) is expected.
struct LeaseTokenTag {};
using LeaseToken = ids::StrongId<LeaseTokenTag, std::string>;

// A queue's id: assigned once, never reused; prefixes its keys. Apart from job ids (both are
// 64-bit integers, side by side in every job key).
struct QueueIdTag {};
using QueueId = ids::StrongId<QueueIdTag, uint64_t>;

struct Header {
  std::string key;
  std::string value;
  friend bool operator==(const Header&, const Header&) = default;
};

enum class Outcome { kLeased, kAcked, kNacked, kExpired };
enum class FailureClass { kTransient, kPermanent };

// One delivery of a job and how it ended.
struct Attempt {
  uint32_t number = 0;
  std::string worker;
  absl::Time leased_at;
  absl::Time ended_at = absl::InfinitePast();
  Outcome outcome = Outcome::kLeased;
  std::string reason;
  FailureClass failure_class = FailureClass::kTransient;
  friend bool operator==(const Attempt&, const Attempt&) = default;
};

struct JobSource {
  std::string topic;
  int32_t partition = 0;
  int64_t offset = 0;
  friend bool operator==(const JobSource&, const JobSource&) = default;
};

// Persisted state. READY and DELAYED are one persisted state (kQueued): which one a job is in
// follows from ready_at and the clock.
enum class JobState { kQueued, kLeased, kDead };

struct Job {
  uint64_t id = 0;
  JobState state = JobState::kQueued;
  std::string payload;
  std::vector<Header> headers;
  std::string tenant;
  int32_t priority = 0;
  std::string idempotency_key;
  std::optional<JobSource> source;
  absl::Time enqueued_at;
  absl::Time ready_at;  // kQueued: when it may be leased
  // kLeased:
  LeaseToken lease_token;
  absl::Time lease_deadline;
  // History and counters.
  std::vector<Attempt> attempts;
  int32_t failures = 0;  // deliveries that ended in a nack
  int32_t expiries = 0;  // leases that expired
  int32_t redrives = 0;
  // kDead:
  absl::Time died_at;
  std::string death_reason;
  friend bool operator==(const Job&, const Job&) = default;
};

// The jobs of one queue, by id.
using JobsById = absl::flat_hash_map<uint64_t, Job>;

// When a change (enqueue, ack, nack, extend, ...) is answered: kSync after the write-ahead log
// is fsynced (group-committed); kInterval once the write reaches the OS, the WAL fsynced at most
// every flush_interval (a process crash loses nothing; a machine crash may lose the last
// interval). A lease is never fsynced on its own (see WorkQueue::LeaseUntil).
enum class QueueDurability { kSync, kInterval };

struct QueueConfig {
  QueueDurability durability = QueueDurability::kSync;
  absl::Duration flush_interval = absl::Milliseconds(100);
  absl::Duration visibility_timeout = absl::Seconds(30);
  int32_t max_attempts = 5;
  int32_t max_lease_expiries = 3;
  absl::Duration backoff_initial = absl::Seconds(1);
  double backoff_multiplier = 2.0;
  absl::Duration backoff_max = absl::Minutes(5);
  absl::Duration idempotency_window = absl::Hours(1);
  int64_t max_depth = 0;  // 0: no limit
  int32_t max_redrives = 3;
  absl::Duration max_ready_age = absl::ZeroDuration();  // 0: no limit
  std::map<std::string, int32_t> tenant_weights;        // others weigh 1
  int32_t max_in_flight_per_tenant = 0;                 // 0: no limit
  friend bool operator==(const QueueConfig&, const QueueConfig&) = default;

  int32_t WeightOf(const std::string& tenant) const {
    auto it = tenant_weights.find(tenant);
    return it == tenant_weights.end() ? 1 : it->second;
  }
};

struct QueueConfigPatch {
  std::optional<QueueDurability> durability;
  std::optional<absl::Duration> flush_interval;
  std::optional<absl::Duration> visibility_timeout;
  std::optional<int32_t> max_attempts;
  std::optional<int32_t> max_lease_expiries;
  std::optional<absl::Duration> backoff_initial;
  std::optional<double> backoff_multiplier;
  std::optional<absl::Duration> backoff_max;
  std::optional<absl::Duration> idempotency_window;
  std::optional<int64_t> max_depth;
  std::optional<int32_t> max_redrives;
  std::optional<absl::Duration> max_ready_age;
  std::optional<std::map<std::string, int32_t>> tenant_weights;
  std::optional<int32_t> max_in_flight_per_tenant;

  QueueConfig ApplyTo(QueueConfig base) const;
};

struct QueueMeta {
  QueueId id;
  std::string name;
  QueueConfig config;
  absl::Time created;
  friend bool operator==(const QueueMeta&, const QueueMeta&) = default;
};

}  // namespace conduit::work_queue
