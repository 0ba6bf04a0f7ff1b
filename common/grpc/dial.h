#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <optional>
#include <string>

namespace conduit::grpc_util {

// How this process's clients reach Conduit servers (issue 19): TLS when `ca_pem` is set (with a
// client certificate for mTLS when `cert_pem`/`key_pem` are), and a bearer token sent as
// `authorization: Bearer` on every call when `token` is. Empty: plaintext, no token.
struct DialSecurity {
  std::string ca_pem;
  std::string cert_pem;
  std::string key_pem;
  std::string token;
};

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
