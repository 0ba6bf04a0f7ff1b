#include "services/log_broker/domain/placement.h"

#include <algorithm>
#include <map>

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

void PlaceTopic(const TopicAssignment& t, std::map<int32_t, int32_t>& counts,
                std::vector<PartitionChange>* out) {
  const int32_t rf = std::min<int32_t>(t.replication_factor, static_cast<int32_t>(counts.size()));
  for (int32_t p = 0; p < static_cast<int32_t>(t.partitions.size()); ++p) {
    if (t.partitions[p]) continue;
    std::vector<int32_t> replicas = PickReplicas(counts, rf);
    ++counts[replicas.front()];
    out->push_back(PartitionChange{t.meta.name, t.meta.id, p, t.partition_revisions[p],
                                   PartitionAssignment{replicas.front(), 1, replicas, replicas}});
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
      if (now.leader != kNoBroker && view.brokers.contains(now.leader)) continue;
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
      next.leader_epoch = now.leader_epoch + 1;
      out.push_back(PartitionChange{name, t.meta.id, p, t.partition_revisions[p], next, unclean});
    }
  }
  for (const auto& [name, t] : view.topics) PlaceTopic(t, counts, &out);
  return out;
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
