#include "services/coordinator/domain/lag_tracker.h"

namespace conduit::coordinator {

DrainEstimate LagTracker::Record(const TopicPartition& tp, absl::Time now, int64_t lag) {
  std::deque<Sample>& history = history_[tp];
  history.push_back({now, lag});
  while (history.size() > 1 && now - history.front().at > window_) history.pop_front();
  DrainEstimate out;
  const Sample& first = history.front();
  const double span = absl::ToDoubleSeconds(now - first.at);
  if (span > 0) {
    out.drain_rate = static_cast<double>(first.lag - lag) / span;
    if (out.drain_rate > 0 && lag > 0) {
      out.catch_up_seconds = static_cast<double>(lag) / out.drain_rate;
    }
  }
  while (history.size() > kMaxSamples) history.pop_front();  // after: the rate spans the window
  return out;
}

size_t LagTracker::samples(const TopicPartition& tp) const {
  auto it = history_.find(tp);
  return it == history_.end() ? 0 : it->second.size();
}

}  // namespace conduit::coordinator
