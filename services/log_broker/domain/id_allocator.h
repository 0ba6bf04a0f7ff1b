#pragma once

#include <algorithm>
#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "services/log_broker/domain/ids.h"

namespace conduit::log_broker {

// Where topic and producer ids come from. An id names a topic's column family and an
// idempotent producer's state, so no two live topics (or producers) may share one within the
// allocator's scope: one broker's data directory on a single node, the whole cluster in cluster
// mode (blocks of ids reserved in etcd). Thread-safe; Next* may block (a remote round trip).
class IdAllocator {
 public:
  virtual ~IdAllocator() = default;
  // UNAVAILABLE when the id source cannot be reached.
  virtual absl::StatusOr<TopicId> NextTopicId() = 0;
  virtual absl::StatusOr<ProducerId> NextProducerId() = 0;
  // Recovery found `id` in use: never hand it out. (A cluster allocator's ids are unique
  // already and ignore this.)
  virtual void NoteInUse(TopicId id) = 0;
  virtual void NoteInUse(ProducerId id) = 0;
};

// Single node: ids count up from one past the highest the broker's store holds. A topic id
// freed by DeleteTopic may come back after a restart, which is safe: its column family is gone.
class LocalIdAllocator final : public IdAllocator {
 public:
  absl::StatusOr<TopicId> NextTopicId() override {
    absl::MutexLock lock(&mu_);
    return TopicId(next_topic_++);
  }
  absl::StatusOr<ProducerId> NextProducerId() override {
    absl::MutexLock lock(&mu_);
    return ProducerId(next_producer_++);
  }
  void NoteInUse(TopicId id) override {
    absl::MutexLock lock(&mu_);
    next_topic_ = std::max(next_topic_, id.value() + 1);
  }
  void NoteInUse(ProducerId id) override {
    absl::MutexLock lock(&mu_);
    next_producer_ = std::max(next_producer_, id.value() + 1);
  }

 private:
  absl::Mutex mu_;
  uint64_t next_topic_ ABSL_GUARDED_BY(mu_) = 1;
  int64_t next_producer_ ABSL_GUARDED_BY(mu_) = 1;
};

}  // namespace conduit::log_broker
