#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace conduit::time {

// Runs callbacks at real-time deadlines on one background thread. Used for network waits such
// as a long-poll's max wait, which are measured in real time by design (a FakeClock would never
// let a client's request finish). Domain rules that depend on time (leases, retention) use Clock.
//
// Thread-safe. Callbacks run on the timer thread and must not block. The destructor runs every
// pending callback immediately (so no waiter is stranded), then joins the thread.
class TimerQueue {
 public:
  using TimerId = uint64_t;

  TimerQueue();
  ~TimerQueue();
  TimerQueue(const TimerQueue&) = delete;
  TimerQueue& operator=(const TimerQueue&) = delete;

  // Schedules `fn` to run at `deadline` (or soon, if it has passed).
  TimerId Schedule(absl::Time deadline, std::function<void()> fn);

  // Removes a timer that has not run yet. Returns false if it already ran or never existed.
  bool Cancel(TimerId id);

 private:
  void Loop();

  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  TimerId next_id_ ABSL_GUARDED_BY(mu_) = 1;
  // (deadline, id) → callback: ordered, so the first entry is the next to run.
  std::map<std::pair<absl::Time, TimerId>, std::function<void()>> timers_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<TimerId, absl::Time> deadlines_ ABSL_GUARDED_BY(mu_);
  absl::CondVar cv_;
  std::thread thread_;
};

}  // namespace conduit::time
