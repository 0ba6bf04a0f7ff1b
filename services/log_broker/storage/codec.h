#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "services/log_broker/domain/record.h"
#include "services/log_broker/domain/topic.h"

namespace conduit::log_broker::codec {

// Record value, format version 1:
//   u8 version=1 | u8 flags (1 key, 2 value, 4 event time) | BE64 append time (µs since epoch)
//   | [BE64 event time µs] | [varint len + key] | [varint len + value]
//   | varint len + event id | varint header count | (varint len + key, varint len + value)*
void EncodeRecord(const RecordData& data, absl::Time append_time, std::string* out);
// DATA_LOSS when the bytes are not a valid record.
absl::Status DecodeRecord(std::string_view in, absl::Time* append_time, RecordData* data);

// Topic metadata, format version 1:
//   u8 version=1 | BE64 id | varint len + name | varint partitions | u8 durability
//   | varint flush interval µs | varint max record bytes | BE64 created µs
std::string EncodeTopicMeta(const TopicMeta& meta);
absl::StatusOr<TopicMeta> DecodeTopicMeta(std::string_view in);

}  // namespace conduit::log_broker::codec
