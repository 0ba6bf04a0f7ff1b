#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/runtime/runtime.h"
#include "common/time/clock.h"
#include "services/log_broker/domain/append_pipeline.h"
#include "services/log_broker/domain/cluster_view.h"
#include "services/log_broker/domain/id_allocator.h"
#include "services/log_broker/domain/log_cleaner.h"
#include "services/log_broker/domain/log_store.h"
#include "services/log_broker/domain/producer_registry.h"
#include "services/log_broker/domain/topic_state.h"
#include "services/log_broker/domain/ids.h"

namespace conduit::log_broker {

struct ProduceRecordArgs {
  std::optional<int32_t> partition;
  RecordData data;
};

// The idempotent-producer fields of a produce request.
struct ProducerArgs {
  ProducerId producer_id;
  int32_t epoch = 0;
  std::vector<std::pair<int32_t, int32_t>> base_sequences;  // (partition, base sequence)
};

struct FetchArgs {
  std::string topic;
  int32_t partition = 0;
  int64_t offset = 0;
  std::optional<int32_t> max_records;  // unset: kDefaultFetchRecords
  std::optional<int32_t> max_bytes;    // unset: kDefaultFetchBytes
  absl::Duration max_wait = absl::ZeroDuration();
};

struct FetchResult {
  std::vector<StoredRecord> records;
  int64_t high_watermark = 0;
  int64_t log_start_offset = 0;
  // Where to fetch next: one past the last record returned, or past a compacted-away gap.
  int64_t next_offset = 0;
};
using FetchCallback = std::function<void(absl::StatusOr<FetchResult>)>;

struct PartitionDescription {
  int32_t partition = 0;
  // Log start, log end (next_offset), count, bytes, max event time, epoch of the last append.
  PartitionMeta meta;
  int64_t high_watermark = 0;
  int32_t leader_epoch = 0;  // the epoch new appends get
  int32_t leader = 0;        // in a cluster, the applied view's leader (kNoBroker: offline)
  absl::Time oldest_append_time = absl::InfinitePast();
  absl::Time newest_append_time = absl::InfinitePast();
};

struct TopicDescription {
  TopicMeta meta;
  std::vector<PartitionDescription> partitions;
};

class Broker;

// A fetch waiting for records (long-poll). Cancel() ends the wait early: the fetch then
// completes at once with what is available (usually nothing). Thread-safe; no-op once the
// fetch has completed.
class PendingFetch {
 public:
  void Cancel() { Fire(); }

 private:
  friend class Broker;
  void Fire();  // first caller (append, deadline or Cancel) starts the read

  Broker* broker_ = nullptr;
  std::shared_ptr<TopicState> topic_;  // keeps part_ alive
  Partition* part_ = nullptr;
  uint64_t waiter_id_ = 0;
  std::atomic<runtime::Scope::TimerId> timer_{0};
  std::function<void()> read_;
  std::atomic<bool> fired_{false};
};

enum class OffsetQuery { kEarliest, kLatest, kTimestamp };

struct BrokerOptions {
  PipelineOptions pipeline;
  CleanerOptions cleaner;
  size_t max_queued_reads = 4096;  // blocking work queued or running on the storage pool
  // Period of the background retention / compaction / dedup-expiry pass. Zero: none; call
  // RunMaintenance() (tests, with a FakeClock).
  absl::Duration maintenance_interval = absl::Seconds(5);
  // Where topic and producer ids come from (must outlive the broker); null: a LocalIdAllocator
  // the broker owns (single node).
  IdAllocator* ids = nullptr;
  // Cluster mode (must outlive the broker): topics are created, changed and deleted through the
  // cluster's metadata, and this broker serves only the partitions the applied view says it
  // leads. Null: a single node.
  ClusterMetadata* cluster = nullptr;
};

// The log broker's rules: topics, record placement, offset assignment (through the
// AppendPipeline's group commit), reads with long-poll, offsets. No gRPC, protobuf or RocksDB
// here; persistence is a LogStore.
//
// Thread-safe. Owns no threads: blocking work runs on the runtime's storage pool, long-poll
// timeouts and the maintenance pass on its scheduler (one Scope). Callbacks (produce, fetch)
// run on those threads or the group-commit engine's and must not block.
class Broker {
 public:
  // `runtime` (and its clock) must outlive the broker.
  Broker(LogStore* store, runtime::Runtime* runtime, BrokerObserver* observer,
         BrokerOptions options = {});
  ~Broker();  // finishes queued appends and reads, then stops

