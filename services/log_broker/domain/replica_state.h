#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "services/log_broker/domain/ids.h"

namespace conduit::log_broker {

// What the leader knows of one follower's copy of a partition.
struct FollowerProgress {
  // The follower's durable log end: the offset its last valid fetch asked for (a follower asks
  // for the next offset only once what it fetched before is durable under the topic's
  // durability). -1 until it has fetched at this leader epoch.
  int64_t end = -1;
  // Monotonic time at which the follower was last caught up: it fetched at or past the leader's
  // log end as of its previous fetch (Kafka's rule, so a steady follower of a busy leader is not
  // counted behind just because records keep arriving).
  absl::Duration caught_up_at;
  absl::Duration last_fetch_at;
  int64_t leader_end_at_last_fetch = 0;
};

// A broker's part in a partition, as reported (DescribeTopic, metrics).
enum class ReplicaRole {
  kSole,      // the only replica (or a single node)
  kLeader,    // leads a replicated partition
  kFollower,  // a replica copying the leader's log (or waiting for one: the partition is offline)
  kNone,      // cluster mode: not a replica of it; this broker holds no copy
};

// One follower as its leader sees it (FollowerProgress, read at one moment).
struct FollowerLag {
  int32_t broker = 0;
  // Its durable log end as last fetched; -1: it has not fetched at this leader epoch yet.
  int64_t log_end_offset = -1;
  // The leader's log end minus that (the whole log, end minus start, while it is -1).
  int64_t lag_records = 0;
  // Since it was last caught up with the leader's log end (what the in-sync rule measures
  // against replica_lag_time). A healthy follower of an idle partition shows up to its long-poll
  // wait here, since it is caught up again only at its next fetch.
  absl::Duration since_caught_up;
  bool in_sync = false;
  friend bool operator==(const FollowerLag&, const FollowerLag&) = default;
};

// A partition's replication as this broker has it.
struct ReplicationDescription {
  ReplicaRole role = ReplicaRole::kSole;
  LeaderEpoch leader_epoch;  // of the metadata view that set the role
  std::vector<int32_t> replicas;
  // The metadata's in-sync set as this broker last applied it (or, leading it, wrote it).
  std::vector<int32_t> isr;
  std::vector<FollowerLag> followers;  // when this broker leads it; by broker id
};

// A partition this broker leads (or holds alone), for the replication metrics.
struct PartitionReplication {
  std::string topic;
  int32_t partition = 0;
  int32_t min_insync_replicas = 1;
  ReplicationDescription replication;
};

// Produce requests waiting for the high watermark to pass their batch (acks all), by the end
// offset each needs. Guarded by the partition's mutex; callbacks run outside it.
class AckWaiters {
 public:
  using Callback = std::function<void(absl::Status)>;
  // Returns an id for Remove.
  uint64_t Add(int64_t needed_end, Callback done);
  // The callback of `id` (it is then removed), or none when it was released already.
  std::optional<Callback> Remove(uint64_t id);
  // Every waiter whose batch the high watermark `hw` covers.
  std::vector<Callback> Release(int64_t hw);
  std::vector<Callback> TakeAll();
  bool empty() const { return by_end_.empty(); }

