#include "services/log_broker/domain/dedup_window.h"

namespace conduit::log_broker {

const DedupEntry* DedupWindow::Find(const std::string& event_id) const {
  auto it = entries_.find(event_id);
  return it == entries_.end() ? nullptr : &it->second;
}

void DedupWindow::Insert(const std::string& event_id, const DedupEntry& entry) {
  entries_[event_id] = entry;
  order_.emplace_back(entry.append_time, event_id);
  has_entries_.store(true);
}

DedupWindow::Expiry DedupWindow::PlanExpiry(absl::Time cutoff, int32_t limit) const {
  Expiry plan;
  for (const auto& [time, id] : order_) {
    if (time > cutoff || plan.popped >= limit) break;
    ++plan.popped;
    auto it = entries_.find(id);
    if (it != entries_.end() && it->second.append_time == time) plan.current.emplace_back(id, time);
  }
  return plan;
}

void DedupWindow::Expire(const Expiry& plan) {
  for (const auto& [id, time] : plan.current) {
    auto it = entries_.find(id);
    if (it != entries_.end() && it->second.append_time == time) entries_.erase(it);
  }
  order_.erase(order_.begin(), order_.begin() + plan.popped);
  if (order_.empty()) has_entries_.store(false);
}

}  // namespace conduit::log_broker
