#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "services/log_broker/domain/log_store.h"
#include "services/log_broker/domain/ids.h"

namespace conduit::log_broker {

// The first offset in [from, end) whose record's append time is >= `at`, or `end` if none.
// Append time never decreases within a partition, so this is a binary search of point reads;
// holes in the offsets (compaction) are fine.
absl::StatusOr<int64_t> FirstOffsetAtOrAfter(LogStore* store, TopicId topic_id, int32_t partition,
                                             int64_t from, int64_t end, absl::Time at);

}  // namespace conduit::log_broker
