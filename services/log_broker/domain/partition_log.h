#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "services/log_broker/domain/broker_requests.h"
#include "services/log_broker/domain/cluster_view.h"
#include "services/log_broker/domain/dedup_window.h"
#include "services/log_broker/domain/ids.h"
#include "services/log_broker/domain/log_store.h"
#include "services/log_broker/domain/producer_state.h"
#include "services/log_broker/domain/replica_state.h"

namespace conduit::log_broker {

// One partition of a topic on this broker: everything about it that moves with it when another
// broker leads it — its offsets, leader epoch and epoch cache, append clock, producer state,
// dedup window, the reads waiting on it and its replication state (role, in-sync set, followers'
// progress, produce requests waiting for acks all).
//
// Two owners. The writer fields (next_offset, producers, dedup) belong to the append writer
// thread (appends and maintenance are serialised there). Everything else is behind the
// partition's own lock, reached only through the methods below, and changes only after a write
// is durable.
//
// Invariants: log start <= high watermark <= log end; the high watermark never goes back
// (except to a follower's truncation point, and to the start of a log begun again); append times
// never go back within the partition; every record carries the leader epoch under which it was
// appended, and epochs never go back along the log. With one replica the high watermark is the
// durable log end; with replication it is the least durable log end over the in-sync replicas
// (ReplicaState).
//
// Methods that let waiters proceed add them to `wake`, to be run by the caller after the lock is
// released. Thread-safe.
class PartitionLog {
 public:
  using Wake = std::vector<std::function<void()>>;

  // ---- Writer thread only -------------------------------------------------------------------
  // The offset the next appended record gets: the log end between batches; runs ahead of it
  // while a batch is being written.
  int64_t next_offset = 0;
  // Idempotent producers seen in this partition, by producer id.
  absl::flat_hash_map<ProducerId, ProducerPartitionState> producers;
  // Event ids within the dedup window.
  DedupWindow dedup;

  // ---- Recovery -----------------------------------------------------------------------------
  // The state the store recovered (one replica: the high watermark is the log end). Records
  // written before the epoch cache existed count as appended at epoch 0.
  void Recover(const PartitionMeta& meta, absl::Time first_append, absl::Time last_append,
               std::map<LeaderEpoch, int64_t> epoch_starts);

  // ---- Reads --------------------------------------------------------------------------------
  struct Extent {
    int64_t log_start = 0;
    int64_t high_watermark = 0;
    int64_t log_end = 0;
    int64_t bytes = 0;
  };
  Extent extent() const;
  LeaderEpoch leader_epoch() const;
  // Where leader epoch `epoch` ends here (KIP-101/279): the largest epoch <= `epoch` that
  // appended here and the first offset after its records. {-1, -1} when none did.
  struct EpochEnd {
    LeaderEpoch epoch = kNoLeaderEpoch;
    int64_t end_offset = -1;
    friend bool operator==(const EpochEnd&, const EpochEnd&) = default;
  };
  EpochEnd EndOfEpoch(LeaderEpoch epoch) const;
  // The epoch of the last record below `end`; -1 when none.
  LeaderEpoch EpochBefore(int64_t end) const;
  // For DescribeTopic: `leader` is the applied view's (0 on a single node).
  PartitionDescription Describe(int32_t partition, int32_t leader, absl::Duration now) const;
  // Where this broker leads the partition or holds it alone (and it is placed): its
  // replication as metrics show it.
  std::optional<ReplicationDescription> LedReplication(absl::Duration now) const;

  // ---- Long-polls ---------------------------------------------------------------------------
  // Keeps `wake` (under `id`) until the high watermark moves, unless it is already past
  // `offset` or `ready()` holds; both are checked under the lock, so whoever changes what
  // `ready` reads and then calls WakeWaiters() is never missed. Returns whether to read now.
  bool AwaitHighWatermarkPast(int64_t offset, uint64_t id, const std::function<bool()>& ready,
                              std::function<void()> wake);
  void ForgetWaiter(uint64_t id);
  // Runs every waiter now (their reads then see what changed, e.g. the topic deleted).
  void WakeWaiters();
  // A follower's fetch: keeps `wake` until the log end moves unless `skip()`; returns whether
  // the log already ends past `offset`.
  bool AwaitLogEndPast(int64_t offset, uint64_t id, const std::function<bool()>& skip,
                       std::function<void()> wake);
  void ForgetReplicaWaiter(uint64_t id);

  // ---- Appends (the append pipeline) ---------------------------------------------------------
  // What a batch starts from.
  struct AppendBase {
    PartitionMeta meta;
    LeaderEpoch leader_epoch;
    LeaderEpoch last_started_epoch = kNoLeaderEpoch;  // the newest epoch in the epoch cache
    absl::Time oldest_append_time;
    absl::Time last_append_time;
  };
  AppendBase BeginAppend() const;
  // Whether the partition is a follower here now (it takes no produce).
  bool IsFollower() const;
  // Whether it leads followers (a batch is published to them before its fsync).
  bool HasFollowers() const;
  // While a batch published before its fsync is being synced: the high watermark stays below
  // the log end as it was. Release lifts that (the batch is durable); returns the high watermark.
  void HoldDurableEnd();
  int64_t ReleaseDurableEnd(Wake* wake);
  // A durable batch, made visible. Returns the high watermark.
  struct Published {
    PartitionMeta meta;
    absl::Time oldest_append_time;
    std::optional<absl::Time> appended_at;    // set when the batch appended records
    std::map<LeaderEpoch, int64_t> epoch_starts;  // epochs the batch started
    std::optional<int64_t> truncated_to;      // a follower's truncation
    bool restarted = false;                   // ... emptying the log to start over there
  };
  int64_t Publish(const Published& batch, Wake* wake);

