#pragma once

#include "absl/random/bit_gen_ref.h"
#include "absl/time/time.h"

namespace conduit::backoff {

// The one exponential-backoff rule of the code base: the n-th wait (n >= 1) is at most
// initial × multiplier^(n−1), never above max. Retry loops that back off (the bridges, the
// client's leader routing and per-record retries, the work queue's retry of a failed job) all
// use it. Jittered() draws "full jitter" (uniform in [0, cap], AWS's recommendation), so many
// clients failing together do not retry together; a loop on its own may use Cap() as it is.
struct Policy {
  absl::Duration initial = absl::Milliseconds(100);
  double multiplier = 2;
  absl::Duration max = absl::Seconds(5);

  // The ceiling of the n-th wait. Zero when `initial` is zero.
  absl::Duration Cap(int attempt) const;
  // A wait drawn uniformly from [0, Cap(attempt)].
  absl::Duration Jittered(int attempt, absl::BitGenRef rng) const;
};

// The waits of one retry loop without jitter: Next() gives Cap(1), Cap(2), ...; Reset() after
// a success starts again at Cap(1).
class Sequence {
 public:
  explicit Sequence(Policy policy) : policy_(policy) {}
  absl::Duration Next() { return policy_.Cap(++attempt_); }
  void Reset() { attempt_ = 0; }

 private:
  Policy policy_;
  int attempt_ = 0;
};

}  // namespace conduit::backoff
