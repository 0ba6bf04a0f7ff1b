#pragma once

// google.protobuf.Timestamp / Duration <-> absl, at the microsecond precision Conduit stores.
// Requests are checked against the protobuf ranges first (request_checks.h); what goes out is
// clamped to them, so a response always renders as proto3 JSON, even for a value stored before
// the checks existed.

#include <google/protobuf/duration.pb.h>
#include <google/protobuf/timestamp.pb.h>

#include <algorithm>

#include "absl/time/time.h"
#include "common/grpc/request_checks.h"

namespace conduit::grpc_util {

inline void SetTimestamp(absl::Time t, google::protobuf::Timestamp* out) {
  static const absl::Time kMin = absl::FromUnixSeconds(kMinTimestampSeconds);
  static const absl::Time kMax = absl::FromUnixSeconds(kMaxTimestampSeconds);
  const int64_t micros = absl::ToUnixMicros(std::clamp(t, kMin, kMax));
  int64_t seconds = micros / 1'000'000, rem = micros % 1'000'000;
  if (rem < 0) {
    rem += 1'000'000;
    --seconds;
  }
  out->set_seconds(seconds);
  out->set_nanos(static_cast<int32_t>(rem * 1000));
}

inline absl::Time FromTimestamp(const google::protobuf::Timestamp& t) {
  return absl::FromUnixSeconds(t.seconds()) + absl::Nanoseconds(t.nanos());
}

inline absl::Duration FromDuration(const google::protobuf::Duration& d) {
  return absl::Seconds(d.seconds()) + absl::Nanoseconds(d.nanos());
}

inline void SetDuration(absl::Duration d, google::protobuf::Duration* out) {
  static const absl::Duration kMax = absl::Seconds(kMaxDurationSeconds);
  const int64_t micros = absl::ToInt64Microseconds(std::clamp(d, -kMax, kMax));
  out->set_seconds(micros / 1'000'000);
  out->set_nanos(static_cast<int32_t>(micros % 1'000'000) * 1000);
}

}  // namespace conduit::grpc_util
