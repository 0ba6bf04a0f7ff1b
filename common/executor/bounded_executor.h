#pragma once

#include <cstddef>
#include <deque>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace conduit::executor {

// A fixed pool of threads draining a bounded FIFO of tasks. Services run blocking storage work
// here (RocksDB reads, fsync) so that gRPC threads never block (LogDevice's storage threads).
//
// Thread-safe. The destructor stops accepting tasks, runs every queued task, then joins.
class BoundedExecutor {
 public:
  BoundedExecutor(std::string name, int threads, size_t max_queued);
  ~BoundedExecutor();
  BoundedExecutor(const BoundedExecutor&) = delete;
  BoundedExecutor& operator=(const BoundedExecutor&) = delete;

  // Queues `task`. Returns false, without queuing, when the queue is full or shutting down:
  // the caller answers RESOURCE_EXHAUSTED rather than buffering without bound.
  [[nodiscard]] bool TrySubmit(std::function<void()> task);

  size_t queued() const;

 private:
  void Work();

  const std::string name_;
  const size_t max_queued_;
  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> threads_;
};

}  // namespace conduit::executor
