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
#include "common/time/clock.h"

namespace conduit::time {

// Runs callbacks after delays measured on a Clock's monotonic reading, on one background thread:
// a long-poll's max wait, a lease wait. On the SystemClock that is real time; on a FakeClock a
// timer fires when the test advances the clock past it (no sleeping, and a wall-clock step never
// fires or delays one).
//
// Thread-safe. Callbacks run on the timer thread and must not block. The destructor runs every
// pending callback immediately (so no waiter is stranded), then joins the thread. A queue on a
// FakeClock must not be destroyed while another thread advances that clock.
class TimerQueue {
 public:
  using TimerId = uint64_t;

  explicit TimerQueue(const Clock* clock = SystemClock::Get());
  ~TimerQueue();
  TimerQueue(const TimerQueue&) = delete;
  TimerQueue& operator=(const TimerQueue&) = delete;

  // Schedules `fn` to run once `delay` has passed on the clock (at once for a delay <= 0).
  TimerId ScheduleAfter(absl::Duration delay, std::function<void()> fn);

  // Removes a timer that has not run yet. Returns false if it already ran or never existed.
  bool Cancel(TimerId id);

 private:
  void Loop();

  const Clock* const clock_;
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  TimerId next_id_ ABSL_GUARDED_BY(mu_) = 1;
  // (monotonic deadline, id) → callback: ordered, so the first entry is the next to run.
  std::map<std::pair<absl::Duration, TimerId>, std::function<void()>> timers_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<TimerId, absl::Duration> deadlines_ ABSL_GUARDED_BY(mu_);
  absl::CondVar cv_;
  std::thread thread_;  // last: starts after every other member is constructed
};

}  // namespace conduit::time
