// AppendPipeline::AddProduce: the rules one produce request meets on the writer thread —
// idempotent-producer sequences, the dedup window, offset assignment and bookkeeping.

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "services/log_broker/domain/append_pipeline.h"

namespace conduit::log_broker {
namespace {

// Answers a retry of an appended batch: each record's position in the original batches.
void FillRetriedPositions(const std::vector<RoutedRecord>& records,
                          const absl::flat_hash_map<int32_t, const ProducerBatch*>& originals,
                          std::vector<RecordPosition>* positions) {
  absl::flat_hash_map<int32_t, int> seen;
  for (size_t i = 0; i < records.size(); ++i) {
    const int32_t partition = records[i].partition;
    RecordPosition pos = originals.at(partition)->PositionOf(partition, seen[partition]++);
    pos.duplicate = true;
    (*positions)[i] = pos;
  }
}

// Assigns the record the partition's next offset and stages it; returns the offset.
int64_t StageRecord(BatchContext& ctx, TopicState* topic, const RoutedRecord& r,
                    std::optional<ProducerTag> producer) {
  BatchContext::Staged& s = ctx.Stage(topic, r.partition);
  PartitionLog* part = &topic->partitions[r.partition];
  const int64_t offset = part->next_offset++;
  if (s.meta.record_count == 0) s.oldest_append_time = s.append_time;
  s.meta.next_offset = part->next_offset;
  s.meta.leader_epoch = s.leader_epoch;
  s.meta.record_count += 1;
  s.meta.bytes += static_cast<int64_t>(r.data.PayloadBytes());
  if (r.data.event_time) {
    s.meta.max_event_time = std::max(s.meta.max_event_time, *r.data.event_time);
  }
  s.appended = true;
  if (s.leader_epoch > s.last_started_epoch) {  // the first record of a new epoch here
    s.last_started_epoch = s.leader_epoch;
    s.epoch_starts.emplace(s.leader_epoch, offset);
    ctx.writes().epoch_starts.push_back(
        WriteSet::EpochStart{topic->id, r.partition, s.leader_epoch, offset});
  }
  ctx.writes().records.push_back(
      AppendEntry{topic->id, r.partition, offset, s.append_time, s.leader_epoch, &r.data, producer});
  return offset;
}

// Whether the batch's records sit at first_offset, first_offset+1, ... of `partition`, so
// ProducerBatch need not remember their positions.
bool IsContiguous(const ProducerBatch& batch, int32_t partition) {
  bool contiguous = true;
  for (size_t i = 0; i < batch.positions.size(); ++i) {
    contiguous &= !batch.positions[i].duplicate && batch.positions[i].partition == partition &&
                  batch.positions[i].offset == batch.first_offset + static_cast<int64_t>(i);
  }
  return contiguous;
}

}  // namespace

void AppendPipeline::AddProduce(Pending& p, BatchContext& ctx, bool* sync) {
  const TopicConfig config = p.topic->config();
  p.outcome.result.positions.resize(p.records.size());
  p.outcome.result.append_time = ctx.now();
  // A request answered from records staged in this very batch must wait for the batch to be
  // durable like any append: acknowledging it earlier could acknowledge a record that is lost.
  bool answered_from_batch = false;
  auto wait_for_batch = [&] {
    *sync |= config.durability == Durability::kSync;
    p.outcome.state = Outcome::kLive;
  };

  absl::flat_hash_map<int32_t, int32_t> counts;  // records per partition
  for (const RoutedRecord& r : p.records) ++counts[r.partition];
  // A partition this broker stopped leading after the request was queued: ApplyView makes it a
  // follower before its fetcher truncates it, so a truncation in this batch could otherwise be
  // overtaken by records the new leader never had. Nothing is staged; the client retries.
  for (const auto& [partition, n] : counts) {
    if (p.topic->partitions[partition].IsFollower()) {
      p.Answer(absl::UnavailableError(absl::StrFormat(
          "this broker no longer leads %s/%d (a newer assignment is being applied); retry after "
          "GetMetadata",
          p.topic->name, partition)));
      return;
    }
  }
  if (p.stamp) {
    auto originals = CheckSequences(p, ctx, counts, &answered_from_batch);
    if (!originals.ok()) {
      // A sequence gap: the batch before it may be on its way (see PipelineOptions).
      const bool gap = originals.status().code() == absl::StatusCode::kAborted;
      if (!gap || !Park(p, originals.status())) p.Answer(originals.status());
      return;
    }
    if (!originals->empty()) {
      // A retry of a batch already appended: answer with the original positions.
      FillRetriedPositions(p.records, *originals, &p.outcome.result.positions);
      observer_->OnDuplicatesDropped(p.topic->name, static_cast<int64_t>(p.records.size()));
      if (answered_from_batch) {
        wait_for_batch();
      } else {
        p.Answer(std::move(p.outcome.result));
      }
      return;
    }
  }

  absl::flat_hash_map<int32_t, ProducerBatch> batches;  // idempotent: per partition
  const bool appended = AppendRecords(p, ctx, config, &batches, &answered_from_batch);
  if (p.stamp) StageProducerBatches(p, ctx, counts, std::move(batches));
  // Every record was a duplicate of a durable one and no producer state changes: done now.
  if (!appended && !p.stamp && !answered_from_batch) {
    p.Answer(std::move(p.outcome.result));
    return;
  }
  wait_for_batch();
}

absl::StatusOr<absl::flat_hash_map<int32_t, const ProducerBatch*>> AppendPipeline::CheckSequences(
    const Pending& p, BatchContext& ctx, const absl::flat_hash_map<int32_t, int32_t>& counts,
    bool* answered_from_batch) const {
  TopicState* topic = p.topic.get();
  const ProducerId producer_id = p.stamp->producer_id;
  const int32_t current = options_.learn_producer_epochs
                              ? producers_->LearnEpoch(producer_id, p.stamp->epoch)
                              : producers_->CurrentEpoch(producer_id);
  if (current < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("unknown producer id ", producer_id.value(), "; call InitProducer"));
  }
  absl::flat_hash_map<int32_t, const ProducerBatch*> originals;
  static const ProducerPartitionState kNew;
  for (const auto& [partition, count] : counts) {
    PartitionLog* part = &topic->partitions[partition];
    const ProducerPartitionState* state = &kNew;
    if (auto staged = ctx.producers_.find(std::make_pair(part, producer_id));
        staged != ctx.producers_.end()) {
      state = &staged->second.state;
      *answered_from_batch = true;
    } else if (auto known = part->producers.find(producer_id); known != part->producers.end()) {
      state = &known->second;
    }
    // A partition's own producer state fences too: its epoch is durable with its records, so a
    // zombie is refused after a restart or a move, before its epoch is learnt again.
    auto verdict = CheckSequence(*state, std::max(current, state->epoch), producer_id, p.stamp->epoch,
                                 p.stamp->base_sequences.at(partition), count);
    if (!verdict.ok()) return verdict.status();
    if (verdict->kind == SequenceCheck::kDuplicate) originals[partition] = verdict->original;
  }
  if (!originals.empty() && originals.size() != counts.size()) {
    return absl::FailedPreconditionError(
        "request mixes a retried batch with new records in other partitions");
  }
  return originals;
}

