#pragma once

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "common/grpc/call_guard.h"
#include "common/grpc/server_main.h"
#include "common/runtime/runtime.h"
#include "services/log_broker/api/log_metrics.h"
#include "services/log_broker/cluster/etcd_cluster.h"
#include "services/log_broker/domain/broker.h"
#include "services/log_broker/replication/replica_fetcher.h"
#include "services/log_broker/storage/rocksdb_log_store.h"

namespace grpc {
class Service;
}  // namespace grpc

namespace conduit::log_broker {

// The gRPC services are declared, not included: their headers instantiate gRPC's generated
// service templates, which cost every includer seconds of compile time.
namespace api {
class LogService;
}  // namespace api
namespace replication {
class ReplicaService;
}  // namespace replication

// The log broker wired together: RocksDB store under <data_dir>/broker, the Broker on top of it
// (recovered), its metrics and its gRPC services (behind the authorise step). Used by
// conduit-broker, conduit-standalone and the integration tests, so all three run the same thing.
//
// Destruction order is the reverse of construction: service, broker (drains), store (closes).
class LogBrokerNode {
 public:
  // With `cluster` (endpoints set), the broker joins that cluster once Join() is called with its
  // serving address; without, it is a single node. Its services take `guard`'s authorise step on
  // every call (the default lets everything through); `guard` must outlive the node.
  static absl::StatusOr<std::unique_ptr<LogBrokerNode>> Open(
      const std::string& data_dir, prometheus::Registry& registry, runtime::Runtime* runtime,
      BrokerOptions options = {}, std::optional<cluster::EtcdClusterOptions> cluster = {},
      const grpc_util::CallGuard& guard = grpc_util::CallGuard::Open());

  // The broker as a component of a server binary, configured from flags
  // (--log-maintenance-interval; cluster mode: --etcd-endpoints, --broker-id, --cluster-name,
  // --advertise-address, --etcd-lease-ttl, --replica-lag-time).
  static grpc_util::ServerComponent Component();

  // Cluster mode: registers at `address` (the advertised one if set) and starts following the
  // metadata. A no-op on a single node.
  absl::Status Join(const std::string& address);

  ~LogBrokerNode();  // stops cluster work first: the broker's periodic work uses the cluster

  // How often cluster mode refreshes the replication gauges (under-replicated and under-min-ISR
  // partitions, follower lag) from ReplicaManager::ReplicationSnapshot.
  static constexpr absl::Duration kReplicationMetricsInterval = absl::Seconds(1);

  // The gRPC services to host (owned by the node); replica_service() is null on a single node.
  grpc::Service* service();
  grpc::Service* replica_service();
  // What GetMetadata names as this broker's address (the serving one: ServerMain sets it).
  void SetAddress(const std::string& address);
  // Ends the broker's open streams and long polls, before the server shuts down.
  void BeginShutdown();
  Broker* broker() { return broker_.get(); }
  RocksDbLogStore* store() { return store_.get(); }

 private:
  LogBrokerNode() = default;
  void RefreshReplicationMetrics();

  std::unique_ptr<RocksDbLogStore> store_;
  std::unique_ptr<api::LogMetrics> metrics_;
  std::unique_ptr<Broker> broker_;
  std::unique_ptr<cluster::ClusterMetrics> cluster_metrics_;
  // Follows leaders; destroyed after the cluster (which hands it views), before the broker.
  std::unique_ptr<replication::ReplicaFetchers> fetchers_;
  // Destroyed before the broker (it applies views to it) and after the service.
  std::unique_ptr<cluster::EtcdCluster> cluster_;
  std::unique_ptr<api::LogService> service_;
  std::unique_ptr<replication::ReplicaService> replica_service_;
  // Cluster mode: the periodic replication-metrics refresh; stopped first in the destructor.
  std::unique_ptr<runtime::Scope> scope_;
  runtime::Scope::PeriodicId replication_metrics_ = 0;
};

}  // namespace conduit::log_broker
