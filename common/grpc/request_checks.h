#pragma once

// Checks every service applies to a request before converting it: rules that hold for any
// message and so live in one place rather than in each conversion.

#include <google/protobuf/message.h>

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace conduit::grpc_util {

// The ranges protobuf defines for its well-known types (google/protobuf/duration.proto and
// timestamp.proto): a Duration spans ±10,000 years, with nanos of the same sign as seconds; a
// Timestamp lies in 0001-01-01T00:00:00Z .. 9999-12-31T23:59:59.999999999Z. A value outside them
// cannot be rendered as proto3 JSON (grpcurl, `conduit -o json`, every JSON client fails on it).
inline constexpr int64_t kMaxDurationSeconds = 315'576'000'000;
inline constexpr int64_t kMinTimestampSeconds = -62'135'596'800;  // 0001-01-01T00:00:00Z
inline constexpr int64_t kMaxTimestampSeconds = 253'402'300'799;  // 9999-12-31T23:59:59Z

// OK when every google.protobuf.Duration and google.protobuf.Timestamp anywhere in `request`
// (nested messages, repeated fields, map values) is within the protobuf range; otherwise
// INVALID_ARGUMENT naming the first bad field by its path, e.g. "records[3].event_time".
//
// Costs one map lookup for a message type without time fields (none when the thread's previous
// request was of the same type), and only visits the fields that can lead to one (a Produce of
// 1,000 records reads 1,000 `event_time` presence bits, not the payloads). Thread-safe.
absl::Status CheckTimeFields(const google::protobuf::Message& request);

// The check CheckTimeFields makes of one Timestamp: OK, or INVALID_ARGUMENT with a message that
// follows the field's path ("is a Timestamp of ..."). For a hot request type that reads its few
// time fields with its generated accessors instead of reflection (the log broker's Produce).
absl::Status CheckTimestampValue(int64_t seconds, int32_t nanos);

// Every Duration and Timestamp field CheckTimeFields visits in `type`, by path
// ("records.event_time"; a recursive type's paths stop where it recurs). A type checked by hand
// pins this list in a test, so that a time field added later cannot go unchecked.
std::vector<std::string> TimeFieldPaths(const google::protobuf::Descriptor* type);

}  // namespace conduit::grpc_util
