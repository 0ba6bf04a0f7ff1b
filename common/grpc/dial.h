#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace conduit::grpc_util {

// How this process's clients reach Conduit servers: TLS when `ca_pem` is set (with a
// client certificate for mTLS when `cert_pem`/`key_pem` are), and a bearer token sent as
// `authorization: Bearer` on every call when `token` is. Empty: plaintext, no token.
struct DialSecurity {
  std::string ca_pem;
  std::string cert_pem;
  std::string key_pem;
  std::string token;
};

// Paths of the PEM files and the token file a DialSecurity is read from; empty: not used.
struct DialSecurityFiles {
  std::string ca;
  std::string cert;
  std::string key;
  std::string token;  // a file holding the bearer token (surrounding whitespace dropped)
};

// Reads `files`: INVALID_ARGUMENT for a certificate without its key (or the reverse) or without
// a CA, naming `flag_prefix` ("--peer-tls", "--tls"); a file's read error otherwise.
absl::StatusOr<DialSecurity> ReadDialSecurity(const DialSecurityFiles& files,
                                              absl::string_view flag_prefix);

// The process-wide default, used by Dial. Set once at startup, before any channel is made: by
// ServerMain from the --peer-* flags (the identity a server presents to the servers it calls:
// coordinator to broker, bridges, replication, redrive to a topic), or by a client program.
void SetDefaultDialSecurity(DialSecurity security);

// A channel to `address` with `security` (a token through a client interceptor, so it works on
// plaintext and TLS channels alike).
std::shared_ptr<grpc::Channel> Dial(const std::string& address, const DialSecurity& security,
                                    const grpc::ChannelArguments& args = {});
// The same with `security` when set, else the process default: what the client library's
// options carry (ProducerOptions::security and the others).
std::shared_ptr<grpc::Channel> Dial(const std::string& address,
                                    const std::optional<DialSecurity>& security,
                                    const grpc::ChannelArguments& args = {});
// The same with the default DialSecurity.
std::shared_ptr<grpc::Channel> Dial(const std::string& address,
                                    const grpc::ChannelArguments& args = {});

}  // namespace conduit::grpc_util
