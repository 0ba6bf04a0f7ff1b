#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/btree_map.h"
#include "absl/container/btree_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "services/coordinator/domain/calls.h"
#include "services/coordinator/domain/coordinator_store.h"
#include "services/coordinator/domain/types.h"

namespace conduit::coordinator {

// What a change to one group touched, collected under its mutex and then written as one
// CoordinatorWrite (the coordinator adds the group record and the dirty members on submit).
struct GroupChange {
  CoordinatorWrite write;
  bool group_dirty = false;
  absl::btree_set<std::string> dirty_members;
};

// What membership asks of the coordinator: its options, its observer, and partition counts.
struct MembershipContext {
  const CoordinatorOptions* options = nullptr;
  CoordinatorObserver* observer = nullptr;
  // The broker's partition count of a topic where known (0: the topic does not exist); nullopt
  // when the broker has not been asked yet.
  std::function<std::optional<int32_t>(const std::string& topic)> cached_count;
};

// A member as held in memory: its persisted record and its deadlines.
struct Member {
  MemberRecord record;
  absl::Time deadline;
  absl::Time last_heartbeat;
  std::optional<absl::Time> revoke_deadline;  // set while it has partitions to release
};

// One consumer group's membership: who is in it, who owns which partition, and the group
// record (epoch, target assignment and the partition counts it was computed with). Joins,
// heartbeats, leaves, session expiry, and each member's incremental reconciliation towards the
// target (KIP-848 style; services/coordinator/README.md, "Membership").
//
// Invariants every method keeps:
// - a partition has at most one owner, and owner() agrees with the members' `owned` sets;
// - a member is granted a partition only once nobody owns it, and only after its own
//   revocations are done; each grant is stamped with the group epoch it was made at;
// - a member's epoch never exceeds the group epoch.
//
// Not thread-safe: used under its group's mutex.
class GroupMembership {
 public:
  GroupMembership(const MembershipContext* context, std::string group_id, absl::Time created);

  // Recovery: the stored record, then each stored member (given a fresh session from `now`).
  void RestoreRecord(GroupRecord record) { record_ = std::move(record); }
  void RestoreMember(MemberRecord record, absl::Time now);

  const GroupRecord& record() const { return record_; }
  const absl::btree_map<std::string, Member>& members() const { return members_; }
  const absl::btree_map<TopicPartition, std::string>& owner() const { return owner_; }
  const Member* Find(const std::string& member_id) const;
  GroupState State() const;
  // The target partitions `m` does not own yet.
  PartitionSet Pending(const Member& m) const;
  absl::btree_set<std::string> SubscribedTopics() const;
  GroupListing Listing() const;
  // The group's id, state, epochs and members (not its partitions' lag).
  void Describe(GroupDescription* out) const;

  // Removes members whose session or release deadline has passed, rebalancing if any went.
  void Expire(absl::Time now, GroupChange* change);
  // A join (member_epoch 0) or a heartbeat of a member; `in` is validated. NOT_FOUND for an
  // unknown member, FAILED_PRECONDITION for an epoch ahead of the member's.
  absl::StatusOr<HeartbeatOutput> Heartbeat(const HeartbeatInput& in, absl::Time now,
                                            GroupChange* change);
  // NOT_FOUND when `member_id` is not a member.
  absl::Status Leave(const std::string& member_id, GroupChange* change);
  // Rebalances when the counts of the subscribed topics differ from the ones the target was
  // computed with (a topic grew, appeared or went).
  void RebalanceIfCountsChanged(GroupChange* change);

  // An executed offset reset: a new group epoch, so that the owners' commits from before it are
  // fenced; each owner of a reset partition has it granted again at that epoch and is told
  // (`resets`). Returns the new epoch.
  GroupEpoch FenceForReset(const std::vector<TopicPartition>& reset, GroupChange* change);
  // The id of the next audit entry (kept in the group record).
  uint64_t TakeAuditId(GroupChange* change);

 private:
  // The member a heartbeat is for: found, joined (maybe taking over a static member's place),
  // or the refusal.
  absl::StatusOr<Member*> FindOrJoin(const HeartbeatInput& in, GroupChange* change);
  Member* TakeOver(std::string old_id, const std::string& id, GroupChange* change);
  // The client fields and subscription the heartbeat carries.
  void UpdateFields(Member& m, const HeartbeatInput& in, GroupChange* change);
  // Partitions being revoked that the member no longer lists are released.
  void ApplyReleases(Member& m, const HeartbeatInput& in, GroupChange* change);
  HeartbeatOutput Answer(const Member& m) const;
  void Remove(const std::string& member_id, GroupChange* change);
  void Rebalance(GroupChange* change);
  void Reconcile(Member& m, absl::Time now, GroupChange* change);
  // The counts a target is computed with: the broker's where known, else the ones the current
  // target used. Only the subscribed topics.
  absl::btree_map<std::string, int32_t> Counts() const;
  void CountMembers() const;

  const MembershipContext* const context_;
  GroupRecord record_;
  absl::btree_map<std::string, Member> members_;
  absl::btree_map<TopicPartition, std::string> owner_;
};

}  // namespace conduit::coordinator
