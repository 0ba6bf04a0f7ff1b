#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "common/grpc/call_guard.h"
#include "common/runtime/runtime.h"
#include "common/time/clock.h"

namespace conduit::grpc_util {

// The CallGuard the --auth-* and --acl-* flags describe, files read and checked (INVALID_ARGUMENT
// or the file's error otherwise); without any of them, CallGuard::Open()'s equivalent. `clock`
// checks JWT times and must outlive the guard; `audit` (may be null) becomes its audit sink.
absl::StatusOr<std::shared_ptr<const CallGuard>> CallGuardFromFlags(
    const time::Clock* clock, std::shared_ptr<security::AuditRelay> audit = nullptr);

// The identity this server presents to the servers it calls (--peer-tls-ca, --peer-tls-cert,
// --peer-tls-key, --peer-token-file), set as the process's default DialSecurity.
absl::Status SetDialSecurityFromFlags();

// Reads --auth-token-file and --acl-file again every --auth-reload-seconds when they changed
// (modification time or size) and swaps them into `guard` whole; a file that fails to read or
// parse keeps the old set (logged). Runs on `scope` until it ends.
void ReloadCallGuardFiles(const CallGuard& guard, runtime::Scope* scope);

// One line for the startup log: "open", or what identifies callers and whether ACLs apply.
std::string DescribeCallGuardFlags();

}  // namespace conduit::grpc_util
