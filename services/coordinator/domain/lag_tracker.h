#pragma once

#include <cstdint>
#include <deque>
#include <optional>

#include "absl/container/btree_map.h"
#include "absl/time/time.h"
#include "services/coordinator/domain/types.h"

namespace conduit::coordinator {

// How fast a partition's lag is shrinking, from its recent samples.
struct DrainEstimate {
  double drain_rate = 0;                   // records per second; negative while the lag grows
  std::optional<double> catch_up_seconds;  // while the lag shrinks
};

// One consumer group's recent lag samples per partition, and the drain rate they show.
//
// Invariants: a partition's samples span at most `window` (the newest is always kept) and
// number at most kMaxSamples; the rate is measured from the oldest sample in the window to now.
//
// Not thread-safe: used under its group's mutex.
class LagTracker {
 public:
  static constexpr size_t kMaxSamples = 512;

  explicit LagTracker(absl::Duration window) : window_(window) {}

  // Records `lag` records at `now`; returns the estimate over the window.
  DrainEstimate Record(const TopicPartition& tp, absl::Time now, int64_t lag);
  // Drops a partition's samples (its lag jumped, as after a reset: older rates mean nothing).
  void Forget(const TopicPartition& tp) { history_.erase(tp); }
  size_t samples(const TopicPartition& tp) const;

 private:
  struct Sample {
    absl::Time at;
    int64_t lag = 0;
  };
  const absl::Duration window_;
  absl::btree_map<TopicPartition, std::deque<Sample>> history_;
};

}  // namespace conduit::coordinator
