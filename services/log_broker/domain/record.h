#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "services/log_broker/domain/ids.h"

namespace conduit::log_broker {

struct Header {
  std::string key;
  std::string value;
  friend bool operator==(const Header&, const Header&) = default;
};

// What a producer sends. An absent key differs from an empty one (as in Kafka); a record with a
// key and no value is a tombstone for compacted topics.
struct RecordData {
  std::optional<std::string> key;
  std::optional<std::string> value;
  std::vector<Header> headers;
  std::optional<absl::Time> event_time;  // the producer's clock
  std::string event_id;

  // Bytes counted against the record size limit: key + value + header keys and values.
  size_t PayloadBytes() const;
  friend bool operator==(const RecordData&, const RecordData&) = default;
};

// The idempotent-producer batch a record was appended in (record v3): what a follower needs to
// rebuild the producer's state, so that a batch retried after a failover is recognised.
struct ProducerTag {
  int64_t producer_id = 0;
  int32_t epoch = 0;
  int32_t base_sequence = 0;
  int32_t count = 0;  // records of the batch in this partition
  int32_t index = 0;  // this record's place among them
  friend bool operator==(const ProducerTag&, const ProducerTag&) = default;
};

// A record as stored: its position, the broker's append time and the leader epoch under which
// it was appended, and its producer batch when the producer was idempotent.
struct StoredRecord {
  int32_t partition = 0;
  int64_t offset = 0;
  absl::Time append_time;
  LeaderEpoch leader_epoch;
  RecordData data;
  std::optional<ProducerTag> producer;
};

// Where a produced record landed.
struct RecordPosition {
  int32_t partition = 0;
  int64_t offset = 0;
  // Not appended again: a retried idempotent batch or an event id seen within the dedup
  // window. `offset` is the original record's.
  bool duplicate = false;
  friend bool operator==(const RecordPosition&, const RecordPosition&) = default;
};

}  // namespace conduit::log_broker
