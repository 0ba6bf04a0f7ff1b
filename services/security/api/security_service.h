#pragma once

#include "common/grpc/call_guard.h"
#include "conduit/security/v1/security.grpc.pb.h"
#include "services/security/domain/acl_registry.h"
#include "services/security/domain/audit_trail.h"

namespace conduit::security_service::api {

namespace spb = ::conduit::security::v1;

// gRPC adapter of conduit.security.v1.Security (callback API): the ACL RPCs (Alter on the
// cluster to change, Describe to list) and the audit trail (Describe on the cluster). Changes
// are short synced writes, run on gRPC's callback threads. Thread-safe; the registry and trail
// must outlive it.
class SecurityService final : public spb::Security::CallbackService {
 public:
  SecurityService(AclRegistry* acls, const AuditTrail* audit, const grpc_util::CallGuard& guard)
      : acls_(acls), audit_(audit), guard_(guard) {}

  grpc::ServerUnaryReactor* CreateAcls(grpc::CallbackServerContext*, const spb::CreateAclsRequest*,
                                       spb::CreateAclsResponse*) override;
  grpc::ServerUnaryReactor* DeleteAcls(grpc::CallbackServerContext*, const spb::DeleteAclsRequest*,
                                       spb::DeleteAclsResponse*) override;
  grpc::ServerUnaryReactor* ListAcls(grpc::CallbackServerContext*, const spb::ListAclsRequest*,
                                     spb::ListAclsResponse*) override;
  grpc::ServerUnaryReactor* ListAudit(grpc::CallbackServerContext*, const spb::ListAuditRequest*,
                                      spb::ListAuditResponse*) override;

 private:
  AclRegistry* const acls_;
  const AuditTrail* const audit_;
  const grpc_util::CallGuard& guard_;
};

}  // namespace conduit::security_service::api
