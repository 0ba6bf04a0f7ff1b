#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "services/log_broker/domain/id_allocator.h"
#include "services/log_broker/domain/log_store.h"
#include "services/log_broker/domain/producer_state.h"
#include "services/log_broker/domain/ids.h"

namespace conduit::log_broker {

// Idempotent producer sessions: hands out producer ids and epochs, and answers which epoch of a
// producer is current (older epochs are fenced). Durable through the LogStore. Thread-safe.
class ProducerRegistry {
 public:
  // New producers' ids come from `ids`. Both must outlive the registry.
  ProducerRegistry(LogStore* store, IdAllocator* ids) : store_(store), ids_(ids) {}

  absl::Status Recover();

  // A new anonymous producer (epoch 0), or for a named one the same id with the next epoch.
  // Blocking (a synced write).
  absl::StatusOr<ProducerInfo> Init(const std::string& name);

  // The current epoch of `producer_id`, or -1 if unknown.
  int32_t CurrentEpoch(ProducerId producer_id) const;

  // Cluster mode: producers are initialised through the cluster's metadata, possibly at another
  // broker, so the epoch a request carries is learnt here (never lowered). Returns the current
  // epoch after learning.
  int32_t LearnEpoch(ProducerId producer_id, int32_t epoch);

 private:
  LogStore* const store_;
  IdAllocator* const ids_;
  absl::Mutex init_mu_ ABSL_ACQUIRED_BEFORE(mu_);  // one Init at a time: ids never collide
  mutable absl::Mutex mu_;
  absl::flat_hash_map<ProducerId, ProducerInfo> by_id_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, ProducerId> by_name_ ABSL_GUARDED_BY(mu_);
};

}  // namespace conduit::log_broker
