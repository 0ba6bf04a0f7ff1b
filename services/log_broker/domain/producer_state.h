#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "services/log_broker/domain/record.h"
#include "services/log_broker/domain/ids.h"

namespace conduit::log_broker {

// An idempotent producer session, as InitProducer hands it out.
struct ProducerInfo {
  ProducerId id;
  int32_t epoch = 0;
  std::string name;  // empty for anonymous producers
  friend bool operator==(const ProducerInfo&, const ProducerInfo&) = default;
};

// One appended batch of a producer in one partition, remembered to answer its retries.
struct ProducerBatch {
  int32_t base_sequence = 0;
  int32_t count = 0;
  int64_t first_offset = 0;
  // Position of each record when they are not first_offset, first_offset+1, ... of the batch's
  // partition (some records were event-id duplicates, answered with their original positions,
  // possibly in another partition). Else empty.
  std::vector<RecordPosition> positions;
  friend bool operator==(const ProducerBatch&, const ProducerBatch&) = default;

  // Where the batch's i-th record (of those in `partition`) is.
  RecordPosition PositionOf(int32_t partition, int i) const {
    return positions.empty() ? RecordPosition{partition, first_offset + i} : positions[i];
  }
};

// What a partition remembers of one producer: its epoch, the last sequence appended, and the
// last few batches (kProducerBatchesRemembered).
struct ProducerPartitionState {
  int32_t epoch = -1;
  int32_t last_sequence = -1;
  std::deque<ProducerBatch> recent;
  friend bool operator==(const ProducerPartitionState&, const ProducerPartitionState&) = default;
};

// The verdict on a batch of `count` records starting at `base_sequence`.
struct SequenceCheck {
  enum Kind { kAppend, kDuplicate } kind = kAppend;
  const ProducerBatch* original = nullptr;  // for kDuplicate
};

// Kafka's idempotence rule for one partition. `current_epoch` is the producer's latest epoch.
// FAILED_PRECONDITION: fenced (request epoch older than current), unknown epoch (newer), a
// sequence gap, or a duplicate too old to be remembered. INVALID_ARGUMENT: negative sequence.
absl::StatusOr<SequenceCheck> CheckSequence(const ProducerPartitionState& state,
                                            int32_t current_epoch, ProducerId producer_id,
                                            int32_t request_epoch, int32_t base_sequence,
                                            int32_t count);

// Records an appended batch in `state` (resetting it when the epoch moved on).
void RecordBatch(ProducerPartitionState* state, int32_t epoch, ProducerBatch batch);

}  // namespace conduit::log_broker
