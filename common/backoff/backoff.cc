#include "common/backoff/backoff.h"

#include <algorithm>
#include <cmath>

#include "absl/random/distributions.h"

namespace conduit::backoff {

absl::Duration Policy::Cap(int attempt) const {
  if (initial == absl::ZeroDuration()) return absl::ZeroDuration();  // 0 * inf
  const double factor = std::pow(multiplier, std::max(0, attempt - 1));
  const double seconds = absl::ToDoubleSeconds(initial) * factor;
  // std::min also tames inf from pow; an infinite max leaves the exponential alone.
  return absl::Seconds(std::min(seconds, absl::ToDoubleSeconds(max)));
}

absl::Duration Policy::Jittered(int attempt, absl::BitGenRef rng) const {
  return absl::Seconds(
      absl::Uniform(absl::IntervalClosed, rng, 0.0, absl::ToDoubleSeconds(Cap(attempt))));
}

}  // namespace conduit::backoff
