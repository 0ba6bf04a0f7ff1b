#pragma once

#include <array>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace conduit::security {

// The static bearer-token file: one token per line, the SHA-256 of the token in hex (64
// characters, either case) then the principal it proves, separated by spaces or tabs:
//
//   # sha256 of the token                                            principal
//   9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08 User:ci-bot
//
// The file holds no token itself, only hashes (`printf %s "$TOKEN" | sha256sum`). A line whose
// first non-blank character is `#` is a comment; blank lines are skipped. Two lines with one
// hash are an error (one token, two principals).

using Sha256Digest = std::array<unsigned char, 32>;

struct TokenEntry {
  Sha256Digest token_sha256;
  std::string principal;
};

// The entries of a token file's text. Returns INVALID_ARGUMENT starting with "line N: " for the
// first malformed line: not two fields, a hash that is not 64 hex digits, a principal that
// ValidatePrincipal refuses, or a hash seen before.
absl::StatusOr<std::vector<TokenEntry>> ParseTokenFile(absl::string_view text);

// SHA-256 of `data` (OpenSSL), and as lowercase hex (the file's form).
Sha256Digest Sha256(absl::string_view data);
std::string Sha256Hex(absl::string_view data);

// The set of static bearer tokens, for `authorization: Bearer <token>`. Only hashes are held;
// a lookup hashes the presented token and compares it with every stored hash in constant time.
//
// Thread-safe: Lookup may run on any number of threads while Reload swaps the set; each lookup
// sees the old set or the new one, never a mix. Starts empty (every lookup fails).
class TokenStore {
 public:
  TokenStore() = default;
  TokenStore(const TokenStore&) = delete;
  TokenStore& operator=(const TokenStore&) = delete;

  // Reads the token file at `path` and replaces the whole set with its entries. On failure
  // keeps the old set and returns ReadTextFile's error (NOT_FOUND, PERMISSION_DENIED, ...) or
  // ParseTokenFile's INVALID_ARGUMENT with the path in front.
  absl::Status Reload(const std::string& path);

  // Replaces the whole set with the entries of a token file's text; on INVALID_ARGUMENT (see
  // ParseTokenFile) keeps the old set.
  absl::Status ReplaceFromText(absl::string_view text);

  // The principal `presented` proves. Returns UNAUTHENTICATED when it is empty or matches no
  // stored hash. Time does not depend on which entry matched or how much of a hash did: every
  // stored hash is compared in full (CRYPTO_memcmp) with no early exit.
  absl::StatusOr<std::string> Lookup(absl::string_view presented) const;

  // How many tokens the set holds.
  size_t size() const;

 private:
  mutable absl::Mutex mu_;
  std::vector<TokenEntry> entries_ ABSL_GUARDED_BY(mu_);
};

}  // namespace conduit::security
