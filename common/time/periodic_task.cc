#include "common/time/periodic_task.h"

#include <algorithm>

namespace conduit::time {

PeriodicTask::PeriodicTask(const Clock* clock, absl::Duration interval,
                           std::function<void()> work)
    : clock_(clock),
      interval_(interval),
      work_(std::move(work)),
      first_(clock->Monotonic() + interval),  // from construction, not from the thread's start
      thread_([this] { Loop(); }) {}

PeriodicTask::~PeriodicTask() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    cv_.SignalAll();
  }
  thread_.join();
}

int64_t PeriodicTask::runs() const {
  absl::MutexLock lock(&mu_);
  return runs_;
}

void PeriodicTask::Loop() {
  absl::MutexLock lock(&mu_);
  absl::Duration next = first_;
  while (!stopping_) {
    if (clock_->Monotonic() < next) {
      clock_->WaitUntil(&cv_, &mu_, next);
      continue;
    }
    mu_.Unlock();
    work_();
    mu_.Lock();
    ++runs_;
    // On the schedule, not from the end of the run: time that passed during a run counts (a
    // run longer than the interval is followed at once by the next, never by several).
    next = std::max(next + interval_, clock_->Monotonic());
  }
}

}  // namespace conduit::time
