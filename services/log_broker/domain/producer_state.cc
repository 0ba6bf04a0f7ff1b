#include "services/log_broker/domain/producer_state.h"

#include "absl/strings/str_format.h"
#include "services/log_broker/domain/limits.h"

namespace conduit::log_broker {

absl::StatusOr<SequenceCheck> CheckSequence(const ProducerPartitionState& state,
                                            int32_t current_epoch, ProducerId producer_id,
                                            int32_t request_epoch, int32_t base_sequence,
                                            int32_t count) {
  if (request_epoch < current_epoch) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "producer %d epoch %d is fenced by epoch %d (a newer instance called InitProducer)",
        producer_id.value(), request_epoch, current_epoch));
  }
  if (request_epoch > current_epoch) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "producer %d has no epoch %d (current %d); call InitProducer", producer_id.value(), request_epoch,
        current_epoch));
  }
  if (base_sequence < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("base sequence must be >= 0, got %d", base_sequence));
  }
  if (int64_t{base_sequence} + count - 1 > INT32_MAX) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "producer %d: sequences past %d; call InitProducer for a new epoch", producer_id.value(),
        INT32_MAX));
  }
  // A new epoch starts its sequences again at 0.
  const int32_t last = state.epoch == request_epoch ? state.last_sequence : -1;
  if (base_sequence == last + 1) return SequenceCheck{SequenceCheck::kAppend, nullptr};
  if (base_sequence <= last && state.epoch == request_epoch) {
    for (const ProducerBatch& batch : state.recent) {
      if (batch.base_sequence == base_sequence && batch.count == count) {
        return SequenceCheck{SequenceCheck::kDuplicate, &batch};
      }
    }
    return absl::FailedPreconditionError(absl::StrFormat(
        "producer %d sequence %d was already appended but is not among the last %d batches "
        "(last sequence %d)",
        producer_id.value(), base_sequence, kProducerBatchesRemembered, last));
  }
  // ABORTED, gRPC's code for a failed sequencer check: a pipelining producer sends this batch
  // again once the batch it overtook is in.
  return absl::AbortedError(absl::StrFormat(
      "producer %d sequence gap: expected sequence %d, got %d", producer_id.value(), last + 1,
      base_sequence));
}

void RecordBatch(ProducerPartitionState* state, int32_t epoch, ProducerBatch batch) {
  if (state->epoch != epoch) {
    state->epoch = epoch;
    state->recent.clear();
  }
  state->last_sequence = batch.base_sequence + batch.count - 1;
  state->recent.push_back(std::move(batch));
  while (state->recent.size() > static_cast<size_t>(kProducerBatchesRemembered)) {
    state->recent.pop_front();
  }
}

}  // namespace conduit::log_broker
