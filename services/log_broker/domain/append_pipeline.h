#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/commit/group_commit.h"
#include "common/runtime/runtime.h"
#include "common/time/clock.h"
#include "services/log_broker/domain/log_store.h"
#include "services/log_broker/domain/producer_registry.h"
#include "services/log_broker/domain/topic_state.h"
#include "services/log_broker/domain/ids.h"

namespace conduit::log_broker {

struct RoutedRecord {
  int32_t partition = 0;
  RecordData data;
};

// The idempotent-producer part of a produce request.
struct ProducerStamp {
  ProducerId producer_id;
  int32_t epoch = 0;
  absl::flat_hash_map<int32_t, int32_t> base_sequences;  // partition → base sequence
};

struct ProduceResult {
  std::vector<RecordPosition> positions;  // request order
  absl::Time append_time;
};

using ProduceCallback = std::function<void(absl::StatusOr<ProduceResult>)>;

struct PipelineOptions {
  // Cluster mode: an idempotent producer's epoch is learnt from its requests (it was
  // initialised through the cluster's metadata), never refused as unknown.
  bool learn_producer_epochs = false;
  // Produce requests are refused with RESOURCE_EXHAUSTED beyond this many queued bytes.
  int64_t max_queued_bytes = 256 << 20;
  // Upper bound on one group-committed WriteBatch.
  int64_t max_batch_bytes = 16 << 20;
  // An idempotent request that arrives ahead of an earlier batch of its producer and partition
  // (a sequence gap: a pipelining producer's requests are handled on several gRPC threads, so
  // the later one can reach the writer first) waits up to this long for that batch, then is
  // refused with ABORTED. Zero: refused at once.
  absl::Duration reorder_wait = absl::Milliseconds(250);
};

// The batch the writer thread is building. Maintenance work (retention, compaction, dedup
// expiry) adds its changes here, so they are atomic with, and ordered among, appends, and see
// the partitions exactly as the appends before them in the batch left them. Writer thread only.
class BatchContext {
 public:
  struct Staged {
    TopicState* topic = nullptr;
    int32_t partition = 0;
    PartitionMeta meta;                 // as it will be after this batch
    absl::Time oldest_append_time;      // likewise
    // This batch's append time in the partition: the batch's clock, but never before the
    // partition's last append (a partition's append times never go back, whatever the clock
    // does or whichever broker appended before).
    absl::Time append_time;
    LeaderEpoch leader_epoch;                         // stamped on the records this batch appends
    LeaderEpoch last_started_epoch = kNoLeaderEpoch;  // the newest in the partition's epoch cache
    std::map<LeaderEpoch, int64_t> epoch_starts;      // epochs this batch starts → first offset
    std::optional<int64_t> truncated_to;      // a follower's truncation in this batch
    bool restarted = false;                   // ... emptying the log to start over there
    int64_t next_offset_before = 0;     // to roll back if the write fails
    bool appended = false;
  };

  explicit BatchContext(absl::Time now) : now_(now) {}

  absl::Time now() const { return now_; }
  WriteSet& writes() { return writes_; }
  // The partition's state as of this point in the batch, for reading and change.
  Staged& Stage(TopicState* topic, int32_t partition);
  // Runs after the batch is durable (writer thread).
  void OnCommit(std::function<void()> fn) { on_commit_.push_back(std::move(fn)); }
  // The batch must be fsynced before it counts (a follower's copy of a sync topic).
  void RequireSync() { sync_ = true; }

 private:
  friend class AppendPipeline;
  absl::Time now_;
  bool sync_ = false;
  WriteSet writes_;
  absl::flat_hash_map<PartitionLog*, Staged> staged_;
  absl::flat_hash_map<std::pair<PartitionLog*, std::string>, DedupEntry> dedup_;
  struct StagedProducer {
    TopicState* topic = nullptr;
    int32_t partition = 0;
    ProducerPartitionState state;
  };
  absl::flat_hash_map<std::pair<PartitionLog*, ProducerId>, StagedProducer> producers_;
  std::vector<std::function<void()>> on_commit_;
};

// Work for the writer thread other than appends: `build` adds to the batch; `done` gets the
// write's status.
struct MaintenanceOp {
  std::shared_ptr<TopicState> topic;  // null for the pipeline's own work
  std::function<void(BatchContext&)> build;
  std::function<void(absl::Status)> done;
};

// The broker's use of the group-commit engine (common/commit/group_commit.h). Produce requests
// queue there; for each batch it takes (up to max_batch_bytes), the writer thread applies the
// idempotence and dedup rules, assigns offsets per partition in arrival order, writes the lot
// with one LogStore::Write (one WriteBatch, one WAL fsync when any topic in it is `sync`), and
// only then publishes the new partition state and wakes waiters. The engine's completion thread
// answers the requests. Periodic work on the broker's scope fsyncs the WAL for `interval`
// topics.
//
// A write the store refuses because the disk is full (RESOURCE_EXHAUSTED, nothing written)
// leaves offsets unassigned and answers the batch's requests with that status; the next batch
// tries again. Any other failed write also leaves offsets unassigned (nothing was acknowledged)
// but stops the pipeline: later produces get UNAVAILABLE until restart, because the store's
// state is then unknown.
//
// Thread-safe.
class AppendPipeline {
 public:
  // The interval fsync runs as periodic work on `scope`, which must outlive the pipeline.
  AppendPipeline(LogStore* store, BrokerObserver* observer, runtime::Scope* scope,
                 ProducerRegistry* producers, PipelineOptions options);
  ~AppendPipeline();  // completes queued requests and stops the interval fsync

