#pragma once

#include <grpcpp/support/server_interceptor.h>

#include <memory>
#include <string>
#include <vector>

namespace conduit::grpc_util {

// gRPC's callback API answers a request it cannot parse (truncated bytes, a bad length, wire
// type 6 or 7, invalid UTF-8 in a string field) with UNIMPLEMENTED and an empty message: the
// answer for a method that does not exist. This interceptor tells the two apart: for a method the
// server hosts (a service in `services`, fully qualified names), that answer becomes
// INVALID_ARGUMENT "request could not be parsed as <type>". Methods it does not host keep
// UNIMPLEMENTED, even when their descriptors are linked in. No Conduit handler answers
// UNIMPLEMENTED with an empty message.
//
// It acts at one interception point (sending the status) and passes every other one through,
// and only on calls whose request is read before the handler runs (unary and server-streaming):
// a client-streaming or bidi call's messages are read by its handler, which answers one that
// does not parse itself (parsed_bidi_reactor.h), so such calls are not intercepted (each
// intercepted message costs a second pass through the completion queue: audit_interceptor.h).
std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
ParseFailureInterceptorFactory(std::vector<std::string> services);

}  // namespace conduit::grpc_util
