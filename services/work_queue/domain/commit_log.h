#pragma once

#include <deque>
#include <functional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "services/work_queue/domain/queue_store.h"

namespace conduit::work_queue {

// Group commit for queue changes. Changes are submitted in the order the domain made them (under
// its lock); one thread writes everything queued as one fsynced write, then runs the callbacks
// in order. A failed write stops the log: every later Submit fails UNAVAILABLE, because memory
// and disk may disagree until a restart. Thread-safe.
class CommitLog {
 public:
  explicit CommitLog(QueueStore* store);
  ~CommitLog();  // writes what is queued, then stops

  // `done` runs on the log's thread once `write` is durable (or failed). An empty write is a
  // barrier: done runs after every earlier write is durable.
  void Submit(QueueWrite write, std::function<void(absl::Status)> done);

  // OK, or the UNAVAILABLE status every write gets after a storage failure.
  absl::Status health();

 private:
  struct Entry {
    QueueWrite write;
    std::function<void(absl::Status)> done;
  };
  void Loop();

  QueueStore* const store_;
  absl::Mutex mu_;
  std::deque<Entry> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status failed_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace conduit::work_queue
