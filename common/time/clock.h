#pragma once

#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace conduit::time {

// Source of time. Domain and storage code take a Clock* instead of calling absl::Now(), so that
// leases, timeouts, retention and long-poll waits are tested with FakeClock and no sleeping.
//
// Two readings: Now() is wall time, for what people read and what is stored (append times,
// enqueue times); Monotonic() never goes back and does not jump when the wall clock is set, for
// deadlines and timers (a lease or a long-poll must not end early because NTP stepped the clock).
// Implementations are thread-safe.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() const = 0;
  // Time since an arbitrary start; only differences mean anything.
  virtual absl::Duration Monotonic() const = 0;
  // With `mu` held, waits on `cv` until Monotonic() reaches `deadline` or `cv` is signalled
  // (spurious returns allowed: callers re-check). For timer threads (runtime::Scheduler).
  virtual void WaitUntil(absl::CondVar* cv, absl::Mutex* mu, absl::Duration deadline) const = 0;
};

// The real clock: absl::Now() and the steady clock. Stateless; use the process-wide instance.
class SystemClock final : public Clock {
 public:
  static SystemClock* Get();
  absl::Time Now() const override { return absl::Now(); }
  absl::Duration Monotonic() const override;
  void WaitUntil(absl::CondVar* cv, absl::Mutex* mu, absl::Duration deadline) const override;
};

// A clock that moves only when told to. Advance() moves both readings forward (a negative step
// moves only the wall clock, as a clock set back would); Set() moves only the wall clock. Timer
// threads waiting on it (WaitUntil) wake when it advances. Thread-safe.
class FakeClock final : public Clock {
 public:
  explicit FakeClock(absl::Time start = absl::FromUnixSeconds(1'700'000'000)) : now_(start) {}

  absl::Time Now() const override {
    absl::MutexLock lock(&mu_);
    return now_;
  }
  absl::Duration Monotonic() const override {
    absl::MutexLock lock(&mu_);
    return monotonic_;
  }
  void WaitUntil(absl::CondVar* cv, absl::Mutex* mu, absl::Duration deadline) const override;
  void Advance(absl::Duration d);
  void Set(absl::Time t) {
    absl::MutexLock lock(&mu_);
    now_ = t;
  }

 private:
  struct Waiter {
    absl::CondVar* cv;
    absl::Mutex* mu;
  };
  mutable absl::Mutex mu_;  // after a waiter's mutex
  absl::Time now_ ABSL_GUARDED_BY(mu_);
  absl::Duration monotonic_ ABSL_GUARDED_BY(mu_) = absl::ZeroDuration();
  mutable std::vector<Waiter> waiters_ ABSL_GUARDED_BY(mu_);
};

}  // namespace conduit::time
