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
#include "services/log_broker/domain/broker_requests.h"
#include "services/log_broker/domain/cluster_view.h"
#include "services/log_broker/domain/id_allocator.h"
#include "services/log_broker/domain/ids.h"
#include "services/log_broker/domain/local_cluster.h"
#include "services/log_broker/domain/log_cleaner.h"
#include "services/log_broker/domain/log_store.h"
#include "services/log_broker/domain/producer_registry.h"
#include "services/log_broker/domain/replica_manager.h"
#include "services/log_broker/domain/topic_state.h"
#include "services/log_broker/domain/topic_table.h"

namespace conduit::log_broker {

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
  PartitionLog* part_ = nullptr;
  uint64_t waiter_id_ = 0;
  std::atomic<runtime::Scope::TimerId> timer_{0};
  std::function<void()> read_;
  std::atomic<bool> fired_{false};
};

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
  // The cluster's metadata (must outlive the broker): topics are created, changed and deleted
  // through it, and this broker serves only the partitions the applied view says it leads.
  // Null: a single node, a cluster of one (the broker's own LocalClusterMetadata).
  ClusterMetadata* cluster = nullptr;
  // Replication: a follower not caught up for this long leaves the in-sync set.
  absl::Duration replica_lag_time = absl::Seconds(10);
  // Acks all: how long a produce waits for the high watermark after its append before it is
  // answered DEADLINE_EXCEEDED (outcome unknown).
  absl::Duration ack_timeout = absl::Seconds(30);
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
  // once the partitions are placed. Unset replication factor: 3 with 3 or more live brokers,
  // else 1; unset min_insync_replicas: 2 when the replication factor is 3 or more, else 1.
  absl::StatusOr<TopicSummary> CreateTopic(const std::string& name, int32_t partitions,
                                           const TopicConfigPatch& config,
                                           std::optional<int32_t> replication_factor = {});
  // Changes the set fields of a topic's config. NOT_FOUND, INVALID_ARGUMENT.
  absl::StatusOr<TopicMeta> UpdateTopicConfig(const std::string& name,
                                              const TopicConfigPatch& patch);
  // NOT_FOUND when absent. Produce and fetch requests in flight for the topic fail NOT_FOUND.
  absl::Status DeleteTopic(const std::string& name);
  std::vector<TopicSummary> ListTopics() const;

  // Runs blocking work (topic changes, timestamp lookups) on the storage executor, so request
  // threads never block on RocksDB. RESOURCE_EXHAUSTED when the executor's queue is full.
  absl::Status RunBlocking(std::function<void()> fn);
  // NOT_FOUND for an unknown topic. Offsets, counts and times are this broker's copy's.
  absl::StatusOr<TopicDescription> DescribeTopic(const std::string& name) const;

  // Validates and places every record, then queues the request for group commit; `done` gets
  // the offsets once durable. Returns an error (and never calls `done`) when the request is
  // refused up front: NOT_FOUND unknown topic/partition, INVALID_ARGUMENT bad record,
  // RESOURCE_EXHAUSTED backpressure, UNAVAILABLE broker stopped.
  // With `producer`, the request is idempotent: see ProduceRequest in log.proto.
  // `acks` overrides the topic's setting (cluster mode: with acks all, `done` runs once the
  // high watermark covers the batch; UNAVAILABLE up front when too few replicas are in sync).
  absl::Status Produce(const std::string& topic, std::vector<ProduceRecordArgs> records,
                       std::optional<ProducerArgs> producer, ProduceCallback done,
                       std::optional<Acks> acks = std::nullopt);

  // Several produce requests of one topic without a producer id, appended as one request: one
  // entry in the group commit, the parts' records in order (keyless records of all the parts
  // share one sticky partition, as Kafka's sticky partitioner does for a batch). Each part is
  // checked alone, so a part with a bad record, or with a partition this broker cannot write
  // now (not the leader, too few in-sync replicas), is refused with its own error and the others
  // go on; with acks all each part is answered once the high watermark covers its own records.
  // A refusal of them all (unknown topic, backpressure, broker stopped, a failed write) answers
  // each part with it. Parts beyond one request's limits go in further requests. Each part's
  // `done` runs exactly once, with its own records' positions; on this thread for a refusal up
  // front.
  struct ProducePart {
    std::vector<ProduceRecordArgs> records;
    ProduceCallback done;
  };
  void ProduceParts(const std::string& topic, std::vector<ProducePart> parts,
                    std::optional<Acks> acks = std::nullopt);

  // A single node's stand-in for the controller's leader change (tests): the partition is led
  // again at `epoch`, through the node's metadata, so appends from now on are stamped with it.
  // FAILED_PRECONDITION when `epoch` is below the partition's current one (epochs never go
  // back) and in a cluster (its epochs come from the cluster's metadata); NOT_FOUND for an
  // unknown partition. The epoch is durable with the next append (a restart before one recovers
  // the previous epoch).
  absl::Status SetLeaderEpoch(const std::string& topic, int32_t partition, LeaderEpoch epoch);

  // Where leader epoch `epoch` ends in this broker's copy of the partition (KIP-101/279): the
  // largest epoch ≤ `epoch` that appended here, and the first offset after its records (the
  // start of the next epoch, or the log end). {-1, -1} when no epoch ≤ `epoch` appended here.
  using EpochEnd = PartitionLog::EpochEnd;
  absl::StatusOr<EpochEnd> OffsetForLeaderEpoch(const std::string& topic, int32_t partition,
                                                LeaderEpoch epoch) const;

  // The cluster as this broker sees it (the applied view). A single node is a cluster of one:
  // broker 0 at `self_address`, the controller and leader of every partition (one replica).
  ClusterView Metadata(const std::string& self_address) const;
  int32_t broker_id() const { return cluster_->self(); }
  std::string cluster_name() const { return cluster_->cluster_name(); }

  // Makes the local state follow a new view of the metadata, then serves by it.
  // Every topic of the view exists locally (with the view's topic id; a local topic of the
  // same name and another id, or gone from the view, is deleted), configs follow the view, and
  // each partition this broker leads takes the view's leader epoch. Blocking (column families
  // are created and dropped); one call at a time. A view older than the applied one is ignored.
  absl::Status ApplyView(std::shared_ptr<const ClusterView> view);

  // Records a reassignment of the partition to `replicas` (see ReassignPartition in log.proto);
  // the controller carries it out. Blocking (etcd round trips). FAILED_PRECONDITION on a single
  // node, which holds the one replica of each partition.
  absl::Status ReassignPartition(const std::string& topic, int32_t partition,
                                 const std::vector<int32_t>& replicas,
                                 int64_t throttle_bytes_per_second);

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

  // Replication: follower fetches, the follower's loop, in-sync sets, acks-all waits.
  ReplicaManager& replicas() { return replicas_; }
  const ReplicaManager& replicas() const { return replicas_; }

 private:
  friend class PendingFetch;

  // ApplyView's steps.
  absl::Status MaterializeTopic(const TopicAssignment& assignment)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(admin_mu_);
  absl::Status RemoveTopic(std::shared_ptr<TopicState> topic)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(admin_mu_);
  // Validates and places one request's records (its limits, each record's rules); keyless
  // records go to `*sticky`, chosen at the first. Adds their bytes to `*bytes` when accepted.
  absl::StatusOr<std::vector<RoutedRecord>> RouteRecords(TopicState& topic, const TopicMeta& meta,
                                                         std::vector<ProduceRecordArgs>& records,
                                                         std::optional<int32_t>* sticky,
                                                         int64_t* bytes) const;
  // Whether one partition takes a request's writes here now, and whether an acks-all write
  // must wait for its followers.
  struct Writable {
    absl::Status status;
    bool await_followers = false;
  };
  // OK when every partition of `routed` takes writes here now (and, with acks all, has enough
  // in-sync replicas); `checked` keeps each partition's answer for the request. Sets
  // `*await_followers` when an acks-all answer must wait for the high watermark (a partition
  // with followers): a partition held alone has every acknowledged record once it is durable.
  absl::Status CheckWritable(const TopicState& topic, const std::vector<RoutedRecord>& routed,
                             bool acks_all, absl::flat_hash_map<int32_t, Writable>* checked,
                             bool* await_followers) const;
  void StartRead(std::shared_ptr<TopicState> topic, FetchArgs args, FetchCallback done);

  LogStore* const store_;
  const time::Clock* const clock_;
  BrokerObserver* const observer_;
  const BrokerOptions options_;

  absl::Mutex admin_mu_;  // serializes ApplyView
  std::atomic<uint64_t> next_waiter_id_{1};
  std::unique_ptr<LocalIdAllocator> local_ids_;  // when options.ids is null
  IdAllocator* const ids_;
  ProducerRegistry producers_;
  std::unique_ptr<LocalClusterMetadata> local_cluster_;  // a single node's (options.cluster null)
  ClusterMetadata* const cluster_;                       // options.cluster or local_cluster_
  TopicTable topics_;
  // Before the scope and the pipeline, so it goes after them: their last callbacks (acks-all
  // answers, timeouts) run through it.
  ReplicaManager replicas_;
  // Destroyed in reverse order, after the destructor has stopped the maintenance pass: the
  // pipeline (completing appends and waking waiters), then the scope (running pending
  // long-poll timeouts and waiting for every read they start).
  runtime::Scope scope_;
  AppendPipeline pipeline_;
  LogCleaner cleaner_;
  runtime::Scope::PeriodicId maintenance_ = 0;  // 0 when maintenance_interval is 0
};

}  // namespace conduit::log_broker
