#include "common/grpc/call_guard_flags.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/grpc/dial.h"
#include "common/security/acl_file.h"
#include "common/security/text_file.h"

ABSL_FLAG(std::string, auth_token_file, "",
          "Static bearer tokens: one '<sha256-hex of the token> <principal>' per line");
ABSL_FLAG(std::vector<std::string>, auth_jwt_keys, {},
          "JWT public keys, ALG:PEM-PATH each (ALG EdDSA or ES256, pinned per key), comma "
          "separated; with --auth-jwt-issuer and --auth-jwt-audience");
ABSL_FLAG(std::string, auth_jwt_issuer, "", "The 'iss' every accepted JWT carries");
ABSL_FLAG(std::string, auth_jwt_audience, "", "The 'aud' every accepted JWT carries");
ABSL_FLAG(bool, authorization, false,
          "Check ACLs on every call: no matching allow means PERMISSION_DENIED (on with "
          "--acl-file)");
ABSL_FLAG(std::string, acl_file, "",
          "ACL bootstrap file (common/security/acl_file.h format); turns --authorization on");
ABSL_FLAG(double, quota_produce_bytes, 0,
          "Bytes/s each principal may produce (records, job payloads); 0: no limit");
ABSL_FLAG(double, quota_fetch_bytes, 0, "Bytes/s each principal may fetch; 0: no limit");
ABSL_FLAG(double, quota_requests, 0, "Calls/s each principal may make; 0: no limit");
ABSL_FLAG(std::vector<std::string>, superusers, {},
          "Principals every check allows, comma separated (e.g. User:admin)");

ABSL_FLAG(std::string, tls_principal_rules, "",
          "How a TLS client certificate names its principal: ordered rules like Kafka's, e.g. "
          "'URI:^spiffe://conduit\\.dev/(.*)$/\\1/,CN:^(.*)$/\\1/L,DEFAULT' "
          "(common/security/principal_rules.h); empty: DEFAULT (URI SAN, DNS SAN, CN)");
ABSL_FLAG(int32_t, auth_reload_seconds, 10,
          "How often --auth-token-file and --acl-file are checked for changes (replace them by a "
          "rename); 0: read at start only");
ABSL_FLAG(std::string, peer_tls_ca, "",
          "PEM CA of the servers this one calls (broker, coordinator, peers): TLS to them");
ABSL_FLAG(std::string, peer_tls_cert, "",
          "PEM client certificate this server presents to the servers it calls (mTLS)");
ABSL_FLAG(std::string, peer_tls_key, "", "PEM key of --peer-tls-cert");
ABSL_FLAG(std::string, peer_token_file, "",
          "A file holding the bearer token this server sends to the servers it calls");

