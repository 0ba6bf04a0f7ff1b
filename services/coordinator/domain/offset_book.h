#pragma once

#include <string>
#include <vector>

#include "absl/container/btree_map.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "services/coordinator/domain/calls.h"
#include "services/coordinator/domain/group_membership.h"
#include "services/coordinator/domain/topic_source.h"
#include "services/coordinator/domain/types.h"

namespace conduit::coordinator {

// One consumer group's committed offsets: the fence a commit must pass, commits, fetches, and
// resets.
//
// Invariants:
// - a commit is applied whole or not at all, and only when CheckFence passed: with members, by
//   a member at an epoch no newer than its own and no older than each partition's grant, that
//   owns every partition in it; without members, by anyone (a memberless tool);
// - a reset puts every offset inside its partition's log, [log start, high watermark].
//
// Not thread-safe: used under its group's mutex.
class OffsetBook {
 public:
  void Restore(OffsetRecord record) { offsets_[record.tp] = std::move(record); }
  const absl::btree_map<TopicPartition, OffsetRecord>& offsets() const { return offsets_; }

  // OK, or the refusal; `*reason` is set to its metrics label (not_member, unknown_member,
  // stale_epoch, not_owner).
  static absl::Status CheckFence(const CommitInput& in, const GroupMembership& membership,
                                 std::string* reason);
  // Applies a commit that passed CheckFence.
  void Commit(const CommitInput& in, absl::Time now, GroupChange* change);
  // The offsets of `topics` (all when empty).
  std::vector<OffsetRecord> Fetch(const std::vector<std::string>& topics) const;

  // Each partition's offset before and after the reset `in`, and its owner; changes nothing.
  // `marks` is indexed by partition; `at_time` holds the offsets for a kTimestamp reset.
  std::vector<PartitionReset> PlanReset(const ResetInput& in,
                                        const std::vector<int32_t>& partitions,
                                        const std::vector<PartitionMarks>& marks,
                                        const absl::flat_hash_map<int32_t, int64_t>& at_time,
                                        const GroupMembership& membership) const;
  // Stores a planned reset's offsets at `epoch`, the group epoch that fences older commits.
  void ApplyReset(const ResetInput& in, const std::vector<PartitionReset>& plan, GroupEpoch epoch,
                  absl::Time now, GroupChange* change);

 private:
  absl::btree_map<TopicPartition, OffsetRecord> offsets_;
};

// The offset a reset of kind `in.kind` moves a partition to, within [log start, high
// watermark]. `committed` is the current offset, if any; `at_time` the broker's answer for a
// kTimestamp reset.
int64_t ResetTarget(const ResetInput& in, const PartitionMarks& marks,
                    const OffsetRecord* committed, int64_t at_time);

}  // namespace conduit::coordinator
