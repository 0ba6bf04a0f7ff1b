// AppendPipeline::AddProduce: the rules one produce request meets on the writer thread —
// idempotent-producer sequences, the dedup window, offset assignment and bookkeeping.

#include "absl/strings/str_cat.h"
#include "services/log_broker/domain/append_pipeline.h"

namespace conduit::log_broker {

void AppendPipeline::AddProduce(Pending& p, BatchContext& ctx, bool* sync) {
  TopicState* topic = p.topic.get();
  const TopicConfig config = topic->config();
  const size_t n = p.records.size();
  p.outcome.result.positions.resize(n);
  p.outcome.result.append_time = ctx.now();
  // A request answered from records staged in this very batch must wait for the batch to be
  // durable like any append: acknowledging it earlier could acknowledge a record that is lost.
  bool answered_from_batch = false;
  auto wait_for_batch = [&] {
    *sync |= config.durability == Durability::kSync;
    p.outcome.state = Outcome::kLive;
  };

  // Idempotence: one verdict per partition the request writes to.
  absl::flat_hash_map<int32_t, int32_t> counts;
  for (const RoutedRecord& r : p.records) ++counts[r.partition];
  if (p.stamp) {
    const int64_t producer_id = p.stamp->producer_id;
    const int32_t current = producers_->CurrentEpoch(producer_id);
    if (current < 0) {
      p.Answer(absl::FailedPreconditionError(
          absl::StrCat("unknown producer id ", producer_id, "; call InitProducer")));
      return;
    }
    absl::flat_hash_map<int32_t, const ProducerBatch*> originals;
    static const ProducerPartitionState kNew;
    for (const auto& [partition, count] : counts) {
      PartitionState* part = &topic->partitions[partition];
      const ProducerPartitionState* state = &kNew;
      if (auto staged = ctx.producers_.find(std::make_pair(part, producer_id));
          staged != ctx.producers_.end()) {
        state = &staged->second.state;
        answered_from_batch = true;
      } else if (auto known = part->producers.find(producer_id); known != part->producers.end()) {
        state = &known->second;
      }
      auto verdict = CheckSequence(*state, current, producer_id, p.stamp->epoch,
                                   p.stamp->base_sequences.at(partition), count);
      if (!verdict.ok()) {
        p.Answer(verdict.status());
        return;
      }
      if (verdict->kind == SequenceCheck::kDuplicate) originals[partition] = verdict->original;
    }
    if (!originals.empty()) {
      if (originals.size() != counts.size()) {
        p.Answer(absl::FailedPreconditionError(
            "request mixes a retried batch with new records in other partitions"));
        return;
      }
      // A retry of a batch already appended: answer with the original positions.
      absl::flat_hash_map<int32_t, int> seen;
      for (size_t i = 0; i < n; ++i) {
        const int32_t partition = p.records[i].partition;
        RecordPosition pos = originals[partition]->PositionOf(partition, seen[partition]++);
        pos.duplicate = true;
        p.outcome.result.positions[i] = pos;
      }
      observer_->OnDuplicatesDropped(topic->name, static_cast<int64_t>(n));
      if (answered_from_batch) {
        wait_for_batch();
      } else {
        p.Answer(std::move(p.outcome.result));
      }
      return;
    }
  }

  // Append every record that is not an event-id duplicate within the dedup window.
  absl::flat_hash_map<int32_t, ProducerBatch> batches;  // idempotent: per partition
  bool appended = false;
  int64_t duplicates = 0;
  const bool dedup = config.dedup_window > absl::ZeroDuration();
  for (size_t i = 0; i < n; ++i) {
    RoutedRecord& r = p.records[i];
    PartitionState* part = &topic->partitions[r.partition];
    if (dedup && !r.data.event_id.empty()) {
      const DedupEntry* seen = nullptr;
      if (auto it = ctx.dedup_.find(std::make_pair(topic, r.data.event_id));
          it != ctx.dedup_.end()) {
        seen = &it->second;
        answered_from_batch = true;
      } else if (auto it2 = topic->dedup.find(r.data.event_id); it2 != topic->dedup.end()) {
        seen = &it2->second;
      }
      if (seen && seen->append_time > ctx.now() - config.dedup_window) {
        RecordPosition pos = seen->position;
        pos.duplicate = true;
        p.outcome.result.positions[i] = pos;
        ++duplicates;
        if (p.stamp) batches[r.partition].positions.push_back(pos);
        continue;
      }
    }
    BatchContext::Staged& s = ctx.Stage(topic, r.partition);
    const int64_t offset = part->next_offset++;
    if (s.meta.record_count == 0) s.oldest_append_time = ctx.now();
    s.meta.next_offset = part->next_offset;
    s.meta.record_count += 1;
    s.meta.bytes += static_cast<int64_t>(r.data.PayloadBytes());
    if (r.data.event_time) {
      s.meta.max_event_time = std::max(s.meta.max_event_time, *r.data.event_time);
    }
    s.appended = true;
    appended = true;
    ctx.writes_.records.push_back(AppendEntry{topic->id, r.partition, offset, ctx.now(), &r.data});
    p.outcome.result.positions[i] = RecordPosition{r.partition, offset};
    if (p.stamp) batches[r.partition].positions.push_back(RecordPosition{r.partition, offset});
    if (dedup && !r.data.event_id.empty()) {
      DedupEntry entry{RecordPosition{r.partition, offset}, ctx.now()};
      ctx.dedup_[std::make_pair(topic, r.data.event_id)] = entry;
      ctx.writes_.dedup_puts.push_back(WriteSet::DedupPut{topic->id, r.data.event_id, entry});
    }
  }
  if (duplicates > 0) observer_->OnDuplicatesDropped(topic->name, duplicates);
  if (p.stamp) {
    for (auto& [partition, batch] : batches) {
      batch.base_sequence = p.stamp->base_sequences.at(partition);
      batch.count = counts[partition];
      batch.first_offset = batch.positions.front().offset;
      bool contiguous = true;
      for (size_t i = 0; i < batch.positions.size(); ++i) {
        contiguous &= !batch.positions[i].duplicate && batch.positions[i].partition == partition &&
                      batch.positions[i].offset == batch.first_offset + static_cast<int64_t>(i);
      }
      if (contiguous) batch.positions.clear();
      PartitionState* part = &topic->partitions[partition];
      auto [it, inserted] = ctx.producers_.try_emplace(std::make_pair(part, p.stamp->producer_id));
      if (inserted) {
        it->second = BatchContext::StagedProducer{topic, partition, {}};
        if (auto known = part->producers.find(p.stamp->producer_id);
            known != part->producers.end()) {
          it->second.state = known->second;
        }
      }
      RecordBatch(&it->second.state, p.stamp->epoch, std::move(batch));
    }
  }
  // Every record was a duplicate of a durable one and no producer state changes: done now.
  if (!appended && !p.stamp && !answered_from_batch) {
    p.Answer(std::move(p.outcome.result));
    return;
  }
  wait_for_batch();
}

}  // namespace conduit::log_broker
