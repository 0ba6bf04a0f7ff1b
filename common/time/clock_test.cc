#include "common/time/clock.h"

#include <atomic>

#include <gtest/gtest.h>

#include "absl/synchronization/notification.h"
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

TEST(TimerQueue, RunsInDeadlineOrderAndHonoursCancel) {
  TimerQueue timers;
  absl::Mutex mu;
  std::vector<int> order;
  absl::Notification done;
  absl::Time base = absl::Now();
  timers.Schedule(base + absl::Milliseconds(20), [&] {
    absl::MutexLock l(&mu);
    order.push_back(2);
    done.Notify();
  });
  timers.Schedule(base, [&] {
    absl::MutexLock l(&mu);
    order.push_back(1);
  });
  auto cancelled = timers.Schedule(base + absl::Milliseconds(5), [&] {
    absl::MutexLock l(&mu);
    order.push_back(99);
  });
  EXPECT_TRUE(timers.Cancel(cancelled));
  EXPECT_FALSE(timers.Cancel(cancelled));
  done.WaitForNotification();
  absl::MutexLock l(&mu);
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
}

TEST(TimerQueue, DestructorRunsPendingTimers) {
  std::atomic<int> ran{0};
  {
    TimerQueue timers;
    timers.Schedule(absl::Now() + absl::Hours(1), [&] { ran++; });
  }
  EXPECT_EQ(ran.load(), 1);
}

}  // namespace
}  // namespace conduit::time
