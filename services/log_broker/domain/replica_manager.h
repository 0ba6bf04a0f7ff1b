#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/runtime/runtime.h"
#include "common/time/clock.h"
#include "services/log_broker/domain/append_pipeline.h"
#include "services/log_broker/domain/broker_requests.h"
#include "services/log_broker/domain/cluster_view.h"
#include "services/log_broker/domain/log_store.h"
#include "services/log_broker/domain/topic_table.h"

namespace conduit::log_broker {

class ReplicaFetchWait;

struct ReplicaManagerOptions {
  // A follower not caught up for this long leaves the in-sync set.
  absl::Duration replica_lag_time = absl::Seconds(10);
  // Acks all: how long a produce waits for the high watermark after its append before it is
  // answered DEADLINE_EXCEEDED (outcome unknown).
  absl::Duration ack_timeout = absl::Seconds(30);
};

// The broker's replication (services/log_broker/README.md, "Replication"), over the partitions
// of a TopicTable: each partition's replica role from the applied view, the leader's side of a
// follower's fetch (validated against this log, the follower's progress moving the high
// watermark), the follower's side (what to fetch, applying the answer through the append
// pipeline), acks-all waits on the high watermark, and the leader's in-sync set changes.
// The per-partition state is PartitionLog's; this class orchestrates it.
//
// Thread-safe. Owns no threads: reads run on the broker's storage scope, the in-sync pass
// periodically on it (Start). Callbacks run on the scope's or the pipeline's threads.
class ReplicaManager {
 public:
  // Everything given must outlive the manager; the pipeline and scope are the broker's.
  ReplicaManager(TopicTable* topics, LogStore* store, AppendPipeline* pipeline,
                 runtime::Scope* scope, const time::Clock* clock, BrokerObserver* observer,
                 ReplicaManagerOptions options);

  // Starts the periodic in-sync pass (every replica_lag_time / 4; none when that is zero).
  void Start();
  // Stops it, before the ClusterMetadata goes.
  void Stop();

  // Leader side: a follower's fetch. Each item is validated (epochs, the follower's log against
  // this one); a valid fetch offset counts as the follower's durable log end, which may move the
  // high watermark and answer acks-all produces. Records up to the log end (not the high
  // watermark) are returned; with `max_wait`, waits until one of the partitions has records
  // past its fetch offset. `done` runs once, on a broker thread. RESOURCE_EXHAUSTED when the
  // read queue is full.
  absl::Status ReplicaFetch(int32_t follower, std::vector<ReplicaFetchItem> items,
                            int64_t max_bytes, absl::Duration max_wait, ReplicaFetchCallback done);

  // Follower side: what to ask broker `leader` for now — every partition the applied view has
  // this broker follow from it, from the local durable log end.
  std::vector<ReplicaFetchItem> FollowedPartitions(int32_t leader) const;
  // Applies the leader's answer: appends its records at their offsets (with their append times
  // and epochs, fsynced for a sync topic) or truncates as told, then takes the leader's high
  // watermark (up to the local durable end). `done` runs once that is durable.
  // FAILED_PRECONDITION when the partition is no longer followed at `leader_epoch`.
  absl::Status ApplyReplicaData(ReplicaFetchData data, LeaderEpoch leader_epoch,
                                std::function<void(absl::Status)> done);

  // Leader side: writes in-sync set changes the followers' progress calls for (a follower behind
  // for longer than replica_lag_time leaves; a caught-up one joins). Blocking (etcd round trips).
  void MaintainInSyncReplicas();
  // For metrics: every partition this broker leads (or holds alone), its replicas, in-sync set
  // and followers' lag, read under each partition's lock at one moment.
  std::vector<PartitionReplication> ReplicationSnapshot() const;

  // The produce path's part. UNAVAILABLE when a replicated partition has fewer in-sync replicas
  // than the topic needs; sets `*has_followers` for a partition this broker leads with followers.
  absl::Status CheckInSync(const TopicState& topic, int32_t partition, bool* has_followers) const;
  // Wraps a produce's callback so an acks-all request is answered once the high watermark covers
  // it (or with the indeterminate error: leadership moved, or ack_timeout passed).
  ProduceCallback AwaitReplication(std::shared_ptr<TopicState> topic, ProduceCallback done);
  // Takes the role the view gives this broker for the partition (leader, sole, follower);
  // acks-all produces waiting on a leadership that ended fail as indeterminate. `revision` is
  // the metadata revision of the partition's state in the view.
  void AssignRole(TopicState& topic, int32_t partition, const PartitionAssignment& a,
                  int64_t revision);

 private:
  friend class ReplicaFetchWait;

  TopicTable* const topics_;
  LogStore* const store_;
  AppendPipeline* const pipeline_;
  runtime::Scope* const scope_;
  const time::Clock* const clock_;
  BrokerObserver* const observer_;
  const ReplicaManagerOptions options_;
  std::atomic<uint64_t> next_waiter_id_{1};
  runtime::Scope::PeriodicId isr_task_ = 0;  // MaintainInSyncReplicas
};

}  // namespace conduit::log_broker
