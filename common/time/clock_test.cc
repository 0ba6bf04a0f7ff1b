#include "common/time/clock.h"

#include <atomic>

#include <gtest/gtest.h>

#include "absl/synchronization/notification.h"

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

}  // namespace
}  // namespace conduit::time