  // Queues a request; `done` runs on the writer thread (an answer that needs no write) or the
  // completion thread. RESOURCE_EXHAUSTED (without queuing) when too much is queued or the disk
  // is full; UNAVAILABLE after a storage failure or during shutdown.
  absl::Status Submit(std::shared_ptr<TopicState> topic, std::vector<RoutedRecord> records,
                      std::optional<ProducerStamp> stamp, int64_t bytes, ProduceCallback done);

  // Queues maintenance work (never refused for backpressure; UNAVAILABLE when stopped).
  absl::Status SubmitMaintenance(MaintenanceOp op);

  // Replication, follower side (append_replica.cc). Appends the leader's records at their own
  // offsets, append times and epochs (fsynced before `done` for a sync topic), in the same group
  // commit as everything else; FAILED_PRECONDITION in `done` when they do not follow the local
  // log end (a fetch answered after a truncation).
  absl::Status SubmitReplicated(std::shared_ptr<TopicState> topic, int32_t partition,
                                std::unique_ptr<ReplicaRecords> records,
                                std::function<void(absl::Status)> done);
  // Cuts the partition's log back to `offset` (records, bookkeeping, epoch cache), or, when
  // `offset` is past the log end, empties it to start over there (the leader's log start).
  absl::Status SubmitTruncate(std::shared_ptr<TopicState> topic, int32_t partition,
                              int64_t offset, std::function<void(absl::Status)> done);

  // Runs `fn` while no batch is being written (used to delete a topic between batches).
  void RunExclusive(const std::function<void()>& fn);

  // Lowers the background fsync period to at most `interval` (for `interval` topics).
  void RequestSyncEvery(absl::Duration interval);

 private:
  struct Outcome {
    // Answered on the writer thread (nothing to write), or waiting for the write (appended
    // something, or maintenance); kUnseen if the engine never handed it to WriteBatch.
    enum State { kUnseen, kAnswered, kLive } state = kUnseen;
    ProduceResult result;
  };
  struct Pending {
    std::shared_ptr<TopicState> topic;
    std::vector<RoutedRecord> records;
    std::optional<ProducerStamp> stamp;
    ProduceCallback done;
    int64_t bytes = 0;  // what it counts against the queue's byte cap (Submit's `bytes`)
    std::optional<MaintenanceOp> maintenance;
    Outcome outcome;
    // Set when the request is first parked after a sequence gap (append_reorder.cc), on the
    // clock's monotonic reading: it is refused if its turn has not come by then.
    std::optional<absl::Duration> reorder_deadline;

    // Answers at once, on the writer thread.
    void Answer(absl::StatusOr<ProduceResult> r) {
      outcome.state = Outcome::kAnswered;
      done(std::move(r));
    }
  };

