#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace conduit::security {

// Largest configuration file (ACL bootstrap, token file) ReadTextFile accepts.
inline constexpr size_t kMaxTextFileBytes = 16 << 20;

// The whole content of the file at `path`. `what` names the file in messages ("acl file").
// Returns NOT_FOUND when it does not exist, PERMISSION_DENIED when it may not be read,
// INVALID_ARGUMENT when it is larger than kMaxTextFileBytes, another errno-mapped code
// otherwise.
absl::StatusOr<std::string> ReadTextFile(const std::string& path, absl::string_view what);

}  // namespace conduit::security
