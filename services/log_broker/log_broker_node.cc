#include "services/log_broker/log_broker_node.h"

#include <spdlog/spdlog.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "common/etcd/etcd_flags.h"
#include "common/rocksdb/rocksdb_util.h"
#include "common/status/status_macros.h"
#include "services/log_broker/api/log_service.h"
#include "services/log_broker/replication/replica_service.h"

ABSL_FLAG(absl::Duration, log_maintenance_interval, absl::Seconds(5),
          "How often the log broker applies retention, compaction and dedup expiry");
ABSL_FLAG(int32_t, broker_id, 0, "Cluster mode: this broker's id, unique in the cluster (>= 0)");
ABSL_FLAG(std::string, advertise_address, "",
          "Cluster mode: host:port other brokers and clients reach this broker at (default: the "
          "address it serves on)");
ABSL_FLAG(absl::Duration, replica_lag_time, absl::Seconds(10),
          "Cluster mode: a follower not caught up with its leader for this long leaves the "
          "partition's in-sync set");
ABSL_FLAG(absl::Duration, etcd_lease_ttl, absl::Seconds(6),
          "Cluster mode: the broker's etcd lease; it is counted gone this long after its last "
          "keep-alive");
ABSL_FLAG(absl::Duration, leader_rebalance_interval, absl::Seconds(300),
          "Cluster mode, at the controller: how often leadership goes back to each partition's "
          "preferred replica once it is in sync again (0: never)");

namespace conduit::log_broker {

grpc::Service* LogBrokerNode::service() { return service_.get(); }
grpc::Service* LogBrokerNode::replica_service() { return replica_service_.get(); }
void LogBrokerNode::SetAddress(const std::string& address) { service_->SetAddress(address); }
void LogBrokerNode::BeginShutdown() { service_->BeginShutdown(); }

grpc_util::ServerComponent LogBrokerNode::Component() {
  auto node = std::make_shared<std::unique_ptr<LogBrokerNode>>();
  grpc_util::ServerComponent component;
  component.build = [node](const std::string& data_dir, prometheus::Registry& registry,
                           runtime::Runtime* runtime, const grpc_util::CallGuard& guard,
                           std::vector<grpc::Service*>* services) -> absl::Status {
    BrokerOptions options;
    options.maintenance_interval = absl::GetFlag(FLAGS_log_maintenance_interval);
    options.replica_lag_time = absl::GetFlag(FLAGS_replica_lag_time);
    auto etcd = etcd::EtcdFlagsFromCommandLine();
    if (!etcd.ok()) return etcd.status();
    std::optional<cluster::EtcdClusterOptions> cluster;
    if (etcd->enabled()) {
      cluster.emplace();
      cluster->endpoints = etcd->endpoints;
      cluster->etcd.credentials = etcd->credentials;
      cluster->broker_id = absl::GetFlag(FLAGS_broker_id);
      cluster->cluster = etcd->cluster;
      cluster->lease_ttl = absl::GetFlag(FLAGS_etcd_lease_ttl);
      cluster->leader_rebalance_interval = absl::GetFlag(FLAGS_leader_rebalance_interval);
    }
    auto opened = Open(data_dir, registry, runtime, options, std::move(cluster), guard);
    if (!opened.ok()) return opened.status();
    *node = *std::move(opened);
    services->push_back((*node)->service());
    if ((*node)->replica_service()) services->push_back((*node)->replica_service());
    return absl::OkStatus();
  };
  component.started = [node](const std::string& address) {
    (*node)->SetAddress(address);
    const std::string advertised = absl::GetFlag(FLAGS_advertise_address);
    absl::Status joined = (*node)->Join(advertised.empty() ? address : advertised);
    // Without the cluster this broker can serve nothing: stop rather than run half-joined.
    if (!joined.ok()) {
      spdlog::critical("conduit-broker: cannot join the cluster: {}", joined.ToString());
      std::_Exit(1);
    }
  };
  component.begin_shutdown = [node] { (*node)->BeginShutdown(); };
  component.teardown = [node] { node->reset(); };
  component.health_services = {::conduit::log::v1::LogService::service_full_name()};
  return component;
}

absl::StatusOr<std::unique_ptr<LogBrokerNode>> LogBrokerNode::Open(
    const std::string& data_dir, prometheus::Registry& registry, runtime::Runtime* runtime,
    BrokerOptions options, std::optional<cluster::EtcdClusterOptions> cluster,
    const grpc_util::CallGuard& guard) {
  CONDUIT_RETURN_IF_ERROR(rocksdb_util::CreateDataDir(data_dir));
  std::unique_ptr<LogBrokerNode> node(new LogBrokerNode());
  auto store = RocksDbLogStore::Open(data_dir + "/broker");
  if (!store.ok()) return store.status();
  node->store_ = *std::move(store);
  node->metrics_ = std::make_unique<api::LogMetrics>(registry);
  const int32_t self = cluster ? cluster->broker_id : 0;
  if (cluster) {
    node->cluster_metrics_ = std::make_unique<cluster::ClusterMetrics>(registry);
    cluster->observer = node->cluster_metrics_.get();
    LogBrokerNode* raw = node.get();
    cluster->on_view = [raw](std::shared_ptr<const ClusterView> view) {
      if (absl::Status s = raw->broker_->ApplyView(view); !s.ok()) {
        spdlog::error("broker: applying the cluster's metadata failed: {}", s.ToString());
      }
      raw->fetchers_->OnView(*view);
    };

    CONDUIT_ASSIGN_OR_RETURN(node->cluster_,
                             cluster::EtcdCluster::Create(*std::move(cluster), runtime));
    options.cluster = node->cluster_.get();
    options.ids = node->cluster_.get();
  }
  node->broker_ =
      std::make_unique<Broker>(node->store_.get(), runtime, node->metrics_.get(), options);
  CONDUIT_RETURN_IF_ERROR(node->broker_->Recover());
  node->service_ =
      std::make_unique<api::LogService>(node->broker_.get(), node->metrics_.get(), guard);
  if (node->cluster_) {
    node->fetchers_ = std::make_unique<replication::ReplicaFetchers>(
        node->broker_.get(), runtime, replication::ReplicaFetcherOptions{.self = self});
    node->replica_service_ =
        std::make_unique<replication::ReplicaService>(node->broker_.get(), guard);
    node->scope_ = std::make_unique<runtime::Scope>(runtime, runtime::Pool::kStorage);
    LogBrokerNode* raw = node.get();
    node->replication_metrics_ = node->scope_->Every(kReplicationMetricsInterval,
                                                     [raw] { raw->RefreshReplicationMetrics(); });
  }
  return node;
}

LogBrokerNode::~LogBrokerNode() {
  if (scope_) scope_->StopEvery(replication_metrics_);
  if (broker_) broker_->replicas().Stop();
}

void LogBrokerNode::RefreshReplicationMetrics() {
  const std::vector<PartitionReplication> led = broker_->replicas().ReplicationSnapshot();
  metrics_->OnReplication(led);
  cluster_metrics_->OnReplication(led);
}

absl::Status LogBrokerNode::Join(const std::string& address) {
  return cluster_ ? cluster_->Join(address) : absl::OkStatus();
}

}  // namespace conduit::log_broker
