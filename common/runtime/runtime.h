#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/executor/bounded_executor.h"
#include "common/time/clock.h"

namespace conduit::runtime {

// The threads of one process, built once by main() (or a test) and shared by every service in
// it: a domain owns no threads, it gets a Scope on the Runtime instead.
//
//   storage: blocking work on this process's own disk (RocksDB reads, topic changes, fsync
//            passes, retention and compaction, the queue's scheduler). Never waits on another
//            service.
//   remote:  work that waits on another service (the coordinator asking the broker). Apart from
//            storage so that a call waiting on a service in the same process (conduit-standalone)
//            can never hold the threads that service needs to answer it.
//   scheduler: the one timer thread: one-shot timers and periodic work, on the injected clock's
//            monotonic reading (a FakeClock in tests drives every timer and periodic pass).
enum class Pool { kStorage, kRemote };

struct RuntimeOptions {
  int storage_threads = 8;
  int remote_threads = 16;
  size_t max_queued_tasks = 65536;  // per pool; each Scope has its own, smaller cap too
};

namespace internal {
struct ScopeState;
}

// The process's one timer thread. Used only through a Scope, which removes its own timers when
// it goes. Thread-safe.
class Scheduler {
 public:
  explicit Scheduler(const time::Clock* clock);
  ~Scheduler();  // every Scope on it must be gone first
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

 private:
  friend struct internal::ScopeState;
  using TimerId = uint64_t;

  // `fn` runs on the timer thread once the monotonic reading reaches `deadline`.
  TimerId Add(const void* owner, absl::Duration deadline, std::function<void()> fn);
  bool Cancel(TimerId id);  // false if it already ran or never existed
  // Removes every timer of `owner` and waits until none of its callbacks is running. Returns
  // the removed callbacks (not run).
  std::vector<std::function<void()>> Detach(const void* owner);
  void Loop();

  struct Timer {
    const void* owner;
    std::function<void()> fn;
  };
  const time::Clock* const clock_;
  absl::Mutex mu_;
  absl::CondVar wake_;  // the loop: a new first timer, or stop
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  TimerId next_id_ ABSL_GUARDED_BY(mu_) = 1;
  const void* running_ ABSL_GUARDED_BY(mu_) = nullptr;  // owner of the callback now running
  // (monotonic deadline, id) → timer: ordered, so the first entry is the next to run.
  std::map<std::pair<absl::Duration, TimerId>, Timer> timers_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<TimerId, absl::Duration> deadlines_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;  // last: starts after every other member is constructed
};

// See the comment above Pool. Destroy every Scope before the Runtime.
class Runtime {
 public:
  explicit Runtime(const time::Clock* clock = time::SystemClock::Get(),
                   RuntimeOptions options = {});
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  const time::Clock* clock() const { return clock_; }
  Scheduler* scheduler() { return &scheduler_; }
  executor::BoundedExecutor* pool(Pool pool) {
    return pool == Pool::kStorage ? &storage_ : &remote_;
  }

 private:
  const time::Clock* const clock_;
  executor::BoundedExecutor storage_;
  executor::BoundedExecutor remote_;
  Scheduler scheduler_;  // last: destroyed first, before the pools its work goes to
};

// One component's share of the Runtime: tasks on one pool, timers and periodic work on the
// scheduler. A domain holds a Scope where it would otherwise own an executor, a timer thread or
// a periodic loop.
//
// Thread-safe. Destroying the Scope stops its periodic work, runs its pending one-shot timers at
// once on the destroying thread (so no waiter is stranded: a long-poll or a lease wait ends),
// and returns once none of its tasks or callbacks is queued or running; tasks and timers added
// meanwhile (by those callbacks) are run too. So a Scope member is destroyed after the members
// its callbacks use. A Scope on a FakeClock must not be destroyed while another thread advances
// that clock.
class Scope {
 public:
  using TimerId = uint64_t;
  using PeriodicId = uint64_t;

  // At most `max_tasks` of this scope's tasks wait or run at once.
  Scope(Runtime* runtime, Pool pool, size_t max_tasks = 4096);
  ~Scope();
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

  const time::Clock* clock() const;

  // Queues `task` on the pool. False, without queuing, when max_tasks are queued or running or
  // the pool's queue is full: the caller answers RESOURCE_EXHAUSTED rather than buffering.
  [[nodiscard]] bool Submit(std::function<void()> task);

  // Runs `fn` on the timer thread once `delay` has passed on the clock (at once for <= 0). `fn`
  // must not block: hand blocking work to Submit.
  TimerId After(absl::Duration delay, std::function<void()> fn);
  // Removes a timer that has not run yet. False if it already ran or never existed.
  bool Cancel(TimerId id);

  // Runs `work` on the pool every `interval` from now, on the clock's monotonic reading. `work`
  // may block; runs never overlap, keep to the schedule, and a run longer than the interval is
  // followed at once by one more, never by a pile of them. A full pool skips to the next
  // interval.
  PeriodicId Every(absl::Duration interval, std::function<void()> work);
  // Stops periodic work, waiting for a run in progress. No-op for an unknown id.
  void StopEvery(PeriodicId id);
  // Completed runs of periodic work (for tests).
  int64_t runs(PeriodicId id) const;

 private:
  std::shared_ptr<internal::ScopeState> state_;  // shared with its queued tasks and timers
};

}  // namespace conduit::runtime
