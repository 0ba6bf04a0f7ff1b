#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "services/log_broker/domain/log_store.h"
#include "services/log_broker/domain/producer_state.h"
#include "services/log_broker/domain/topic.h"
#include "services/log_broker/domain/ids.h"

namespace conduit::log_broker {

// Live state of one partition. Fields marked "writer" belong to the append writer thread; what
// readers see is guarded by `mu` and changes only after a write is durable.
struct PartitionState {
  // Writer: the offset the next appended record gets. Equals the high watermark between
  // batches; runs ahead of it while a batch is being written.
  int64_t next_offset = 0;
  // Writer: idempotent producers seen in this partition, by producer id.
  absl::flat_hash_map<ProducerId, ProducerPartitionState> producers;

  mutable absl::Mutex mu;
  // meta.next_offset is the high watermark: every offset below it is durable and readable.
  PartitionMeta meta ABSL_GUARDED_BY(mu);
  absl::Time oldest_append_time ABSL_GUARDED_BY(mu) = absl::InfinitePast();
  absl::Time last_append_time ABSL_GUARDED_BY(mu) = absl::InfinitePast();
  // Long-polls and tails waiting for the high watermark to move, by waiter id.
  absl::flat_hash_map<uint64_t, std::function<void()>> waiters ABSL_GUARDED_BY(mu);
};

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
  std::vector<PartitionState> partitions;
  std::atomic<bool> deleted{false};
  // Round-robin cursor for keyless records (one partition per request: "sticky").
  std::atomic<uint32_t> sticky_cursor{0};
  // Writer: event id → where it was appended, for the dedup window, and the same ids in
  // append order so that expiry pops from the front.
  absl::flat_hash_map<std::string, DedupEntry> dedup;
  std::deque<std::pair<absl::Time, std::string>> dedup_order;
  // Whether `dedup` may hold entries: lets the cleaner skip topics without any.
  std::atomic<bool> has_dedup_entries{false};

  TopicConfig config() const {
    absl::MutexLock lock(&config_mu_);
    return config_;
  }
  void set_config(const TopicConfig& config) {
    absl::MutexLock lock(&config_mu_);
    config_ = config;
  }
  TopicMeta meta() const { return TopicMeta{id, name, partition_count, config(), created}; }

 private:
  mutable absl::Mutex config_mu_;
  TopicConfig config_ ABSL_GUARDED_BY(config_mu_);
};

}  // namespace conduit::log_broker
