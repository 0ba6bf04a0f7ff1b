#pragma once

#include <deque>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "conduit/log/v1/log.grpc.pb.h"

namespace conduit::client {

struct ProducerOptions {
  std::string address;  // host:port of the broker (or conduit-standalone)
  std::string topic;
  // A batch (one Produce request, one partition) is sent when it has this many records or
  // bytes, or when its first record has waited `linger`.
  int max_batch_records = 500;
  size_t max_batch_bytes = 1 << 20;
  absl::Duration linger = absl::Milliseconds(5);
  // Idempotent: InitProducer once, sequences per partition, so that a retried batch is
  // appended once. Off: plain Produce (a retry may duplicate).
  bool idempotent = true;
  std::string producer_name;  // optional stable name: the same name fences older instances
  // Retries of UNAVAILABLE / DEADLINE_EXCEEDED / RESOURCE_EXHAUSTED / ABORTED, with backoff.
  int max_retries = 8;
  absl::Duration retry_backoff = absl::Milliseconds(50);
  absl::Duration request_timeout = absl::Seconds(10);
};

struct ProducerRecord {
  std::optional<std::string> key;
  std::optional<std::string> value;
  std::optional<int32_t> partition;  // else the broker's partitioner: murmur2(key), or sticky
  std::vector<std::pair<std::string, std::string>> headers;
  std::optional<absl::Time> event_time;
  std::string event_id;
};

struct RecordPosition {
  int32_t partition = 0;
  int64_t offset = 0;
  bool duplicate = false;  // a retry (or an event id already appended): the original offset
};

// Batching, partitioning and retrying producer for one topic. Records of one partition are
// appended in Send order: one batch per partition is in flight at a time. Keyed records go
// where the broker would put them (Kafka's murmur2); keyless records stick to one partition per
// batch and rotate. Results arrive on the producer's threads. After an unclear failure of an
// idempotent batch (retries exhausted on a timeout: it may or may not be appended) the producer
// stops: later sends fail, and a new Producer (a new epoch) carries on. Thread-safe.
class Producer {
 public:
  using Callback = std::function<void(absl::StatusOr<RecordPosition>)>;

  // Asks the broker for the partition count (and a producer id when idempotent).
  static absl::StatusOr<std::unique_ptr<Producer>> Create(ProducerOptions options);
  ~Producer();  // Flush, then stop

  void Send(ProducerRecord record, Callback done);
  std::future<absl::StatusOr<RecordPosition>> Send(ProducerRecord record);
  // Waits until every record sent so far has its result; the first error seen since the last
  // Flush, if any.
  absl::Status Flush();

  int32_t partitions() const { return partitions_; }

 private:
  struct Pending {
    ProducerRecord record;
    Callback done;
  };
  struct Batch {
    std::vector<Pending> records;
    conduit::log::v1::ProduceRequest request;
    int attempts = 0;
    absl::Time retry_at = absl::InfinitePast();
  };
  struct PartitionQueue {
    std::deque<Pending> queued;
    size_t bytes = 0;
    absl::Time first_queued;
    int32_t next_sequence = 0;
    std::unique_ptr<Batch> in_flight;  // sent and not yet answered, or waiting to be retried
  };

  Producer(ProducerOptions options, int32_t partitions, int64_t producer_id, int32_t epoch);
  void Loop();
  // Moves ready batches out of the queues; true when anything is due now.
  bool ReadyLocked(absl::Time now, std::vector<std::pair<int32_t, Batch*>>* send)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void StartBatchLocked(int32_t partition) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SendAsync(int32_t partition, Batch* batch);
  void OnResponse(int32_t partition, Batch* batch, const grpc::Status& status,
                  const conduit::log::v1::ProduceResponse& response);

  const ProducerOptions options_;
  const int32_t partitions_;
  const int64_t producer_id_;
  const int32_t producer_epoch_;
  std::unique_ptr<conduit::log::v1::LogService::Stub> stub_;

  absl::Mutex mu_;
  std::map<int32_t, PartitionQueue> queues_ ABSL_GUARDED_BY(mu_);
  int32_t sticky_partition_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t outstanding_ ABSL_GUARDED_BY(mu_) = 0;  // records without a result yet
  bool flushing_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status first_error_ ABSL_GUARDED_BY(mu_);
  // Set after an unclear failure of an idempotent batch: later records fail with it.
  absl::Status fatal_ ABSL_GUARDED_BY(mu_);
  std::thread sender_;
};

}  // namespace conduit::client
