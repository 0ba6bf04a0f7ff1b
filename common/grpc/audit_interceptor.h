#pragma once

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/server_interceptor.h>

#include <memory>

#include "absl/strings/string_view.h"
#include "common/security/audit.h"
#include "common/time/clock.h"

namespace conduit::grpc_util {

// The audit step of every server. During a call, the authorise step
// (CallGuard) notes what it checked and decided, and a handler may note details (its own audit
// record); when the call ends, this interceptor turns the notes into one security::AuditRecord
// (time from `clock`, the peer, the method, the final status) for `sink`. Calls without notes
// are not recorded.
//
// The notes travel in the call's trailing metadata under reserved "-bin" keys and the
// interceptor removes them before the status is sent: they never reach the client, and a call
// needs no shared table. Only servers that install this interceptor may note (CallGuard notes
// only when its CallSecurity has an audit sink; ServerMain installs both).
//
// An intercepted call pays gRPC a second pass through the completion queue for every message it
// reads or writes (gRPC C++ queues each operation's result again after the interceptors' hooks
// on it): for a stream of small messages that is a tenth or more of the reading thread's CPU
// (PERFORMANCE-NOTES). So with `intercept_client_streams` false, client-streaming and bidi
// calls are not intercepted; a server passes CallGuard::MayNoteNonAdminCalls(), which is false
// only when nothing but admin operations can be noted, and no client-streaming method performs
// an admin operation or notes a detail (CallContract in tests/integration/security_rpc_test.cc
// lists them).
std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> AuditInterceptorFactory(
    std::shared_ptr<security::AuditSink> sink, const time::Clock* clock,
    bool intercept_client_streams = true);

// Notes one check of the authorise step; `principal` is the caller's ("" when its token was
// refused).
void NoteAuditCheck(grpc::ServerContextBase& ctx, absl::string_view principal,
                    const security::AuditCheck& check);
// Notes a detail of the call ("offset reset audit 12: ..."), recorded with its checks.
void NoteAuditDetail(grpc::ServerContextBase& ctx, absl::string_view detail);

}  // namespace conduit::grpc_util
