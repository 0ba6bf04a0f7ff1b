#pragma once

#include <cstdint>

#include "absl/time/time.h"
#include "common/time/clock.h"

namespace conduit::client {

// A token bucket: `per_second` tokens a second flow in, up to `burst`; it starts full. Reads
// the injected clock's monotonic time only. Take may overdraw (a fetch returned more than was
// available): the debt is repaid by later refills, so the long-run rate still holds. Not
// thread-safe: the owner serializes calls (GroupConsumer holds it under its mutex). The clock
// must outlive it.
class RateLimiter {
 public:
  // `per_second` > 0; `burst` below 1 is taken as 1.
  RateLimiter(double per_second, double burst, const time::Clock* clock);

  // Whole tokens available now (0 while in debt).
  int64_t Available();
  // Takes `n` tokens.
  void Take(int64_t n);
  // How long until `n` whole tokens are available (`n` is capped at the burst); zero if now.
  absl::Duration TimeUntilAvailable(int64_t n = 1);

 private:
  void Refill();

  const double per_second_;
  const double burst_;
  const time::Clock* const clock_;
  double tokens_;
  absl::Duration last_;
};

}  // namespace conduit::client