  // The interval fsync's periodic work: syncs the WAL if a write since the last pass did not.
  void SyncWalIfNeeded();
  absl::Status WriteBatch(std::vector<Pending>& batch) ABSL_LOCKS_EXCLUDED(write_mu_);
  // Builds the batch's WriteSet: each request's rules, then the staged partition and producer
  // state.
  void BuildBatch(std::vector<Pending>& batch, BatchContext& ctx, bool* sync, int* requests)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  // Whether a partition of the batch leads followers (its sync batch is published before its
  // fsync, see WriteBatch).
  static bool HasFollowers(BatchContext& ctx);
  // Holds each partition's high watermark at its log end before the batch, until
  // ReleaseDurableEnds (after the fsync) lets it advance over the batch.
  static void HoldDurableEnds(BatchContext& ctx);
  void ReleaseDurableEnds(BatchContext& ctx);
  // Publishes a written batch (durable, or with its high watermarks held until it is):
  // producer and dedup state, partition state, waiters.
  void Publish(BatchContext& ctx);
  // Applies one produce request to the batch; answers it at once when nothing is appended
  // (error, or every record a duplicate).
  void AddProduce(Pending& p, BatchContext& ctx, bool* sync)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  // AddProduce's steps (append_produce.cc). The idempotent-producer check, one verdict per
  // partition of `counts` (records per partition): the original batch of each partition when
  // the request retries one already appended, an empty map when it is new, or the status to
  // answer with. Sets *answered_from_batch when it read producer state staged in `ctx`.
  absl::StatusOr<absl::flat_hash_map<int32_t, const ProducerBatch*>> CheckSequences(
      const Pending& p, BatchContext& ctx, const absl::flat_hash_map<int32_t, int32_t>& counts,
      bool* answered_from_batch) const;
  // Stages every record that is not an event-id duplicate within the dedup window, filling the
  // request's positions (and, for an idempotent producer, `batches`). Returns whether any
  // record was appended.
  bool AppendRecords(Pending& p, BatchContext& ctx, const TopicConfig& config,
                     absl::flat_hash_map<int32_t, ProducerBatch>* batches,
                     bool* answered_from_batch);
  // The entry of `event_id` younger than the dedup window, staged in `ctx` or durable; nullptr
  // when none. Sets *answered_from_batch when the event id was staged in `ctx`.
  static const DedupEntry* FindRecentDuplicate(BatchContext& ctx, PartitionLog* part,
                                               const TopicConfig& config,
                                               const std::string& event_id,
                                               bool* answered_from_batch);
  // Records the request's batch in each partition's staged producer state.
  static void StageProducerBatches(const Pending& p, BatchContext& ctx,
                                   const absl::flat_hash_map<int32_t, int32_t>& counts,
                                   absl::flat_hash_map<int32_t, ProducerBatch> batches);
  // A follower's copy of an idempotent batch, complete once its last record (at
  // `last_offset`) is staged: recorded in the partition's producer state.
  static void StageReplicatedBatch(BatchContext& ctx, TopicState* topic, int32_t partition,
                                   const ProducerTag& tag, int64_t last_offset);
  // Requests held back after a sequence gap (append_reorder.cc). Park moves `p` (refused with
  // `gap` by CheckSequences) into parked_ and leaves it answered in the batch; false when it may
  // not wait (a request over several partitions, its wait over, or the caps reached).
  bool Park(Pending& p, const absl::Status& gap) ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  // After `p` staged batches of its producer: the requests parked behind them go to the end of
  // `batch`, to be checked again in this batch (in sequence order; one still early parks again).
  void Unpark(const Pending& p, std::vector<Pending>& batch)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  // Refuses the parked requests whose wait is over by `now`, a monotonic reading (a maintenance
  // op, every reorder_wait / 2).
  void ExpireParked(absl::Duration now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  // Engine completion thread: the outcome of the write, for requests still waiting on it.
  void Complete(Pending& p, const absl::Status& outcome);

  LogStore* const store_;
  BrokerObserver* const observer_;
  const time::Clock* const clock_;
  ProducerRegistry* const producers_;
  const PipelineOptions options_;

  // Held by WriteBatch (uncontended: one writer thread).
  absl::Mutex write_mu_ ABSL_ACQUIRED_BEFORE(sync_mu_);

  // Parked requests by (partition, producer), each list in arrival order. Their bytes left the
  // engine's queue accounting, so they have caps of their own (append_reorder.cc).
  struct Parked {
    Pending pending;
    absl::Status gap;  // the answer when its wait is over
  };
  using ProducerKey = std::pair<PartitionLog*, ProducerId>;
  absl::flat_hash_map<ProducerKey, std::vector<Parked>> parked_ ABSL_GUARDED_BY(write_mu_);
  int64_t parked_bytes_ ABSL_GUARDED_BY(write_mu_) = 0;
  std::atomic<int> parked_requests_{0};  // read without the lock by the expiry task
  runtime::Scope::PeriodicId reorder_task_ = 0;

  // The interval fsync: periodic work on scope_, restarted when its period is lowered.
  runtime::Scope* const scope_;
  absl::Mutex sync_task_mu_ ABSL_ACQUIRED_BEFORE(sync_mu_);  // held while (re)starting it
  absl::Duration sync_every_ ABSL_GUARDED_BY(sync_task_mu_) = absl::InfiniteDuration();
  runtime::Scope::PeriodicId sync_task_ ABSL_GUARDED_BY(sync_task_mu_) = 0;
  absl::Mutex sync_mu_;
  bool unsynced_ ABSL_GUARDED_BY(sync_mu_) = false;

  std::unique_ptr<commit::GroupCommit<Pending>> engine_;  // reset first in the destructor
};

}  // namespace conduit::log_broker
