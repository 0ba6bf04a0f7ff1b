#pragma once

#include <cstdint>

#include "absl/time/time.h"

namespace conduit::log_broker {

// Limits on what a request may ask for. Validation (validation.h) enforces them.
inline constexpr int kMaxTopicNameLength = 249;          // Kafka's rule
inline constexpr int32_t kMaxPartitions = 1024;
inline constexpr int32_t kMaxRecordBytesLimit = 8 << 20;  // ceiling for a topic's max_record_bytes
inline constexpr int64_t kMaxProduceRequestBytes = 32 << 20;
inline constexpr int32_t kMaxRecordsPerProduce = 100'000;
inline constexpr int32_t kDefaultFetchRecords = 500;
inline constexpr int32_t kMaxFetchRecords = 10'000;
inline constexpr int32_t kDefaultFetchBytes = 1 << 20;
inline constexpr int32_t kMaxFetchBytes = 16 << 20;
inline constexpr absl::Duration kMaxFetchWait = absl::Seconds(30);
inline constexpr absl::Duration kMinFlushInterval = absl::Milliseconds(1);
inline constexpr absl::Duration kMaxFlushInterval = absl::Seconds(60);
inline constexpr absl::Duration kMaxDedupWindow = absl::Hours(24 * 7);
// retention_time and tombstone_retention: longer than this is a mistake (infinite retention is
// its own setting, a negative retention_time).
inline constexpr absl::Duration kMaxRetention = absl::Hours(24 * 365 * 100);
// Recent batches remembered per (producer, partition) to answer retries (Kafka keeps 5).
inline constexpr int kProducerBatchesRemembered = 5;

}  // namespace conduit::log_broker
