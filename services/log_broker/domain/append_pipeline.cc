#include "services/log_broker/domain/append_pipeline.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status/status_macros.h"

namespace conduit::log_broker {

BatchContext::Staged& BatchContext::Stage(TopicState* topic, int32_t partition) {
  PartitionLog* part = &topic->partitions[partition];
  auto [it, inserted] = staged_.try_emplace(part);
  if (inserted) {
    Staged& s = it->second;
    s.topic = topic;
    s.partition = partition;
    s.next_offset_before = part->next_offset;
    const PartitionLog::AppendBase base = part->BeginAppend();
    s.meta = base.meta;
    s.leader_epoch = base.leader_epoch;
    s.last_started_epoch = base.last_started_epoch;
    s.oldest_append_time = base.oldest_append_time;
    s.append_time = std::max(now_, base.last_append_time);
  }
  return it->second;
}

AppendPipeline::AppendPipeline(LogStore* store, BrokerObserver* observer, runtime::Scope* scope,
                               ProducerRegistry* producers, PipelineOptions options)
    : store_(store),
      observer_(observer),
      clock_(scope->clock()),
      producers_(producers),
      options_(options),
      scope_(scope) {
  engine_ = std::make_unique<commit::GroupCommit<Pending>>(
      commit::GroupCommitOptions{.service = "broker",
                                 .max_queued_bytes = options.max_queued_bytes,
                                 .max_batch_bytes = options.max_batch_bytes,
                                 .space_check = [store] { return store->CheckSpace(); }},
      clock_, [this](std::vector<Pending>& batch) { return WriteBatch(batch); },
      [this](Pending& p, const absl::Status& outcome) { Complete(p, outcome); });
  if (options_.reorder_wait > absl::ZeroDuration()) {
    reorder_task_ = scope_->Every(options_.reorder_wait / 2, [this] {
      if (parked_requests_.load() == 0) return;
      MaintenanceOp expire;
      expire.build = [this](BatchContext&) ABSL_NO_THREAD_SAFETY_ANALYSIS {
        ExpireParked(clock_->Monotonic());  // on the writer thread, under write_mu_
      };
      expire.done = [](absl::Status) {};
      (void)SubmitMaintenance(std::move(expire));  // UNAVAILABLE only once stopping
    });
  }
}

AppendPipeline::~AppendPipeline() {
  if (reorder_task_ != 0) scope_->StopEvery(reorder_task_);
  engine_.reset();  // writes and answers what is queued
  {
    absl::MutexLock lock(&write_mu_);
    ExpireParked(absl::InfiniteDuration());
  }
  {
    absl::MutexLock lock(&sync_task_mu_);
    if (sync_task_ != 0) scope_->StopEvery(sync_task_);
  }
  // The writer may have written after the last fsync pass: leave nothing unsynced.
  bool unsynced;
  {
    absl::MutexLock lock(&sync_mu_);
    unsynced = unsynced_;
  }
  if (unsynced) (void)store_->SyncWal();
}

absl::Status AppendPipeline::Submit(std::shared_ptr<TopicState> topic,
                                    std::vector<RoutedRecord> records,
                                    std::optional<ProducerStamp> stamp, int64_t bytes,
                                    ProduceCallback done) {
  return engine_->Submit(
      Pending{std::move(topic), std::move(records), std::move(stamp), std::move(done), bytes},
      bytes, commit::Admission::kBounded);
}

absl::Status AppendPipeline::SubmitMaintenance(MaintenanceOp op) {
  Pending p;
  p.topic = op.topic;
  p.maintenance = std::move(op);
  return engine_->Submit(std::move(p), 0, commit::Admission::kAlways);
}

void AppendPipeline::RunExclusive(const std::function<void()>& fn) { engine_->RunExclusive(fn); }

void AppendPipeline::RequestSyncEvery(absl::Duration interval) {
  absl::MutexLock lock(&sync_task_mu_);
  if (interval >= sync_every_) return;
  sync_every_ = interval;
  if (sync_task_ != 0) scope_->StopEvery(sync_task_);
  sync_task_ = scope_->Every(interval, [this] { SyncWalIfNeeded(); });
}

absl::Status AppendPipeline::WriteBatch(std::vector<Pending>& batch) {
  absl::MutexLock write_lock(&write_mu_);
  BatchContext ctx(clock_->Now());
  bool sync = false;
  int requests = 0;
  BuildBatch(batch, ctx, &sync, &requests);
  sync |= ctx.sync_;
  WriteSet& writes = ctx.writes_;
  if (writes.empty()) {
    for (auto& fn : ctx.on_commit_) fn();
    return absl::OkStatus();
  }

  // A sync batch of a partition with followers is written, published and then fsynced, so the
  // followers copy it (and fsync their copies) while this broker fsyncs its own: the high
  // watermark, and so every acknowledgement, stays below the batch until the fsync is done.
  const bool overlap = sync && HasFollowers(ctx);
  const absl::Duration started = clock_->Monotonic();
  // With the disk full the store refuses the write (RESOURCE_EXHAUSTED) and the engine answers
  // the batch with it: the broker can undo what it staged, so it need not hold the batch.
  absl::Status status = store_->Write(writes, sync && !overlap);
  if (!status.ok()) {
    for (auto& [part, s] : ctx.staged_) part->next_offset = s.next_offset_before;
    return status;
  }
  if (overlap) {
    HoldDurableEnds(ctx);
    Publish(ctx);
    // A failed fsync leaves the ends held: nothing of the batch is ever acknowledged here (the
    // engine refuses every later write until a restart).
    CONDUIT_RETURN_IF_ERROR(store_->SyncWal());
  }
  const absl::Duration latency = clock_->Monotonic() - started;
  observer_->OnBatchWritten(requests, static_cast<int>(writes.records.size()), sync, latency);
  if (sync) observer_->OnWalSynced(latency);
  {
    absl::MutexLock lock(&sync_mu_);
    unsynced_ = !sync;
  }
  if (overlap) {
    ReleaseDurableEnds(ctx);
  } else {
    Publish(ctx);
  }
  return absl::OkStatus();
}

bool AppendPipeline::HasFollowers(BatchContext& ctx) {
  for (auto& [part, s] : ctx.staged_) {
    if (part->HasFollowers()) return true;
  }
  return false;
}

void AppendPipeline::HoldDurableEnds(BatchContext& ctx) {
  for (auto& [part, s] : ctx.staged_) part->HoldDurableEnd();
}

void AppendPipeline::ReleaseDurableEnds(BatchContext& ctx) {
  PartitionLog::Wake wake;
  for (auto& [part, s] : ctx.staged_) {
    observer_->OnHighWatermark(s.topic->name, s.partition, part->ReleaseDurableEnd(&wake));
  }
  for (auto& fn : wake) fn();
}

void AppendPipeline::BuildBatch(std::vector<Pending>& batch, BatchContext& ctx, bool* sync,
                                int* requests) {
  // By index: Unpark appends to the batch.
  for (size_t i = 0; i < batch.size(); ++i) {
    Pending& p = batch[i];
    if (p.topic != nullptr && p.topic->deleted.load()) {
      absl::Status gone = p.topic->DeletedError();
      p.outcome.state = Outcome::kAnswered;
      if (p.maintenance) {
        p.maintenance->done(gone);
      } else {
        p.done(gone);
      }
      continue;
    }
    if (p.maintenance) {
      p.maintenance->build(ctx);
      p.outcome.state = Outcome::kLive;
      continue;
    }
    AddProduce(p, ctx, sync);
    *requests += p.outcome.state == Outcome::kLive ? 1 : 0;
    if (p.stamp && p.outcome.state == Outcome::kLive && !parked_.empty()) Unpark(p, batch);
  }
  WriteSet& writes = ctx.writes_;
  for (auto& [part, s] : ctx.staged_) {
    writes.partitions.push_back(WriteSet::PartitionUpdate{s.topic->id, s.partition, s.meta});
  }
  for (auto& [key, staged] : ctx.producers_) {
    writes.producers.push_back(
        WriteSet::ProducerUpdate{staged.topic->id, staged.partition, key.second, staged.state});
  }
}

void AppendPipeline::Publish(BatchContext& ctx) {
  for (auto& [key, staged] : ctx.producers_) {
    key.first->producers[key.second] = std::move(staged.state);
  }
  // ctx.dedup_ holds one entry per (partition, id), all appended at that partition's one
  // append time of this batch, so any order keeps each window in append-time order.
  for (auto& [key, entry] : ctx.dedup_) key.first->dedup.Insert(key.second, entry);
  for (auto& fn : ctx.on_commit_) fn();
  PartitionLog::Wake wake;
  for (auto& [part, s] : ctx.staged_) {
    const int64_t hw =
        part->Publish(PartitionLog::Published{s.meta, s.oldest_append_time,
                                              s.appended ? std::optional<absl::Time>(s.append_time)
                                                         : std::nullopt,
                                              s.epoch_starts, s.truncated_to, s.restarted},
                      &wake);
    observer_->OnHighWatermark(s.topic->name, s.partition, hw);
  }
  for (auto& fn : wake) fn();
}

void AppendPipeline::Complete(Pending& p, const absl::Status& outcome) {
  if (p.outcome.state == Outcome::kAnswered) return;
  if (p.maintenance) return p.maintenance->done(outcome);
  if (!outcome.ok()) return p.done(outcome);
  const ProduceResult& result = p.outcome.result;
  int64_t records = 0, payload = 0;
  for (size_t r = 0; r < p.records.size(); ++r) {
    if (result.positions[r].duplicate) continue;
    ++records;
    payload += static_cast<int64_t>(p.records[r].data.PayloadBytes());
  }
  observer_->OnProduced(p.topic->name, records, payload);
  p.done(std::move(p.outcome.result));
}

void AppendPipeline::SyncWalIfNeeded() {
  {
    absl::MutexLock lock(&sync_mu_);
    if (!unsynced_) return;
    unsynced_ = false;
  }
  const absl::Duration started = clock_->Monotonic();
  absl::Status s = store_->SyncWal();
  observer_->OnWalSynced(clock_->Monotonic() - started);
  if (!s.ok()) {
    absl::MutexLock lock(&sync_mu_);
    unsynced_ = true;  // try again next period
  }
}

}  // namespace conduit::log_broker
