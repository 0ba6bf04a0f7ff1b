#include "services/log_broker/domain/log_cleaner.h"

#include <algorithm>

#include "absl/synchronization/notification.h"
#include "services/log_broker/domain/offset_search.h"

namespace conduit::log_broker {
namespace {

constexpr int32_t kReadChunk = 10'000;
constexpr int64_t kUnlimitedBytes = INT64_MAX;

// The records of one swept chunk that compaction removes.
struct Removable {
  std::vector<int64_t> offsets;
  int64_t bytes = 0;
  std::optional<absl::Time> first_survivor;  // append time of the chunk's first kept record
};

// Superseded records (`latest` maps their key to a newer offset) and tombstones appended before
// `tombstone_cutoff`.
Removable FindRemovable(const std::vector<StoredRecord>& chunk,
                        const absl::flat_hash_map<std::string, int64_t>& latest,
                        absl::Time tombstone_cutoff) {
  Removable doomed;
  for (const StoredRecord& r : chunk) {
    bool remove = false;
    if (r.data.key) {
      auto it = latest.find(*r.data.key);
      const bool superseded = it != latest.end() && it->second > r.offset;
      const bool expired_tombstone = !r.data.value && r.append_time < tombstone_cutoff;
      remove = superseded || expired_tombstone;
    }
    if (remove) {
      doomed.offsets.push_back(r.offset);
      doomed.bytes += static_cast<int64_t>(r.data.PayloadBytes());
    } else if (!doomed.first_survivor) {
      doomed.first_survivor = r.append_time;
    }
  }
  return doomed;
}

}  // namespace

LogCleaner::Snapshot LogCleaner::Snap(const PartitionLog& part) {
  const PartitionLog::Extent extent = part.extent();
  return Snapshot{extent.log_start, extent.log_end, extent.bytes};
}

void LogCleaner::RunOnce(const std::vector<std::shared_ptr<TopicState>>& topics) {
  absl::MutexLock lock(&run_mu_);
  absl::flat_hash_map<std::pair<TopicId, int32_t>, CompactionJob> still_compacting;
  for (const auto& topic : topics) {
    if (topic->deleted.load()) continue;
    const TopicConfig config = topic->config();
    const absl::Time now = clock_->Now();
    for (int32_t p = 0; p < topic->partition_count; ++p) {
      if (config.deletes()) ApplyRetention(topic, p, config, now);
      if (config.compacts()) {
        Compact(topic, p, config, now);
        auto key = std::make_pair(topic->id, p);
        still_compacting[key] = std::move(jobs_[key]);
      }
    }
    ExpireDedup(topic, config, now);
  }
  jobs_ = std::move(still_compacting);  // forget deleted topics and changed policies
}

absl::Status LogCleaner::RunMaintenance(const std::shared_ptr<TopicState>& topic,
                                        std::function<void(BatchContext&)> build) {
  absl::Notification written;
  absl::Status result;
  absl::Status queued = pipeline_->SubmitMaintenance(
      MaintenanceOp{topic, std::move(build), [&](absl::Status s) {
                      result = std::move(s);
                      written.Notify();
                    }});
  if (!queued.ok()) return queued;
  written.WaitForNotification();
  return result;
}

void LogCleaner::ApplyRetention(const std::shared_ptr<TopicState>& topic, int32_t partition,
                                const TopicConfig& config, absl::Time now) {
  const Snapshot snap = Snap(topic->partitions[partition]);
  if (snap.start >= snap.end) return;
  const bool by_time = config.retention_time != absl::InfiniteDuration();
  const bool by_size = config.retention_bytes >= 0 && snap.bytes > config.retention_bytes;
  if (!by_time && !by_size) return;

  int64_t time_target = snap.start;
  if (by_time) {
    auto first_kept = FirstOffsetAtOrAfter(store_, topic->id, partition, snap.start, snap.end,
                                           now - config.retention_time);
    if (!first_kept.ok()) return;  // the topic went away, or a read failed: next pass
    time_target = *first_kept;
  }
  if (time_target == snap.start && !by_size) return;

  const std::optional<RetentionCut> cut =
      FindRetentionCut(*topic, partition, config, snap, time_target);
  if (!cut || cut->new_start <= snap.start) return;
  absl::Status status = AdvanceLogStart(topic, partition, snap.start, *cut);
  // A failed write stops the pipeline; the next pass finds the same work.
  if (status.ok() && !cut->survivor_time) RefreshOldest(topic, partition);
}

std::optional<LogCleaner::RetentionCut> LogCleaner::FindRetentionCut(const TopicState& topic,
                                                                     int32_t partition,
                                                                     const TopicConfig& config,
                                                                     const Snapshot& snap,
                                                                     int64_t time_target) {
  // Walk from the log start, removing while the record is too old or the partition too big.
  RetentionCut cut{.new_start = snap.start};
  int64_t scanned = 0;
  bool reached_end = false;
  int64_t cursor = snap.start;
  while (!cut.survivor_time && scanned < options_.max_records_per_pass) {
    auto chunk = store_->Read(topic.id, partition, cursor, snap.end, kReadChunk, kUnlimitedBytes);
    if (!chunk.ok()) return std::nullopt;
    if (chunk->empty()) {
      reached_end = true;
      break;
    }
    for (const StoredRecord& r : *chunk) {
      const int64_t size = static_cast<int64_t>(r.data.PayloadBytes());
      const bool too_old = r.offset < time_target;
      const bool too_big =
          config.retention_bytes >= 0 && snap.bytes - cut.removed_bytes > config.retention_bytes;
      if (!too_old && !too_big) {
        cut.survivor_time = r.append_time;
        break;
      }
      ++cut.removed;
      cut.removed_bytes += size;
      cut.new_start = r.offset + 1;
      if (++scanned >= options_.max_records_per_pass) break;
    }
    cursor = chunk->back().offset + 1;
  }
  // Past the last record, only holes remain up to the time target.
  if (reached_end) cut.new_start = std::max(cut.new_start, std::min(time_target, snap.end));
  return cut;
}

absl::Status LogCleaner::AdvanceLogStart(const std::shared_ptr<TopicState>& topic,
                                         int32_t partition, int64_t old_start,
                                         const RetentionCut& cut) {
  return RunMaintenance(topic, [=, this](BatchContext& ctx) {
    BatchContext::Staged& s = ctx.Stage(topic.get(), partition);
    if (s.meta.log_start_offset != old_start) return;  // moved since we looked
    s.meta.log_start_offset = cut.new_start;
    s.meta.record_count -= cut.removed;
    s.meta.bytes -= cut.removed_bytes;
    if (cut.survivor_time) {
      s.oldest_append_time = *cut.survivor_time;
    } else {
      s.oldest_append_time = s.meta.record_count > 0 ? ctx.now() : absl::InfinitePast();
    }
    ctx.writes().range_deletes.push_back(
        WriteSet::RangeDelete{topic->id, partition, old_start, cut.new_start});
    ctx.OnCommit([=, this] {
      observer_->OnRecordsRemoved(topic->name, false, cut.removed, cut.removed_bytes);
    });
  });
}

void LogCleaner::RefreshOldest(const std::shared_ptr<TopicState>& topic, int32_t partition) {
  const Snapshot snap = Snap(topic->partitions[partition]);
  auto first = store_->Read(topic->id, partition, snap.start, snap.end, 1, 1);
  if (!first.ok() || first->empty()) return;
  const absl::Time oldest = first->front().append_time;
  (void)RunMaintenance(topic, [=](BatchContext& ctx) {
    BatchContext::Staged& s = ctx.Stage(topic.get(), partition);
    if (s.meta.log_start_offset == snap.start) s.oldest_append_time = oldest;
  });
}

void LogCleaner::Compact(const std::shared_ptr<TopicState>& topic, int32_t partition,
                         const TopicConfig& config, absl::Time now) {
  CompactionJob& job = jobs_[std::make_pair(topic->id, partition)];
  int64_t budget = options_.max_records_per_pass;
  bool more = true;
  while (more && budget > 0) {
    const Snapshot snap = Snap(topic->partitions[partition]);
    job.clean_upto = std::max(job.clean_upto, snap.start);
    switch (job.phase) {
      case CompactionJob::Phase::kIdle:
        more = StartCompactionRound(job, snap, config, now);
        break;
      case CompactionJob::Phase::kMap:
        more = MapDirtyKeys(job, *topic, partition, snap, &budget);
        break;
      case CompactionJob::Phase::kSweep:
        more = SweepChunk(job, topic, partition, config, now, snap, &budget);
        break;
    }
  }
}

bool LogCleaner::StartCompactionRound(CompactionJob& job, const Snapshot& snap,
                                      const TopicConfig& config, absl::Time now) {
  const bool dirty = job.clean_upto < snap.end;
  // With nothing new, sweep again only to expire tombstones.
  const bool tombstones_due =
      snap.start < snap.end && now - job.last_sweep >= config.tombstone_retention;
  if (!dirty && !tombstones_due) return false;
  job.latest.clear();
  job.cursor = job.clean_upto;
  job.dirty_end = job.clean_upto;
  job.phase = dirty ? CompactionJob::Phase::kMap : CompactionJob::Phase::kSweep;
  if (!dirty) job.cursor = snap.start;
  return true;
}

bool LogCleaner::MapDirtyKeys(CompactionJob& job, const TopicState& topic, int32_t partition,
                              const Snapshot& snap, int64_t* budget) {
  auto chunk =
      store_->Read(topic.id, partition, job.cursor, snap.end,
                   static_cast<int32_t>(std::min<int64_t>(*budget, kReadChunk)), kUnlimitedBytes);
  if (!chunk.ok()) return false;
  for (const StoredRecord& r : *chunk) {
    if (r.data.key) job.latest[*r.data.key] = r.offset;
    job.cursor = r.offset + 1;
    if (job.latest.size() >= options_.max_compaction_keys) break;
  }
  *budget -= static_cast<int64_t>(chunk->size());
  if (chunk->empty() || job.cursor >= snap.end ||
      job.latest.size() >= options_.max_compaction_keys) {
    job.dirty_end = chunk->empty() ? snap.end : job.cursor;
    job.cursor = snap.start;
    job.phase = CompactionJob::Phase::kSweep;
  }
  return true;
}

bool LogCleaner::SweepChunk(CompactionJob& job, const std::shared_ptr<TopicState>& topic,
                            int32_t partition, const TopicConfig& config, absl::Time now,
                            const Snapshot& snap, int64_t* budget) {
  job.cursor = std::max(job.cursor, snap.start);
  const int64_t sweep_end = std::max(job.dirty_end, job.clean_upto);
  auto chunk =
      store_->Read(topic->id, partition, job.cursor, sweep_end,
                   static_cast<int32_t>(std::min<int64_t>(*budget, options_.max_deletes_per_write)),
                   kUnlimitedBytes);
  if (!chunk.ok()) return false;
  if (chunk->empty()) {
    job.clean_upto = sweep_end;
    job.last_sweep = now;
    job.latest.clear();
    job.phase = CompactionJob::Phase::kIdle;
    return false;  // at most one completed round per pass
  }
  *budget -= static_cast<int64_t>(chunk->size());
  const Removable doomed = FindRemovable(*chunk, job.latest, now - config.tombstone_retention);
  job.cursor = chunk->back().offset + 1;
  if (doomed.offsets.empty()) return true;
  const bool first_record_removed =
      chunk->front().offset == snap.start && doomed.offsets.front() == snap.start;
  absl::Status status = RunMaintenance(topic, [=, this](BatchContext& ctx) {
    BatchContext::Staged& s = ctx.Stage(topic.get(), partition);
    int64_t count = 0, bytes_removed = doomed.bytes;
    for (int64_t offset : doomed.offsets) {
      if (offset < s.meta.log_start_offset) continue;  // retention got there first
      ctx.writes().record_deletes.push_back(WriteSet::RecordDelete{topic->id, partition, offset});
      ++count;
    }
    if (count != static_cast<int64_t>(doomed.offsets.size())) return;  // stale: redo next round
    s.meta.record_count -= count;
    s.meta.bytes -= bytes_removed;
    if (first_record_removed) {
      s.oldest_append_time = doomed.first_survivor     ? *doomed.first_survivor
                             : s.meta.record_count > 0 ? ctx.now()
                                                       : absl::InfinitePast();
    }
    ctx.OnCommit(
        [=, this] { observer_->OnRecordsRemoved(topic->name, true, count, bytes_removed); });
  });
  if (!status.ok()) return false;
  if (first_record_removed && !doomed.first_survivor) RefreshOldest(topic, partition);
  return true;
}

void LogCleaner::ExpireDedup(const std::shared_ptr<TopicState>& topic, const TopicConfig& config,
                             absl::Time now) {
  const absl::Time cutoff = now - config.dedup_window;
  const int32_t limit = options_.max_dedup_expiries_per_pass;
  for (int32_t p = 0; p < topic->partition_count; ++p) {
    if (!topic->partitions[p].dedup.maybe_has_entries()) continue;
    (void)RunMaintenance(topic, [topic, p, cutoff, limit](BatchContext& ctx) {
      // Writer thread: the partition's dedup window is ours to read here.
      DedupWindow& window = topic->partitions[p].dedup;
      DedupWindow::Expiry plan = window.PlanExpiry(cutoff, limit);
      if (plan.popped == 0) return;
      for (const auto& [id, time] : plan.current) {
        ctx.writes().dedup_deletes.push_back(WriteSet::DedupDelete{topic->id, p, id});
      }
      ctx.OnCommit([topic, p, plan = std::move(plan)] { topic->partitions[p].dedup.Expire(plan); });
    });
  }
}

}  // namespace conduit::log_broker
