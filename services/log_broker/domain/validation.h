#pragma once

#include "absl/strings/string_view.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "services/log_broker/domain/record.h"
#include "services/log_broker/domain/topic.h"

namespace conduit::log_broker {

// Kafka's topic name rule: 1..249 characters from [a-zA-Z0-9._-], and not "." or "..".
// INVALID_ARGUMENT naming the problem otherwise.
absl::Status ValidateTopicName(absl::string_view name);

// 1..kMaxPartitions. INVALID_ARGUMENT otherwise.
absl::Status ValidatePartitionCount(int32_t partitions);

// INVALID_ARGUMENT naming the first field out of range.
// `replication_factor` bounds min_insync_replicas.
absl::Status ValidateConfig(const TopicConfig& config, int32_t replication_factor = 1);

// One record against its topic: size limit, partition range when explicit, key present on
// compacted topics.
absl::Status ValidateRecord(const TopicMeta& topic, const RecordData& record,
                            std::optional<int32_t> partition, size_t index);

}  // namespace conduit::log_broker
