#pragma once

#include <cstdint>
#include <string>

#include "absl/time/time.h"

namespace conduit::log_broker {

enum class Durability {
  // Ack after the WAL is fsynced; concurrent requests share one fsync (group commit).
  kSync,
  // Ack after the write reaches the OS; a background task fsyncs at most every flush_interval.
  kInterval,
};

struct TopicConfig {
  Durability durability = Durability::kSync;
  absl::Duration flush_interval = absl::Milliseconds(100);
  int32_t max_record_bytes = 1 << 20;
  friend bool operator==(const TopicConfig&, const TopicConfig&) = default;
};

// A topic's persistent description. `id` is unique for the life of the data directory and names
// the topic's column family, so a topic deleted and re-created never sees old records.
struct TopicMeta {
  uint64_t id = 0;
  std::string name;
  int32_t partitions = 0;
  TopicConfig config;
  absl::Time created;
  friend bool operator==(const TopicMeta&, const TopicMeta&) = default;
};

}  // namespace conduit::log_broker
