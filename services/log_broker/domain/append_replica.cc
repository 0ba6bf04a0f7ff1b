// AppendPipeline on a follower: the leader's records appended as they are, and truncation of a
// divergent suffix. Both run on the writer thread inside a group-committed batch.

#include <algorithm>
#include <memory>
#include <utility>

#include "absl/strings/str_format.h"
#include "services/log_broker/domain/append_pipeline.h"

namespace conduit::log_broker {

std::unique_ptr<ReplicaRecords> ReplicaRecords::FromDecoded(std::vector<StoredRecord> records) {
  auto out = std::make_unique<ReplicaRecords>();
  out->decoded = std::move(records);
  out->records.reserve(out->decoded.size());
  for (const StoredRecord& r : out->decoded) {
    out->records.push_back(ReplicaRecord{r.offset, r.append_time, r.leader_epoch,
                                         static_cast<int64_t>(r.data.PayloadBytes()),
                                         r.data.event_time, r.data.event_id, r.producer, {},
                                         &r.data});
  }
  return out;
}

absl::Status AppendPipeline::SubmitReplicated(std::shared_ptr<TopicState> topic,
                                              int32_t partition,
                                              std::unique_ptr<ReplicaRecords> records,
                                              std::function<void(absl::Status)> done) {
  std::shared_ptr<const ReplicaRecords> fetched = std::move(records);
  auto misplaced = std::make_shared<absl::Status>();
  MaintenanceOp op;
  op.topic = topic;
  op.build = [topic = topic.get(), partition, fetched, misplaced](BatchContext& ctx) {
    PartitionLog* part = &topic->partitions[partition];
    const std::vector<ReplicaRecord>& owned = fetched->records;
    if (owned.empty()) return;
    if (owned.front().offset < part->next_offset) {
      *misplaced = absl::FailedPreconditionError(absl::StrFormat(
          "records from offset %d do not follow the log end %d of %s/%d", owned.front().offset,
          part->next_offset, topic->name, partition));
      return;
    }
    BatchContext::Staged& s = ctx.Stage(topic, partition);
    s.append_time = absl::InfinitePast();
    // Room for this fetch's records at once (a batch may take several: still doubling).
    std::vector<AppendEntry>& entries = ctx.writes().records;
    if (entries.capacity() < entries.size() + owned.size()) {
      entries.reserve(std::max(entries.size() + owned.size(), 2 * entries.capacity()));
    }
    const bool dedup = topic->config().dedup_window > absl::ZeroDuration();
    for (const ReplicaRecord& r : owned) {
      if (r.offset < part->next_offset) continue;  // never out of order from one leader
      part->next_offset = r.offset + 1;
      if (s.meta.record_count == 0) s.oldest_append_time = r.append_time;
      s.meta.next_offset = part->next_offset;
      s.meta.leader_epoch = r.leader_epoch;
      s.meta.record_count += 1;
      s.meta.bytes += r.payload_bytes;
      if (r.event_time) s.meta.max_event_time = std::max(s.meta.max_event_time, *r.event_time);
      s.append_time = std::max(s.append_time, r.append_time);
      s.appended = true;
      if (r.leader_epoch > s.last_started_epoch) {
        s.last_started_epoch = r.leader_epoch;
        s.epoch_starts.emplace(r.leader_epoch, r.offset);
        ctx.writes().epoch_starts.push_back(
            WriteSet::EpochStart{topic->id, partition, r.leader_epoch, r.offset});
      }
      ctx.writes().records.push_back(AppendEntry{topic->id, partition, r.offset, r.append_time,
                                                 r.leader_epoch, r.data, r.producer, r.stored});
      if (dedup && !r.event_id.empty()) {
        DedupEntry entry{RecordPosition{partition, r.offset}, r.append_time};
        std::string event_id(r.event_id);
        ctx.dedup_[std::make_pair(part, event_id)] = entry;
        ctx.writes_.dedup_puts.push_back(WriteSet::DedupPut{topic->id, std::move(event_id), entry});
      }
      if (r.producer && r.producer->index + 1 == r.producer->count) {
        // The batch's last record: the whole batch is here, so a retry of it is a duplicate.
        // (A batch cut by a fetch boundary counts once its end arrives; one whose end never
        // does is not recognised, so a retry appends it again rather than being answered
        // with offsets that do not hold it.)
        StageReplicatedBatch(ctx, topic, partition, *r.producer, r.offset);
      }
    }
    // A follower's end counts toward the high watermark once durable: a sync topic's copy
    // must be fsynced before the follower asks for more (and so reports it).
    if (topic->config().durability == Durability::kSync) ctx.RequireSync();
  };
  op.done = [done = std::move(done), misplaced](absl::Status s) {
    done(s.ok() ? *misplaced : s);
  };
  return SubmitMaintenance(std::move(op));
}

void AppendPipeline::StageReplicatedBatch(BatchContext& ctx, TopicState* topic, int32_t partition,
                                          const ProducerTag& tag, int64_t last_offset) {
  PartitionLog* part = &topic->partitions[partition];
  const ProducerId id(tag.producer_id);
  auto [it, inserted] = ctx.producers_.try_emplace(std::make_pair(part, id));
  if (inserted) {
    it->second = BatchContext::StagedProducer{topic, partition, {}};
    if (auto known = part->producers.find(id); known != part->producers.end()) {
      it->second.state = known->second;
    }
  }
  ProducerBatch batch;
  batch.base_sequence = tag.base_sequence;
  batch.count = tag.count;
  batch.first_offset = last_offset - tag.index;
  RecordBatch(&it->second.state, tag.epoch, std::move(batch));
}

absl::Status AppendPipeline::SubmitTruncate(std::shared_ptr<TopicState> topic, int32_t partition,
                                            int64_t offset, std::function<void(absl::Status)> done) {
  auto failed = std::make_shared<absl::Status>();
  MaintenanceOp op;
  op.topic = topic;
  op.build = [this, topic = topic.get(), partition, offset, failed](BatchContext& ctx) {
    PartitionLog* part = &topic->partitions[partition];
    BatchContext::Staged& s = ctx.Stage(topic, partition);
    const int64_t end = part->next_offset;
    if (offset == end) return;
    const bool restart = offset > end;  // the leader's log starts past ours: start over there
    const int64_t from = restart ? s.meta.log_start_offset : std::max(offset, s.meta.log_start_offset);
    // What goes, for the bookkeeping's counts.
    int64_t gone = 0, gone_bytes = 0;
    for (int64_t at = from; at < end;) {
      auto records = store_->Read(topic->id, partition, at, end, 10000, 64 << 20);
      if (!records.ok()) {
        *failed = records.status();
        return;
      }
      if (records->empty()) break;
      for (const auto& r : *records) {
        ++gone;
        gone_bytes += static_cast<int64_t>(r.data.PayloadBytes());
      }
      at = records->back().offset + 1;
    }
    ctx.writes().range_deletes.push_back(WriteSet::RangeDelete{topic->id, partition, from, end});
    const int64_t new_end = restart ? offset : from;
    // The epoch of the last record that stays.
    const LeaderEpoch last_kept_epoch = restart ? kNoLeaderEpoch : part->EpochBefore(new_end);
    ctx.writes().epoch_truncates.push_back(
        WriteSet::EpochTruncate{topic->id, partition, NextEpoch(last_kept_epoch)});
    part->next_offset = new_end;
    s.meta.next_offset = new_end;
    if (restart) s.meta.log_start_offset = new_end;
    s.meta.record_count = std::max<int64_t>(0, s.meta.record_count - gone);
    s.meta.bytes = std::max<int64_t>(0, s.meta.bytes - gone_bytes);
    s.meta.leader_epoch = std::max(last_kept_epoch, LeaderEpoch(0));
    s.last_started_epoch = restart ? kNoLeaderEpoch : last_kept_epoch;
    s.epoch_starts.clear();
    s.truncated_to = new_end;
    s.restarted = restart;
  };
  op.done = [done = std::move(done), failed](absl::Status s) { done(s.ok() ? *failed : s); };
  return SubmitMaintenance(std::move(op));
}

}  // namespace conduit::log_broker
