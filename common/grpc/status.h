#pragma once

#include <grpcpp/support/status.h>

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace conduit::grpc_util {

// A status message travels in a response header (grpc-message). Clients refuse headers past a
// limit (8 KiB by default), and would then see RESOURCE_EXHAUSTED instead of the real status; a
// message that echoes a 1 MiB name is cut to this many bytes.
inline constexpr size_t kMaxStatusMessageBytes = 1024;

// `message` when it fits kMaxStatusMessageBytes; else its first bytes (never half a UTF-8
// character) and how many were left off.
std::string BoundedMessage(absl::string_view message);

// The one absl::Status → grpc::Status mapping. The canonical codes line up one-to-one; the
// message is kept verbatim (bounded by BoundedMessage) so a client sees what the domain said.
grpc::Status ToGrpcStatus(const absl::Status& status);

// The reverse, for clients inside this codebase (CLI, tests).
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace conduit::grpc_util
