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
#include "common/commit/commit_log.h"
#include "common/time/clock.h"
#include "services/coordinator/domain/await.h"
#include "services/coordinator/domain/coordinator_store.h"
#include "services/coordinator/domain/topic_cache.h"
#include "services/coordinator/domain/topic_source.h"
#include "services/coordinator/domain/types.h"

namespace conduit::coordinator {

struct CoordinatorOptions {
  absl::Duration default_session_timeout = absl::Seconds(45);
  absl::Duration min_session_timeout = absl::Seconds(1);
  absl::Duration max_session_timeout = absl::Minutes(30);
  // Told to members; never more than a third of their session timeout.
  absl::Duration heartbeat_interval = absl::Seconds(3);
  // How long partition counts and high watermarks are trusted before the broker is asked again
  // (a commit past the cached high watermark always asks).
  absl::Duration topic_refresh = absl::Seconds(30);
  // Lag samples older than this are dropped; the drain rate spans what is left.
  absl::Duration lag_window = absl::Minutes(5);
};

// Told about changes, for metrics. Called without locks held except where noted.
class CoordinatorObserver {
 public:
  virtual ~CoordinatorObserver() = default;
  virtual void OnMembers(const std::string& group, int members) {}
  virtual void OnRebalance(const std::string& group) {}
  virtual void OnCommit(const std::string& group) {}
  virtual void OnCommitRejected(const std::string& group, const std::string& reason) {}
  virtual void OnHeartbeat() {}
  virtual void OnLag(const std::string& group, const TopicPartition& tp, int64_t records,
                     double seconds) {}
  // The topic no longer exists: its lag is not a figure any more.
  virtual void OnLagGone(const std::string& group, const std::string& topic) {}
  virtual void OnGroupDeleted(const std::string& group) {}
};

enum class GroupState { kEmpty, kStable, kReconciling };

struct HeartbeatInput {
  std::string group_id;
  std::string member_id;
  int32_t member_epoch = 0;
  std::string instance_id;
  std::vector<std::string> subscription;  // sorted, unique; empty after join: unchanged
  PartitionSet owned;
  std::optional<absl::Duration> session_timeout;
  std::string client_id;
  std::string client_host;
  // The caller's deadline: a heartbeat still waiting for the broker then changes nothing.
  absl::Time deadline = absl::InfiniteFuture();
};

struct HeartbeatOutput {
  std::string member_id;
  int32_t member_epoch = 0;
  absl::Duration heartbeat_interval;
  PartitionSet assignment;
  PartitionSet pending;
  PartitionSet resets;
  int32_t group_epoch = 0;
};

struct CommitInput {
  std::string group_id;
  std::string member_id;
  int32_t member_epoch = 0;
  struct Entry {
    TopicPartition tp;
    int64_t offset = 0;
    std::string metadata;
  };
  std::vector<Entry> entries;
  // The caller's deadline: a commit still waiting for the broker's marks then changes nothing.
  absl::Time deadline = absl::InfiniteFuture();
};

struct MemberView {
  MemberRecord record;
  PartitionSet pending;
  absl::Time last_heartbeat;
};

struct PartitionLagView {
  TopicPartition tp;
  std::string owner;
  std::optional<OffsetRecord> committed;
  int64_t log_start = 0;
  int64_t high_watermark = 0;
  int64_t lag_records = 0;
  double lag_seconds = 0;
  std::optional<absl::Time> first_unprocessed_append_time;
  double drain_rate = 0;
  std::optional<double> catch_up_seconds;
};

struct GroupDescription {
  std::string group_id;
  GroupState state = GroupState::kEmpty;
  int32_t epoch = 0;
  int64_t rebalances = 0;
  std::vector<MemberView> members;
  std::vector<PartitionLagView> partitions;
  int64_t max_lag_records = 0;
  double max_lag_seconds = 0;
  std::string broker_error;
};

struct GroupListing {
  std::string group_id;
  GroupState state = GroupState::kEmpty;
  int32_t epoch = 0;
  int members = 0;
};

struct ResetInput {
  enum class Kind { kEarliest, kLatest, kTimestamp, kOffset, kShift };
  std::string group_id;
  std::string topic;
  std::vector<int32_t> partitions;  // empty: all
  Kind kind = Kind::kEarliest;
  absl::Time timestamp;
  int64_t value = 0;  // the offset, or the shift
  bool execute = false;
  std::string actor;
  std::string peer;
  std::string reason;
  // The caller's deadline: an executed reset still waiting for the broker then changes nothing.
  absl::Time deadline = absl::InfiniteFuture();
};

struct ResetOutput {
  bool executed = false;
  std::vector<PartitionReset> partitions;
  int32_t group_epoch = 0;
  uint64_t audit_id = 0;
};

// Consumer groups: membership and incremental assignment (KIP-848 style), fenced offsets, lag,
// resets. See services/coordinator/README.md for the rules.
//
// Thread-safe. Each group has its own mutex; a change is applied in memory and queued on the
// commit log under it, and the call returns once the change is durable. Calls may block (broker,
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
  struct Member {
    MemberRecord record;
    absl::Time deadline;
    absl::Time last_heartbeat;
    std::optional<absl::Time> revoke_deadline;  // set while it has partitions to release
  };
  struct LagSample {
    absl::Time at;
    int64_t lag = 0;
  };
  struct Group : std::enable_shared_from_this<Group> {
    absl::Mutex mu;
    GroupRecord record ABSL_GUARDED_BY(mu);
    absl::btree_map<std::string, Member> members ABSL_GUARDED_BY(mu);
    absl::btree_map<TopicPartition, std::string> owner ABSL_GUARDED_BY(mu);
    absl::btree_map<TopicPartition, OffsetRecord> offsets ABSL_GUARDED_BY(mu);
    absl::btree_map<TopicPartition, std::deque<LagSample>> lag_history ABSL_GUARDED_BY(mu);
    bool deleted ABSL_GUARDED_BY(mu) = false;
    bool persisted ABSL_GUARDED_BY(mu) = false;  // its record is (or is queued to be) stored
    std::atomic<int> inflight{0};                 // writes queued and not yet durable
  };
  using GroupPtr = std::shared_ptr<Group>;

