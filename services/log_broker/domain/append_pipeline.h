#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/time/clock.h"
#include "services/log_broker/domain/log_store.h"
#include "services/log_broker/domain/topic_state.h"

namespace conduit::log_broker {

struct RoutedRecord {
  int32_t partition = 0;
  RecordData data;
};

struct ProduceResult {
  std::vector<RecordPosition> positions;  // request order
  absl::Time append_time;
};

using ProduceCallback = std::function<void(absl::StatusOr<ProduceResult>)>;

struct PipelineOptions {
  // Produce requests are refused with RESOURCE_EXHAUSTED beyond this many queued bytes.
  int64_t max_queued_bytes = 256 << 20;
  // Upper bound on one group-committed WriteBatch.
  int64_t max_batch_bytes = 16 << 20;
};

// Group commit. Produce requests queue here; one writer thread repeatedly takes everything
// queued (up to max_batch_bytes), assigns offsets per partition in arrival order, writes the lot
// with one LogStore::Append (one WriteBatch, one WAL fsync when any topic in it is `sync`), and
// only then advances high watermarks, wakes waiters and completes the requests. A second thread
// fsyncs the WAL for `interval` topics.
//
// A failed write leaves offsets unassigned (nothing was acknowledged) and stops the pipeline:
// later produces get UNAVAILABLE until restart, because the store's state is then unknown.
//
// Thread-safe.
class AppendPipeline {
 public:
  AppendPipeline(LogStore* store, BrokerObserver* observer, const time::Clock* clock,
                 PipelineOptions options);
  ~AppendPipeline();  // completes queued requests, then joins

  // Seeds the append clock after recovery (append time never goes backwards).
  void SetLastAppendTime(absl::Time t);

  // Queues a request; `done` runs on the writer thread. RESOURCE_EXHAUSTED (without queuing)
  // when too much is queued; UNAVAILABLE after a storage failure or during shutdown.
  absl::Status Submit(std::shared_ptr<TopicState> topic, std::vector<RoutedRecord> records,
                      int64_t bytes, ProduceCallback done);

  // Runs `fn` while no batch is being written (used to delete a topic between batches).
  void RunExclusive(const std::function<void()>& fn);

  // Lowers the background fsync period to at most `interval` (for `interval` topics).
  void RequestSyncEvery(absl::Duration interval);

 private:
  struct Pending {
    std::shared_ptr<TopicState> topic;
    std::vector<RoutedRecord> records;
    int64_t bytes = 0;
    ProduceCallback done;
  };

  void WriterLoop();
  void SyncLoop();
  void WriteBatch(std::vector<Pending>& batch) ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);

  LogStore* const store_;
  BrokerObserver* const observer_;
  const time::Clock* const clock_;
  const PipelineOptions options_;

  absl::Mutex mu_;
  std::deque<Pending> queue_ ABSL_GUARDED_BY(mu_);
  int64_t queued_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status failed_ ABSL_GUARDED_BY(mu_);
  bool unsynced_ ABSL_GUARDED_BY(mu_) = false;
  absl::Duration sync_every_ ABSL_GUARDED_BY(mu_) = absl::InfiniteDuration();

  // Held by the writer while it builds and writes one batch.
  absl::Mutex write_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  absl::Time last_append_time_ ABSL_GUARDED_BY(write_mu_) = absl::InfinitePast();

  std::thread writer_;
  std::thread syncer_;
};

}  // namespace conduit::log_broker
