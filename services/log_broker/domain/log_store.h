#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "services/log_broker/domain/record.h"
#include "services/log_broker/domain/topic.h"

namespace conduit::log_broker {

// One record to write at an offset the broker has assigned.
struct AppendEntry {
  uint64_t topic_id = 0;
  int32_t partition = 0;
  int64_t offset = 0;
  absl::Time append_time;
  const RecordData* data = nullptr;  // not owned; valid for the duration of Append
};

// What recovery learns about a partition from its stored records.
struct PartitionExtent {
  int64_t log_start_offset = 0;  // offset of the first stored record (== next_offset if empty)
  int64_t next_offset = 0;       // one past the last stored record
  absl::Time last_append_time = absl::InfinitePast();
};

// Persistence of topics and records. The broker (domain) owns offsets and ordering; a LogStore
// only stores what it is given, atomically per Append call.
//
// Implementations are thread-safe: Append is called from the broker's single writer thread,
// Read from storage executor threads, topic changes from request threads.
class LogStore {
 public:
  virtual ~LogStore() = default;

  // Every topic persisted, in no particular order.
  virtual absl::StatusOr<std::vector<TopicMeta>> LoadTopics() = 0;
  virtual absl::StatusOr<PartitionExtent> RecoverPartition(uint64_t topic_id, int32_t partition) = 0;

  // Persists a new topic (durably) and makes room for its records.
  virtual absl::Status CreateTopic(const TopicMeta& topic) = 0;
  // Removes a topic and all of its records (durably).
  virtual absl::Status DeleteTopic(const TopicMeta& topic) = 0;

  // Writes all entries atomically; with `sync`, returns only after the WAL is fsynced.
  virtual absl::Status Append(const std::vector<AppendEntry>& entries, bool sync) = 0;
  // Fsyncs everything appended so far.
  virtual absl::Status SyncWal() = 0;

  // Records of one partition with offsets in [from, end), in offset order, at most
  // `max_records`, stopping once `max_bytes` of payload is reached (but always at least one
  // record when any exists). NOT_FOUND when the topic is gone.
  virtual absl::StatusOr<std::vector<StoredRecord>> Read(uint64_t topic_id, int32_t partition,
                                                         int64_t from, int64_t end,
                                                         int32_t max_records, int64_t max_bytes) = 0;
};

// Hooks for metrics; the default does nothing. Called on broker threads; must not block.
class BrokerObserver {
 public:
  virtual ~BrokerObserver() = default;
  // One group-committed write: how many produce requests and records it carried.
  virtual void OnBatchWritten(int requests, int records, bool synced, absl::Duration latency) {}
  virtual void OnWalSynced(absl::Duration latency) {}
  virtual void OnProduced(const std::string& topic, int64_t records, int64_t bytes) {}
  virtual void OnFetched(const std::string& topic, int64_t records, int64_t bytes) {}
  virtual void OnHighWatermark(const std::string& topic, int32_t partition, int64_t hw) {}
  virtual void OnTopicDeleted(const std::string& topic, int32_t partitions) {}
};

}  // namespace conduit::log_broker
