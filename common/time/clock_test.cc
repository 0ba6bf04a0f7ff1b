#include "common/time/clock.h"

#include <atomic>

#include <gtest/gtest.h>

#include "absl/synchronization/notification.h"
#include "common/time/periodic_task.h"
#include "common/time/timer_queue.h"

namespace conduit::time {
namespace {

TEST(FakeClock, MovesOnlyWhenTold) {
  FakeClock clock(absl::FromUnixSeconds(100));
  EXPECT_EQ(clock.Now(), absl::FromUnixSeconds(100));
  clock.Advance(absl::Seconds(5));
  EXPECT_EQ(clock.Now(), absl::FromUnixSeconds(105));
  clock.Set(absl::FromUnixSeconds(7));
  EXPECT_EQ(clock.Now(), absl::FromUnixSeconds(7));
}

TEST(FakeClock, TheMonotonicReadingIgnoresWallClockSteps) {
  FakeClock clock(absl::FromUnixSeconds(100));
  const absl::Duration start = clock.Monotonic();
  clock.Set(absl::FromUnixSeconds(1'000'000));  // NTP steps the wall clock forward...
  clock.Advance(-absl::Hours(1));               // ...and back
  EXPECT_EQ(clock.Monotonic(), start);
  clock.Advance(absl::Seconds(3));
  EXPECT_EQ(clock.Monotonic() - start, absl::Seconds(3));
}

TEST(SystemClock, TheMonotonicReadingNeverGoesBack) {
  const Clock* clock = SystemClock::Get();
  absl::Duration last = clock->Monotonic();
  for (int i = 0; i < 1000; ++i) {
    const absl::Duration now = clock->Monotonic();
    EXPECT_GE(now, last);
    last = now;
  }
}

// Timers on a FakeClock fire when the clock passes them, in deadline order, and only then.
TEST(TimerQueue, RunsInDeadlineOrderAsTheClockAdvancesAndHonoursCancel) {
  FakeClock clock;
  TimerQueue timers(&clock);
  absl::Mutex mu;
  std::vector<int> order;
  absl::Notification first, second;
  timers.ScheduleAfter(absl::Milliseconds(20), [&] {
    absl::MutexLock l(&mu);
    order.push_back(2);
    second.Notify();
  });
  timers.ScheduleAfter(absl::ZeroDuration(), [&] {
    absl::MutexLock l(&mu);
    order.push_back(1);
    first.Notify();
  });
  auto cancelled = timers.ScheduleAfter(absl::Milliseconds(5), [&] {
    absl::MutexLock l(&mu);
    order.push_back(99);
  });
  EXPECT_TRUE(timers.Cancel(cancelled));
  EXPECT_FALSE(timers.Cancel(cancelled));
  first.WaitForNotification();  // due at once
  clock.Set(clock.Now() + absl::Hours(1));  // a wall-clock step fires nothing
  clock.Advance(absl::Milliseconds(19));
  EXPECT_FALSE(second.WaitForNotificationWithTimeout(absl::Milliseconds(50)))
      << "19 ms of 20 have passed";
  clock.Advance(absl::Milliseconds(1));
  second.WaitForNotification();
  absl::MutexLock l(&mu);
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
}

TEST(TimerQueue, RealTimeTimersFireOnTheSystemClock) {
  TimerQueue timers;
  absl::Notification fired;
  timers.ScheduleAfter(absl::Milliseconds(5), [&] { fired.Notify(); });
  EXPECT_TRUE(fired.WaitForNotificationWithTimeout(absl::Seconds(10)));
}

TEST(TimerQueue, DestructorRunsPendingTimers) {
  std::atomic<int> ran{0};
  {
    TimerQueue timers;
    timers.ScheduleAfter(absl::Hours(1), [&] { ran++; });
  }
  EXPECT_EQ(ran.load(), 1);
}

// The one periodic loop: on a FakeClock it runs when the clock passes each interval, never
// before, and a wall-clock step does not run it.
TEST(PeriodicTask, RunsEachTimeTheClockPassesAnInterval) {
  FakeClock clock;
  absl::Mutex mu;
  int runs = 0;
  absl::CondVar ran;
  auto wait_for = [&](int n) {
    absl::MutexLock l(&mu);
    while (runs < n) ran.WaitWithTimeout(&mu, absl::Seconds(10));
    return runs;
  };
  PeriodicTask task(&clock, absl::Seconds(5), [&] {
    absl::MutexLock l(&mu);
    ++runs;
    ran.SignalAll();
  });
  clock.Set(clock.Now() + absl::Hours(1));
  clock.Advance(absl::Seconds(4));
  absl::SleepFor(absl::Milliseconds(30));  // a chance to run early, if it would
  EXPECT_EQ(task.runs(), 0);
  clock.Advance(absl::Seconds(1));
  EXPECT_EQ(wait_for(1), 1);
  clock.Advance(absl::Seconds(5));
  EXPECT_EQ(wait_for(2), 2);
}

}  // namespace
}  // namespace conduit::time
