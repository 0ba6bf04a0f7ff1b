#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/time/time.h"
#include "services/log_broker/domain/ids.h"

namespace conduit::log_broker {

enum class Durability {
  // Ack after the WAL is fsynced; concurrent requests share one fsync (group commit).
  kSync,
  // Ack after the write reaches the OS; a background task fsyncs at most every flush_interval.
  kInterval,
};

// When a produce is acknowledged in a replicated partition.
enum class Acks {
  kAll,     // once the high watermark covers it: every in-sync replica has it durably
  kLeader,  // once the leader has it durably
};

enum class CleanupPolicy {
  kDelete,         // retention by time and size
  kCompact,        // keep the latest record per key
  kCompactDelete,  // both
};

struct TopicConfig {
  Durability durability = Durability::kSync;
  absl::Duration flush_interval = absl::Milliseconds(100);
  int32_t max_record_bytes = 1 << 20;
  // InfiniteDuration keeps records forever.
  absl::Duration retention_time = absl::Hours(24 * 7);
  // -1: no size limit. Per partition.
  int64_t retention_bytes = -1;
  CleanupPolicy cleanup_policy = CleanupPolicy::kDelete;
  absl::Duration tombstone_retention = absl::Hours(24);
  // Zero: no deduplication by event id.
  absl::Duration dedup_window = absl::ZeroDuration();
  // Replication: with acks kAll, appends are refused while fewer replicas are in sync.
  int32_t min_insync_replicas = 1;
  Acks acks = Acks::kAll;
  // With no in-sync replica live, elect an out-of-sync one (losing what it lacks).
  bool unclean_leader_election = false;

  bool deletes() const { return cleanup_policy != CleanupPolicy::kCompact; }
  bool compacts() const { return cleanup_policy != CleanupPolicy::kDelete; }
  friend bool operator==(const TopicConfig&, const TopicConfig&) = default;
};

// The fields a request sets; the rest keep their current (or default) values.
struct TopicConfigPatch {
  std::optional<Durability> durability;
  std::optional<absl::Duration> flush_interval;
  std::optional<int32_t> max_record_bytes;
  std::optional<absl::Duration> retention_time;
  std::optional<int64_t> retention_bytes;
  std::optional<CleanupPolicy> cleanup_policy;
  std::optional<absl::Duration> tombstone_retention;
  std::optional<absl::Duration> dedup_window;
  std::optional<int32_t> min_insync_replicas;
  std::optional<Acks> acks;
  std::optional<bool> unclean_leader_election;

  TopicConfig ApplyTo(TopicConfig base) const;
};

// A topic's persistent description. `id` is unique among live topics and names the topic's
// column family, so a topic deleted and re-created never sees old records.
struct TopicMeta {
  TopicId id;
  std::string name;
  int32_t partitions = 0;
  TopicConfig config;
  absl::Time created;
  friend bool operator==(const TopicMeta&, const TopicMeta&) = default;
};

}  // namespace conduit::log_broker
