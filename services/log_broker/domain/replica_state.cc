#include "services/log_broker/domain/replica_state.h"

#include <algorithm>
#include <utility>

namespace conduit::log_broker {

uint64_t AckWaiters::Add(int64_t needed_end, Callback done) {
  const uint64_t id = next_id_++;
  by_end_.emplace(needed_end, std::make_pair(id, std::move(done)));
  end_of_[id] = needed_end;
  return id;
}

std::optional<AckWaiters::Callback> AckWaiters::Remove(uint64_t id) {
  auto end = end_of_.find(id);
  if (end == end_of_.end()) return std::nullopt;
  auto [first, last] = by_end_.equal_range(end->second);
  end_of_.erase(end);
  for (auto it = first; it != last; ++it) {
    if (it->second.first != id) continue;
    Callback done = std::move(it->second.second);
    by_end_.erase(it);
    return done;
  }
  return std::nullopt;
}

std::vector<AckWaiters::Callback> AckWaiters::Release(int64_t hw) {
  std::vector<Callback> out;
  auto last = by_end_.upper_bound(hw);
  for (auto it = by_end_.begin(); it != last; ++it) {
    end_of_.erase(it->second.first);
    out.push_back(std::move(it->second.second));
  }
  by_end_.erase(by_end_.begin(), last);
  return out;
}

std::vector<AckWaiters::Callback> AckWaiters::TakeAll() {
  return Release(INT64_MAX);
}

void ReplicaState::Assign(Role next_role, int32_t self_id, int32_t leader_id, LeaderEpoch epoch,
                          std::vector<int32_t> replica_ids, std::vector<int32_t> in_sync,
                          int64_t revision, absl::Duration now) {
  const bool new_term = next_role != role || epoch != leader_epoch;
  role = next_role;
  self = self_id;
  leader = leader_id;
  leader_epoch = epoch;
  replicas = std::move(replica_ids);
  view_isr = std::move(in_sync);
  // A change being written, or written after this view's state, still counts; a view at or
  // after the write shows its outcome.
  view_revision = revision;
  const bool shown = pending_isr && ((pending_until_revision > 0 && revision >= pending_until_revision) ||
                                     *pending_isr == view_isr);
  if (new_term || role != Role::kLeader || shown) {
    pending_isr.reset();
    pending_until_revision = 0;
  }
  UnionPending();
  if (role != Role::kLeader) {
    followers.clear();
    return;
  }
  if (new_term) followers.clear();
  for (int32_t r : replicas) {
    if (r == self || followers.contains(r)) continue;
    // A new leader gives each follower a full lag time to fetch before counting it behind.
    followers[r] = FollowerProgress{.end = -1, .caught_up_at = now, .last_fetch_at = now};
  }
}

int64_t ReplicaState::HighWatermark(int64_t durable_end) const {
  switch (role) {
    case Role::kSole:
      return durable_end;
    case Role::kFollower:
      return std::min(leader_high_watermark, durable_end);
    case Role::kLeader:
      break;
  }
  int64_t hw = durable_end;
  for (int32_t b : isr) {
    if (b == self) continue;
    auto it = followers.find(b);
    hw = std::min(hw, it == followers.end() ? -1 : it->second.end);
  }
  return hw;
}

void ReplicaState::RecordFetch(int32_t follower, int64_t offset, int64_t log_end,
                               absl::Duration now) {
  FollowerProgress& f = followers[follower];
  if (offset >= log_end) {
    f.caught_up_at = now;
  } else if (offset >= f.leader_end_at_last_fetch && f.end >= 0) {
    f.caught_up_at = std::max(f.caught_up_at, f.last_fetch_at);
  }
  f.end = offset;
  f.last_fetch_at = now;
  f.leader_end_at_last_fetch = log_end;
}

int64_t ReplicaState::ThrottleBudget(int32_t follower, absl::Duration now) {
  if (throttle_bytes_per_second <= 0 || InSync(follower)) return INT64_MAX;
  const double rate = static_cast<double>(throttle_bytes_per_second);
  if (throttle_refilled_at == absl::ZeroDuration()) throttle_refilled_at = now;  // starts empty
  throttle_tokens = std::min(
      rate, throttle_tokens + rate * absl::ToDoubleSeconds(now - throttle_refilled_at));
  throttle_refilled_at = now;
  return throttle_tokens <= 0 ? 0 : static_cast<int64_t>(throttle_tokens);
}

void ReplicaState::ChargeThrottle(int32_t follower, int64_t bytes) {
  if (throttle_bytes_per_second <= 0 || InSync(follower)) return;
  throttle_tokens -= static_cast<double>(bytes);
}

bool ReplicaState::InSync(int32_t broker) const {
  return std::find(isr.begin(), isr.end(), broker) != isr.end();
}

ReplicationDescription ReplicaState::Describe(int64_t log_start, int64_t log_end,
                                              absl::Duration now) const {
  ReplicationDescription out;
  switch (role) {
    case Role::kSole:
      out.role = ReplicaRole::kSole;
      break;
    case Role::kLeader:
      out.role = ReplicaRole::kLeader;
      break;
    case Role::kFollower: {
      const bool replica = std::find(replicas.begin(), replicas.end(), self) != replicas.end();
      out.role = replica ? ReplicaRole::kFollower : ReplicaRole::kNone;
      break;
    }
  }
  out.leader_epoch = leader_epoch;
  out.replicas = replicas;
  out.isr = view_isr;
  if (role != Role::kLeader) return out;
  for (const auto& [broker, f] : followers) {
    out.followers.push_back(FollowerLag{
        .broker = broker,
        .log_end_offset = f.end,
        .lag_records = std::max<int64_t>(0, log_end - (f.end < 0 ? log_start : f.end)),
        .since_caught_up = std::max(absl::ZeroDuration(), now - f.caught_up_at),
        .in_sync = std::find(view_isr.begin(), view_isr.end(), broker) != view_isr.end()});
  }
  std::sort(out.followers.begin(), out.followers.end(),
            [](const FollowerLag& a, const FollowerLag& b) { return a.broker < b.broker; });
  return out;
}

void ReplicaState::UnionPending() {
  isr = view_isr;
  if (!pending_isr) return;
  for (int32_t b : *pending_isr) {
    if (!InSync(b)) isr.push_back(b);
  }
}

void ReplicaState::BeginIsrChange(std::vector<int32_t> next) {
  pending_isr = std::move(next);
  pending_until_revision = 0;
  UnionPending();
}

void ReplicaState::EndIsrChange(int64_t written_revision) {
  if (!pending_isr) return;
  if (written_revision > view_revision) {
    pending_until_revision = written_revision;  // counts until a view that recent arrives
    return;
  }
  if (written_revision > 0) view_isr = *pending_isr;  // the view already shows it
  pending_isr.reset();
  UnionPending();
}

std::optional<std::vector<int32_t>> ReplicaState::PlanIsr(int64_t hw, int64_t epoch_start,
                                                          absl::Duration lag_time,
                                                          absl::Duration now) const {
  if (role != Role::kLeader || pending_isr) return std::nullopt;  // one change at a time
  std::vector<int32_t> next;
  bool changed = false;
  for (int32_t b : isr) {
    auto it = followers.find(b);
    const bool behind =
        b != self && (it == followers.end() || now - it->second.caught_up_at > lag_time);
    if (behind) {
      changed = true;
    } else {
      next.push_back(b);
    }
  }
  if (!changed) {
    for (const auto& [b, f] : followers) {
      if (InSync(b) || f.end < 0 || f.end < hw || f.end < epoch_start) continue;
      // Only a follower the rule above would keep: one stopped at the high watermark (its end
      // there because nothing was appended since) would otherwise join and leave in turn.
      if (now - f.caught_up_at > lag_time) continue;
      next.push_back(b);
      changed = true;
      break;  // one at a time: each join is its own guarded write
    }
  }
  if (!changed) return std::nullopt;
  std::sort(next.begin(), next.end());
  return next;
}

}  // namespace conduit::log_broker
