#include "common/tls/pem.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace conduit::tls {
namespace {

// Far above any certificate chain or CA bundle; a bound on what a mistaken path makes us read.
constexpr size_t kMaxPemFileBytes = 4 << 20;

struct BioFree {
  void operator()(BIO* bio) const { BIO_free(bio); }
};
using BioPtr = std::unique_ptr<BIO, BioFree>;

absl::Status FileError(absl::string_view flag, const std::string& path, int err) {
  const std::string message =
      absl::StrCat(flag, " file '", path, "' cannot be read: ", std::strerror(err));
  if (err == ENOENT) return absl::NotFoundError(message);
  if (err == EACCES || err == EPERM) return absl::PermissionDeniedError(message);
  return absl::InvalidArgumentError(message);
}

BioPtr MemoryBio(const std::string& data) {
  return BioPtr(BIO_new_mem_buf(data.data(), static_cast<int>(data.size())));
}

// Refuses to prompt for a passphrase.
int NoPassphrase(char*, int, int, void*) { return -1; }

}  // namespace

absl::StatusOr<std::string> ReadPemFile(absl::string_view flag, const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) return FileError(flag, path, errno);
  std::string content;
  char buffer[16384];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), file)) > 0) {
    content.append(buffer, n);
    if (content.size() > kMaxPemFileBytes) break;
  }
  const int err = std::ferror(file) ? errno : 0;
  std::fclose(file);
  if (err != 0) return FileError(flag, path, err);
  if (content.size() > kMaxPemFileBytes) {
    return absl::InvalidArgumentError(absl::StrCat(flag, " file '", path, "' is larger than ",
                                                   kMaxPemFileBytes, " bytes: not a PEM file"));
  }
  return content;
}

std::vector<X509Ptr> ParseCertificates(const std::string& pem) {
  BioPtr bio = MemoryBio(pem);
  std::vector<X509Ptr> certs;
  while (X509* cert = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) {
    certs.emplace_back(cert);
  }
  ERR_clear_error();  // the end of the input is reported as an error
  return certs;
}

absl::StatusOr<KeyPair> LoadKeyPair(absl::string_view cert_flag, const std::string& cert_path,
                                    absl::string_view key_flag, const std::string& key_path) {
  auto chain = LoadCertificates(cert_flag, cert_path);
  if (!chain.ok()) return chain.status();
  auto key_pem = ReadPemFile(key_flag, key_path);
  if (!key_pem.ok()) return key_pem.status();
  BioPtr bio = MemoryBio(*key_pem);
  PkeyPtr key(PEM_read_bio_PrivateKey(bio.get(), nullptr, NoPassphrase, nullptr));
  ERR_clear_error();
  if (key == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        key_flag, " file '", key_path, "' holds no ",
        absl::StrContains(*key_pem, "ENCRYPTED") ? "unencrypted (an encrypted key cannot be used) "
                                                 : "",
        "PEM private key"));
  }
  const bool match = X509_check_private_key(chain->front().get(), key.get()) == 1;
  ERR_clear_error();
  if (!match) {
    return absl::InvalidArgumentError(absl::StrCat(key_flag, " file '", key_path,
                                                   "' is not the key of the first certificate in ",
                                                   cert_flag, " file '", cert_path, "'"));
  }
  return KeyPair{.chain = std::move(*chain), .key = std::move(key)};
}

absl::StatusOr<std::vector<X509Ptr>> LoadCertificates(absl::string_view flag,
                                                      const std::string& path) {
  auto pem = ReadPemFile(flag, path);
  if (!pem.ok()) return pem.status();
  std::vector<X509Ptr> certs = ParseCertificates(*pem);
  if (certs.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " file '", path, "' holds no PEM certificate"));
  }
  return certs;
}

}  // namespace conduit::tls
