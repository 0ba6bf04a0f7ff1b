#pragma once

#include "absl/strings/string_view.h"

#include "absl/status/status.h"

namespace conduit::coordinator {

inline constexpr size_t kMaxIdLength = 255;
inline constexpr size_t kMaxMetadataBytes = 4096;
inline constexpr int32_t kMaxPartitionsPerRequest = 100000;

// Group ids, member ids, instance ids and topics: 1..255 bytes, no control characters (NUL
// separates key parts on disk). `what` names the field in the message.
absl::Status ValidateId(absl::string_view what, absl::string_view id);

}  // namespace conduit::coordinator
