#include "services/security/security_node.h"

#include <spdlog/spdlog.h>

#include "absl/flags/flag.h"
#include "common/rocksdb/rocksdb_util.h"
#include "common/status/status_macros.h"
#include "services/security/api/security_service.h"

ABSL_FLAG(absl::Duration, audit_retention, absl::Hours(24 * 30),
          "How long audit records are kept (conduit audit)");

namespace conduit::security_service {

absl::StatusOr<std::unique_ptr<SecurityNode>> SecurityNode::Open(
    const std::string& data_dir, runtime::Runtime* runtime, SecurityNodeOptions options,
    const grpc_util::CallGuard& guard) {
  CONDUIT_RETURN_IF_ERROR(rocksdb_util::CreateDataDir(data_dir));
  std::unique_ptr<SecurityNode> node(new SecurityNode());
  auto store = RocksDbSecurityStore::Open(data_dir + "/security");
  if (!store.ok()) return store.status();
  node->store_ = *std::move(store);
  AclStore* acl_store = node->store_.get();
  if (options.etcd.enabled()) {
    auto etcd = EtcdAclStore::Connect(options.etcd);
    if (!etcd.ok()) return etcd.status();
    node->etcd_acls_ = *std::move(etcd);
    acl_store = node->etcd_acls_.get();
  }
  node->acls_ = std::make_unique<AclRegistry>(acl_store, guard.security().authorizer);
  CONDUIT_RETURN_IF_ERROR(node->acls_->Load());
  node->audit_ = std::make_shared<AuditTrail>(node->store_.get());
  CONDUIT_RETURN_IF_ERROR(node->audit_->Open());
  node->relay_ = guard.security().audit;
  if (node->relay_ != nullptr) node->relay_->SetSink(node->audit_);
  node->service_ =
      std::make_unique<api::SecurityService>(node->acls_.get(), node->audit_.get(), guard);
  node->scope_ = std::make_unique<runtime::Scope>(runtime, runtime::Pool::kStorage);
  SecurityNode* self = node.get();
  const time::Clock* clock = runtime->clock();
  node->scope_->Every(options.trim_interval, [self, clock, retention = options.audit_retention] {
    self->TrimAudit(clock->Now(), retention);
  });
  if (node->etcd_acls_ != nullptr) {
    AclRegistry* acls = node->acls_.get();
    runtime::Scope* scope = node->scope_.get();
    CONDUIT_RETURN_IF_ERROR(node->etcd_acls_->Follow([acls, scope] {
      const bool queued = scope->Submit([acls] {
        if (absl::Status s = acls->Load(); !s.ok()) {
          spdlog::error("stored ACLs: reading etcd failed, the previous set stays: {}",
                        s.ToString());
        }
      });
      if (!queued) spdlog::warn("stored ACLs: reload not queued (the pool is full)");
    }));
    EtcdAclStore* etcd = node->etcd_acls_.get();
    node->scope_->Every(absl::Seconds(1), [etcd] { etcd->Poll(); });
  }
  return node;
}

void SecurityNode::TrimAudit(absl::Time now, absl::Duration retention) {
  if (auto removed = audit_->Trim(now - retention); !removed.ok()) {
    spdlog::error("audit trail: trimming failed: {}", removed.status().ToString());
  } else if (*removed > 0) {
    spdlog::info("audit trail: removed {} records older than {}", *removed,
                 absl::FormatDuration(retention));
  }
  auto [dropped, error] = audit_->Dropped();
  if (dropped > dropped_logged_) {
    spdlog::error("audit trail: {} records could not be stored (last: {})",
                  dropped - dropped_logged_, error.ToString());
    dropped_logged_ = dropped;
  }
}

grpc::Service* SecurityNode::service() { return service_.get(); }

SecurityNode::~SecurityNode() {
  if (etcd_acls_ != nullptr) etcd_acls_->Stop();  // no reload is queued after this
  scope_.reset();
  if (relay_ != nullptr) relay_->SetSink(nullptr);
}

grpc_util::ServerComponent SecurityNode::Component() {
  auto node = std::make_shared<std::unique_ptr<SecurityNode>>();
  grpc_util::ServerComponent component;
  component.build = [node](const std::string& data_dir, prometheus::Registry&,
                           runtime::Runtime* runtime, const grpc_util::CallGuard& guard,
                           std::vector<grpc::Service*>* services) -> absl::Status {
    SecurityNodeOptions options;
    options.audit_retention = absl::GetFlag(FLAGS_audit_retention);
    auto etcd = etcd::EtcdFlagsFromCommandLine();
    if (!etcd.ok()) return etcd.status();
    options.etcd = *std::move(etcd);
    auto opened = Open(data_dir, runtime, options, guard);
    if (!opened.ok()) return opened.status();
    *node = *std::move(opened);
    services->push_back((*node)->service());
    return absl::OkStatus();
  };
  component.teardown = [node] { node->reset(); };
  component.health_services = {api::spb::Security::service_full_name()};
  return component;
}

}  // namespace conduit::security_service
