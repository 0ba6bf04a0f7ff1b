#pragma once

#include <grpcpp/support/server_interceptor.h>
#include <prometheus/registry.h>

#include <memory>

#include "common/time/clock.h"

namespace conduit::grpc_util {

// Per-method request metrics of a server, named as go-grpc-prometheus names them (with the
// conduit_ prefix), so its dashboards and alerts carry over:
//   conduit_grpc_server_started_total{grpc_service, grpc_method, grpc_type}    every call
//   conduit_grpc_server_handled_total{..., grpc_code}                          calls answered
//   conduit_grpc_server_handling_seconds{..., grpc_code}  histogram, call start to status
// grpc_type is unary, server_stream, client_stream or bidi_stream; grpc_code the status code's
// name (OK, NOT_FOUND, ...). Times are `clock`'s Monotonic().
//
// Handled calls and their latency are counted for unary and server-streaming methods only.
// Client-streaming and bidi calls (ProduceStream, Consume, ...) are counted when they start and
// not intercepted further: an intercepted call pays a second pass through the completion queue
// for every message (audit_interceptor.h), a tenth of a stream's CPU; their outcomes are in the
// services' own metrics.
std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> RpcMetricsInterceptorFactory(
    prometheus::Registry& registry, const time::Clock* clock);

}  // namespace conduit::grpc_util
