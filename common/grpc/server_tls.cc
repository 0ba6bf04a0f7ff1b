#include "common/grpc/server_tls.h"

#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_credentials_options.h>

#include "absl/strings/str_cat.h"
#include "common/tls/pem.h"

namespace conduit::grpc_util {
namespace {

constexpr int kMaxRefreshSeconds = 86400;

absl::Status CheckIdentity(const ServerTlsOptions& options) {
  return tls::LoadKeyPair("--tls-cert", options.cert_path, "--tls-key", options.key_path).status();
}

absl::Status CheckClientCa(const ServerTlsOptions& options) {
  return tls::LoadCertificates("--tls-client-ca", options.client_ca_path).status();
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
