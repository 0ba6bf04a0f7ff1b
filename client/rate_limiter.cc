#include "client/rate_limiter.h"

#include <algorithm>
#include <cmath>

namespace conduit::client {

RateLimiter::RateLimiter(double per_second, double burst, const time::Clock* clock)
    : per_second_(per_second),
      burst_(std::max(1.0, burst)),
      clock_(clock),
      tokens_(burst_),
      last_(clock->Monotonic()) {}

void RateLimiter::Refill() {
  const absl::Duration now = clock_->Monotonic();
  tokens_ = std::min(burst_, tokens_ + absl::ToDoubleSeconds(now - last_) * per_second_);
  last_ = now;
}

int64_t RateLimiter::Available() {
  Refill();
  return tokens_ <= 0 ? 0 : static_cast<int64_t>(std::floor(tokens_));
}

void RateLimiter::Take(int64_t n) {
  Refill();
  tokens_ -= static_cast<double>(n);
}

absl::Duration RateLimiter::TimeUntilAvailable(int64_t n) {
  Refill();
  const double missing = std::min(static_cast<double>(n), burst_) - tokens_;
  if (missing <= 0) return absl::ZeroDuration();
  return absl::Ceil(absl::Seconds(missing / per_second_), absl::Microseconds(1));
}

}  // namespace conduit::client
