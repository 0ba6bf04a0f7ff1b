#pragma once

#include <google/protobuf/descriptor.h>
#include <grpcpp/support/server_interceptor.h>

#include <string>

#include "absl/strings/string_view.h"

namespace conduit::grpc_util {

// Whether a call of `type` reads a stream of messages from its client (client-streaming or
// bidi): its handler reads each message itself.
inline bool ReadsAStream(grpc::experimental::ServerRpcInfo::Type type) {
  using Type = grpc::experimental::ServerRpcInfo::Type;
  return type == Type::CLIENT_STREAMING || type == Type::BIDI_STREAMING;
}

// "/pkg.Service/Method" (a call's method path) → the method's descriptor in the generated pool,
// or nullptr (not a path, or a method this binary was not built with).
inline const google::protobuf::MethodDescriptor* FindMethod(absl::string_view path) {
  if (path.empty() || path[0] != '/') return nullptr;
  std::string name(path.substr(1));
  const size_t slash = name.find('/');
  if (slash == std::string::npos) return nullptr;
  name[slash] = '.';
  return google::protobuf::DescriptorPool::generated_pool()->FindMethodByName(name);
}

}  // namespace conduit::grpc_util
