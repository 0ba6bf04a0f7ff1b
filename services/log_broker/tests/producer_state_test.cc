#include "services/log_broker/domain/producer_state.h"

#include <gtest/gtest.h>

#include "services/log_broker/domain/limits.h"

namespace conduit::log_broker {
namespace {

const ProducerId kProducer(1);

TEST(ProducerState, SequencesEpochsAndRememberedBatches) {
  ProducerPartitionState state;
  EXPECT_EQ(CheckSequence(state, 0, kProducer, 0, 0, 3)->kind, SequenceCheck::kAppend);
  EXPECT_EQ(CheckSequence(state, 0, kProducer, 0, 1, 3).status().code(), absl::StatusCode::kAborted)
      << "a gap: this batch overtook an earlier one";
  RecordBatch(&state, 0, ProducerBatch{0, 3, 100, {}});
  EXPECT_EQ(state.last_sequence, 2);
  auto dup = CheckSequence(state, 0, kProducer, 0, 0, 3);
  ASSERT_EQ(dup->kind, SequenceCheck::kDuplicate);
  EXPECT_EQ(dup->original->PositionOf(0, 2), (RecordPosition{0, 102}));
  EXPECT_EQ(CheckSequence(state, 0, kProducer, 0, 3, 1)->kind, SequenceCheck::kAppend);

  for (int i = 0; i < kProducerBatchesRemembered; ++i) {
    RecordBatch(&state, 0, ProducerBatch{3 + i, 1, 200 + i, {}});
  }
  EXPECT_EQ(CheckSequence(state, 0, kProducer, 0, 0, 3).status().code(),
            absl::StatusCode::kFailedPrecondition)
      << "too old to be remembered";
  // Epochs: older is fenced, newer than current is unknown, a new epoch restarts at 0.
  EXPECT_EQ(CheckSequence(state, 1, kProducer, 0, 8, 1).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(CheckSequence(state, 0, kProducer, 1, 0, 1).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(CheckSequence(state, 1, kProducer, 1, 0, 1)->kind, SequenceCheck::kAppend);
  RecordBatch(&state, 1, ProducerBatch{0, 1, 300, {}});
  EXPECT_EQ(state.recent.size(), 1u);
  EXPECT_EQ(state.epoch, 1);
}

TEST(ProducerState, NonContiguousBatchesAnswerWithTheirOwnOffsets) {
  // The middle record was an event-id duplicate of a record in partition 1.
  ProducerBatch batch{0, 3, 10, {{0, 10}, {1, 4, true}, {0, 11}}};
  EXPECT_EQ(batch.PositionOf(0, 0), (RecordPosition{0, 10}));
  EXPECT_EQ(batch.PositionOf(0, 1), (RecordPosition{1, 4, true}));
  EXPECT_EQ(batch.PositionOf(0, 2), (RecordPosition{0, 11}));
  ProducerPartitionState state;
  EXPECT_EQ(CheckSequence(state, 0, kProducer, 0, INT32_MAX - 1, 5).status().code(),
            absl::StatusCode::kInvalidArgument)
      << "sequence overflow";
}

}  // namespace
}  // namespace conduit::log_broker
