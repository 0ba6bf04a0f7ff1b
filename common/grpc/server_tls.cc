#include "common/grpc/server_tls.h"

#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_credentials_options.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace conduit::grpc_util {
namespace {

constexpr int kMaxRefreshSeconds = 86400;
// Far above any certificate chain or CA bundle; a bound on what a mistaken path makes us read.
constexpr size_t kMaxPemFileBytes = 4 << 20;

struct BioFree {
  void operator()(BIO* bio) const { BIO_free(bio); }
};
struct X509Free {
  void operator()(X509* cert) const { X509_free(cert); }
};
struct PkeyFree {
  void operator()(EVP_PKEY* key) const { EVP_PKEY_free(key); }
};
using BioPtr = std::unique_ptr<BIO, BioFree>;
using X509Ptr = std::unique_ptr<X509, X509Free>;
using PkeyPtr = std::unique_ptr<EVP_PKEY, PkeyFree>;

absl::Status FileError(absl::string_view flag, const std::string& path, int err) {
  const std::string message =
      absl::StrCat(flag, " file '", path, "' cannot be read: ", std::strerror(err));
  if (err == ENOENT) return absl::NotFoundError(message);
  if (err == EACCES || err == EPERM) return absl::PermissionDeniedError(message);
  return absl::InvalidArgumentError(message);
}

// The whole file named by `flag`.
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

BioPtr MemoryBio(const std::string& data) {
  return BioPtr(BIO_new_mem_buf(data.data(), static_cast<int>(data.size())));
}

// Every certificate of a PEM text, in order (other PEM blocks are skipped).
std::vector<X509Ptr> ParseCertificates(const std::string& pem) {
  BioPtr bio = MemoryBio(pem);
  std::vector<X509Ptr> certs;
  while (X509* cert = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) {
    certs.emplace_back(cert);
  }
  ERR_clear_error();  // the end of the input is reported as an error
  return certs;
}

// Refuses to prompt for a passphrase: gRPC cannot use an encrypted key either.
int NoPassphrase(char*, int, int, void*) { return -1; }

absl::Status CheckIdentity(const ServerTlsOptions& options) {
  auto cert_pem = ReadPemFile("--tls-cert", options.cert_path);
  if (!cert_pem.ok()) return cert_pem.status();
  std::vector<X509Ptr> chain = ParseCertificates(*cert_pem);
  if (chain.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tls-cert file '", options.cert_path, "' holds no PEM certificate"));
  }
  auto key_pem = ReadPemFile("--tls-key", options.key_path);
  if (!key_pem.ok()) return key_pem.status();
  BioPtr bio = MemoryBio(*key_pem);
  PkeyPtr key(PEM_read_bio_PrivateKey(bio.get(), nullptr, NoPassphrase, nullptr));
  ERR_clear_error();
  if (key == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--tls-key file '", options.key_path, "' holds no ",
        absl::StrContains(*key_pem, "ENCRYPTED") ? "unencrypted (gRPC cannot use an encrypted key) "
                                                 : "",
        "PEM private key"));
  }
  const bool match = X509_check_private_key(chain.front().get(), key.get()) == 1;
  ERR_clear_error();
  if (!match) {
    return absl::InvalidArgumentError(absl::StrCat("--tls-key file '", options.key_path,
                                                   "' is not the key of the first certificate in "
                                                   "--tls-cert file '",
                                                   options.cert_path, "'"));
  }
  return absl::OkStatus();
}

absl::Status CheckClientCa(const ServerTlsOptions& options) {
  auto pem = ReadPemFile("--tls-client-ca", options.client_ca_path);
  if (!pem.ok()) return pem.status();
  if (ParseCertificates(*pem).empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--tls-client-ca file '", options.client_ca_path,
                                                   "' holds no PEM certificate"));
  }
  return absl::OkStatus();
}

