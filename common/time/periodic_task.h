#pragma once

#include <functional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/time/clock.h"

namespace conduit::time {

// Runs `work` every `interval` on its own thread, timed on `clock`'s monotonic reading: the one
// periodic loop of the tree (the broker's maintenance, the queue's scheduler, the coordinator's
// sweep and lag sampling). On a FakeClock a run happens when the test advances the clock past
// it. `work` may block (it has the thread to itself); runs keep to the schedule, and a run that
// takes longer than the interval is followed at once by one more, never by a pile of them.
//
// Thread-safe. The destructor waits for a run in progress, then joins. A task on a FakeClock
// must not be destroyed while another thread advances that clock (as for TimerQueue).
class PeriodicTask {
 public:
  PeriodicTask(const Clock* clock, absl::Duration interval, std::function<void()> work);
  ~PeriodicTask();
  PeriodicTask(const PeriodicTask&) = delete;
  PeriodicTask& operator=(const PeriodicTask&) = delete;

  // Completed runs, for tests.
  int64_t runs() const;

 private:
  void Loop();

  const Clock* const clock_;
  const absl::Duration interval_;
  const std::function<void()> work_;
  const absl::Duration first_;
  mutable absl::Mutex mu_;
  absl::CondVar cv_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int64_t runs_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;  // last: starts after every other member is constructed
};

}  // namespace conduit::time
