#include "common/time/clock.h"

#include <algorithm>
#include <chrono>

namespace conduit::time {

SystemClock* SystemClock::Get() {
  static SystemClock* clock = new SystemClock();
  return clock;
}

absl::Duration SystemClock::Monotonic() const {
  return absl::FromChrono(std::chrono::steady_clock::now().time_since_epoch());
}

void SystemClock::WaitUntil(absl::CondVar* cv, absl::Mutex* mu, absl::Duration deadline) const {
  const absl::Duration left = deadline - Monotonic();
  if (left <= absl::ZeroDuration()) return;
  cv->WaitWithTimeout(mu, left);
}

void FakeClock::WaitUntil(absl::CondVar* cv, absl::Mutex* mu, absl::Duration deadline) const {
  {
    // Checked and registered together, so an Advance either comes before the check (and is
    // seen) or after the registration (and signals).
    absl::MutexLock lock(&mu_);
    if (monotonic_ >= deadline) return;
    waiters_.push_back({cv, mu});
  }
  cv->Wait(mu);
  absl::MutexLock lock(&mu_);
  auto it = std::find_if(waiters_.begin(), waiters_.end(),
                         [&](const Waiter& w) { return w.cv == cv && w.mu == mu; });
  if (it != waiters_.end()) waiters_.erase(it);
}

void FakeClock::Advance(absl::Duration d) {
  std::vector<Waiter> wake;
  {
    absl::MutexLock lock(&mu_);
    now_ += d;
    if (d > absl::ZeroDuration()) monotonic_ += d;
    wake = waiters_;
  }
  // Each waiter's own mutex, taken with ours released: a waiter holds its mutex from its check
  // until it waits, so the signal cannot fall between the two.
  for (const Waiter& w : wake) {
    absl::MutexLock lock(w.mu);
    w.cv->SignalAll();
  }
}

}  // namespace conduit::time
