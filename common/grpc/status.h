#pragma once

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace conduit::grpc_util {

// The one absl::Status → grpc::Status mapping. The canonical codes line up one-to-one; the
// message is kept verbatim so a client sees exactly what the domain said.
grpc::Status ToGrpcStatus(const absl::Status& status);

// The reverse, for clients inside this codebase (CLI, tests).
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace conduit::grpc_util