namespace conduit::grpc_util {
namespace {

absl::StatusOr<std::shared_ptr<security::JwtVerifier>> JwtFromFlags(const time::Clock* clock) {
  const std::vector<std::string> specs = absl::GetFlag(FLAGS_auth_jwt_keys);
  if (specs.empty()) return nullptr;
  std::vector<security::JwtKeyConfig> keys;
  for (const std::string& spec : specs) {
    std::vector<std::string> parts = absl::StrSplit(spec, absl::MaxSplits(':', 1));
    auto algorithm = parts.size() == 2 ? security::ParseJwtAlgorithm(parts[0]) : std::nullopt;
    if (!algorithm) {
      return absl::InvalidArgumentError(
          absl::StrCat("--auth-jwt-keys: '", spec, "' is not ALG:PATH with ALG EdDSA or ES256"));
    }
    auto pem = security::ReadTextFile(parts[1], "JWT public key");
    if (!pem.ok()) return pem.status();
    keys.push_back(security::JwtKeyConfig{"", *algorithm, *std::move(pem)});
  }
  security::JwtVerifierOptions options;
  options.issuer = absl::GetFlag(FLAGS_auth_jwt_issuer);
  options.audience = absl::GetFlag(FLAGS_auth_jwt_audience);
  auto verifier = security::JwtVerifier::Create(options, std::move(keys), clock);
  if (!verifier.ok()) return verifier.status();
  return std::shared_ptr<security::JwtVerifier>(*std::move(verifier));
}

}  // namespace

absl::StatusOr<std::shared_ptr<const CallGuard>> CallGuardFromFlags(
    const time::Clock* clock, std::shared_ptr<security::AuditRelay> audit) {
  CallSecurity security;
  security.audit = std::move(audit);
  auto rules = security::CertificatePrincipalRules::Parse(absl::GetFlag(FLAGS_tls_principal_rules));
  if (!rules.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tls-principal-rules: ", rules.status().message()));
  }
  security.certificate_rules = *std::move(rules);
  if (const std::string path = absl::GetFlag(FLAGS_auth_token_file); !path.empty()) {
    auto tokens = std::make_shared<security::TokenStore>();
    if (absl::Status s = tokens->Reload(path); !s.ok()) return s;
    security.tokens = std::move(tokens);
  }
  auto jwt = JwtFromFlags(clock);
  if (!jwt.ok()) return jwt.status();
  security.jwt = *std::move(jwt);
  const std::string acl_file = absl::GetFlag(FLAGS_acl_file);
  if (absl::GetFlag(FLAGS_authorization) || !acl_file.empty()) {
    auto authorizer = std::make_shared<security::Authorizer>();
    if (!acl_file.empty()) {
      auto acls = security::LoadAclFile(acl_file);
      if (!acls.ok()) return acls.status();
      if (absl::Status s = authorizer->ReplaceAcls(*std::move(acls)); !s.ok()) return s;
    }
    if (absl::Status s = authorizer->ReplaceSuperusers(absl::GetFlag(FLAGS_superusers)); !s.ok()) {
      return s;
    }
    security.authorizer = std::move(authorizer);
  }
  const security::QuotaRates rates{absl::GetFlag(FLAGS_quota_produce_bytes),
                                   absl::GetFlag(FLAGS_quota_fetch_bytes),
                                   absl::GetFlag(FLAGS_quota_requests)};
  if (rates.produce_bytes < 0 || rates.fetch_bytes < 0 || rates.requests < 0) {
    return absl::InvalidArgumentError("--quota-* rates cannot be negative");
  }
  if (rates.produce_bytes > 0 || rates.fetch_bytes > 0 || rates.requests > 0) {
    security.quotas = std::make_shared<security::QuotaBook>(rates, clock);
  }
  return std::make_shared<const CallGuard>(std::move(security));
}

absl::Status SetDialSecurityFromFlags() {
  auto security =
      ReadDialSecurity({absl::GetFlag(FLAGS_peer_tls_ca), absl::GetFlag(FLAGS_peer_tls_cert),
                        absl::GetFlag(FLAGS_peer_tls_key), absl::GetFlag(FLAGS_peer_token_file)},
                       "--peer-tls");
  if (!security.ok()) return security.status();
  SetDefaultDialSecurity(*std::move(security));
  return absl::OkStatus();
}

namespace {

// The file's (modification time, size), or nullopt when it cannot be stat'ed.
std::optional<std::pair<int64_t, int64_t>> Version(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  return std::pair<int64_t, int64_t>{
      static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec, st.st_size};
}

// Calls `reload` when `path` changed since the last call that saw it.
class FileWatch {
 public:
  FileWatch(std::string path, std::function<absl::Status(const std::string&)> reload)
      : path_(std::move(path)), reload_(std::move(reload)), seen_(Version(path_)) {}
  void Check() {
    auto now = Version(path_);
    if (!now || now == seen_) return;
    seen_ = now;
    if (absl::Status s = reload_(path_); !s.ok()) {
      spdlog::error("reloading {} failed, the previous contents stay: {}", path_,
                    std::string(s.message()));
    } else {
      spdlog::info("reloaded {}", path_);
    }
  }

 private:
  const std::string path_;
  const std::function<absl::Status(const std::string&)> reload_;
  std::optional<std::pair<int64_t, int64_t>> seen_;
};

}  // namespace

void ReloadCallGuardFiles(const CallGuard& guard, runtime::Scope* scope) {
  const int32_t seconds = absl::GetFlag(FLAGS_auth_reload_seconds);
  if (seconds <= 0) return;
  std::vector<std::shared_ptr<FileWatch>> watches;
  const std::string tokens = absl::GetFlag(FLAGS_auth_token_file);
  if (!tokens.empty() && guard.security().tokens != nullptr) {
    auto store = guard.security().tokens;
    watches.push_back(std::make_shared<FileWatch>(
        tokens, [store](const std::string& path) { return store->Reload(path); }));
  }
  const std::string acls = absl::GetFlag(FLAGS_acl_file);
  if (!acls.empty() && guard.security().authorizer != nullptr) {
    auto authorizer = guard.security().authorizer;
    watches.push_back(
        std::make_shared<FileWatch>(acls, [authorizer](const std::string& path) -> absl::Status {
          auto entries = security::LoadAclFile(path);
          if (!entries.ok()) return entries.status();
          return authorizer->ReplaceAcls(*std::move(entries));
        }));
  }
  if (watches.empty()) return;
  scope->Every(absl::Seconds(seconds), [watches] {
    for (const auto& w : watches) w->Check();
  });
}

std::string DescribeCallGuardFlags() {
  std::vector<std::string> parts;
  if (!absl::GetFlag(FLAGS_auth_token_file).empty()) parts.push_back("bearer tokens");
  if (!absl::GetFlag(FLAGS_auth_jwt_keys).empty()) parts.push_back("JWTs");
  if (absl::GetFlag(FLAGS_authorization) || !absl::GetFlag(FLAGS_acl_file).empty()) {
    parts.push_back("ACLs");
  }
  if (absl::GetFlag(FLAGS_quota_produce_bytes) > 0 || absl::GetFlag(FLAGS_quota_fetch_bytes) > 0 ||
      absl::GetFlag(FLAGS_quota_requests) > 0) {
    parts.push_back("quotas");
  }
  return parts.empty() ? "open: no authentication or ACLs" : absl::StrJoin(parts, ", ");
}

}  // namespace conduit::grpc_util
