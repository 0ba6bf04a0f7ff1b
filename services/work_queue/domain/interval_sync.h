#pragma once

#include <atomic>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/runtime/runtime.h"
#include "services/work_queue/domain/queue_store.h"

namespace conduit::work_queue {

// The interval fsync of QueueDurability::kInterval queues: whether a write that was not fsynced
// reached the store since the last fsync (marked on the log's writer thread), and periodic work
// on the scope, while any queue is kInterval, that fsyncs the WAL then, at the shortest
// flush_interval seen (restarted when a shorter one comes). The destructor fsyncs what is
// still marked. Thread-safe.
class IntervalSync {
 public:
  // Both must outlive the object; `scope` may be constructed after it (only Request and Stop use
  // it).
  IntervalSync(QueueStore* store, runtime::Scope* scope) : store_(store), scope_(scope) {}
  ~IntervalSync() { SyncIfNeeded(); }

  void Mark() { unsynced_.store(true); }
  // Starts (or speeds up) the periodic fsync for a kInterval queue's flush_interval; nothing
  // for another durability.
  void Request(const QueueConfig& config) {
    if (config.durability != QueueDurability::kInterval) return;
    absl::MutexLock lock(&mu_);
    if (config.flush_interval >= every_) return;
    every_ = config.flush_interval;
    if (task_ != 0) scope_->StopEvery(task_);
    task_ = scope_->Every(every_, [this] { SyncIfNeeded(); });
  }
  // Stops the periodic work (before the scope goes).
  void Stop() {
    absl::MutexLock lock(&mu_);
    if (task_ != 0) scope_->StopEvery(task_);
    task_ = 0;
  }

 private:
  // Fsyncs the WAL if a write was marked since the last call; a failed fsync stays marked.
  void SyncIfNeeded() {
    if (!unsynced_.exchange(false)) return;
    if (!store_->SyncWal().ok()) unsynced_.store(true);
  }

  QueueStore* const store_;
  runtime::Scope* const scope_;
  std::atomic<bool> unsynced_{false};
  absl::Mutex mu_;
  absl::Duration every_ ABSL_GUARDED_BY(mu_) = absl::InfiniteDuration();
  runtime::Scope::PeriodicId task_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace conduit::work_queue
