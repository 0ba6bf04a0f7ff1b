#include "common/grpc/reply.h"

#include <grpcpp/server_context.h>

#include "common/grpc/status.h"

namespace conduit::grpc_util {

grpc::ServerUnaryReactor* FinishNow(grpc::CallbackServerContext* ctx, const grpc::Status& status) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  reactor->Finish(status);
  return reactor;
}

grpc::ServerUnaryReactor* FinishNow(grpc::CallbackServerContext* ctx, const absl::Status& status) {
  return FinishNow(ctx, ToGrpcStatus(status));
}

}  // namespace conduit::grpc_util
