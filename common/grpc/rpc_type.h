#pragma once

#include <grpcpp/support/server_interceptor.h>

namespace conduit::grpc_util {

// Whether a call of `type` reads a stream of messages from its client (client-streaming or
// bidi): its handler reads each message itself.
inline bool ReadsAStream(grpc::experimental::ServerRpcInfo::Type type) {
  using Type = grpc::experimental::ServerRpcInfo::Type;
  return type == Type::CLIENT_STREAMING || type == Type::BIDI_STREAMING;
}

}  // namespace conduit::grpc_util
