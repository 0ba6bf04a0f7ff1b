#pragma once

#include <cstddef>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace conduit::security {

// A principal names who is calling, as "<Type>:<name>": "User:alice" from a token or a
// certificate mapping, "Service:broker-2" for a peer. Principals are compared as whole strings.

// In an ACL entry, the principal that matches every caller.
inline constexpr absl::string_view kAnyPrincipal = "*";

// The principal the transport gives a caller that presented no credentials, so that ACLs can
// name it (an entry for `*` matches it too).
inline constexpr absl::string_view kAnonymousPrincipal = "User:ANONYMOUS";

// Longest principal accepted anywhere (ACLs, token files, JWT claims).
inline constexpr size_t kMaxPrincipalBytes = 512;

// Checks the form of a concrete principal: "<Type>:<name>" with both parts non-empty, at most
// kMaxPrincipalBytes, no whitespace or control characters (the file formats split on
// whitespace and the name lands in audit lines). The wildcard `*` is not a concrete principal.
// Returns INVALID_ARGUMENT naming the problem.
absl::Status ValidatePrincipal(absl::string_view principal);

}  // namespace conduit::security
