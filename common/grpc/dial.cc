#include "common/grpc/dial.h"

#include <grpcpp/support/client_interceptor.h>

#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/security/text_file.h"

namespace conduit::grpc_util {
namespace {

absl::Mutex default_mu(absl::kConstInit);
DialSecurity& Default() ABSL_EXCLUSIVE_LOCKS_REQUIRED(default_mu) {
  static DialSecurity* security = new DialSecurity();  // never destroyed: used until exit
  return *security;
}

// Adds the bearer token to every call's initial metadata.
class TokenInterceptor final : public grpc::experimental::Interceptor {
 public:
  explicit TokenInterceptor(const std::string* header) : header_(header) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->emplace("authorization", *header_);
    }
    methods->Proceed();
  }

 private:
  const std::string* const header_;
};

class TokenInterceptorFactory final : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit TokenInterceptorFactory(std::string token) : header_("Bearer " + std::move(token)) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo*) override {
    return new TokenInterceptor(&header_);
  }

 private:
  const std::string header_;  // lives as long as the channel, which owns the factory
};

}  // namespace

absl::StatusOr<DialSecurity> ReadDialSecurity(const DialSecurityFiles& files,
                                              absl::string_view flag_prefix) {
  DialSecurity security;
  const std::pair<const std::string*, std::string*> read[] = {{&files.ca, &security.ca_pem},
                                                              {&files.cert, &security.cert_pem},
                                                              {&files.key, &security.key_pem},
                                                              {&files.token, &security.token}};
  for (const auto& [path, out] : read) {
    if (path->empty()) continue;
    auto text = security::ReadTextFile(*path, absl::StrCat(flag_prefix, "-* file"));
    if (!text.ok()) return text.status();
    *out = *std::move(text);
  }
  absl::StripAsciiWhitespace(&security.token);
  if (security.cert_pem.empty() != security.key_pem.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag_prefix, "-cert and ", flag_prefix, "-key go together"));
  }
  if (!security.cert_pem.empty() && security.ca_pem.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag_prefix, "-cert needs ", flag_prefix, "-ca"));
  }
  return security;
}

void SetDefaultDialSecurity(DialSecurity security) {
  absl::MutexLock lock(&default_mu);
  Default() = std::move(security);
}

std::shared_ptr<grpc::Channel> Dial(const std::string& address,
                                    const grpc::ChannelArguments& args) {
  return Dial(address, std::optional<DialSecurity>(), args);
}

std::shared_ptr<grpc::Channel> Dial(const std::string& address,
                                    const std::optional<DialSecurity>& security,
                                    const grpc::ChannelArguments& args) {
  if (security.has_value()) return Dial(address, *security, args);
  DialSecurity fallback;
  {
    absl::MutexLock lock(&default_mu);
    fallback = Default();
  }
  return Dial(address, fallback, args);
}

std::shared_ptr<grpc::Channel> Dial(const std::string& address, const DialSecurity& security,
                                    const grpc::ChannelArguments& args) {
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (!security.ca_pem.empty()) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = security.ca_pem;
    ssl.pem_cert_chain = security.cert_pem;
    ssl.pem_private_key = security.key_pem;
    credentials = grpc::SslCredentials(ssl);
  }
  if (security.token.empty()) return grpc::CreateCustomChannel(address, credentials, args);
  std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(std::make_unique<TokenInterceptorFactory>(security.token));
  return grpc::experimental::CreateCustomChannelWithInterceptors(address, credentials, args,
                                                                 std::move(interceptors));
}

}  // namespace conduit::grpc_util
