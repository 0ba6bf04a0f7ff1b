#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "services/log_broker/domain/log_store.h"

namespace conduit::log_broker {

// The event ids appended to one partition, newest entry per id, for the topic's dedup window.
// Kept per partition (an event id's key, or the id itself for a keyless record, fixes its
// partition), so a partition that moves to another broker takes its window with it.
//
// Writer thread only (appends and maintenance run there), except maybe_has_entries(), which
// the cleaner reads from its own thread to skip partitions without any.
class DedupWindow {
 public:
  // The durable entry of `event_id`, or nullptr.
  const DedupEntry* Find(const std::string& event_id) const;
  // Records a durable entry; entries must arrive in append-time order.
  void Insert(const std::string& event_id, const DedupEntry& entry);

  // The oldest entries appended at or before `cutoff`, at most `limit` of them: how many to
  // drop from the order, and those still current (not since appended again) to delete.
  struct Expiry {
    int32_t popped = 0;
    std::vector<std::pair<std::string, absl::Time>> current;
  };
  Expiry PlanExpiry(absl::Time cutoff, int32_t limit) const;
  // Applies a plan once its deletes are durable. An id appended again since the plan keeps its
  // fresh entry.
  void Expire(const Expiry& plan);

  bool maybe_has_entries() const { return has_entries_.load(); }
  size_t size() const { return entries_.size(); }

 private:
  absl::flat_hash_map<std::string, DedupEntry> entries_;
  std::deque<std::pair<absl::Time, std::string>> order_;  // append order, for expiry
  std::atomic<bool> has_entries_{false};
};

}  // namespace conduit::log_broker
