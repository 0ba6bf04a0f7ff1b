#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "services/log_broker/domain/ids.h"
#include "services/log_broker/domain/partition_log.h"
#include "services/log_broker/domain/topic.h"

namespace conduit::log_broker {

// Live state of one topic. Shared (shared_ptr) by requests in flight, so that a concurrent
// DeleteTopic never leaves them with a dangling reference; they see `deleted` instead.
class TopicState {
 public:
  explicit TopicState(const TopicMeta& meta)
      : id(meta.id), name(meta.name), partition_count(meta.partitions), created(meta.created),
        partitions(meta.partitions), config_(meta.config) {}

  const TopicId id;
  const std::string name;
  const int32_t partition_count;
  const absl::Time created;
  std::vector<PartitionLog> partitions;
  std::atomic<bool> deleted{false};
  // Round-robin cursor for keyless records (one partition per request: "sticky").
  std::atomic<uint32_t> sticky_cursor{0};

  TopicConfig config() const {
    absl::MutexLock lock(&config_mu_);
    return config_;
  }
  void set_config(const TopicConfig& config) {
    absl::MutexLock lock(&config_mu_);
    config_ = config;
  }
  TopicMeta meta() const { return TopicMeta{id, name, partition_count, config(), created}; }
  // The answer to a request that finds the topic deleted.
  absl::Status DeletedError() const {
    return absl::NotFoundError(absl::StrCat("topic '", name, "' was deleted"));
  }

 private:
  mutable absl::Mutex config_mu_;
  TopicConfig config_ ABSL_GUARDED_BY(config_mu_);
};

}  // namespace conduit::log_broker
