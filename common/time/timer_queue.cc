#include "common/time/timer_queue.h"

#include <algorithm>
#include <vector>


namespace conduit::time {

TimerQueue::TimerQueue(const Clock* clock) : clock_(clock), thread_([this] { Loop(); }) {}

TimerQueue::~TimerQueue() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    cv_.Signal();
  }
  thread_.join();
}

TimerQueue::TimerId TimerQueue::ScheduleAfter(absl::Duration delay, std::function<void()> fn) {
  const absl::Duration deadline = clock_->Monotonic() + std::max(delay, absl::ZeroDuration());
  absl::MutexLock lock(&mu_);
  TimerId id = next_id_++;
  bool is_first = timers_.empty() || deadline < timers_.begin()->first.first;
  timers_.emplace(std::make_pair(deadline, id), std::move(fn));
  deadlines_.emplace(id, deadline);
  if (is_first) cv_.Signal();
  return id;
}

bool TimerQueue::Cancel(TimerId id) {
  absl::MutexLock lock(&mu_);
  auto it = deadlines_.find(id);
  if (it == deadlines_.end()) return false;
  timers_.erase(std::make_pair(it->second, id));
  deadlines_.erase(it);
  return true;
}

void TimerQueue::Loop() {
  absl::MutexLock lock(&mu_);
  while (true) {
    if (stopping_) break;
    if (timers_.empty()) {
      cv_.Wait(&mu_);
      continue;
    }
    const absl::Duration next = timers_.begin()->first.first;
    if (clock_->Monotonic() < next) {
      clock_->WaitUntil(&cv_, &mu_, next);
      continue;
    }
    auto node = timers_.extract(timers_.begin());
    deadlines_.erase(node.key().second);
    mu_.Unlock();
    node.mapped()();
    mu_.Lock();
  }
  // Shutting down: run what is left so that nobody waits forever.
  while (!timers_.empty()) {
    auto node = timers_.extract(timers_.begin());
    deadlines_.erase(node.key().second);
    mu_.Unlock();
    node.mapped()();
    mu_.Lock();
  }
}

}  // namespace conduit::time
