#include "common/grpc/call_guard.h"

#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/grpc/audit_interceptor.h"
#include "common/security/principal.h"

namespace conduit::grpc_util {
namespace {

constexpr absl::string_view kBearer = "Bearer ";

// Every value of `property` in `auth`, appended to `out`.
void Append(const grpc::AuthContext& auth, const char* property, std::vector<std::string>* out) {
  for (const grpc::string_ref& value : auth.FindPropertyValues(property)) {
    out->emplace_back(value.data(), value.size());
  }
}

absl::Status Denial(absl::string_view principal, security::ResourceType type,
                    absl::string_view name, security::Operation operation,
                    absl::string_view reason) {
  return absl::PermissionDeniedError(
      absl::StrCat(principal, " may not ", security::OperationName(operation), " ",
                   security::ResourceTypeName(type), " '", name, "' (", reason, ")"));
}

}  // namespace

const CallGuard& CallGuard::Open() {
  static const CallGuard* open = new CallGuard(CallSecurity{});
  return *open;
}

std::string CertificatePrincipal(const grpc::AuthContext& auth,
                                 const security::CertificatePrincipalRules& rules) {
  security::CertificateNames names;
  Append(auth, GRPC_PEER_SPIFFE_ID_PROPERTY_NAME, &names.uris);  // first: DEFAULT takes it
  Append(auth, GRPC_PEER_URI_PROPERTY_NAME, &names.uris);
  Append(auth, GRPC_PEER_DNS_PROPERTY_NAME, &names.dns);
  std::vector<std::string> cn;
  Append(auth, GRPC_X509_CN_PROPERTY_NAME, &cn);
  if (!cn.empty()) names.common_name = std::move(cn.front());
  return rules.Map(names);
}

absl::StatusOr<std::string> CallGuard::PrincipalOf(const grpc::ServerContextBase& ctx) const {
  const auto& metadata = ctx.client_metadata();
  auto header = metadata.find("authorization");
  // A server that checks no tokens ignores them (as it ignores every credential when open).
  const bool checks_tokens = security_.tokens != nullptr || security_.jwt != nullptr;
  if (header != metadata.end() && checks_tokens) {
    const absl::string_view value(header->second.data(), header->second.size());
    if (!absl::StartsWith(value, kBearer)) {
      return absl::UnauthenticatedError("authorization metadata must be 'Bearer <token>'");
    }
    const absl::string_view token = value.substr(kBearer.size());
    if (security_.tokens != nullptr) {
      if (auto principal = security_.tokens->Lookup(token); principal.ok()) return principal;
    }
    if (security_.jwt != nullptr && absl::StrContains(token, ".")) {
      auto identity = security_.jwt->Verify(token);
      if (!identity.ok()) return identity.status();
      return identity->principal;
    }
    return absl::UnauthenticatedError("the bearer token is not valid here");
  }
  if (auto auth = ctx.auth_context(); auth != nullptr && auth->IsPeerAuthenticated()) {
    std::string principal = CertificatePrincipal(*auth, security_.certificate_rules);
    if (!principal.empty()) return principal;
  }
  return std::string(security::kAnonymousPrincipal);
}

absl::Status CallGuard::Check(grpc::ServerContextBase& ctx, security::ResourceType type,
                              absl::string_view name, security::Operation operation) const {
  const bool audit_admin = security_.audit != nullptr && security::IsAdminOperation(operation);
  if (Inert() && !audit_admin) return absl::OkStatus();
  auto principal = PrincipalOf(ctx);
  if (!principal.ok()) {
    if (security_.audit != nullptr) {
      NoteAuditCheck(
          ctx, "",
          {type, std::string(name), operation, false, std::string(principal.status().message())});
    }
    return principal.status();
  }
  if (absl::Status s = Charge(ctx, *principal, security::QuotaKind::kRequests, 1); !s.ok()) {
    return s;
  }
  return Check(ctx, *principal, type, name, operation);
}

absl::Status CallGuard::Check(grpc::ServerContextBase& ctx, absl::string_view principal,
                              security::ResourceType type, absl::string_view name,
                              security::Operation operation) const {
  security::Decision decision = Decide(principal, type, name, operation);
  if (security_.audit != nullptr && (!decision.allowed || security::IsAdminOperation(operation))) {
    NoteAuditCheck(ctx, principal,
                   {type, std::string(name), operation, decision.allowed, decision.reason});
  }
  if (decision.allowed) return absl::OkStatus();
  return Denial(principal, type, name, operation, decision.reason);
}

void CallGuard::AuditDetail(grpc::ServerContextBase& ctx, absl::string_view detail) const {
  if (security_.audit != nullptr) NoteAuditDetail(ctx, detail);
}

absl::Status CallGuard::ChargeBytes(grpc::ServerContextBase& ctx, security::QuotaKind kind,
                                    double bytes) const {
  if (security_.quotas == nullptr) return absl::OkStatus();
  auto principal = PrincipalOf(ctx);
  if (!principal.ok()) return principal.status();
  return Charge(ctx, *principal, kind, bytes);
}

absl::Status CallGuard::Charge(grpc::ServerContextBase& ctx, absl::string_view principal,
                               security::QuotaKind kind, double amount) const {
  if (security_.quotas == nullptr) return absl::OkStatus();
  const security::QuotaBook::Verdict verdict = security_.quotas->Charge(principal, kind, amount);
  if (verdict.allowed) return absl::OkStatus();
  ctx.AddTrailingMetadata("grpc-retry-pushback-ms",
                          absl::StrCat(absl::ToInt64Milliseconds(verdict.retry_after)));
  return security_.quotas->Refusal(principal, kind, verdict);
}

security::Decision CallGuard::Decide(absl::string_view principal, security::ResourceType type,
                                     absl::string_view name, security::Operation operation) const {
  if (!authorizing()) return {true, "authorisation is off"};
  return security_.authorizer->Authorize(principal, type, name, operation);
}

absl::Status CallGuard::Check(absl::string_view principal, security::ResourceType type,
                              absl::string_view name, security::Operation operation) const {
  if (!authorizing()) return absl::OkStatus();
  security::Decision decision = Decide(principal, type, name, operation);
  if (decision.allowed) return absl::OkStatus();
  return Denial(principal, type, name, operation, decision.reason);
}

bool CallGuard::MayViewPayload(const grpc::ServerContextBase& ctx, security::ResourceType type,
                               absl::string_view name) const {
  if (!authorizing()) return true;
  auto principal = PrincipalOf(ctx);
  return principal.ok() && Check(*principal, type, name, security::Operation::kViewPayload).ok();
}

}  // namespace conduit::grpc_util
