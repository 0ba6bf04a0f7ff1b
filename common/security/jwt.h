#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/security/jws_key.h"
#include "common/time/clock.h"

namespace conduit::security {

// One trusted signing key of a JWT issuer.
struct JwtKeyConfig {
  // The header "kid" that selects this key alone; may be empty (see JwtVerifier).
  std::string key_id;
  JwtAlgorithm algorithm = JwtAlgorithm::kEdDSA;  // pinned: tokens saying otherwise are refused
  std::string public_key_pem;                     // "-----BEGIN PUBLIC KEY-----" ...
};

struct JwtVerifierOptions {
  std::string issuer;    // required "iss", exactly
  std::string audience;  // must be "aud", or one of the "aud" array
  std::string principal_claim = "sub";
  std::string principal_prefix = "User:";     // principal = prefix + the claim's value
  absl::Duration leeway = absl::Seconds(30);  // clock skew allowed on exp and nbf
  size_t max_token_bytes = 8 << 10;
};

// What a verified token says about its caller.
struct JwtIdentity {
  std::string principal;  // e.g. "User:alice"
  std::string key_id;     // the configured key that verified it
  absl::Time expires_at;
};

// Verifies compact JWS tokens (RFC 7519 JWTs) against fixed public keys, for
// `authorization: Bearer <jwt>`. A token passes when all of these hold:
//   - three base64url segments (no padding), the header and payload JSON objects;
//   - the header's "alg" is EdDSA or ES256 (`none`, HS*, RS* ... are refused), no "crit";
//   - the key: the one whose key_id is the header's "kid" when some key has it, otherwise
//     every key; the header's "alg" must be the key's pinned algorithm, and the signature must
//     verify with it (the first key that verifies wins);
//   - "iss" equals options.issuer; "aud" is options.audience or an array holding it;
//   - now < exp + leeway ("exp" required); now + leeway >= nbf when "nbf" is present;
//   - the principal claim is a non-empty string giving a valid principal (ValidatePrincipal).
// The time comes from the injected Clock.
//
// Immutable after Create: Verify is safe on any number of threads. Key rotation builds a new
// verifier. The clock is not owned and must outlive the verifier.
class JwtVerifier {
 public:
  // Returns INVALID_ARGUMENT when the options lack an issuer, audience or principal claim, the
  // leeway is negative, there are no keys, two keys share a key_id, or a key does not load
  // (JwsPublicKey::FromPem).
  static absl::StatusOr<std::unique_ptr<JwtVerifier>> Create(JwtVerifierOptions options,
                                                             std::vector<JwtKeyConfig> keys,
                                                             const time::Clock* clock);

  // The identity `token` proves (rules above). Every failure is UNAUTHENTICATED with the reason
  // ("jwt expired at 2023-11-14T22:13:20+00:00 (leeway 30s)"); the reason never quotes the token.
  absl::StatusOr<JwtIdentity> Verify(absl::string_view token) const;

 private:
  struct Key {
    std::string key_id;
    JwsPublicKey key;
  };
  JwtVerifier(JwtVerifierOptions options, std::vector<Key> keys, const time::Clock* clock)
      : options_(std::move(options)), keys_(std::move(keys)), clock_(clock) {}

  const JwtVerifierOptions options_;
  const std::vector<Key> keys_;
  const time::Clock* const clock_;
};

}  // namespace conduit::security
