#include "services/log_broker/log_broker_node.h"

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "common/rocksdb/rocksdb_util.h"
#include "common/status/status_macros.h"

ABSL_FLAG(absl::Duration, log_maintenance_interval, absl::Seconds(5),
          "How often the log broker applies retention, compaction and dedup expiry");

namespace conduit::log_broker {

grpc_util::ServerComponent LogBrokerNode::Component() {
  auto node = std::make_shared<std::unique_ptr<LogBrokerNode>>();
  grpc_util::ServerComponent component;
  component.build = [node](const std::string& data_dir, prometheus::Registry& registry,
                           runtime::Runtime* runtime,
                           std::vector<grpc::Service*>* services) -> absl::Status {
    BrokerOptions options;
    options.maintenance_interval = absl::GetFlag(FLAGS_log_maintenance_interval);
    auto opened = Open(data_dir, registry, runtime, options);
    if (!opened.ok()) return opened.status();
    *node = *std::move(opened);
    services->push_back((*node)->service());
    return absl::OkStatus();
  };
  component.started = [node](const std::string& address) {
    (*node)->service()->SetAddress(address);
  };
  component.begin_shutdown = [node] { (*node)->service()->BeginShutdown(); };
  component.teardown = [node] { node->reset(); };
  component.health_services = {::conduit::log::v1::LogService::service_full_name()};
  return component;
}

absl::StatusOr<std::unique_ptr<LogBrokerNode>> LogBrokerNode::Open(const std::string& data_dir,
                                                                   prometheus::Registry& registry,
                                                                   runtime::Runtime* runtime,
                                                                   BrokerOptions options) {
  CONDUIT_RETURN_IF_ERROR(rocksdb_util::CreateDataDir(data_dir));
  std::unique_ptr<LogBrokerNode> node(new LogBrokerNode());
  auto store = RocksDbLogStore::Open(data_dir + "/broker");
  if (!store.ok()) return store.status();
  node->store_ = *std::move(store);
  node->metrics_ = std::make_unique<api::LogMetrics>(registry);
  node->broker_ =
      std::make_unique<Broker>(node->store_.get(), runtime, node->metrics_.get(), options);
  CONDUIT_RETURN_IF_ERROR(node->broker_->Recover());
  node->service_ = std::make_unique<api::LogService>(node->broker_.get(), node->metrics_.get());
  return node;
}

}  // namespace conduit::log_broker
