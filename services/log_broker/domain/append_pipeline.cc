#include "services/log_broker/domain/append_pipeline.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace conduit::log_broker {

AppendPipeline::AppendPipeline(LogStore* store, BrokerObserver* observer, const time::Clock* clock,
                               PipelineOptions options)
    : store_(store), observer_(observer), clock_(clock), options_(options) {
  writer_ = std::thread([this] { WriterLoop(); });
  syncer_ = std::thread([this] { SyncLoop(); });
}

AppendPipeline::~AppendPipeline() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  writer_.join();
  syncer_.join();
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
                                    std::vector<RoutedRecord> records, int64_t bytes,
                                    ProduceCallback done) {
  absl::MutexLock lock(&mu_);
  if (!failed_.ok()) return failed_;
  if (stopping_) return absl::UnavailableError("broker is shutting down");
  if (queued_bytes_ > 0 && queued_bytes_ + bytes > options_.max_queued_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "append queue holds ", queued_bytes_, " bytes (limit ", options_.max_queued_bytes,
        "); retry after 50ms"));
  }
  queued_bytes_ += bytes;
  queue_.push_back(Pending{std::move(topic), std::move(records), bytes, std::move(done)});
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
  if (!failed.ok()) {
    for (auto& p : batch) p.done(failed);
    return;
  }

  // Append time never goes backwards, whatever the wall clock does.
  const absl::Time now = std::max(clock_->Now(), last_append_time_);
  struct Touched {
    TopicState* topic;
    int32_t partition;
    int64_t first_offset;  // to roll back if the write fails
  };
  absl::flat_hash_map<PartitionState*, Touched> touched;
  std::vector<AppendEntry> entries;
  std::vector<std::vector<RecordPosition>> positions(batch.size());
  std::vector<bool> live(batch.size(), false);
  bool sync = false;
  int records = 0;

  for (size_t i = 0; i < batch.size(); ++i) {
    Pending& p = batch[i];
    if (p.topic->deleted.load()) {
      p.done(absl::NotFoundError(absl::StrCat("topic '", p.topic->meta.name, "' was deleted")));
      continue;
    }
    live[i] = true;
    sync |= p.topic->meta.config.durability == Durability::kSync;
    positions[i].reserve(p.records.size());
    for (RoutedRecord& r : p.records) {
      PartitionState& part = p.topic->partitions[r.partition];
      touched.try_emplace(&part, Touched{p.topic.get(), r.partition, part.next_offset});
      entries.push_back(AppendEntry{p.topic->meta.id, r.partition, part.next_offset, now, &r.data});
      positions[i].push_back(RecordPosition{r.partition, part.next_offset});
      ++part.next_offset;
      ++records;
    }
  }
  if (entries.empty()) return;

  const absl::Time started = absl::Now();
  absl::Status status = store_->Append(entries, sync);
  const absl::Duration latency = absl::Now() - started;

  if (!status.ok()) {
    for (auto& [part, t] : touched) part->next_offset = t.first_offset;
    absl::Status stop = absl::UnavailableError(
        absl::StrCat("storage write failed (", status.message(),
                     "); the broker accepts no produce requests until it is restarted"));
    {
      absl::MutexLock lock(&mu_);
      failed_ = stop;
    }
    for (size_t i = 0; i < batch.size(); ++i) {
      if (live[i]) batch[i].done(stop);
    }
    return;
  }
  last_append_time_ = now;
  observer_->OnBatchWritten(static_cast<int>(batch.size()), records, sync, latency);
  if (sync) observer_->OnWalSynced(latency);
  {
    absl::MutexLock lock(&mu_);
    unsynced_ = !sync;
  }

  // The batch is durable: publish the new high watermarks, then wake readers.
  std::vector<std::function<void()>> wake;
  for (auto& [part, t] : touched) {
    int64_t hw = part->next_offset;
    {
      absl::MutexLock lock(&part->mu);
      part->high_watermark = hw;
      part->last_append_time = now;
      for (auto& [id, fn] : part->waiters) wake.push_back(std::move(fn));
      part->waiters.clear();
    }
    observer_->OnHighWatermark(t.topic->meta.name, t.partition, hw);
  }
  for (auto& fn : wake) fn();
  for (size_t i = 0; i < batch.size(); ++i) {
    if (!live[i]) continue;
    int64_t payload = 0;
    for (const RoutedRecord& r : batch[i].records) payload += static_cast<int64_t>(r.data.PayloadBytes());
    observer_->OnProduced(batch[i].topic->meta.name, static_cast<int64_t>(batch[i].records.size()),
                          payload);
    batch[i].done(ProduceResult{std::move(positions[i]), now});
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
      const absl::Time started = absl::Now();
      absl::Status s = store_->SyncWal();
      observer_->OnWalSynced(absl::Now() - started);
      mu_.Lock();
      if (!s.ok()) unsynced_ = true;  // try again next period
    }
    if (stopping) return;
  }
}

}  // namespace conduit::log_broker
