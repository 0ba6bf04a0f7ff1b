// Randomized properties of the target assignment: one owner per partition, every partition
// owned while members exist, balanced within one, and the fewest moves a balanced assignment
// allows (computed here from first principles, not from the assignor's own steps).
#include "services/coordinator/domain/assignor.h"

#include <algorithm>
#include <random>

#include <gtest/gtest.h>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"

namespace conduit::coordinator {
namespace {

using Counts = absl::btree_map<std::string, int32_t>;

// partition → owner, failing the test on a partition owned twice.
absl::btree_map<TopicPartition, std::string> Owners(const Assignment& a) {
  absl::btree_map<TopicPartition, std::string> owners;
  for (const auto& [member, partitions] : a) {
    for (const TopicPartition& tp : partitions) {
      auto [it, inserted] = owners.emplace(tp, member);
      EXPECT_TRUE(inserted) << tp.topic << "/" << tp.partition << " owned by " << it->second
                            << " and " << member;
    }
  }
  return owners;
}

// The minimum number of partitions that must change owner to reach a balanced assignment
// from `previous` over `members` and `pool`: each member keeps at most its cap, and the
// r = P mod N larger caps are best given to the members that hold the most.
size_t MinimalMoves(const Assignment& previous, const std::vector<std::string>& members,
                    const PartitionSet& pool) {
  std::vector<size_t> held;
  for (const std::string& m : members) {
    auto it = previous.find(m);
    size_t n = 0;
    if (it != previous.end()) {
      for (const TopicPartition& tp : it->second) n += pool.contains(tp) ? 1 : 0;
    }
    held.push_back(n);
  }
  std::sort(held.rbegin(), held.rend());
  const size_t base = pool.size() / members.size(), extra = pool.size() % members.size();
  size_t moves = 0;
  for (size_t i = 0; i < held.size(); ++i) {
    const size_t cap = base + (i < extra ? 1 : 0);
    if (held[i] > cap) moves += held[i] - cap;
  }
  return moves;
}

TEST(AssignorTest, RandomMembershipChangesKeepOwnershipBalanceAndMinimalMoves) {
  std::mt19937 rng(20261129);
  for (int trial = 0; trial < 200; ++trial) {
    Counts counts;
    const int topics = 1 + static_cast<int>(rng() % 3);
    for (int t = 0; t < topics; ++t) counts[absl::StrCat("t", t)] = 1 + rng() % 24;
    std::vector<std::string> subscription;
    PartitionSet pool;
    for (const auto& [topic, n] : counts) {
      subscription.push_back(topic);
      for (int32_t p = 0; p < n; ++p) pool.insert({topic, p});
    }
    std::vector<std::string> members;
    Assignment current;
    int next_id = 0;
    for (int step = 0; step < 30; ++step) {
      // Join (more likely) or leave, sometimes several at once.
      const int changes = 1 + static_cast<int>(rng() % 3);
      for (int c = 0; c < changes; ++c) {
        if (members.empty() || rng() % 3 != 0) {
          members.push_back(absl::StrCat("m", next_id++));
        } else {
          members.erase(members.begin() + rng() % members.size());
        }
      }
      std::sort(members.begin(), members.end());
      std::vector<AssignorMember> input;
      for (const std::string& m : members) input.push_back({m, subscription});
      Assignment next = ComputeAssignment(input, counts, current);

      auto owners = Owners(next);
      if (members.empty()) {
        EXPECT_TRUE(owners.empty());
      } else {
        EXPECT_EQ(owners.size(), pool.size()) << "every partition is owned while members exist";
        size_t lo = SIZE_MAX, hi = 0;
        for (const std::string& m : members) {
          lo = std::min(lo, next[m].size());
          hi = std::max(hi, next[m].size());
        }
        EXPECT_LE(hi - lo, 1u) << "balanced within one";
        // Moves: partitions a surviving member had and another member has now.
        size_t moves = 0;
        for (const std::string& m : members) {
          auto it = current.find(m);
          if (it == current.end()) continue;
          for (const TopicPartition& tp : it->second) moves += next[m].contains(tp) ? 0 : 1;
        }
        EXPECT_EQ(moves, MinimalMoves(current, members, pool)) << "trial " << trial;
      }
      // Same input, same output.
      EXPECT_EQ(ComputeAssignment(input, counts, current), next);
      current = std::move(next);
      if (HasFailure()) return;
    }
  }
}

TEST(AssignorTest, DifferentSubscriptionsGiveEachTopicToItsSubscribersBalanced) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    Counts counts;
    for (int t = 0; t < 4; ++t) counts[absl::StrCat("t", t)] = 1 + rng() % 12;
    std::vector<AssignorMember> members;
    const int n = 1 + static_cast<int>(rng() % 6);
    for (int i = 0; i < n; ++i) {
      AssignorMember m{absl::StrCat("m", i), {}};
      for (const auto& [topic, count] : counts) {
        if (rng() % 2) m.topics.push_back(topic);
      }
      if (m.topics.empty()) m.topics.push_back("t0");
      members.push_back(std::move(m));
    }
    Assignment a = ComputeAssignment(members, counts, {});
    auto owners = Owners(a);
    for (const auto& [topic, count] : counts) {
      std::vector<const AssignorMember*> subscribers;
      for (const AssignorMember& m : members) {
        if (std::find(m.topics.begin(), m.topics.end(), topic) != m.topics.end()) {
          subscribers.push_back(&m);
        }
      }
      absl::flat_hash_map<std::string, int> per_member;
      for (int32_t p = 0; p < count; ++p) {
        auto it = owners.find(TopicPartition{topic, p});
        if (subscribers.empty()) {
          EXPECT_EQ(it, owners.end()) << "nobody subscribes to " << topic;
          continue;
        }
        ASSERT_NE(it, owners.end()) << topic << "/" << p << " has no owner";
        const bool subscribed = std::any_of(subscribers.begin(), subscribers.end(),
                                            [&](auto* m) { return m->member_id == it->second; });
        EXPECT_TRUE(subscribed) << topic << "/" << p << " went to " << it->second;
        ++per_member[it->second];
      }
      if (subscribers.empty()) continue;
      int lo = INT32_MAX, hi = 0;
      for (auto* m : subscribers) {
        lo = std::min(lo, per_member[m->member_id]);
        hi = std::max(hi, per_member[m->member_id]);
      }
      EXPECT_LE(hi - lo, 1) << topic << " is balanced within one over its subscribers";
    }
  }
}

TEST(AssignorTest, UnknownTopicsAndNoMembersAssignNothing) {
  EXPECT_TRUE(ComputeAssignment({}, {{"t", 4}}, {}).empty());
  Assignment a = ComputeAssignment({{"m1", {"missing"}}}, {{"t", 4}}, {});
  ASSERT_EQ(a.size(), 1u);
  EXPECT_TRUE(a["m1"].empty());
}

}  // namespace
}  // namespace conduit::coordinator
