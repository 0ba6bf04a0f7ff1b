#include "services/log_broker/domain/placement.h"

#include <algorithm>
#include <map>
#include <optional>

#include "absl/strings/str_format.h"

namespace conduit::log_broker {
namespace {

// Partitions led by each live broker (0 for those leading none).
std::map<int32_t, int32_t> LeaderCounts(const ClusterView& view) {
  std::map<int32_t, int32_t> counts;
  for (const auto& [id, b] : view.brokers) counts[id] = 0;
  for (const auto& [name, t] : view.topics) {
    for (const auto& p : t.partitions) {
      if (p && counts.contains(p->leader)) ++counts[p->leader];
    }
  }
  return counts;
}

// The live broker leading the fewest partitions (lowest id on a tie), then the next
// `replication_factor - 1` live brokers after it in id order.
std::vector<int32_t> PickReplicas(const std::map<int32_t, int32_t>& counts,
                                  int32_t replication_factor) {
  auto least = counts.begin();
  for (auto it = counts.begin(); it != counts.end(); ++it) {
    if (it->second < least->second) least = it;
  }
  std::vector<int32_t> replicas;
  for (auto it = least; static_cast<int32_t>(replicas.size()) < replication_factor;) {
    replicas.push_back(it->first);
    if (++it == counts.end()) it = counts.begin();
  }
  return replicas;
}

bool Contains(const std::vector<int32_t>& v, int32_t b) {
  return std::find(v.begin(), v.end(), b) != v.end();
}

// The next step of a reassignment of a partition with a live leader: add the wanted replicas;
// once all are in sync, hand leadership to the first wanted one (if live and in sync; else any
// wanted in-sync replica, when the leader is not wanted) and drop the others.
std::optional<PartitionAssignment> PlanReassignment(const ClusterView& view,
                                                    const PartitionAssignment& now) {
  const std::vector<int32_t>& wanted = now.target_replicas;
  if (wanted.empty()) return std::nullopt;
  PartitionAssignment next = now;
  bool missing = false;
  for (int32_t b : wanted) missing |= !Contains(now.replicas, b);
  if (missing) {  // step 1: the new replicas join as followers and catch up
    next.replicas = wanted;
    for (int32_t b : now.replicas) {
      if (!Contains(wanted, b)) next.replicas.push_back(b);
    }
    return next;
  }
  for (int32_t b : wanted) {
    if (!Contains(now.isr, b)) return std::nullopt;  // still catching up
  }
  // Step 2: every wanted replica is in sync — lead from the preferred one, drop the rest.
  const int32_t preferred = wanted.front();
  if (now.leader != preferred && view.brokers.contains(preferred)) {
    next.leader = preferred;
  } else if (!Contains(wanted, now.leader)) {
    auto live = std::find_if(wanted.begin(), wanted.end(),
                             [&](int32_t b) { return view.brokers.contains(b); });
    if (live == wanted.end()) return std::nullopt;
    next.leader = *live;
  }
  if (next.leader != now.leader) next.leader_epoch = NextEpoch(now.leader_epoch);
  next.replicas = wanted;
  next.isr.clear();
  for (int32_t b : now.isr) {
    if (Contains(wanted, b)) next.isr.push_back(b);
  }
  next.target_replicas.clear();
  next.throttle_bytes_per_second = 0;
  return next;
}

void PlaceTopic(const TopicAssignment& t, std::map<int32_t, int32_t>& counts,
                std::vector<PartitionChange>* out) {
  const int32_t rf = std::min<int32_t>(t.replication_factor, static_cast<int32_t>(counts.size()));
  for (int32_t p = 0; p < static_cast<int32_t>(t.partitions.size()); ++p) {
    if (t.partitions[p]) continue;
    std::vector<int32_t> replicas = PickReplicas(counts, rf);
    ++counts[replicas.front()];
    out->push_back(
        PartitionChange{t.meta.name, t.meta.id, p, t.partition_revisions[p],
                        PartitionAssignment{replicas.front(), LeaderEpoch(1), replicas, replicas}});
  }
}

}  // namespace

std::vector<PartitionChange> PlanPartitionChanges(const ClusterView& view) {
  std::vector<PartitionChange> out;
  if (view.brokers.empty()) return out;
  std::map<int32_t, int32_t> counts = LeaderCounts(view);
  for (const auto& [name, t] : view.topics) {
    for (int32_t p = 0; p < static_cast<int32_t>(t.partitions.size()); ++p) {
      if (!t.partitions[p]) continue;
      const PartitionAssignment& now = *t.partitions[p];
      if (now.leader != kNoBroker && view.brokers.contains(now.leader)) {
        if (auto next = PlanReassignment(view, now)) {
          if (next->leader != now.leader) ++counts[next->leader];
          out.push_back(PartitionChange{name, t.meta.id, p, t.partition_revisions[p], *next});
        }
        continue;
      }
      PartitionAssignment next = now;
      bool unclean = false;
      std::vector<int32_t> live_isr;
      for (int32_t b : now.isr) {
        if (view.brokers.contains(b)) live_isr.push_back(b);
      }
      if (!live_isr.empty()) {
        next.leader = live_isr.front();
        next.isr = live_isr;
      } else if (t.meta.config.unclean_leader_election) {
        auto live = std::find_if(now.replicas.begin(), now.replicas.end(),
                                 [&](int32_t b) { return view.brokers.contains(b); });
        if (live == now.replicas.end()) {
          if (now.leader == kNoBroker) continue;
          next.leader = kNoBroker;
        } else {
          next.leader = *live;
          next.isr = {*live};
          unclean = true;
        }
      } else if (now.leader == kNoBroker) {
        continue;  // offline until an in-sync replica returns
      } else {
        next.leader = kNoBroker;
      }
      if (next.leader != kNoBroker) ++counts[next.leader];
      next.leader_epoch = NextEpoch(now.leader_epoch);
      out.push_back(PartitionChange{name, t.meta.id, p, t.partition_revisions[p], next, unclean});
    }
  }
  for (const auto& [name, t] : view.topics) PlaceTopic(t, counts, &out);
  return out;
}

std::vector<PartitionChange> PlanPreferredLeaders(const ClusterView& view) {
  std::vector<PartitionChange> out;
  for (const auto& [name, t] : view.topics) {
    for (int32_t p = 0; p < static_cast<int32_t>(t.partitions.size()); ++p) {
      if (!t.partitions[p]) continue;
      const PartitionAssignment& now = *t.partitions[p];
      if (now.replicas.empty() || !now.target_replicas.empty()) continue;
      const int32_t preferred = now.replicas.front();
      if (now.leader == preferred || now.leader == kNoBroker ||
          !view.brokers.contains(now.leader) || !view.brokers.contains(preferred) ||
          !Contains(now.isr, preferred)) {
        continue;
      }
      PartitionAssignment next = now;
      next.leader = preferred;
      next.leader_epoch = NextEpoch(now.leader_epoch);
      out.push_back(PartitionChange{name, t.meta.id, p, t.partition_revisions[p], next});
    }
  }
  return out;
}

std::set<int32_t> LeadersTakenAsGone(const ClusterView& view,
                                     const std::vector<PartitionChange>& changes) {
  std::set<int32_t> gone;
  for (const PartitionChange& c : changes) {
    const PartitionAssignment* now = view.FindPartition(c.topic, c.partition);
    if (now != nullptr && now->leader != kNoBroker && now->leader != c.next.leader &&
        !view.brokers.contains(now->leader)) {
      gone.insert(now->leader);
    }
  }
  return gone;
}

absl::Status CheckReplicationFactor(const ClusterView& view, int32_t replication_factor) {
  const int32_t live = static_cast<int32_t>(view.brokers.size());
  if (replication_factor < 1 || replication_factor > live) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "replication_factor %d is not within 1..%d (the live brokers)", replication_factor, live));
  }
  return absl::OkStatus();
}

}  // namespace conduit::log_broker