  // ---- Leadership ---------------------------------------------------------------------------
  // Takes `epoch` for new appends unless it is below the current one; returns the epoch before.
  LeaderEpoch RaiseLeaderEpoch(LeaderEpoch epoch);
  // What the serving check reads, at one moment.
  struct Serving {
    LeaderEpoch leader_epoch;
    bool follower = false;
    // The applied view has this broker lead the partition (alone or with followers) at the
    // partition's own epoch: it serves reads (and, when it may lead, writes).
    bool leads = false;
  };
  Serving serving() const;
  // Takes the role the view gives this broker (`a` at metadata `revision`). Returns the acks-all
  // produces whose leadership ended (to be failed as indeterminate).
  std::vector<AckWaiters::Callback> AssignRole(ReplicaState::Role role, int32_t self,
                                               const PartitionAssignment& a, int64_t revision,
                                               absl::Duration now, Wake* wake);

  // ---- Replication, leader side ---------------------------------------------------------------
  enum class AckWait { kCovered, kWaiting, kNotLeader };
  // An acks-all produce that needs the high watermark at `end`: already covered, kept (as `*id`)
  // until it is, or refused because this broker does not lead the partition.
  AckWait AwaitAck(int64_t end, AckWaiters::Callback done, uint64_t* id);
  void CancelAck(uint64_t id);
  // The in-sync replicas when this broker leads the partition with followers; nullopt otherwise.
  std::optional<int32_t> LeaderInSyncCount() const;
  // A follower's fetch of this partition: checks its epochs and its log against this one
  // (filling `answer`'s offsets and, on divergence, where to truncate) and records its
  // progress, which moves the high watermark when `may_lead`.
  absl::Status ValidateFollowerFetch(const std::string& topic, int32_t follower,
                                     const ReplicaFetchItem& item, bool may_lead,
                                     absl::Duration now, ReplicaFetchData* answer, Wake* wake);
  int64_t ThrottleBudget(int32_t follower, absl::Duration now);
  void ChargeThrottle(int32_t follower, int64_t bytes);
  // The in-sync set change the followers' progress calls for, begun (nullopt: none, or this
  // broker does not lead at `leader_epoch`). EndIsrChange with the metadata revision written
  // (0: not written).
  std::optional<std::vector<int32_t>> PlanIsrChange(LeaderEpoch leader_epoch,
                                                    absl::Duration replica_lag_time,
                                                    absl::Duration now);
  void EndIsrChange(int64_t revision, Wake* wake);

  // ---- Replication, follower side -----------------------------------------------------------
  struct FollowerPosition {
    int64_t log_end = 0;
    LeaderEpoch last_epoch = kNoLeaderEpoch;  // of the last record; none for an empty log
  };
  FollowerPosition follower_position() const;
  // The leader's high watermark, taken up to the local durable end. False (nothing changed) when
  // the partition is no longer followed at `leader_epoch`.
  bool TakeLeaderHighWatermark(LeaderEpoch leader_epoch, int64_t leader_high_watermark, Wake* wake);

 private:
  LeaderEpoch EpochBeforeLocked(int64_t end) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Moves the high watermark as far as the replication state allows (never back), adding the
  // long-polls and acknowledgements that can now proceed to `wake`.
  void AdvanceHighWatermark(Wake* wake) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void TakeWaiters(Wake* wake) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  // Durable bookkeeping: log start, log end, counts, leader epoch of the last append. Written
  // with every change to the partition's records.
  PartitionMeta meta_ ABSL_GUARDED_BY(mu_);
  // Readers see offsets below it: Fetch, Tail and ListOffsets stop here.
  int64_t high_watermark_ ABSL_GUARDED_BY(mu_) = 0;
  // Where this broker's own copy stops being durable while a sync batch it has published (so
  // that followers may copy it) is being fsynced; the high watermark stays below it. No limit
  // otherwise.
  int64_t durable_end_ ABSL_GUARDED_BY(mu_) = std::numeric_limits<int64_t>::max();
  // The epoch appends are stamped with: 0 on a single node; in a cluster the epoch at which the
  // metadata made this broker the leader.
  LeaderEpoch leader_epoch_ ABSL_GUARDED_BY(mu_);
  // The leader-epoch cache: each epoch that appended here → the first offset it appended.
  // Durable with that first record.
  std::map<LeaderEpoch, int64_t> epoch_starts_ ABSL_GUARDED_BY(mu_);
  absl::Time oldest_append_time_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  absl::Time last_append_time_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  // Long-polls and tails waiting for the high watermark to move, by waiter id.
  absl::flat_hash_map<uint64_t, std::function<void()>> waiters_ ABSL_GUARDED_BY(mu_);
  // Replication: the role, in-sync set and followers' progress; produce requests waiting for
  // the high watermark (acks all); followers' fetches waiting for the log end to move.
  ReplicaState replica_ ABSL_GUARDED_BY(mu_);
  AckWaiters acks_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, std::function<void()>> replica_waiters_ ABSL_GUARDED_BY(mu_);
};

}  // namespace conduit::log_broker
