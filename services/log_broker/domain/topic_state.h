#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "services/log_broker/domain/topic.h"

namespace conduit::log_broker {

// Live state of one partition. `next_offset` belongs to the append writer thread; what readers
// see (high watermark, log start, waiters) is guarded by `mu`.
struct PartitionState {
  // Writer-thread only: the offset the next appended record gets. Equals the high watermark
  // between batches; runs ahead of it while a batch is being written.
  int64_t next_offset = 0;

  mutable absl::Mutex mu;
  // Every offset below this is durable (per the topic's durability) and readable.
  int64_t high_watermark ABSL_GUARDED_BY(mu) = 0;
  int64_t log_start_offset ABSL_GUARDED_BY(mu) = 0;
  absl::Time last_append_time ABSL_GUARDED_BY(mu) = absl::InfinitePast();
  // Long-polls and tails waiting for the high watermark to move, by waiter id.
  absl::flat_hash_map<uint64_t, std::function<void()>> waiters ABSL_GUARDED_BY(mu);
};

// Live state of one topic. Shared (shared_ptr) by requests in flight, so that a concurrent
// DeleteTopic never leaves them with a dangling reference; they see `deleted` instead.
struct TopicState {
  explicit TopicState(TopicMeta m) : meta(std::move(m)), partitions(meta.partitions) {}

  const TopicMeta meta;
  std::vector<PartitionState> partitions;
  std::atomic<bool> deleted{false};
  // Round-robin cursor for keyless records (one partition per request: "sticky").
  std::atomic<uint32_t> sticky_cursor{0};
};

}  // namespace conduit::log_broker
