// The token bucket behind ConsumerOptions::max_records_per_second, on a FakeClock.
#include "client/rate_limiter.h"

#include <gtest/gtest.h>

namespace conduit::client {
namespace {

TEST(RateLimiter, StartsFullRefillsAtTheRateAndHoldsNoMoreThanTheBurst) {
  time::FakeClock clock;
  RateLimiter limiter(10, 10, &clock);
  EXPECT_EQ(limiter.Available(), 10);
  limiter.Take(10);
  EXPECT_EQ(limiter.Available(), 0);
  EXPECT_EQ(limiter.TimeUntilAvailable(1), absl::Milliseconds(100));
  EXPECT_EQ(limiter.TimeUntilAvailable(5), absl::Milliseconds(500));
  clock.Advance(absl::Milliseconds(50));
  EXPECT_EQ(limiter.Available(), 0);
  clock.Advance(absl::Milliseconds(50));
  EXPECT_EQ(limiter.Available(), 1);
  EXPECT_EQ(limiter.TimeUntilAvailable(1), absl::ZeroDuration());
  clock.Advance(absl::Minutes(5));
  EXPECT_EQ(limiter.Available(), 10);
  EXPECT_EQ(limiter.TimeUntilAvailable(50), absl::ZeroDuration());  // capped at the burst
}

TEST(RateLimiter, AnOverdraftIsRepaidBeforeMoreIsAvailable) {
  time::FakeClock clock;
  RateLimiter limiter(10, 10, &clock);
  limiter.Take(15);  // two concurrent fetches each got the whole budget
  EXPECT_EQ(limiter.Available(), 0);
  EXPECT_EQ(limiter.TimeUntilAvailable(1), absl::Milliseconds(600));
  clock.Advance(absl::Milliseconds(500));
  EXPECT_EQ(limiter.Available(), 0);
  clock.Advance(absl::Milliseconds(100));
  EXPECT_EQ(limiter.Available(), 1);
}

TEST(RateLimiter, ASlowRateStillLetsOneRecordThrough) {
  time::FakeClock clock;
  RateLimiter limiter(0.5, 0.5, &clock);  // the burst is at least 1
  EXPECT_EQ(limiter.Available(), 1);
  limiter.Take(1);
  EXPECT_EQ(limiter.TimeUntilAvailable(1), absl::Seconds(2));
  clock.Advance(absl::Seconds(1));
  EXPECT_EQ(limiter.Available(), 0);
  clock.Advance(absl::Seconds(1));
  EXPECT_EQ(limiter.Available(), 1);
}

TEST(RateLimiter, TakingAllThatIsAvailableKeepsTheLongRunRate) {
  time::FakeClock clock;
  RateLimiter limiter(100, 100, &clock);
  int64_t taken = 0;
  for (int step = 0; step < 1000; ++step) {  // 10 s in 10 ms steps
    const int64_t n = limiter.Available();
    limiter.Take(n);
    taken += n;
    clock.Advance(absl::Milliseconds(10));
  }
  // The first burst, then 100 a second for the 9.99 s after it.
  EXPECT_EQ(taken, 100 + 999);
}

}  // namespace
}  // namespace conduit::client
