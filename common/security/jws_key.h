#pragma once

#include <openssl/types.h>

#include <memory>
#include <optional>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace conduit::security {

// The JWS algorithms Conduit verifies (RFC 7518 §3.4, RFC 8037 §3.1). Symmetric (HS*) and
// unsigned (`none`) tokens are never accepted.
enum class JwtAlgorithm {
  kEdDSA,  // Ed25519
  kES256,  // ECDSA on P-256 with SHA-256; the signature is r || s, 32 bytes each
};

// "EdDSA" or "ES256", as in a JWS header's "alg".
absl::string_view JwtAlgorithmName(JwtAlgorithm algorithm);

// The algorithm a header's "alg" names, or nullopt for any other (none, HS256, RS256, ...).
std::optional<JwtAlgorithm> ParseJwtAlgorithm(absl::string_view alg);

// A public key with its algorithm pinned: Verify only checks signatures of that algorithm,
// whatever a token claims. Immutable after creation; Verify is safe on any number of threads.
// Owns the OpenSSL key.
class JwsPublicKey {
 public:
  // Loads a "PUBLIC KEY" (SubjectPublicKeyInfo) PEM block. Returns INVALID_ARGUMENT when the PEM
  // does not parse or the key does not fit the algorithm (Ed25519 for EdDSA, EC on P-256 for
  // ES256).
  static absl::StatusOr<JwsPublicKey> FromPem(JwtAlgorithm algorithm, absl::string_view pem);

  // Whether `signature` (the decoded third JWS segment) signs `signing_input` (the first two
  // segments with their dot) under this key and its pinned algorithm. False for a signature of
  // the wrong length or form.
  bool Verify(absl::string_view signing_input, absl::string_view signature) const;

  JwtAlgorithm algorithm() const { return algorithm_; }

 private:
  struct KeyFree {
    void operator()(EVP_PKEY* key) const;
  };
  JwsPublicKey(JwtAlgorithm algorithm, EVP_PKEY* key) : algorithm_(algorithm), key_(key) {}

  JwtAlgorithm algorithm_;
  std::unique_ptr<EVP_PKEY, KeyFree> key_;
};

}  // namespace conduit::security