bool AppendPipeline::AppendRecords(Pending& p, BatchContext& ctx, const TopicConfig& config,
                                   absl::flat_hash_map<int32_t, ProducerBatch>* batches,
                                   bool* answered_from_batch) {
  TopicState* topic = p.topic.get();
  bool appended = false;
  int64_t duplicates = 0;
  const bool dedup = config.dedup_window > absl::ZeroDuration();
  absl::flat_hash_map<int32_t, int32_t> counts, seen;  // records per partition (idempotent)
  if (p.stamp) {
    for (const RoutedRecord& r : p.records) ++counts[r.partition];
  }
  for (size_t i = 0; i < p.records.size(); ++i) {
    RoutedRecord& r = p.records[i];
    PartitionLog* part = &topic->partitions[r.partition];
    // Every record of an idempotent batch carries the batch, so followers rebuild the state.
    std::optional<ProducerTag> tag;
    if (p.stamp) {
      tag = ProducerTag{p.stamp->producer_id.value(), p.stamp->epoch,
                        p.stamp->base_sequences.at(r.partition), counts[r.partition],
                        seen[r.partition]++};
    }
    if (dedup && !r.data.event_id.empty()) {
      if (const DedupEntry* seen =
              FindRecentDuplicate(ctx, part, config, r.data.event_id, answered_from_batch)) {
        RecordPosition pos = seen->position;
        pos.duplicate = true;
        p.outcome.result.positions[i] = pos;
        ++duplicates;
        if (p.stamp) (*batches)[r.partition].positions.push_back(pos);
        continue;
      }
    }
    const int64_t offset = StageRecord(ctx, topic, r, tag);
    const absl::Time append_time = ctx.Stage(topic, r.partition).append_time;
    p.outcome.result.append_time = std::max(p.outcome.result.append_time, append_time);
    appended = true;
    p.outcome.result.positions[i] = RecordPosition{r.partition, offset};
    if (p.stamp) (*batches)[r.partition].positions.push_back(RecordPosition{r.partition, offset});
    if (dedup && !r.data.event_id.empty()) {
      DedupEntry entry{RecordPosition{r.partition, offset}, append_time};
      ctx.dedup_[std::make_pair(part, r.data.event_id)] = entry;
      ctx.writes_.dedup_puts.push_back(WriteSet::DedupPut{topic->id, r.data.event_id, entry});
    }
  }
  if (duplicates > 0) observer_->OnDuplicatesDropped(topic->name, duplicates);
  return appended;
}

const DedupEntry* AppendPipeline::FindRecentDuplicate(BatchContext& ctx, PartitionLog* part,
                                                      const TopicConfig& config,
                                                      const std::string& event_id,
                                                      bool* answered_from_batch) {
  const DedupEntry* seen = nullptr;
  if (auto it = ctx.dedup_.find(std::make_pair(part, event_id)); it != ctx.dedup_.end()) {
    seen = &it->second;
    *answered_from_batch = true;
  } else {
    seen = part->dedup.Find(event_id);
  }
  if (seen && seen->append_time > ctx.now() - config.dedup_window) return seen;
  return nullptr;
}

void AppendPipeline::StageProducerBatches(const Pending& p, BatchContext& ctx,
                                          const absl::flat_hash_map<int32_t, int32_t>& counts,
                                          absl::flat_hash_map<int32_t, ProducerBatch> batches) {
  TopicState* topic = p.topic.get();
  const ProducerId producer_id = p.stamp->producer_id;
  for (auto& [partition, batch] : batches) {
    batch.base_sequence = p.stamp->base_sequences.at(partition);
    batch.count = counts.at(partition);
    batch.first_offset = batch.positions.front().offset;
    if (IsContiguous(batch, partition)) batch.positions.clear();
    PartitionLog* part = &topic->partitions[partition];
    auto [it, inserted] = ctx.producers_.try_emplace(std::make_pair(part, producer_id));
    if (inserted) {
      it->second = BatchContext::StagedProducer{topic, partition, {}};
      if (auto known = part->producers.find(producer_id); known != part->producers.end()) {
        it->second.state = known->second;
      }
    }
    RecordBatch(&it->second.state, p.stamp->epoch, std::move(batch));
  }
}

}  // namespace conduit::log_broker
