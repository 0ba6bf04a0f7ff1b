#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/etcd/etcd_flags.h"
#include "common/grpc/call_guard.h"
#include "common/grpc/server_main.h"
#include "common/runtime/runtime.h"
#include "services/security/cluster/etcd_acl_store.h"
#include "services/security/domain/acl_registry.h"
#include "services/security/domain/audit_trail.h"
#include "services/security/storage/rocksdb_security_store.h"

namespace grpc {
class Service;
}  // namespace grpc

namespace conduit::security_service {

// The gRPC services are declared, not included: their headers instantiate gRPC's generated
// service templates, which cost every includer seconds of compile time.
namespace api {
class SecurityService;
}  // namespace api

struct SecurityNodeOptions {
  // Audit records older than this are removed (checked every trim_interval).
  absl::Duration audit_retention = absl::Hours(24 * 30);
  absl::Duration trim_interval = absl::Minutes(10);
  // Cluster mode (--etcd-endpoints): the stored ACLs live in etcd, shared by every server of
  // the cluster, followed by a watch (a broken watch restarts every second); the audit trail
  // stays local. Empty: RocksDB.
  etcd::EtcdFlags etcd;
};

// The security service wired together: RocksDB under <data_dir>/security (or etcd for the
// stored ACLs in cluster mode), the stored ACLs loaded into the guard's Authorizer, the audit trail
// set as the guard's audit sink, the gRPC service, and the trail's retention on a Scope. Every
// Conduit server binary hosts it.
class SecurityNode {
 public:
  static absl::StatusOr<std::unique_ptr<SecurityNode>> Open(const std::string& data_dir,
                                                            runtime::Runtime* runtime,
                                                            SecurityNodeOptions options,
                                                            const grpc_util::CallGuard& guard);
  // The component of a server binary; flag --audit-retention.
  static grpc_util::ServerComponent Component();
  // Stops the retention task and detaches the trail from the guard.
  ~SecurityNode();

  grpc::Service* service();  // the gRPC service to host (owned by the node)
  AuditTrail* audit() { return audit_.get(); }

 private:
  SecurityNode() = default;
  void TrimAudit(absl::Time now, absl::Duration retention);

  std::unique_ptr<RocksDbSecurityStore> store_;
  std::unique_ptr<EtcdAclStore> etcd_acls_;  // cluster mode only
  std::unique_ptr<AclRegistry> acls_;
  std::shared_ptr<AuditTrail> audit_;
  std::shared_ptr<security::AuditRelay> relay_;
  std::unique_ptr<api::SecurityService> service_;
  std::unique_ptr<runtime::Scope> scope_;
  uint64_t dropped_logged_ = 0;  // only touched by the scope's trim task
};

}  // namespace conduit::security_service
