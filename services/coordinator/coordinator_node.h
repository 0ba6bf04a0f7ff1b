#pragma once

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/grpc/call_guard.h"
#include "common/grpc/server_main.h"
#include "common/runtime/runtime.h"
#include "services/coordinator/api/coordinator_metrics.h"
#include "services/coordinator/broker/grpc_topic_source.h"
#include "services/coordinator/domain/group_coordinator.h"
#include "services/coordinator/storage/rocksdb_coordinator_store.h"

namespace grpc {
class Service;
}  // namespace grpc

namespace conduit::coordinator {

// The gRPC services are declared, not included: their headers instantiate gRPC's generated
// service templates, which cost every includer seconds of compile time.
namespace api {
class CoordinatorService;
}  // namespace api

struct CoordinatorNodeOptions {
  // The log broker (host:port). Empty: set later with SetBrokerAddress (conduit-standalone
  // points it at its own address once serving).
  std::string broker_address;
  CoordinatorOptions coordinator;
  // Background sweep (session expiry, topic changes) and lag sampling for metrics, periodic
  // work on the runtime. Off in tests that drive a fake clock.
  bool run_sweeper = true;
  absl::Duration sweep_interval = absl::Seconds(1);
  absl::Duration lag_interval = absl::Seconds(15);
};

// The group coordinator wired together: RocksDB under <data_dir>/coordinator, the broker
// client, the GroupCoordinator (recovered), its gRPC service, and its Scope on the runtime's
// remote pool (calls and periodic passes may wait on the broker). Used by conduit-coordinator,
// conduit-standalone and the tests.
class CoordinatorNode {
 public:
  // `guard` is the authorise step of every call (CallGuard::Open(): none); it must outlive the
  // node.
  static absl::StatusOr<std::unique_ptr<CoordinatorNode>> Open(
      const std::string& data_dir, prometheus::Registry& registry, runtime::Runtime* runtime,
      CoordinatorNodeOptions options,
      const grpc_util::CallGuard& guard = grpc_util::CallGuard::Open());
  // The coordinator as a component of a server binary; flags --broker-address (empty: this
  // server's own address), --lag-interval, --session-timeout.
  static grpc_util::ServerComponent Component();
  ~CoordinatorNode();

  void SetBrokerAddress(const std::string& address) { topics_->SetAddress(address); }
  grpc::Service* service();  // the gRPC service to host (owned by the node)
  GroupCoordinator* coordinator() { return coordinator_.get(); }

 private:
  CoordinatorNode() = default;

  std::unique_ptr<RocksDbCoordinatorStore> store_;
  std::unique_ptr<GrpcTopicSource> topics_;
  std::unique_ptr<api::CoordinatorMetrics> metrics_;
  std::unique_ptr<GroupCoordinator> coordinator_;
  // Calls, the sweep (session expiry, topic changes) and lag sampling; reset first in the
  // destructor, which waits for them while the coordinator still exists. The sweep and the lag
  // pass are apart, so session expiry never waits for a slow broker.
  std::unique_ptr<runtime::Scope> scope_;
  std::unique_ptr<api::CoordinatorService> service_;
};

}  // namespace conduit::coordinator
