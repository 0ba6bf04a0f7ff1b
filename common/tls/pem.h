#pragma once

#include <openssl/evp.h>
#include <openssl/x509.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace conduit::tls {

struct X509Free {
  void operator()(X509* cert) const { X509_free(cert); }
};
struct PkeyFree {
  void operator()(EVP_PKEY* key) const { EVP_PKEY_free(key); }
};
using X509Ptr = std::unique_ptr<X509, X509Free>;
using PkeyPtr = std::unique_ptr<EVP_PKEY, PkeyFree>;

// The PEM files a server is given by flags, read and checked with OpenSSL so that a mistake is
// reported at startup naming the flag and the path. Every error names `flag` (e.g. "--tls-cert")
// and the file: NOT_FOUND or PERMISSION_DENIED when it cannot be read, INVALID_ARGUMENT when it
// is larger than 4 MiB or does not hold what it should.

// The whole file.
absl::StatusOr<std::string> ReadPemFile(absl::string_view flag, const std::string& path);

// Every certificate of a PEM text, in order (other PEM blocks are skipped).
std::vector<X509Ptr> ParseCertificates(const std::string& pem);

// A certificate chain (leaf first) and the leaf's private key.
struct KeyPair {
  std::vector<X509Ptr> chain;
  PkeyPtr key;
};

// Reads both files; INVALID_ARGUMENT also for an encrypted key (nothing is prompted for) and for
// a key that is not the leaf's.
absl::StatusOr<KeyPair> LoadKeyPair(absl::string_view cert_flag, const std::string& cert_path,
                                    absl::string_view key_flag, const std::string& key_path);

// A CA bundle: at least one certificate.
absl::StatusOr<std::vector<X509Ptr>> LoadCertificates(absl::string_view flag,
                                                      const std::string& path);

}  // namespace conduit::tls
