#pragma once

// absl::Time and absl::Duration as stored on disk: microseconds since the epoch, big-endian,
// with InfinitePast as INT64_MIN ("never").

#include <string>
#include <string_view>

#include "absl/time/time.h"
#include "common/coding/coding.h"

namespace conduit::coding {

inline void PutTime(std::string* out, absl::Time t) {
  const int64_t micros = t == absl::InfinitePast() ? INT64_MIN : absl::ToUnixMicros(t);
  PutBigEndian64(out, static_cast<uint64_t>(micros));
}

inline bool GetTime(std::string_view* in, absl::Time* t) {
  uint64_t raw = 0;
  if (!GetFixed64(in, &raw)) return false;
  const int64_t micros = static_cast<int64_t>(raw);
  *t = micros == INT64_MIN ? absl::InfinitePast() : absl::FromUnixMicros(micros);
  return true;
}

}  // namespace conduit::coding
