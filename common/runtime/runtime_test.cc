#include "common/runtime/runtime.h"

#include <atomic>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "absl/synchronization/notification.h"

namespace conduit::runtime {
namespace {

using time::FakeClock;

// Timers on a FakeClock fire when the clock passes them, in deadline order, and only then.
TEST(Scope, TimersRunInDeadlineOrderAsTheClockAdvancesAndHonourCancel) {
  FakeClock clock;
  Runtime runtime(&clock);
  Scope scope(&runtime, Pool::kStorage);
  absl::Mutex mu;
  std::vector<int> order;
  absl::Notification first, second;
  scope.After(absl::Milliseconds(20), [&] {
    absl::MutexLock l(&mu);
    order.push_back(2);
    second.Notify();
  });
  scope.After(absl::ZeroDuration(), [&] {
    absl::MutexLock l(&mu);
    order.push_back(1);
    first.Notify();
  });
  auto cancelled = scope.After(absl::Milliseconds(5), [&] {
    absl::MutexLock l(&mu);
    order.push_back(99);
  });
  EXPECT_TRUE(scope.Cancel(cancelled));
  EXPECT_FALSE(scope.Cancel(cancelled));
  first.WaitForNotification();              // due at once
  clock.Set(clock.Now() + absl::Hours(1));  // a wall-clock step fires nothing
  clock.Advance(absl::Milliseconds(19));
  EXPECT_FALSE(second.WaitForNotificationWithTimeout(absl::Milliseconds(50)))
      << "19 ms of 20 have passed";
  clock.Advance(absl::Milliseconds(1));
  second.WaitForNotification();
  absl::MutexLock l(&mu);
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
}

TEST(Scope, RealTimeTimersFireOnTheSystemClock) {
  Runtime runtime;
  Scope scope(&runtime, Pool::kStorage);
  absl::Notification fired;
  scope.After(absl::Milliseconds(5), [&] { fired.Notify(); });
  EXPECT_TRUE(fired.WaitForNotificationWithTimeout(absl::Seconds(10)));
}

// What a domain relies on when it goes: its waiters are not stranded (pending timers run at
// once, and so do timers and tasks those add), nothing of it runs afterwards, and another
// component's timers on the same Runtime are untouched.
TEST(Scope, DestroyingAScopeRunsItsPendingTimersAndWaitsForItsTasks) {
  FakeClock clock;
  Runtime runtime(&clock);
  Scope other(&runtime, Pool::kStorage);
  std::atomic<int> other_ran{0};
  other.After(absl::Hours(1), [&] { other_ran++; });
  std::atomic<int> ran{0};
  std::atomic<bool> task_done{false};
  {
    Scope scope(&runtime, Pool::kStorage);
    scope.After(absl::Hours(1), [&] {
      ran++;
      // As a long-poll's timeout does: its wake-up hands a read to the pool.
      ASSERT_TRUE(scope.Submit([&] {
        absl::SleepFor(absl::Milliseconds(20));
        scope.After(absl::Hours(2), [&] { ran++; });
        task_done = true;
      }));
    });
  }
  EXPECT_EQ(ran.load(), 2);
  EXPECT_TRUE(task_done.load());
  EXPECT_EQ(other_ran.load(), 0);
  clock.Advance(absl::Hours(1));
  for (int i = 0; i < 1000 && other_ran.load() == 0; ++i) absl::SleepFor(absl::Milliseconds(5));
  EXPECT_EQ(other_ran.load(), 1);
}

TEST(Scope, SubmitRefusesBeyondTheScopesOwnCap) {
  Runtime runtime;
  Scope scope(&runtime, Pool::kStorage, /*max_tasks=*/2);
  absl::Notification release;
  EXPECT_TRUE(scope.Submit([&] { release.WaitForNotification(); }));
  EXPECT_TRUE(scope.Submit([&] { release.WaitForNotification(); }));
  EXPECT_FALSE(scope.Submit([] {})) << "two are running: the third must be refused";
  release.Notify();
}

// The one periodic mechanism: on a FakeClock work runs when the clock passes each interval,
// never before, and a wall-clock step does not run it.
TEST(Scope, PeriodicWorkRunsEachTimeTheClockPassesAnInterval) {
  FakeClock clock;
  Runtime runtime(&clock);
  Scope scope(&runtime, Pool::kStorage);
  std::atomic<int> runs{0};
  auto id = scope.Every(absl::Seconds(5), [&] { runs++; });
  auto wait_for = [&](int64_t n) {
    for (int i = 0; i < 2000 && scope.runs(id) < n; ++i) absl::SleepFor(absl::Milliseconds(5));
    return scope.runs(id);
  };
  clock.Set(clock.Now() + absl::Hours(1));
  clock.Advance(absl::Seconds(4));
  absl::SleepFor(absl::Milliseconds(30));  // a chance to run early, if it would
  EXPECT_EQ(scope.runs(id), 0);
  clock.Advance(absl::Seconds(1));
  EXPECT_EQ(wait_for(1), 1);
  clock.Advance(absl::Seconds(5));
  EXPECT_EQ(wait_for(2), 2);
  EXPECT_EQ(runs.load(), 2);
}

// StopEvery returns only after a run in progress has finished, and no run starts after it.
TEST(Scope, StopEveryWaitsForTheRunInProgress) {
  FakeClock clock;
  Runtime runtime(&clock);
  Scope scope(&runtime, Pool::kStorage);
  absl::Notification started, release;
  std::atomic<int> finished{0};
  auto id = scope.Every(absl::Seconds(1), [&] {
    if (!started.HasBeenNotified()) started.Notify();
    release.WaitForNotification();
    finished++;
  });
  clock.Advance(absl::Seconds(1));
  started.WaitForNotification();
  std::atomic<bool> stopped{false};
  std::thread stopper([&] {
    scope.StopEvery(id);
    stopped = true;
  });
  absl::SleepFor(absl::Milliseconds(30));
  EXPECT_FALSE(stopped.load()) << "a run is in progress";
  release.Notify();
  stopper.join();
  EXPECT_EQ(finished.load(), 1);
  clock.Advance(absl::Seconds(10));
  absl::SleepFor(absl::Milliseconds(30));
  EXPECT_EQ(finished.load(), 1);
}

}  // namespace
}  // namespace conduit::runtime