  // A change collected under a group's mutex, then submitted.
  struct Change {
    CoordinatorWrite write;
    bool group_dirty = false;
    absl::btree_set<std::string> dirty_members;
  };
  struct Waiter;

  std::vector<GroupPtr> AllGroups();
  GroupPtr FindGroup(const std::string& group_id);
  GroupPtr FindOrCreateGroup(const std::string& group_id);
  absl::StatusOr<GroupPtr> ExistingGroup(const std::string& group_id);

  // Fills `change` with the group and member records it names and queues it on the log. Returns
  // what to wait on (nullptr when there was nothing to write and nothing in flight).
  std::shared_ptr<Waiter> SubmitLocked(Group& g, Change change) ABSL_EXCLUSIVE_LOCKS_REQUIRED(g.mu);
  // A barrier when the group has writes in flight, so that a read never shows what is not durable.
  std::shared_ptr<Waiter> BarrierLocked(Group& g) ABSL_EXCLUSIVE_LOCKS_REQUIRED(g.mu);
  // Hands `write` to the commit log; the waiter is notified once it is durable. `inflight`, if
  // set, counts the write among its group's unfinished ones until then.
  std::shared_ptr<Waiter> SubmitWrite(CoordinatorWrite write, GroupPtr inflight);
  static absl::Status Wait(const std::shared_ptr<Waiter>& waiter);
  // Runs `fn` with the write's outcome once it is durable (at once when `waiter` is null or the
  // write already is).
  static void Then(const std::shared_ptr<Waiter>& waiter, std::function<void(absl::Status)> fn);
  // Everything of a commit (once its offsets are checked against the log) or a heartbeat up to
  // queuing its write (in `queued`; null when nothing was written): the refusal, or OK / the
  // heartbeat's answer once that write is durable.
  absl::Status StartCommit(const CommitInput& in, std::shared_ptr<Waiter>* queued);
  absl::StatusOr<HeartbeatOutput> StartHeartbeat(const HeartbeatInput& in,
                                                 std::shared_ptr<Waiter>* queued);

  // Membership (membership.cc).
  void ExpireLocked(Group& g, absl::Time now, Change* change) ABSL_EXCLUSIVE_LOCKS_REQUIRED(g.mu);
  void RemoveMemberLocked(Group& g, const std::string& member_id, Change* change)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(g.mu);
  void RebalanceLocked(Group& g, Change* change) ABSL_EXCLUSIVE_LOCKS_REQUIRED(g.mu);
  void ReconcileLocked(Group& g, Member& m, absl::Time now, Change* change)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(g.mu);
  PartitionSet PendingLocked(Group& g, const Member& m) ABSL_EXCLUSIVE_LOCKS_REQUIRED(g.mu);
  GroupState StateLocked(Group& g) ABSL_EXCLUSIVE_LOCKS_REQUIRED(g.mu);
  absl::StatusOr<HeartbeatOutput> HeartbeatLocked(Group& g, const HeartbeatInput& in,
                                                  Change* change)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(g.mu);

  // The counts a target for `g` is computed with: the broker's where known (0: the topic does
  // not exist), else the ones the current target used. Looks up only `g`'s topics.
  absl::btree_map<std::string, int32_t> CountsForLocked(Group& g)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(g.mu);
  // Calls `done` with OK when every entry's offset is at most its partition's high watermark, as
  // the broker says now (one question per topic, asked without blocking): a deleted topic
  // refuses commits at once (NOT_FOUND), and one recreated since is told by its new marks.
  void CheckWithinLog(const std::vector<CommitInput::Entry>& entries,
                      std::function<void(absl::Status)> done);
  // The status of a call that found its group deleted after looking it up.
  static absl::Status DeletedMeanwhile();
  // The status of a call whose deadline passed before it changed anything.
  static absl::Status DeadlinePassed();

  // Lag (lag.cc).
  // Topic → the broker's marks, asked once per topic while it lives (one lag sampling pass).
  using MarksMemo = absl::flat_hash_map<std::string, absl::StatusOr<std::vector<PartitionMarks>>>;
  absl::Status ComputeLag(Group& g, GroupDescription* out, MarksMemo* memo = nullptr);

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

  commit::CommitLog<CoordinatorWrite> log_;  // last: drains before the rest is destroyed
};

const char* GroupStateName(GroupState state);

}  // namespace conduit::coordinator
