#pragma once

#include <string>
#include <vector>

#include "absl/container/btree_map.h"
#include "services/coordinator/domain/types.h"

namespace conduit::coordinator {

struct AssignorMember {
  std::string member_id;
  std::vector<std::string> topics;  // sorted, unique
};

// The target assignment of a group. Deterministic: the same input gives the same output.
//
// - Every partition of a subscribed topic with a known partition count goes to exactly one
//   member subscribed to its topic.
// - Members with the same subscription (the usual case) are balanced within one over all their
//   partitions; with differing subscriptions each topic is balanced within one over its
//   subscribers, and ties favour the member with less in total.
// - Sticky with the fewest moves: each member keeps what it had in `previous`, up to its quota;
//   the `P mod N` larger quotas go to the members that already hold the most.
Assignment ComputeAssignment(const std::vector<AssignorMember>& members,
                             const absl::btree_map<std::string, int32_t>& partition_counts,
                             const Assignment& previous);

}  // namespace conduit::coordinator
