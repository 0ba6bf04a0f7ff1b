#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/executor/bounded_executor.h"
#include "common/time/clock.h"
#include "common/time/timer_queue.h"
#include "services/log_broker/domain/append_pipeline.h"
#include "services/log_broker/domain/log_store.h"
#include "services/log_broker/domain/topic_state.h"

namespace conduit::log_broker {

struct ProduceRecordArgs {
  std::optional<int32_t> partition;
  RecordData data;
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
};
using FetchCallback = std::function<void(absl::StatusOr<FetchResult>)>;

struct PartitionDescription {
  int32_t partition = 0;
  int64_t log_start_offset = 0;
  int64_t high_watermark = 0;
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
  PartitionState* part_ = nullptr;
  uint64_t waiter_id_ = 0;
  time::TimerQueue::TimerId timer_ = 0;
  std::function<void()> read_;
  std::atomic<bool> fired_{false};
};

enum class OffsetQuery { kEarliest, kLatest, kTimestamp };

struct BrokerOptions {
  PipelineOptions pipeline;
  int storage_threads = 4;
  size_t max_queued_reads = 4096;
};

// The log broker's rules: topics, record placement, offset assignment (through the
// AppendPipeline's group commit), reads with long-poll, offsets. No gRPC, protobuf or RocksDB
// here; persistence is a LogStore.
//
// Thread-safe. Callbacks (produce, fetch) run on broker threads and must not block.
class Broker {
 public:
  Broker(LogStore* store, const time::Clock* clock, BrokerObserver* observer,
         BrokerOptions options = {});
  ~Broker();  // finishes queued appends and reads, then stops

  // Loads topics and recovers each partition's offsets from the store. Call once, first.
  absl::Status Recover();

  // INVALID_ARGUMENT for a bad name, partition count or config; ALREADY_EXISTS for a taken name.
  absl::StatusOr<TopicMeta> CreateTopic(const std::string& name, int32_t partitions,
                                        TopicConfig config);
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
  absl::Status Produce(const std::string& topic, std::vector<ProduceRecordArgs> records,
                       ProduceCallback done);

  // Reads from `offset`; with max_wait, waits for records when none are available yet.
  // Returns an error up front (never calling `done`): NOT_FOUND, INVALID_ARGUMENT,
  // OUT_OF_RANGE naming the valid range, RESOURCE_EXHAUSTED when the read queue is full.
  // When the fetch waits and `pending` is given, *pending is set to a handle that can end the
  // wait early.
  absl::Status Fetch(const FetchArgs& args, FetchCallback done,
                     std::shared_ptr<PendingFetch>* pending = nullptr);

  // Offsets per partition (all when `partitions` is empty): earliest is the log start, latest
  // the high watermark, timestamp the first offset whose append time is >= `at` (the high
  // watermark when there is none). Blocking: reads the store for kTimestamp.
  absl::StatusOr<std::vector<RecordPosition>> ListOffsets(const std::string& topic,
                                                          const std::vector<int32_t>& partitions,
                                                          OffsetQuery query, absl::Time at);

 private:
  friend class PendingFetch;

  absl::StatusOr<std::shared_ptr<TopicState>> FindTopic(const std::string& name) const;
  absl::Status CheckPartition(const TopicState& topic, int32_t partition) const;
  void StartRead(std::shared_ptr<TopicState> topic, FetchArgs args, FetchCallback done);
  absl::StatusOr<int64_t> OffsetForTime(const TopicState& topic, int32_t partition, absl::Time at);

  LogStore* const store_;
  const time::Clock* const clock_;
  BrokerObserver* const observer_;
  const BrokerOptions options_;

  absl::Mutex admin_mu_ ABSL_ACQUIRED_BEFORE(mu_);  // serializes CreateTopic / DeleteTopic
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<TopicState>> topics_ ABSL_GUARDED_BY(mu_);
  uint64_t next_topic_id_ ABSL_GUARDED_BY(mu_) = 1;
  std::atomic<uint64_t> next_waiter_id_{1};

  // Destroyed in reverse order: the pipeline first (completing appends and waking waiters),
  // then timers (running pending long-poll timeouts), then the executor (running their reads).
  executor::BoundedExecutor reads_;
  time::TimerQueue timers_;
  AppendPipeline pipeline_;
};

}  // namespace conduit::log_broker