absl::Status CheckCombination(const ServerTlsOptions& options) {
  if (options.cert_path.empty() != options.key_path.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--tls-cert and --tls-key go together: ",
                                                   options.cert_path.empty()
                                                       ? "--tls-key is set without --tls-cert"
                                                       : "--tls-cert is set without --tls-key"));
  }
  if (options.cert_path.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(options.client_ca_path.empty() ? "--tls-client-auth" : "--tls-client-ca",
                     " needs TLS: set --tls-cert and --tls-key too"));
  }
  const ClientAuth auth = options.EffectiveClientAuth();
  if (auth != ClientAuth::kNone && options.client_ca_path.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--tls-client-auth=", ClientAuthName(auth),
                                                   " needs --tls-client-ca (the CA bundle "
                                                   "client certificates are verified against)"));
  }
  if (options.refresh_seconds < 1 || options.refresh_seconds > kMaxRefreshSeconds) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tls-refresh-seconds=", options.refresh_seconds, " is outside [1, ",
                     kMaxRefreshSeconds, "]"));
  }
  return absl::OkStatus();
}

grpc_ssl_client_certificate_request_type RequestType(ClientAuth auth) {
  switch (auth) {
    case ClientAuth::kRequest:
      return GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY;
    case ClientAuth::kRequire:
      return GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
    case ClientAuth::kNone:
      break;
  }
  return GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE;
}

}  // namespace

absl::StatusOr<ClientAuth> ParseClientAuth(absl::string_view name) {
  if (name == "none") return ClientAuth::kNone;
  if (name == "request") return ClientAuth::kRequest;
  if (name == "require") return ClientAuth::kRequire;
  return absl::InvalidArgumentError(
      absl::StrCat("--tls-client-auth '", name, "' is not one of none, request, require"));
}

absl::string_view ClientAuthName(ClientAuth auth) {
  switch (auth) {
    case ClientAuth::kRequest:
      return "request";
    case ClientAuth::kRequire:
      return "require";
    case ClientAuth::kNone:
      break;
  }
  return "none";
}

bool ServerTlsOptions::enabled() const {
  return !cert_path.empty() || !key_path.empty() || !client_ca_path.empty() ||
         client_auth.has_value();
}

ClientAuth ServerTlsOptions::EffectiveClientAuth() const {
  if (client_auth.has_value()) return *client_auth;
  return client_ca_path.empty() ? ClientAuth::kNone : ClientAuth::kRequire;
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const ServerTlsOptions& options) {
  if (!options.enabled()) return grpc::InsecureServerCredentials();
  if (auto s = CheckCombination(options); !s.ok()) return s;
  if (auto s = CheckIdentity(options); !s.ok()) return s;
  const ClientAuth auth = options.EffectiveClientAuth();
  const bool verify_clients = auth != ClientAuth::kNone;
  if (verify_clients) {
    if (auto s = CheckClientCa(options); !s.ok()) return s;
  }
  // The provider's thread re-reads the files; the credentials keep it alive with the server.
  // An unreadable file at a refresh clears that material and fails handshakes until it is back.
  auto provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
      options.key_path, options.cert_path, verify_clients ? options.client_ca_path : "",
      static_cast<unsigned int>(options.refresh_seconds));
  grpc::experimental::TlsServerCredentialsOptions tls(provider);
  tls.watch_identity_key_cert_pairs();
  if (verify_clients) tls.watch_root_certs();
  tls.set_cert_request_type(RequestType(auth));
  std::shared_ptr<grpc::ServerCredentials> credentials =
      grpc::experimental::TlsServerCredentials(tls);
  if (credentials == nullptr) {
    return absl::InternalError("gRPC refused the TLS server credentials");
  }
  return credentials;
}

std::string DescribeServerTls(const ServerTlsOptions& options) {
  if (!options.enabled()) return "plaintext";
  switch (options.EffectiveClientAuth()) {
    case ClientAuth::kRequire:
      return absl::StrCat("TLS, client certificates required (CA ", options.client_ca_path, ")");
    case ClientAuth::kRequest:
      return absl::StrCat("TLS, client certificates verified when sent (CA ",
                          options.client_ca_path, ")");
    case ClientAuth::kNone:
      break;
  }
  return "TLS, no client certificates";
}

}  // namespace conduit::grpc_util
