#pragma once

#include <grpcpp/support/server_callback.h>
#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace conduit::grpc_util {

// The one way a unary callback handler answers at once (a refusal, a bad argument, a result
// already at hand): finishes the call's default reactor with `status` and returns it, for the
// handler to return. The absl::Status form maps it with ToGrpcStatus.
grpc::ServerUnaryReactor* FinishNow(grpc::CallbackServerContext* ctx, const grpc::Status& status);
grpc::ServerUnaryReactor* FinishNow(grpc::CallbackServerContext* ctx, const absl::Status& status);

}  // namespace conduit::grpc_util
