#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "services/log_broker/domain/producer_state.h"
#include "services/log_broker/domain/record.h"
#include "services/log_broker/domain/topic.h"
#include "services/log_broker/domain/ids.h"

namespace conduit::log_broker {

// A partition's durable bookkeeping, written in the same atomic write as every change to the
// partition's records, so it always agrees with them.
struct PartitionMeta {
  int64_t log_start_offset = 0;
  int64_t next_offset = 0;  // the log end offset: one past the last record written
  int64_t record_count = 0;
  int64_t bytes = 0;  // payload bytes
  absl::Time max_event_time = absl::InfinitePast();
  LeaderEpoch leader_epoch;  // the epoch of the latest append
  friend bool operator==(const PartitionMeta&, const PartitionMeta&) = default;
};

// One record to write at an offset the broker has assigned.
struct AppendEntry {
  TopicId topic_id;
  int32_t partition = 0;
  int64_t offset = 0;
  absl::Time append_time;
  LeaderEpoch leader_epoch;
  // Not owned; valid for the duration of Write. Null for a replicated record that comes as
  // `stored`.
  const RecordData* data = nullptr;
  std::optional<ProducerTag> producer;
  // A replicated record as the leader's store encoded it (ReplicaRecord::stored), written as it
  // is; empty: the store encodes the fields above. Not owned; valid for the duration of Write.
  std::string_view stored;
};

// A record a follower appends (LogStore::DecodeRecords): the fields its bookkeeping needs, read
// in place, and the leader's encoding of it, which it writes as it is.
struct ReplicaRecord {
  int64_t offset = 0;
  absl::Time append_time;
  LeaderEpoch leader_epoch;
  int64_t payload_bytes = 0;  // as RecordData::PayloadBytes
  std::optional<absl::Time> event_time;
  std::string_view event_id;
  std::optional<ProducerTag> producer;
  // The leader's store's encoding; empty when the records came decoded: then `data`, which the
  // follower's store encodes.
  std::string_view stored;
  const RecordData* data = nullptr;
};

// One fetch's records of a partition, and what their views point into. Held by pointer (the
// views must not move): DecodeRecords and FromDecoded make one.
struct ReplicaRecords {
  std::vector<ReplicaRecord> records;
  std::string bytes;                  // the leader's encoding, which `stored` views
  std::vector<StoredRecord> decoded;  // or the records decoded, which `data` and `event_id` view

  ReplicaRecords() = default;
  ReplicaRecords(const ReplicaRecords&) = delete;
  ReplicaRecords& operator=(const ReplicaRecords&) = delete;
  // Records that came decoded (a leader whose store has no encoded form).
  static std::unique_ptr<ReplicaRecords> FromDecoded(std::vector<StoredRecord> records);
};

// Records in the store's own encoding, for shipping to a follower whose store is the same kind
// (ReplicaFetch): read without decoding, appended without encoding.
struct EncodedRecords {
  std::string bytes;
  int32_t count = 0;
  int64_t stored_bytes = 0;  // what the records take in the store (counted against max_bytes)
};

// Where an event id was appended (dedup window).
struct DedupEntry {
  RecordPosition position;
  absl::Time append_time;
};

// Everything one atomic write changes. The broker's writer thread builds it; a LogStore applies
// all of it or nothing.
struct WriteSet {
  struct PartitionUpdate {
    TopicId topic_id;
    int32_t partition;
    PartitionMeta meta;
  };
  struct ProducerUpdate {
    TopicId topic_id;
    int32_t partition;
    ProducerId producer_id;
    ProducerPartitionState state;
  };
  struct DedupPut {  // in partition entry.position.partition
    TopicId topic_id;
    std::string event_id;
    DedupEntry entry;
  };
  struct DedupDelete {
    TopicId topic_id;
    int32_t partition;
    std::string event_id;
  };
  struct RangeDelete {  // records with offsets in [from, to)
    TopicId topic_id;
    int32_t partition;
    int64_t from;
    int64_t to;
  };
  struct RecordDelete {
    TopicId topic_id;
    int32_t partition;
    int64_t offset;
  };
  // The first offset appended under a leader epoch (the leader-epoch cache, KIP-101).
  struct EpochStart {
    TopicId topic_id;
    int32_t partition;
    LeaderEpoch epoch;
    int64_t start_offset;
  };

  std::vector<AppendEntry> records;
  std::vector<PartitionUpdate> partitions;
  std::vector<ProducerUpdate> producers;
  std::vector<DedupPut> dedup_puts;
  std::vector<DedupDelete> dedup_deletes;
  std::vector<RangeDelete> range_deletes;
  std::vector<RecordDelete> record_deletes;
  std::vector<EpochStart> epoch_starts;
  // A follower's truncation: the epoch cache entries of `from_epoch` and above go (before the
  // batch's epoch_starts are written).
  struct EpochTruncate {
    TopicId topic_id;
    int32_t partition;
    LeaderEpoch from_epoch;
  };
  std::vector<EpochTruncate> epoch_truncates;

