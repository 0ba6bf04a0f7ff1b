#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/security/acl.h"
#include "common/security/audit.h"
#include "common/security/authorizer.h"
#include "common/security/jwt.h"
#include "common/security/principal_rules.h"
#include "common/security/quota.h"
#include "common/security/tokens.h"

namespace conduit::grpc_util {

// The name of the one cluster resource (ACLs: `cluster literal conduit`, or `cluster any *`).
inline constexpr absl::string_view kClusterResource = "conduit";

// What a server knows to identify and authorise its callers. Null members are off.
struct CallSecurity {
  std::shared_ptr<security::TokenStore> tokens;      // static bearer tokens (reloadable)
  std::shared_ptr<const security::JwtVerifier> jwt;  // bearer JWTs
  // How a TLS client certificate names its principal (--tls-principal-rules); DEFAULT: its
  // SPIFFE id or URI SAN, else DNS SAN, else CN.
  security::CertificatePrincipalRules certificate_rules;
  // Null: authorisation is off and every identified caller may do everything (the plaintext
  // default of `make run`). Set: no matching allow means PERMISSION_DENIED.
  std::shared_ptr<security::Authorizer> authorizer;  // its ACLs reloadable
  // Per-principal rates (requests/s on every checked call; produce and fetch bytes/s where a
  // service charges them). Null: no quotas.
  std::shared_ptr<security::QuotaBook> quotas;
  // Where the audit interceptor (audit_interceptor.h) sends its records (the component that
  // keeps the trail sets the relay's sink); set: Check notes every admin operation it checks
  // (security::IsAdminOperation) and every call it refuses, for the interceptor. Null: nothing
  // is noted (a server without the interceptor must leave it null).
  std::shared_ptr<security::AuditRelay> audit;
};

// The one authorise step every RPC of the three services takes before it acts (streams before
// their first message). Identity is decided per call, never stored on the connection: calls on
// one connection may carry different tokens.
// - Principal: `authorization: Bearer <token>` — a static token (TokenStore), else a JWT
//   (JwtVerifier); a bearer token that is neither is UNAUTHENTICATED, never anonymous. Without
//   a token: the TLS client certificate's identity through the certificate rules (by default
//   SPIFFE/URI SAN, then DNS SAN, then CN, as "User:<value>"); without either: User:ANONYMOUS.
// - Check: OK, UNAUTHENTICATED (a bad token), or PERMISSION_DENIED naming the principal, the
//   operation and the resource (and the rule that denied).
//
// Immutable; thread-safe (the token store and authoriser swap their sets atomically).
class CallGuard {
 public:
  explicit CallGuard(CallSecurity security) : security_(std::move(security)) {}

  // A guard that lets every call through (no identity checks, no authorisation).
  static const CallGuard& Open();

  absl::StatusOr<std::string> PrincipalOf(const grpc::ServerContextBase& ctx) const;

  // Also charges the principal one request (quota): over it, RESOURCE_EXHAUSTED with the
  // grpc-retry-pushback-ms trailing metadata (gRFC A6) saying when to retry. With an audit
  // sink, notes the check for the audit trail when the operation is an admin one or the call
  // is refused (a bad token, a denial).
  absl::Status Check(grpc::ServerContextBase& ctx, security::ResourceType type,
                     absl::string_view name, security::Operation operation) const;
  // Check on the cluster resource (kClusterResource): the one place a server's cluster-wide
  // operations (cluster metadata, ACLs, the audit trail, bridges, broker-to-broker fetches) are
  // checked.
  absl::Status CheckCluster(grpc::ServerContextBase& ctx, security::Operation operation) const {
    return Check(ctx, security::ResourceType::kCluster, kClusterResource, operation);
  }
  // Charges the caller `bytes` of `kind` (produce or fetch bytes): RESOURCE_EXHAUSTED with the
  // pushback when over its quota, OK otherwise (and always without quotas).
  absl::Status ChargeBytes(grpc::ServerContextBase& ctx, security::QuotaKind kind,
                           double bytes) const;
  // The same decision for a call that checks several resources with its caller decided once
  // (`principal` from PrincipalOf): no quota charge, noted for the audit trail as above.
  absl::Status Check(grpc::ServerContextBase& ctx, absl::string_view principal,
                     security::ResourceType type, absl::string_view name,
                     security::Operation operation) const;
  // OK when `principal` (from PrincipalOf) may; PERMISSION_DENIED otherwise. Not noted for the
  // audit trail: for filtering what a call shows (a listing filtered by Describe).
  absl::Status Check(absl::string_view principal, security::ResourceType type,
                     absl::string_view name, security::Operation operation) const;

  // With quotas: takes `bytes` of `kind` from `principal`'s bucket after the fact (a fetch's
  // answer), to be paid back before its next call of that kind passes.
  void Debit(absl::string_view principal, security::QuotaKind kind, double bytes) const {
    if (security_.quotas != nullptr) security_.quotas->Debit(principal, kind, bytes);
  }
  bool has_quotas() const { return security_.quotas != nullptr; }

  // Whether the caller may see payloads (record values, job payloads) of the resource: an
  // allowed ViewPayload, or authorisation off.
  bool MayViewPayload(const grpc::ServerContextBase& ctx, security::ResourceType type,
                      absl::string_view name) const;

  // With an audit sink, adds `detail` to the call's audit record (an offset reset's or a
  // redrive's own audit entry); the record is written only if the call has checks noted.
  void AuditDetail(grpc::ServerContextBase& ctx, absl::string_view detail) const;

  bool authorizing() const { return security_.authorizer != nullptr; }
  const CallSecurity& security() const { return security_; }
  // Whether Check can note a call whose operations are not admin ones (a bad token, a denial):
  // only with an audit sink and with identity checks, authorisation or quotas on. Without, the
  // audit interceptor has nothing to record for such calls and need not intercept them.
  bool MayNoteNonAdminCalls() const { return security_.audit != nullptr && !Inert(); }

 private:
  // No identity checks, authorisation or quotas: Check lets every call through and notes only
  // admin operations.
  bool Inert() const {
    return security_.tokens == nullptr && security_.jwt == nullptr && !authorizing() &&
           security_.quotas == nullptr;
  }
  absl::Status Charge(grpc::ServerContextBase& ctx, absl::string_view principal,
                      security::QuotaKind kind, double amount) const;
  // The authorisation decision (allowed when authorisation is off).
  security::Decision Decide(absl::string_view principal, security::ResourceType type,
                            absl::string_view name, security::Operation operation) const;
  CallSecurity security_;
};

// The principal of a TLS peer's certificate as gRPC reports it, mapped by `rules` (by default
// its SPIFFE id or URI SAN, else its DNS SAN, else its common name, as "User:<value>"); empty
// when the connection has no client certificate or no rule names it.
std::string CertificatePrincipal(const grpc::AuthContext& auth,
                                 const security::CertificatePrincipalRules& rules = {});

}  // namespace conduit::grpc_util
