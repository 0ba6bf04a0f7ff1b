#include "common/backoff/backoff.h"

#include <gtest/gtest.h>

#include "absl/random/random.h"

namespace conduit::backoff {
namespace {

TEST(BackoffTest, CapGrowsByTheMultiplierUpToMax) {
  const Policy p{absl::Seconds(1), 2, absl::Seconds(30)};
  EXPECT_EQ(p.Cap(1), absl::Seconds(1));
  EXPECT_EQ(p.Cap(2), absl::Seconds(2));
  EXPECT_EQ(p.Cap(5), absl::Seconds(16));
  EXPECT_EQ(p.Cap(6), absl::Seconds(30));
  EXPECT_EQ(p.Cap(5000), absl::Seconds(30)) << "no overflow far out";
  EXPECT_EQ(p.Cap(0), absl::Seconds(1)) << "attempts before the first count as the first";
  EXPECT_EQ((Policy{absl::ZeroDuration(), 2, absl::Seconds(1)}.Cap(9)), absl::ZeroDuration());
  EXPECT_EQ((Policy{absl::Milliseconds(10), 2, absl::InfiniteDuration()}.Cap(4)),
            absl::Milliseconds(80))
      << "an infinite max: the plain exponential";
}

TEST(BackoffTest, JitteredStaysWithinTheCapAndSpreads) {
  const Policy p{absl::Milliseconds(100), 2, absl::Seconds(1)};
  absl::BitGen rng;
  absl::Duration low = absl::InfiniteDuration(), high = absl::ZeroDuration();
  for (int i = 0; i < 2000; ++i) {
    const absl::Duration d = p.Jittered(3, rng);
    ASSERT_GE(d, absl::ZeroDuration());
    ASSERT_LE(d, absl::Milliseconds(400));
    low = std::min(low, d);
    high = std::max(high, d);
  }
  EXPECT_LT(low, absl::Milliseconds(40)) << "full jitter reaches near zero";
  EXPECT_GT(high, absl::Milliseconds(360)) << "and near the cap";
}

TEST(BackoffTest, SequenceDoublesAndResets) {
  Sequence s(Policy{absl::Milliseconds(100), 2, absl::Milliseconds(500)});
  EXPECT_EQ(s.Next(), absl::Milliseconds(100));
  EXPECT_EQ(s.Next(), absl::Milliseconds(200));
  EXPECT_EQ(s.Next(), absl::Milliseconds(400));
  EXPECT_EQ(s.Next(), absl::Milliseconds(500));
  s.Reset();
  EXPECT_EQ(s.Next(), absl::Milliseconds(100));
}

}  // namespace
}  // namespace conduit::backoff
