#pragma once

// The coordinator's domain values: partitions, members, groups' persisted records, offsets and
// audit entries. Plain data; the rules live in group_coordinator.h and assignor.h.

#include <compare>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/btree_map.h"
#include "absl/container/btree_set.h"
#include "absl/time/time.h"
#include "common/ids/strong_id.h"

namespace conduit::coordinator {

// KIP-848 epochs. The group epoch rises with every new target assignment (and with an executed
// offset reset), and each grant of a partition is stamped with it. A member's epoch is the group
// epoch it has reconciled to (0 to join, -1 to leave); a commit must carry a member epoch no
// older than the grant of each partition it commits: that is the fence.
struct MemberEpochTag {};
using MemberEpoch = ids::StrongId<MemberEpochTag, int32_t>;
struct GroupEpochTag {};
using GroupEpoch = ids::StrongId<GroupEpochTag, int32_t>;
inline constexpr MemberEpoch kJoiningEpoch{0};
inline constexpr MemberEpoch kLeavingEpoch{-1};
inline GroupEpoch NextGroupEpoch(GroupEpoch epoch) { return GroupEpoch(epoch.value() + 1); }
// The epoch of a member reconciled to group epoch `group`.
inline MemberEpoch ReconciledTo(GroupEpoch group) { return MemberEpoch(group.value()); }
// Whether a member at `member` has reached what the group did at `group` (a grant, a reset).
inline bool Reached(MemberEpoch member, GroupEpoch group) {
  return member.value() >= group.value();
}

struct TopicPartition {
  std::string topic;
  int32_t partition = 0;

  auto operator<=>(const TopicPartition&) const = default;
  bool operator==(const TopicPartition&) const = default;
};

// Ordered, so that assignments, responses and keys are deterministic.
using PartitionSet = absl::btree_set<TopicPartition>;
// member id → partitions.
using Assignment = absl::btree_map<std::string, PartitionSet>;

// A member as persisted. Deadlines live in memory only (see Member).
struct MemberRecord {
  std::string group_id;
  std::string member_id;
  std::string instance_id;
  std::string client_id;
  std::string client_host;
  MemberEpoch epoch;
  std::vector<std::string> subscription;  // sorted, unique
  absl::Duration session_timeout;
  // Owned partitions → the group epoch at which each was granted (or last reset). Commits for a
  // partition must carry an epoch at or after it: that is the fence.
  absl::btree_map<TopicPartition, GroupEpoch> owned;
  PartitionSet revoking;  // subset of owned: to be released by the member
  PartitionSet resets;    // owned partitions reset while the member had an older epoch
  GroupEpoch resets_epoch;
};

struct GroupRecord {
  std::string group_id;
  GroupEpoch epoch;
  int64_t rebalances = 0;
  uint64_t next_audit_id = 1;
  absl::Time created;
  Assignment target;  // computed at `epoch`
  // The partition count of each subscribed topic that `target` was computed with. A topic
  // growing (or appearing, or going) shows as a difference, and rebalances the group; while the
  // broker cannot be asked these stand in for the counts.
  absl::btree_map<std::string, int32_t> partition_counts;
};

struct OffsetRecord {
  std::string group_id;
  TopicPartition tp;
  int64_t offset = 0;
  std::string metadata;
  absl::Time commit_time;
  std::string committed_by;  // member id, "reset:<actor>", or "" (no members)
  MemberEpoch member_epoch;  // a reset's: the group epoch that fenced the commits before it
};

struct PartitionReset {
  int32_t partition = 0;
  bool had_offset = false;
  int64_t before = 0;
  int64_t after = 0;
  std::string owner_member_id;
};

struct AuditRecord {
  std::string group_id;
  uint64_t id = 0;
  absl::Time time;
  std::string action;
  std::string actor;
  std::string peer;
  std::string reason;
  std::string spec;
  std::string topic;
  std::vector<PartitionReset> partitions;
  GroupEpoch group_epoch;
};

}  // namespace conduit::coordinator
