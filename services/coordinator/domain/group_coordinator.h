#pragma once

#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/btree_map.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/time/clock.h"
#include "services/coordinator/domain/await.h"
#include "services/coordinator/domain/calls.h"
#include "services/coordinator/domain/coordinator_store.h"
#include "services/coordinator/domain/group_log.h"
#include "services/coordinator/domain/group_membership.h"
#include "services/coordinator/domain/lag_tracker.h"
#include "services/coordinator/domain/offset_book.h"
#include "services/coordinator/domain/topic_cache.h"
#include "services/coordinator/domain/topic_source.h"
#include "services/coordinator/domain/types.h"

namespace conduit::coordinator {

// Consumer groups: the coordinator of each group's GroupMembership (membership and incremental
// assignment, KIP-848 style), OffsetBook (fenced offsets, resets) and LagTracker, with their
// persistence and the broker's view. See services/coordinator/README.md for the rules.
//
// Thread-safe. Each group has its own mutex; a change is applied in memory and queued on the
// GroupLog under it, and the call returns once the change is durable. Calls may block (broker,
// fsync): run them off gRPC threads.
class GroupCoordinator {
 public:
  GroupCoordinator(CoordinatorStore* store, TopicSource* topics, const time::Clock* clock,
                   CoordinatorOptions options, CoordinatorObserver* observer = nullptr);
  ~GroupCoordinator();

  // Loads groups, members and offsets. Members get a fresh session (now + timeout).
  absl::Status Recover();

  // Heartbeat and Commit come in two forms: the callback one, which returns once the change is
  // queued and calls `done` when it is durable (on the commit log's thread, or at once for a
  // refusal), so no thread waits for the fsync; and a blocking one over it.
  absl::StatusOr<HeartbeatOutput> Heartbeat(const HeartbeatInput& in);
  void Heartbeat(const HeartbeatInput& in,
                 std::function<void(absl::StatusOr<HeartbeatOutput>)> done);
  absl::Status Leave(const std::string& group_id, const std::string& member_id);
  absl::Status Commit(const CommitInput& in);
  void Commit(const CommitInput& in, std::function<void(absl::Status)> done);
  absl::StatusOr<std::vector<OffsetRecord>> FetchOffsets(const std::string& group_id,
                                                         const std::vector<std::string>& topics);
  absl::StatusOr<GroupDescription> Describe(const std::string& group_id);
  std::vector<GroupListing> List();
  absl::Status DeleteGroup(const std::string& group_id);
  absl::StatusOr<ResetOutput> ResetOffsets(const ResetInput& in);
  absl::StatusOr<std::vector<AuditRecord>> ListAudit(const std::string& group_id,
                                                     uint64_t before_id, int limit);

  // Expires silent members and re-reads partition counts of subscribed topics (rebalancing
  // groups whose topics changed).
  void Sweep();
  // How many topics the topic cache holds (subscribed ones, and others until the sweep drops
  // them).
  size_t CachedTopics() { return topic_cache_.size(); }
  // Computes every group's lag for the observer (metrics). May take long with a slow broker:
  // run it apart from Sweep.
  void SampleLag();

 private:
  struct Group : std::enable_shared_from_this<Group> {
    Group(const MembershipContext* context, std::string group_id, absl::Time created,
          absl::Duration lag_window)
        : membership(context, std::move(group_id), created), lag(lag_window) {}
    absl::Mutex mu;
    GroupMembership membership ABSL_GUARDED_BY(mu);
    OffsetBook offsets ABSL_GUARDED_BY(mu);
    LagTracker lag ABSL_GUARDED_BY(mu);
    bool deleted ABSL_GUARDED_BY(mu) = false;
    bool persisted ABSL_GUARDED_BY(mu) = false;  // its record is (or is queued to be) stored
    std::atomic<int> inflight{0};                 // writes queued and not yet durable
  };
  using GroupPtr = std::shared_ptr<Group>;
  using Waiter = GroupLog::Outcome;

  GroupPtr NewGroup(const std::string& group_id) const;
  std::vector<GroupPtr> AllGroups();
  GroupPtr FindGroup(const std::string& group_id);
  GroupPtr FindOrCreateGroup(const std::string& group_id);
  absl::StatusOr<GroupPtr> ExistingGroup(const std::string& group_id);

  // Adds the group and member records `change` names and queues it on the log. Returns what to
  // wait on (nullptr when there was nothing to write and nothing in flight).
  std::shared_ptr<Waiter> SubmitLocked(Group& g, GroupChange change)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(g.mu);
  // A barrier when the group has writes in flight, so that a read never shows what is not durable.
  std::shared_ptr<Waiter> BarrierLocked(Group& g) ABSL_EXCLUSIVE_LOCKS_REQUIRED(g.mu);
  // Expires the group's silent members and queues what that changed.
  void ExpireLocked(Group& g) ABSL_EXCLUSIVE_LOCKS_REQUIRED(g.mu);
  // Everything of a commit (once its offsets are checked against the log) or a heartbeat up to
  // queuing its write (in `queued`; null when nothing was written): the refusal, or OK / the
  // heartbeat's answer once that write is durable.
  absl::Status StartCommit(const CommitInput& in, std::shared_ptr<Waiter>* queued);
  absl::StatusOr<HeartbeatOutput> StartHeartbeat(const HeartbeatInput& in,
                                                 std::shared_ptr<Waiter>* queued);

  // Calls `done` with OK when every entry's offset is at most its partition's high watermark, as
  // the broker says now (one question per topic, asked without blocking): a deleted topic
  // refuses commits at once (NOT_FOUND), and one recreated since is told by its new marks.
  void CheckWithinLog(const std::vector<CommitInput::Entry>& entries,
                      std::function<void(absl::Status)> done);

  // Resets (offsets.cc): the partitions a reset names, checked against the log, and the offsets
  // for a timestamp reset (asked of the broker, outside any mutex).
  absl::StatusOr<std::vector<int32_t>> ResetPartitions(const ResetInput& in,
                                                       const std::vector<PartitionMarks>& marks,
                                                       absl::flat_hash_map<int32_t, int64_t>* at);

  // Lag (lag.cc).
  // Topic → the broker's marks, asked once per topic while it lives (one lag sampling pass).
  using MarksMemo = absl::flat_hash_map<std::string, absl::StatusOr<std::vector<PartitionMarks>>>;
  struct LagSnapshot;
  absl::Status ComputeLag(Group& g, GroupDescription* out, MarksMemo* memo = nullptr);
  // The figures of one topic's partitions, from the broker's marks (outside any mutex).
  void TopicLag(const std::string& topic, const LagSnapshot& snapshot, absl::Time now,
                MarksMemo* memo, GroupDescription* out);

  CoordinatorStore* const store_;
  TopicSource* const topics_;
  const time::Clock* const clock_;
  const CoordinatorOptions options_;
  CoordinatorObserver default_observer_;
  CoordinatorObserver* const observer_;

  absl::Mutex mu_;  // before any group's mutex
  absl::btree_map<std::string, GroupPtr> groups_ ABSL_GUARDED_BY(mu_);

  // Holds the topics members subscribe to; the sweep drops the others.
  TopicCache topic_cache_;
  const MembershipContext membership_context_;

  GroupLog log_;  // last: drains before the rest is destroyed
};

const char* GroupStateName(GroupState state);

}  // namespace conduit::coordinator
