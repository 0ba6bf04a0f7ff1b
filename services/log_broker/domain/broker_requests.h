#pragma once

// What the Broker's calls take and answer (broker.h): produce and fetch arguments, topic and
// partition descriptions, and the replica fetch between brokers.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "services/log_broker/domain/ids.h"
#include "services/log_broker/domain/log_store.h"
#include "services/log_broker/domain/record.h"
#include "services/log_broker/domain/replica_state.h"
#include "services/log_broker/domain/topic.h"

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
  LeaderEpoch leader_epoch;  // the epoch new appends get
  int32_t leader = 0;        // in a cluster, the applied view's leader (kNoBroker: offline)
  absl::Time oldest_append_time = absl::InfinitePast();
  absl::Time newest_append_time = absl::InfinitePast();
  // Replicas, in-sync set, this broker's role and, where it leads, each follower's lag. A
  // single node: broker 0 alone.
  ReplicationDescription replication;
};

// A topic as CreateTopic and ListTopics answer it.
struct TopicSummary {
  TopicMeta meta;
  int32_t replication_factor = 1;  // in a cluster, the metadata's
};

struct TopicDescription {
  TopicMeta meta;
  std::vector<PartitionDescription> partitions;
  int32_t replication_factor = 1;  // in a cluster, the applied view's
};

enum class OffsetQuery { kEarliest, kLatest, kTimestamp };

// Replication (services/log_broker/README.md, "Replication"): what a follower asks its leader
// for, per partition.
struct ReplicaFetchItem {
  std::string topic;
  TopicId topic_id;
  int32_t partition = 0;
  int64_t fetch_offset = 0;         // the follower's durable log end
  LeaderEpoch last_fetched_epoch = kNoLeaderEpoch;  // of its last record; none: log empty
  LeaderEpoch current_leader_epoch;                 // the leader epoch the follower's view names
};

// The leader's answer for one partition.
struct ReplicaFetchData {
  std::string topic;
  TopicId topic_id;
  int32_t partition = 0;
  // FAILED_PRECONDITION: the follower's epoch is stale, or this broker does not lead it;
  // UNAVAILABLE: the leader has not reached that epoch yet; OUT_OF_RANGE with truncate_to:
  // the follower's log diverged (or starts before the leader's log start).
  absl::Status status;
  // Where the follower's log must end before it fetches again: the end of the last epoch both
  // logs share (KIP-101/279, answered in the fetch as KIP-320 does), or, above the follower's
  // log end, the leader's log start (the follower then starts over there).
  std::optional<int64_t> truncate_to;
  // The records: from the leader's store in its own encoding (`encoded`, when the store has one),
  // else decoded (`records`). The follower decodes `encoded` with its store.
  EncodedRecords encoded;
  std::vector<StoredRecord> records;
  int64_t high_watermark = 0;
  int64_t log_start_offset = 0;
  int64_t log_end_offset = 0;
};
using ReplicaFetchCallback = std::function<void(std::vector<ReplicaFetchData>)>;

}  // namespace conduit::log_broker