  // Loads topics and recovers each partition's offsets from the store. Call once, first.
  absl::Status Recover();

  // INVALID_ARGUMENT for a bad name, partition count, replication factor or config;
  // ALREADY_EXISTS for a taken name. In a cluster, through the metadata (any broker), answering
  // once the partitions are placed.
  absl::StatusOr<TopicMeta> CreateTopic(const std::string& name, int32_t partitions,
                                        const TopicConfigPatch& config,
                                        int32_t replication_factor = 1);
  // Changes the set fields of a topic's config. NOT_FOUND, INVALID_ARGUMENT.
  absl::StatusOr<TopicMeta> UpdateTopicConfig(const std::string& name,
                                              const TopicConfigPatch& patch);
  // NOT_FOUND when absent. Produce and fetch requests in flight for the topic fail NOT_FOUND.
  absl::Status DeleteTopic(const std::string& name);
  std::vector<TopicMeta> ListTopics() const;

  // Runs blocking work (topic changes, timestamp lookups) on the storage executor, so request
  // threads never block on RocksDB. RESOURCE_EXHAUSTED when the executor's queue is full.
  absl::Status RunBlocking(std::function<void()> fn);
  absl::StatusOr<TopicDescription> DescribeTopic(const std::string& name) const;

  // Validates and places every record, then queues the request for group commit; `done` gets
  // the offsets once durable. Returns an error (and never calls `done`) when the request is
  // refused up front: NOT_FOUND unknown topic/partition, INVALID_ARGUMENT bad record,
  // RESOURCE_EXHAUSTED backpressure, UNAVAILABLE broker stopped.
  // With `producer`, the request is idempotent: see ProduceRequest in log.proto.
  absl::Status Produce(const std::string& topic, std::vector<ProduceRecordArgs> records,
                       std::optional<ProducerArgs> producer, ProduceCallback done);

  // The cluster's metadata made this broker the leader of topic/partition at `epoch`: appends
  // from now on are stamped with it. FAILED_PRECONDITION when `epoch` is below the partition's
  // current one (epochs never go back); NOT_FOUND for an unknown partition. The epoch is
  // durable with the next append (a restart before one recovers the previous epoch; the
  // cluster's metadata then names the current one again).
  absl::Status SetLeaderEpoch(const std::string& topic, int32_t partition, int32_t epoch);

  // Where leader epoch `epoch` ends in this broker's copy of the partition (KIP-101/279): the
  // largest epoch ≤ `epoch` that appended here, and the first offset after its records (the
  // start of the next epoch, or the log end). {-1, -1} when no epoch ≤ `epoch` appended here.
  struct EpochEnd {
    int32_t epoch = -1;
    int64_t end_offset = -1;
    friend bool operator==(const EpochEnd&, const EpochEnd&) = default;
  };
  absl::StatusOr<EpochEnd> OffsetForLeaderEpoch(const std::string& topic, int32_t partition,
                                                int32_t epoch) const;

  // The cluster as this broker sees it. A single node is broker 0 at `self_address`, the
  // controller and leader of every partition (one replica, its current leader epoch).
  ClusterView Metadata(const std::string& self_address) const;
  int32_t broker_id() const { return cluster_ != nullptr ? cluster_->self() : 0; }
  std::string cluster_name() const { return cluster_ != nullptr ? cluster_->cluster_name() : ""; }

  // Cluster mode: makes the local state follow a new view of the metadata, then serves by it.
  // Every topic of the view exists locally (with the view's topic id; a local topic of the
  // same name and another id, or gone from the view, is deleted), configs follow the view, and
  // each partition this broker leads takes the view's leader epoch. Blocking (column families
  // are created and dropped); one call at a time. A view older than the applied one is ignored.
  absl::Status ApplyView(std::shared_ptr<const ClusterView> view);

  // A producer id and epoch for idempotent produce. Blocking (a synced write).
  absl::StatusOr<ProducerInfo> InitProducer(const std::string& name);

