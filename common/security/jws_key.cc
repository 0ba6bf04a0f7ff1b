#include "common/security/jws_key.h"

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include <string>

#include "absl/strings/str_cat.h"

namespace conduit::security {
namespace {

constexpr size_t kEd25519SignatureBytes = 64;
constexpr size_t kEs256CoordinateBytes = 32;

struct BioFree {
  void operator()(BIO* bio) const { BIO_free(bio); }
};
struct MdCtxFree {
  void operator()(EVP_MD_CTX* ctx) const { EVP_MD_CTX_free(ctx); }
};
struct EcdsaSigFree {
  void operator()(ECDSA_SIG* sig) const { ECDSA_SIG_free(sig); }
};

// The most recent OpenSSL error as text, and the thread's error queue emptied (so a later
// unrelated call does not report a stale error).
std::string TakeOpenSslError() {
  const unsigned long code = ERR_get_error();
  ERR_clear_error();
  if (code == 0) return "unknown error";
  char text[256];
  ERR_error_string_n(code, text, sizeof(text));
  return text;
}

// JWS carries an ES256 signature as r || s (RFC 7518 §3.4); OpenSSL verifies the DER
// ECDSA-Sig-Value. Empty when `raw` is not 64 bytes.
std::string RawEs256ToDer(absl::string_view raw) {
  if (raw.size() != 2 * kEs256CoordinateBytes) return {};
  const auto* bytes = reinterpret_cast<const unsigned char*>(raw.data());
  std::unique_ptr<ECDSA_SIG, EcdsaSigFree> sig(ECDSA_SIG_new());
  BIGNUM* r = BN_bin2bn(bytes, kEs256CoordinateBytes, nullptr);
  BIGNUM* s = BN_bin2bn(bytes + kEs256CoordinateBytes, kEs256CoordinateBytes, nullptr);
  if (sig == nullptr || r == nullptr || s == nullptr || ECDSA_SIG_set0(sig.get(), r, s) != 1) {
    BN_free(r);
    BN_free(s);
    return {};
  }
  const int length = i2d_ECDSA_SIG(sig.get(), nullptr);
  if (length <= 0) return {};
  std::string der(static_cast<size_t>(length), '\0');
  auto* out = reinterpret_cast<unsigned char*>(der.data());
  if (i2d_ECDSA_SIG(sig.get(), &out) != length) return {};
  return der;
}

absl::Status CheckKeyType(JwtAlgorithm algorithm, EVP_PKEY* key) {
  switch (algorithm) {
    case JwtAlgorithm::kEdDSA:
      if (EVP_PKEY_is_a(key, "ED25519") != 1) {
        return absl::InvalidArgumentError("the key of an EdDSA jwt key is not an Ed25519 key");
      }
      return absl::OkStatus();
    case JwtAlgorithm::kES256: {
      char group[64] = {};
      size_t length = 0;
      if (EVP_PKEY_is_a(key, "EC") != 1 ||
          EVP_PKEY_get_group_name(key, group, sizeof(group), &length) != 1 ||
          absl::string_view(group, length) != "prime256v1") {
        ERR_clear_error();
        return absl::InvalidArgumentError("the key of an ES256 jwt key is not an EC P-256 key");
      }
      return absl::OkStatus();
    }
  }
  return absl::InvalidArgumentError("unknown jwt algorithm");
}

}  // namespace

absl::string_view JwtAlgorithmName(JwtAlgorithm algorithm) {
  switch (algorithm) {
    case JwtAlgorithm::kEdDSA:
      return "EdDSA";
    case JwtAlgorithm::kES256:
      return "ES256";
  }
  return "invalid";
}

std::optional<JwtAlgorithm> ParseJwtAlgorithm(absl::string_view alg) {
  // Exact: "alg" values are case-sensitive (RFC 7515 §4.1.1).
  if (alg == "EdDSA") return JwtAlgorithm::kEdDSA;
  if (alg == "ES256") return JwtAlgorithm::kES256;
  return std::nullopt;
}

void JwsPublicKey::KeyFree::operator()(EVP_PKEY* key) const { EVP_PKEY_free(key); }

absl::StatusOr<JwsPublicKey> JwsPublicKey::FromPem(JwtAlgorithm algorithm, absl::string_view pem) {
  if (pem.size() > static_cast<size_t>(INT32_MAX)) {
    return absl::InvalidArgumentError("jwt public key pem is too large");
  }
  std::unique_ptr<BIO, BioFree> bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  if (bio == nullptr) return absl::InternalError("cannot allocate an openssl bio");
  EVP_PKEY* raw = PEM_read_bio_PUBKEY(bio.get(), nullptr, nullptr, nullptr);
  if (raw == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("jwt public key is not a PEM public key: ", TakeOpenSslError()));
  }
  JwsPublicKey key(algorithm, raw);
  if (absl::Status s = CheckKeyType(algorithm, raw); !s.ok()) return s;
  return key;
}

bool JwsPublicKey::Verify(absl::string_view signing_input, absl::string_view signature) const {
  std::string der;
  const EVP_MD* digest = nullptr;  // Ed25519 hashes internally (one-shot only)
  switch (algorithm_) {
    case JwtAlgorithm::kEdDSA:
      if (signature.size() != kEd25519SignatureBytes) return false;
      break;
    case JwtAlgorithm::kES256:
      der = RawEs256ToDer(signature);
      if (der.empty()) return false;
      signature = der;
      digest = EVP_sha256();
      break;
  }
  std::unique_ptr<EVP_MD_CTX, MdCtxFree> ctx(EVP_MD_CTX_new());
  const bool ok =
      ctx != nullptr &&
      EVP_DigestVerifyInit(ctx.get(), nullptr, digest, nullptr, key_.get()) == 1 &&
      EVP_DigestVerify(
          ctx.get(), reinterpret_cast<const unsigned char*>(signature.data()), signature.size(),
          reinterpret_cast<const unsigned char*>(signing_input.data()), signing_input.size()) == 1;
  if (!ok) ERR_clear_error();
  return ok;
}

}  // namespace conduit::security