  bool empty() const {
    return records.empty() && partitions.empty() && producers.empty() && dedup_puts.empty() &&
           dedup_deletes.empty() && range_deletes.empty() && record_deletes.empty() &&
           epoch_starts.empty() && epoch_truncates.empty();
  }
};

// What recovery learns about a partition.
struct PartitionRecovery {
  std::optional<PartitionMeta> meta;  // absent if the partition was never written
  // From the stored records: first / one-past-last offsets and append times.
  int64_t first_offset = 0;
  int64_t end_offset = 0;
  absl::Time first_append_time = absl::InfinitePast();
  absl::Time last_append_time = absl::InfinitePast();
};

// Persistence of topics, records and their bookkeeping. The broker (domain) owns offsets,
// ordering and every rule; a LogStore only stores what it is given, atomically per Write.
//
// Implementations are thread-safe: Write is called from the broker's single writer thread,
// Read from storage executor threads, topic and producer changes from request threads.
class LogStore {
 public:
  virtual ~LogStore() = default;

  // Every topic persisted, in no particular order.
  virtual absl::StatusOr<std::vector<TopicMeta>> LoadTopics() = 0;
  virtual absl::StatusOr<PartitionRecovery> RecoverPartition(TopicId topic_id,
                                                             int32_t partition) = 0;
  virtual absl::StatusOr<std::vector<WriteSet::ProducerUpdate>> LoadProducerStates(
      TopicId topic_id) = 0;
  virtual absl::StatusOr<std::vector<WriteSet::DedupPut>> LoadDedupEntries(TopicId topic_id) = 0;
  virtual absl::StatusOr<std::vector<WriteSet::EpochStart>> LoadEpochStarts(TopicId topic_id) = 0;

  // Persists a new topic (durably) and makes room for its records.
  virtual absl::Status CreateTopic(const TopicMeta& topic) = 0;
  // Rewrites a topic's metadata (durably).
  virtual absl::Status UpdateTopic(const TopicMeta& topic) = 0;
  // Removes a topic, its records and all its bookkeeping (durably).
  virtual absl::Status DeleteTopic(const TopicMeta& topic) = 0;

  // The producer registry (durable).
  virtual absl::StatusOr<std::vector<ProducerInfo>> LoadProducers() = 0;
  virtual absl::Status SaveProducer(const ProducerInfo& producer) = 0;

  // Applies everything atomically; with `sync`, returns only after the WAL is fsynced.
  virtual absl::Status Write(const WriteSet& writes, bool sync) = 0;
  // RESOURCE_EXHAUSTED "disk full" while the volume is below its free-space reserve: writes
  // that add data would be refused (the domain refuses the change before making it).
  virtual absl::Status CheckSpace() const { return absl::OkStatus(); }
  // Fsyncs everything written so far.
  virtual absl::Status SyncWal() = 0;

  // Records of one partition with offsets in [from, end), in offset order, at most
  // `max_records`, stopping once `max_bytes` of payload is reached (but always at least one
  // record when any exists). Offsets may have holes (compaction). NOT_FOUND when the topic is
  // gone.
  virtual absl::StatusOr<std::vector<StoredRecord>> Read(TopicId topic_id, int32_t partition,
                                                         int64_t from, int64_t end,
                                                         int32_t max_records, int64_t max_bytes) = 0;

  // The same records as Read, in the store's own encoding, `max_bytes` counting stored bytes.
  // UNIMPLEMENTED: this store has no such form (the caller uses Read).
  virtual absl::StatusOr<EncodedRecords> ReadEncoded(TopicId topic_id, int32_t partition,
                                                     int64_t from, int64_t end,
                                                     int32_t max_records, int64_t max_bytes) {
    return absl::UnimplementedError("no encoded reads");
  }
  // The records of ReadEncoded's bytes (possibly another broker's), each viewing its encoding
  // in them, nothing copied. DATA_LOSS when the bytes are not such records.
  virtual absl::StatusOr<std::unique_ptr<ReplicaRecords>> DecodeRecords(std::string bytes) {
    return absl::UnimplementedError("no encoded records");
  }
};

// Hooks for metrics; the default does nothing. Called on broker threads; must not block.
class BrokerObserver {
 public:
  virtual ~BrokerObserver() = default;
  // One group-committed write: how many produce requests and records it carried.
  virtual void OnBatchWritten(int requests, int records, bool synced, absl::Duration latency) {}
  virtual void OnWalSynced(absl::Duration latency) {}
  virtual void OnProduced(const std::string& topic, int64_t records, int64_t bytes) {}
  virtual void OnDuplicatesDropped(const std::string& topic, int64_t records) {}
  // An idempotent request reached the writer ahead of an earlier batch and waits for it
  // (PipelineOptions::reorder_wait); once per request.
  virtual void OnProduceParked() {}
  virtual void OnFetched(const std::string& topic, int64_t records, int64_t bytes) {}
  virtual void OnHighWatermark(const std::string& topic, int32_t partition, int64_t hw) {}
  virtual void OnRecordsRemoved(const std::string& topic, bool compaction, int64_t records,
                                int64_t bytes) {}
  virtual void OnTopicDeleted(const std::string& topic, int32_t partitions) {}
  // Replication: a follower cut its log back to `offset` (a divergent suffix, or a restart at
  // the leader's log start), for the reason given.
  virtual void OnTruncated(const std::string& topic, int32_t partition, int64_t offset,
                           const std::string& reason) {}
  // Replication: the leader wrote (or failed to write) a change of the in-sync set.
  virtual void OnInSyncChange(const std::string& topic, int32_t partition,
                              const std::vector<int32_t>& from, const std::vector<int32_t>& to,
                              const absl::Status& written) {}
};

}  // namespace conduit::log_broker
