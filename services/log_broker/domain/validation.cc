#include "services/log_broker/domain/validation.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_format.h"
#include "services/log_broker/domain/limits.h"

namespace conduit::log_broker {

absl::Status ValidateTopicName(absl::string_view name) {
  if (name.empty()) return absl::InvalidArgumentError("topic name is empty");
  if (name.size() > kMaxTopicNameLength) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "topic name is %d characters; the limit is %d", name.size(), kMaxTopicNameLength));
  }
  if (name == "." || name == "..") {
    return absl::InvalidArgumentError(absl::StrCat("topic name '", name, "' is reserved"));
  }
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-';
    if (!ok) {
      return absl::InvalidArgumentError(absl::StrCat(
          "topic name '", absl::CHexEscape(name), "' may only contain [a-zA-Z0-9._-]"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidatePartitionCount(int32_t partitions) {
  if (partitions < 1 || partitions > kMaxPartitions) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "partitions must be between 1 and %d, got %d", kMaxPartitions, partitions));
  }
  return absl::OkStatus();
}

absl::Status ValidateConfig(const TopicConfig& config, int32_t replication_factor) {
  auto invalid = [](auto... parts) { return absl::InvalidArgumentError(absl::StrCat(parts...)); };
  if (config.flush_interval < kMinFlushInterval || config.flush_interval > kMaxFlushInterval) {
    return invalid("flush_interval must be between ", absl::FormatDuration(kMinFlushInterval),
                   " and ", absl::FormatDuration(kMaxFlushInterval), ", got ",
                   absl::FormatDuration(config.flush_interval));
  }
  if (config.max_record_bytes < 1 || config.max_record_bytes > kMaxRecordBytesLimit) {
    return invalid("max_record_bytes must be between 1 and ", kMaxRecordBytesLimit, ", got ",
                   config.max_record_bytes);
  }
  if (config.retention_time <= absl::ZeroDuration() ||
      (config.retention_time > kMaxRetention &&
       config.retention_time != absl::InfiniteDuration())) {
    return invalid("retention_time must be positive and at most ",
                   absl::FormatDuration(kMaxRetention), " (or negative: infinite), got ",
                   absl::FormatDuration(config.retention_time));
  }
  if (config.retention_bytes == 0 || config.retention_bytes < -1) {
    return invalid("retention_bytes must be positive or -1 (no limit), got ",
                   config.retention_bytes);
  }
  if (config.tombstone_retention < absl::ZeroDuration() ||
      config.tombstone_retention > kMaxRetention) {
    return invalid("tombstone_retention must be between 0 and ",
                   absl::FormatDuration(kMaxRetention), ", got ",
                   absl::FormatDuration(config.tombstone_retention));
  }
  if (config.dedup_window < absl::ZeroDuration() || config.dedup_window > kMaxDedupWindow) {
    return invalid("dedup_window must be between 0 and ", absl::FormatDuration(kMaxDedupWindow),
                   ", got ", absl::FormatDuration(config.dedup_window));
  }
  if (config.min_insync_replicas < 1 || config.min_insync_replicas > replication_factor) {
    return invalid("min_insync_replicas must be between 1 and the replication factor ",
                   replication_factor, ", got ", config.min_insync_replicas);
  }
  return absl::OkStatus();
}

absl::Status ValidateRecord(const TopicMeta& topic, const RecordData& record,
                            std::optional<int32_t> partition, size_t index) {
  if (topic.config.compacts() && !record.key) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "record %d has no key; compacted topic '%s' keeps the latest record per key", index,
        topic.name));
  }
  if (partition && (*partition < 0 || *partition >= topic.partitions)) {
    return absl::NotFoundError(absl::StrFormat("record %d: partition %d of topic '%s' does not exist "
                                               "(it has %d partitions)",
                                               index, *partition, topic.name, topic.partitions));
  }
  size_t bytes = record.PayloadBytes();
  if (bytes > static_cast<size_t>(topic.config.max_record_bytes)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("record %d is %d bytes; topic '%s' accepts at most %d", index, bytes,
                        topic.name, topic.config.max_record_bytes));
  }
  for (const auto& h : record.headers) {
    if (h.key.empty()) {
      return absl::InvalidArgumentError(absl::StrFormat("record %d has a header with an empty key", index));
    }
  }
  return absl::OkStatus();
}

}  // namespace conduit::log_broker
