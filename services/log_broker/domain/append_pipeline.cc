#include "services/log_broker/domain/append_pipeline.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace conduit::log_broker {

BatchContext::Staged& BatchContext::Stage(TopicState* topic, int32_t partition) {
  PartitionState* part = &topic->partitions[partition];
  auto [it, inserted] = staged_.try_emplace(part);
  if (inserted) {
    Staged& s = it->second;
    s.topic = topic;
    s.partition = partition;
    s.next_offset_before = part->next_offset;
    absl::MutexLock lock(&part->mu);
    s.meta = part->meta;
    s.oldest_append_time = part->oldest_append_time;
  }
  return it->second;
}

AppendPipeline::AppendPipeline(LogStore* store, BrokerObserver* observer, const time::Clock* clock,
                               const ProducerRegistry* producers, PipelineOptions options)
    : store_(store), observer_(observer), clock_(clock), producers_(producers), options_(options) {
  writer_ = std::thread([this] { WriterLoop(); });
  syncer_ = std::thread([this] { SyncLoop(); });
  completer_ = std::thread([this] { CompletionLoop(); });
}

AppendPipeline::~AppendPipeline() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  writer_.join();
  syncer_.join();
  {
    absl::MutexLock lock(&done_mu_);
    done_stopping_ = true;
  }
  completer_.join();
  // The writer may have written after the syncer's last pass: leave nothing unsynced.
  bool unsynced;
  {
    absl::MutexLock lock(&mu_);
    unsynced = unsynced_;
  }
  if (unsynced) (void)store_->SyncWal();
}

void AppendPipeline::SetLastAppendTime(absl::Time t) {
  absl::MutexLock lock(&write_mu_);
  last_append_time_ = std::max(last_append_time_, t);
}

absl::Status AppendPipeline::Submit(std::shared_ptr<TopicState> topic,
                                    std::vector<RoutedRecord> records,
                                    std::optional<ProducerStamp> stamp, int64_t bytes,
                                    ProduceCallback done) {
  return Enqueue(Pending{std::move(topic), std::move(records), std::move(stamp), bytes,
                         std::move(done), std::nullopt},
                 /*backpressure=*/true);
}

absl::Status AppendPipeline::SubmitMaintenance(MaintenanceOp op) {
  Pending p;
  p.topic = op.topic;
  p.maintenance = std::move(op);
  return Enqueue(std::move(p), /*backpressure=*/false);
}

absl::Status AppendPipeline::Enqueue(Pending pending, bool backpressure) {
  absl::MutexLock lock(&mu_);
  if (!failed_.ok()) return failed_;
  if (stopping_) return absl::UnavailableError("broker is shutting down");
  if (backpressure && queued_bytes_ > 0 &&
      queued_bytes_ + pending.bytes > options_.max_queued_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat("append queue holds ", queued_bytes_,
                                                     " bytes (limit ", options_.max_queued_bytes,
                                                     "); retry after 50ms"));
  }
  queued_bytes_ += pending.bytes;
  queue_.push_back(std::move(pending));
  return absl::OkStatus();
}

void AppendPipeline::RunExclusive(const std::function<void()>& fn) {
  absl::MutexLock lock(&write_mu_);
  fn();
}

void AppendPipeline::RequestSyncEvery(absl::Duration interval) {
  absl::MutexLock lock(&mu_);
  sync_every_ = std::min(sync_every_, interval);
}

void AppendPipeline::WriterLoop() {
  while (true) {
    std::vector<Pending> batch;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](AppendPipeline* p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(p->mu_) {
            return p->stopping_ || !p->queue_.empty();
          },
          this));
      if (queue_.empty()) return;  // stopping, and everything queued has been written
      int64_t bytes = 0;
      while (!queue_.empty() &&
             (batch.empty() || bytes + queue_.front().bytes <= options_.max_batch_bytes)) {
        bytes += queue_.front().bytes;
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
      queued_bytes_ -= bytes;
    }
    absl::MutexLock write_lock(&write_mu_);
    WriteBatch(batch);
  }
}

