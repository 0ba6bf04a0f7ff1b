#pragma once

// Tests only: key pairs made in-process with OpenSSL, and compact JWS tokens signed with them,
// so the JWT tests need no fixtures on disk.

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include <cstdlib>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/security/base64url.h"

namespace conduit::security::jwt_testing {

// A fresh key pair: Ed25519 or EC P-256. Aborts if OpenSSL cannot make one (a broken install).
class TestKeyPair {
 public:
  static TestKeyPair Ed25519() {
    return TestKeyPair(EVP_PKEY_Q_keygen(nullptr, nullptr, "ED25519"));
  }
  static TestKeyPair P256() {
    return TestKeyPair(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256"));
  }

  // The public half as a "PUBLIC KEY" PEM block.
  std::string PublicPem() const {
    std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new(BIO_s_mem()), BIO_free);
    if (PEM_write_bio_PUBKEY(bio.get(), key_.get()) != 1) std::abort();
    char* data = nullptr;
    const long n = BIO_get_mem_data(bio.get(), &data);
    return std::string(data, static_cast<size_t>(n));
  }

  // The signature of `input` as JWS carries it: Ed25519's 64 bytes, or ES256's r || s.
  std::string Sign(absl::string_view input) const {
    const bool ec = EVP_PKEY_is_a(key_.get(), "EC") == 1;
    std::string der = DigestSign(input, ec ? EVP_sha256() : nullptr);
    return ec ? DerToRaw(der) : der;
  }

  // The DER ECDSA-Sig-Value OpenSSL makes (EC keys), which JWS does not use.
  std::string SignDer(absl::string_view input) const { return DigestSign(input, EVP_sha256()); }

 private:
  explicit TestKeyPair(EVP_PKEY* key) : key_(key, EVP_PKEY_free) {
    if (key == nullptr) std::abort();
  }

  std::string DigestSign(absl::string_view input, const EVP_MD* md) const {
    std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
    size_t length = 0;
    const auto* in = reinterpret_cast<const unsigned char*>(input.data());
    if (EVP_DigestSignInit(ctx.get(), nullptr, md, nullptr, key_.get()) != 1 ||
        EVP_DigestSign(ctx.get(), nullptr, &length, in, input.size()) != 1) {
      std::abort();
    }
    std::string sig(length, '\0');
    if (EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(sig.data()), &length, in,
                       input.size()) != 1) {
      std::abort();
    }
    sig.resize(length);
    return sig;
  }

  static std::string DerToRaw(const std::string& der) {
    const auto* p = reinterpret_cast<const unsigned char*>(der.data());
    std::unique_ptr<ECDSA_SIG, decltype(&ECDSA_SIG_free)> sig(
        d2i_ECDSA_SIG(nullptr, &p, static_cast<long>(der.size())), ECDSA_SIG_free);
    if (sig == nullptr) std::abort();
    std::string raw(64, '\0');
    auto* out = reinterpret_cast<unsigned char*>(raw.data());
    if (BN_bn2binpad(ECDSA_SIG_get0_r(sig.get()), out, 32) != 32 ||
        BN_bn2binpad(ECDSA_SIG_get0_s(sig.get()), out + 32, 32) != 32) {
      std::abort();
    }
    return raw;
  }

  std::shared_ptr<EVP_PKEY> key_;
};

// HMAC-SHA256 of `data` under `secret` (for the HS256 key-confusion attack).
inline std::string HmacSha256(absl::string_view secret, absl::string_view data) {
  unsigned char out[32];
  size_t length = 0;
  if (EVP_Q_mac(nullptr, "HMAC", nullptr, "SHA256", nullptr, secret.data(), secret.size(),
                reinterpret_cast<const unsigned char*>(data.data()), data.size(), out, sizeof(out),
                &length) == nullptr) {
    std::abort();
  }
  return std::string(reinterpret_cast<char*>(out), length);
}

// "<header>.<payload>" of a compact JWS, from the two JSON texts.
inline std::string SigningInput(absl::string_view header_json, absl::string_view payload_json) {
  return absl::StrCat(Base64UrlEncode(header_json), ".", Base64UrlEncode(payload_json));
}

// A whole token: the signing input, a dot, the base64url signature.
inline std::string Compact(absl::string_view signing_input, absl::string_view signature) {
  return absl::StrCat(signing_input, ".", Base64UrlEncode(signature));
}

}  // namespace conduit::security::jwt_testing
