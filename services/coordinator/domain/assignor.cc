#include "services/coordinator/domain/assignor.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"

namespace conduit::coordinator {
namespace {

// Balances `pool` over `members` (all of whom may take any of it), sticky to `previous`.
// `load` is every member's total so far; it breaks ties and is updated.
void AssignPool(const std::vector<TopicPartition>& pool, std::vector<std::string> members,
                const Assignment& previous, absl::flat_hash_map<std::string, int64_t>* load,
                Assignment* out) {
  if (members.empty() || pool.empty()) return;
  const PartitionSet in_pool(pool.begin(), pool.end());
  // What each member had before, within this pool, each partition claimed once.
  absl::flat_hash_map<std::string, std::vector<TopicPartition>> kept;
  PartitionSet claimed;
  for (const std::string& m : members) {
    kept[m];
    (*load)[m];
    auto it = previous.find(m);
    if (it == previous.end()) continue;
    for (const TopicPartition& tp : it->second) {
      if (in_pool.contains(tp) && claimed.insert(tp).second) kept[m].push_back(tp);
    }
  }
  const size_t n = members.size();
  const size_t base = pool.size() / n;
  const size_t extra = pool.size() % n;
  // The larger quotas go to who already holds the most: that minimises moves.
  std::sort(members.begin(), members.end(), [&](const std::string& a, const std::string& b) {
    size_t ka = kept[a].size(), kb = kept[b].size();
    if (ka != kb) return ka > kb;
    int64_t la = (*load)[a], lb = (*load)[b];
    if (la != lb) return la < lb;
    return a < b;
  });
  std::vector<TopicPartition> free;
  absl::flat_hash_map<std::string, size_t> quota;
  for (size_t i = 0; i < n; ++i) {
    const std::string& m = members[i];
    quota[m] = base + (i < extra ? 1 : 0);
    std::vector<TopicPartition>& mine = kept[m];
    while (mine.size() > quota[m]) {  // give up the highest partitions
      claimed.erase(mine.back());
      mine.pop_back();
    }
  }
  for (const TopicPartition& tp : pool) {
    if (!claimed.contains(tp)) free.push_back(tp);
  }
  size_t next = 0;
  for (const std::string& m : members) {
    std::vector<TopicPartition>& mine = kept[m];
    while (mine.size() < quota[m] && next < free.size()) mine.push_back(free[next++]);
    PartitionSet& target = (*out)[m];
    target.insert(mine.begin(), mine.end());
    (*load)[m] += static_cast<int64_t>(mine.size());
  }
}

std::vector<TopicPartition> PartitionsOf(const std::string& topic,
                                         const absl::btree_map<std::string, int32_t>& counts) {
  std::vector<TopicPartition> out;
  auto it = counts.find(topic);
  if (it == counts.end()) return out;
  for (int32_t p = 0; p < it->second; ++p) out.push_back({topic, p});
  return out;
}

}  // namespace

Assignment ComputeAssignment(const std::vector<AssignorMember>& members,
                             const absl::btree_map<std::string, int32_t>& partition_counts,
                             const Assignment& previous) {
  Assignment out;
  for (const AssignorMember& m : members) out[m.member_id];  // every member has an entry
  if (members.empty()) return out;
  absl::flat_hash_map<std::string, int64_t> load;
  const bool homogeneous =
      std::all_of(members.begin(), members.end(),
                  [&](const AssignorMember& m) { return m.topics == members.front().topics; });
  if (homogeneous) {
    std::vector<TopicPartition> pool;
    for (const std::string& topic : members.front().topics) {
      for (TopicPartition& tp : PartitionsOf(topic, partition_counts)) pool.push_back(tp);
    }
    std::vector<std::string> ids;
    for (const AssignorMember& m : members) ids.push_back(m.member_id);
    AssignPool(pool, std::move(ids), previous, &load, &out);
    return out;
  }
  absl::btree_map<std::string, std::vector<std::string>> subscribers;
  for (const AssignorMember& m : members) {
    for (const std::string& topic : m.topics) subscribers[topic].push_back(m.member_id);
  }
  for (const auto& [topic, ids] : subscribers) {
    AssignPool(PartitionsOf(topic, partition_counts), ids, previous, &load, &out);
  }
  return out;
}

}  // namespace conduit::coordinator