void AppendPipeline::WriteBatch(std::vector<Pending>& batch) {
  absl::Status failed;
  {
    absl::MutexLock lock(&mu_);
    failed = failed_;
  }
  auto finish = [&](Pending& p, const absl::Status& status) {
    if (p.maintenance) {
      p.maintenance->done(status);
    } else {
      p.done(status);
    }
  };
  if (!failed.ok()) {
    for (auto& p : batch) finish(p, failed);
    return;
  }

  // Append time never goes backwards, whatever the wall clock does.
  BatchContext ctx(std::max(clock_->Now(), last_append_time_));
  std::vector<Outcome> outcomes(batch.size());
  bool sync = false;
  int requests = 0;
  for (size_t i = 0; i < batch.size(); ++i) {
    Pending& p = batch[i];
    if (p.topic->deleted.load()) {
      finish(p, absl::NotFoundError(absl::StrCat("topic '", p.topic->name, "' was deleted")));
      continue;
    }
    if (p.maintenance) {
      p.maintenance->build(ctx);
      outcomes[i].live = true;
      continue;
    }
    AddProduce(p, ctx, &outcomes[i], &sync);
    requests += outcomes[i].live ? 1 : 0;
  }
  WriteSet& writes = ctx.writes_;
  for (auto& [part, s] : ctx.staged_) {
    writes.partitions.push_back(WriteSet::PartitionUpdate{s.topic->id, s.partition, s.meta});
  }
  for (auto& [key, staged] : ctx.producers_) {
    writes.producers.push_back(
        WriteSet::ProducerUpdate{staged.topic->id, staged.partition, key.second, staged.state});
  }
  if (writes.empty()) {
    for (auto& fn : ctx.on_commit_) fn();
    for (size_t i = 0; i < batch.size(); ++i) {
      if (outcomes[i].live) finish(batch[i], absl::OkStatus());
    }
    return;
  }

  const absl::Duration started = clock_->Monotonic();
  absl::Status status = store_->Write(writes, sync);
  const absl::Duration latency = clock_->Monotonic() - started;

  if (!status.ok()) {
    for (auto& [part, s] : ctx.staged_) part->next_offset = s.next_offset_before;
    absl::Status stop = absl::UnavailableError(
        absl::StrCat("storage write failed (", status.message(),
                     "); the broker accepts no produce requests until it is restarted"));
    {
      absl::MutexLock lock(&mu_);
      failed_ = stop;
    }
    for (size_t i = 0; i < batch.size(); ++i) {
      if (outcomes[i].live) finish(batch[i], stop);
    }
    return;
  }
  last_append_time_ = ctx.now();
  observer_->OnBatchWritten(requests, static_cast<int>(writes.records.size()), sync, latency);
  if (sync) observer_->OnWalSynced(latency);
  {
    absl::MutexLock lock(&mu_);
    unsynced_ = !sync;
  }

  // The batch is durable: publish the new partition state, then wake readers.
  for (auto& [key, staged] : ctx.producers_) {
    key.first->producers[key.second] = std::move(staged.state);
  }
  for (auto& [key, entry] : ctx.dedup_) {
    key.first->dedup[key.second] = entry;
    key.first->dedup_order.emplace_back(entry.append_time, key.second);
    key.first->has_dedup_entries.store(true);
  }
  for (auto& fn : ctx.on_commit_) fn();
  std::vector<std::function<void()>> wake;
  for (auto& [part, s] : ctx.staged_) {
    {
      absl::MutexLock lock(&part->mu);
      part->meta = s.meta;
      part->oldest_append_time = s.oldest_append_time;
      if (s.appended) {
        part->last_append_time = ctx.now();
        for (auto& [id, fn] : part->waiters) wake.push_back(std::move(fn));
        part->waiters.clear();
      }
    }
    observer_->OnHighWatermark(s.topic->name, s.partition, s.meta.next_offset);
  }
  for (auto& fn : wake) fn();
  std::vector<std::function<void()>> completions;
  for (size_t i = 0; i < batch.size(); ++i) {
    if (!outcomes[i].live) continue;
    completions.push_back([this, p = std::move(batch[i]), result = std::move(outcomes[i].result)]() mutable {
      if (p.maintenance) {
        p.maintenance->done(absl::OkStatus());
        return;
      }
      int64_t records = 0, payload = 0;
      for (size_t r = 0; r < p.records.size(); ++r) {
        if (result.positions[r].duplicate) continue;
        ++records;
        payload += static_cast<int64_t>(p.records[r].data.PayloadBytes());
      }
      observer_->OnProduced(p.topic->name, records, payload);
      p.done(std::move(result));
    });
  }
  absl::MutexLock lock(&done_mu_);
  for (auto& c : completions) done_queue_.push_back(std::move(c));
}

void AppendPipeline::CompletionLoop() {
  while (true) {
    std::deque<std::function<void()>> ready;
    {
      absl::MutexLock lock(&done_mu_);
      done_mu_.Await(absl::Condition(
          +[](AppendPipeline* p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(p->done_mu_) {
            return p->done_stopping_ || !p->done_queue_.empty();
          },
          this));
      if (done_queue_.empty()) return;  // stopping and drained
      ready.swap(done_queue_);
    }
    for (auto& fn : ready) fn();
  }
}

void AppendPipeline::SyncLoop() {
  absl::MutexLock lock(&mu_);
  while (true) {
    if (sync_every_ == absl::InfiniteDuration()) {
      mu_.Await(absl::Condition(
          +[](AppendPipeline* p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(p->mu_) {
            return p->stopping_ || p->sync_every_ != absl::InfiniteDuration();
          },
          this));
    } else {
      mu_.AwaitWithTimeout(absl::Condition(&stopping_), sync_every_);
    }
    const bool stopping = stopping_;
    if (unsynced_) {
      unsynced_ = false;
      mu_.Unlock();
      const absl::Duration started = clock_->Monotonic();
      absl::Status s = store_->SyncWal();
      observer_->OnWalSynced(clock_->Monotonic() - started);
      mu_.Lock();
      if (!s.ok()) unsynced_ = true;  // try again next period
    }
    if (stopping) return;
  }
}

}  // namespace conduit::log_broker
