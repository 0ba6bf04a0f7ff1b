#pragma once

#include <grpcpp/security/server_credentials.h>

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace conduit::grpc_util {

// Whether a TLS server asks connecting clients for a certificate (--tls-client-auth).
enum class ClientAuth {
  kNone,     // not asked for
  kRequest,  // asked for; one that is sent must chain to the client CA, none is accepted too
  kRequire,  // required and verified against the client CA: without one the handshake fails
};

// Parses "none", "request" or "require"; INVALID_ARGUMENT otherwise.
absl::StatusOr<ClientAuth> ParseClientAuth(absl::string_view name);
absl::string_view ClientAuthName(ClientAuth auth);

// The TLS settings of a server's gRPC port, one field per --tls-* flag (messages name the flags).
// Nothing set: plaintext.
struct ServerTlsOptions {
  std::string cert_path;       // --tls-cert: PEM certificate chain, leaf first
  std::string key_path;        // --tls-key: PEM private key of the leaf (unencrypted)
  std::string client_ca_path;  // --tls-client-ca: PEM bundle client certificates chain to
  // --tls-client-auth; unset: kRequire with a client CA, kNone without.
  std::optional<ClientAuth> client_auth;
  // --tls-refresh-seconds: how often the files are read again; a change is used from the next
  // handshake on (connections already open keep theirs).
  int refresh_seconds = 60;

  // Whether any TLS setting is given (then cert and key are required).
  bool enabled() const;
  // The client authentication in effect: client_auth, or its default.
  ClientAuth EffectiveClientAuth() const;
};

// The credentials for a server's listening port: grpc::InsecureServerCredentials() when
// `options` sets nothing; otherwise TLS (1.2 and 1.3) from gRPC's experimental
// TlsServerCredentials over a FileWatcherCertificateProvider that re-reads the files every
// refresh_seconds, so files replaced by a rename are picked up without a restart.
//
// The files are checked first, so that a mistake stops the server at startup rather than
// failing every handshake: INVALID_ARGUMENT for a cert without a key (or the reverse), a client
// CA or client auth without a cert, `request`/`require` without a client CA, refresh_seconds
// outside [1, 86400], a file that is not PEM of the expected kind, an encrypted key, or a key
// that does not belong to the certificate; NOT_FOUND or PERMISSION_DENIED (naming the flag and
// the path) for a file that cannot be read.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const ServerTlsOptions& options);

// One line for the startup log: "plaintext", or "TLS (client certificates required, CA <path>)".
std::string DescribeServerTls(const ServerTlsOptions& options);

}  // namespace conduit::grpc_util