 private:
  uint64_t next_id_ = 1;
  std::multimap<int64_t, std::pair<uint64_t, Callback>> by_end_;
  absl::flat_hash_map<uint64_t, int64_t> end_of_;
};

// A partition's replication state, guarded by the partition's mutex. The rules that
// move the high watermark and the in-sync set live here, free of threads and I/O, so they are
// unit-tested with a fake clock.
//
// Invariants: the high watermark is at most the least durable log end over the in-sync set
// (the leader's own included) — so every acknowledged record is durable on every in-sync
// replica, and any of them elected next has it; a follower's progress counts only once it has
// fetched at the current leader epoch with a log that agrees with the leader's.
struct ReplicaState {
  enum class Role {
    kSole,      // one replica (or a single node): the high watermark is the durable log end
    kLeader,    // leads a replicated partition
    kFollower,  // copies the leader's log
  };
  Role role = Role::kSole;
  int32_t self = 0;
  int32_t leader = 0;
  LeaderEpoch leader_epoch;  // of the view that set the role
  std::vector<int32_t> replicas;
  // The metadata's in-sync set, as of the view that set the role.
  std::vector<int32_t> view_isr;
  // Leader: an in-sync set being written to the metadata (one change at a time), and once
  // written, the metadata revision of the write: it counts until a view at least that recent
  // shows the outcome (an older view, applied late, must not undo it).
  std::optional<std::vector<int32_t>> pending_isr;
  int64_t pending_until_revision = 0;  // 0: the write's outcome is not known yet
  int64_t view_revision = 0;           // of the partition's state in the last view
  // Leader: the set the high watermark is computed over — the metadata's, plus any follower
  // whose addition is being written (Kafka's "maximal ISR": it counts from the moment the
  // leader decides to add it, so it holds every record acknowledged from then on; one being
  // removed still counts until the removal is written).
  std::vector<int32_t> isr;
  absl::flat_hash_map<int32_t, FollowerProgress> followers;  // leader: by broker id
  int64_t leader_high_watermark = 0;  // follower: the leader's, as last fetched
  // Leader: the payload bytes/s followers outside the in-sync set may copy (a reassignment's
  // throttle; 0: unthrottled), one bucket per partition, starting empty and holding at most a
  // second's worth.
  int64_t throttle_bytes_per_second = 0;
  double throttle_tokens = 0;
  absl::Duration throttle_refilled_at;

  // Takes the role a view names. Followers' progress restarts at a new epoch.
  // `revision` is the metadata revision of the partition's state in the view.
  void Assign(Role next_role, int32_t self_id, int32_t leader_id, LeaderEpoch epoch,
              std::vector<int32_t> replica_ids, std::vector<int32_t> in_sync, int64_t revision,
              absl::Duration now);

  // The high watermark the state allows with `durable_end` as the local durable log end.
  int64_t HighWatermark(int64_t durable_end) const;

  // Leader: a follower fetched from `offset` (already validated against the leader's log) while
  // the leader's log ends at `log_end`.
  void RecordFetch(int32_t follower, int64_t offset, int64_t log_end, absl::Duration now);

  // Leader: the in-sync set to write next, if it should change: followers not caught up for
  // longer than `lag_time` leave; one out of the set that reached the high watermark `hw`, and
  // at least `epoch_start` (the first offset of the current epoch), and was caught up within
  // `lag_time`, joins. nullopt: no change (or a change is pending).
  std::optional<std::vector<int32_t>> PlanIsr(int64_t hw, int64_t epoch_start,
                                              absl::Duration lag_time, absl::Duration now) const;
  bool InSync(int32_t broker) const;
  // What DescribeTopic reports, for a log spanning [log_start, log_end) at monotonic `now`.
  ReplicationDescription Describe(int64_t log_start, int64_t log_end, absl::Duration now) const;
  // Leader: the bytes `follower` may read now — unlimited (INT64_MAX) when unthrottled or in
  // sync; ChargeThrottle takes what it read (the bucket may go below zero by one record).
  int64_t ThrottleBudget(int32_t follower, absl::Duration now);
  void ChargeThrottle(int32_t follower, int64_t bytes);
  // Leader: `next` is being written; the union of it and the metadata's set counts until a
  // view shows the outcome.
  void BeginIsrChange(std::vector<int32_t> next);
  // The write's outcome: the metadata revision it was written at, or 0 when it was not (then
  // the metadata's set alone counts again).
  void EndIsrChange(int64_t written_revision);

 private:
  // isr = the metadata's set plus any member of the pending change.
  void UnionPending();

 public:
};

}  // namespace conduit::log_broker
