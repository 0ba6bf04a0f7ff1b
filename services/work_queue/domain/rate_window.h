#pragma once

#include <array>
#include <cstdint>

#include "absl/time/time.h"

namespace conduit::work_queue {

// Events per second over the last minute, in one-second buckets (time from the caller's clock).
// Not thread-safe; the owner's lock guards it.
class RateWindow {
 public:
  void Add(absl::Time now, int64_t n) {
    Bucket& b = buckets_[Index(now)];
    const int64_t second = absl::ToUnixSeconds(now);
    if (b.second != second) b = Bucket{second, 0};
    b.count += n;
  }
  double PerSecond(absl::Time now) const {
    const int64_t second = absl::ToUnixSeconds(now);
    int64_t total = 0;
    for (const Bucket& b : buckets_) {
      if (b.second > second - kSeconds && b.second <= second) total += b.count;
    }
    return static_cast<double>(total) / kSeconds;
  }

 private:
  static constexpr int kSeconds = 60;
  struct Bucket {
    int64_t second = INT64_MIN;
    int64_t count = 0;
  };
  static size_t Index(absl::Time now) {
    const int64_t s = absl::ToUnixSeconds(now) % kSeconds;
    return static_cast<size_t>(s < 0 ? s + kSeconds : s);
  }
  std::array<Bucket, kSeconds> buckets_;
};

}  // namespace conduit::work_queue