  // One pass of retention, compaction and dedup expiry over every topic (see LogCleaner).
  // Blocking; the background thread calls it every maintenance_interval.
  void RunMaintenance();

  // Reads from `offset`; with max_wait, waits for records when none are available yet.
  // Returns an error up front (never calling `done`): NOT_FOUND, INVALID_ARGUMENT,
  // OUT_OF_RANGE naming the valid range, RESOURCE_EXHAUSTED when the read queue is full.
  // When the fetch waits and `on_wait` is given, it is called (before `done` can be) with a
  // handle that can end the wait early.
  absl::Status Fetch(const FetchArgs& args, FetchCallback done,
                     std::function<void(std::shared_ptr<PendingFetch>)> on_wait = nullptr);

  // Offsets per partition (all when `partitions` is empty): earliest is the log start, latest
  // the high watermark, timestamp the first offset whose append time is >= `at` (the high
  // watermark when there is none). Blocking: reads the store for kTimestamp.
  absl::StatusOr<std::vector<RecordPosition>> ListOffsets(const std::string& topic,
                                                          const std::vector<int32_t>& partitions,
                                                          OffsetQuery query, absl::Time at);

 private:
  friend class PendingFetch;

  // One topic's state from the store: each partition's offsets, epoch and append times, its
  // producer states and dedup window.
  absl::StatusOr<std::shared_ptr<TopicState>> RecoverTopic(const TopicMeta& meta);
  absl::StatusOr<std::shared_ptr<TopicState>> FindTopic(const std::string& name) const;
  absl::Status CheckPartition(const TopicState& topic, int32_t partition) const;
  // Cluster mode: OK when this broker leads the partition at the applied view's epoch (and, for
  // a write, its lease is confirmed); else the not-leader FAILED_PRECONDITION naming the leader,
  // or UNAVAILABLE (offline, not placed yet, epoch not applied yet, lease unconfirmed).
  // Always OK on a single node.
  absl::Status CheckServing(const TopicState& topic, int32_t partition, bool write) const;
  std::shared_ptr<const ClusterView> AppliedView() const;
  // A keyless record's partition: round-robin, over the partitions this broker leads in a
  // cluster.
  int32_t StickyPartition(TopicState& topic) const;
  // ApplyView's steps.
  absl::Status MaterializeTopic(const TopicAssignment& assignment)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(admin_mu_);
  absl::Status RemoveTopic(std::shared_ptr<TopicState> topic)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(admin_mu_);
  absl::StatusOr<TopicMeta> UpdateClusterTopicConfig(const std::string& name,
                                                     const TopicConfigPatch& patch);
  static absl::StatusOr<ProducerStamp> CheckProducerArgs(const ProducerArgs& producer,
                                                         const std::vector<RoutedRecord>& routed);
  void StartRead(std::shared_ptr<TopicState> topic, FetchArgs args, FetchCallback done);

  LogStore* const store_;
  const time::Clock* const clock_;
  BrokerObserver* const observer_;
  const BrokerOptions options_;

  absl::Mutex admin_mu_ ABSL_ACQUIRED_BEFORE(mu_);  // serializes CreateTopic / DeleteTopic
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<TopicState>> topics_ ABSL_GUARDED_BY(mu_);
  std::atomic<uint64_t> next_waiter_id_{1};
  mutable absl::Mutex view_mu_;
  std::shared_ptr<const ClusterView> view_ ABSL_GUARDED_BY(view_mu_);  // cluster mode

  std::vector<std::shared_ptr<TopicState>> TopicsSnapshot() const;

  std::unique_ptr<LocalIdAllocator> local_ids_;  // when options.ids is null
  IdAllocator* const ids_;
  ClusterMetadata* const cluster_;  // null: single node
  ProducerRegistry producers_;
  // Destroyed in reverse order, after the destructor has stopped the maintenance pass: the
  // pipeline (completing appends and waking waiters), then the scope (running pending
  // long-poll timeouts and waiting for every read they start).
  runtime::Scope scope_;
  AppendPipeline pipeline_;
  LogCleaner cleaner_;
  runtime::Scope::PeriodicId maintenance_ = 0;  // 0 when maintenance_interval is 0
};

}  // namespace conduit::log_broker
