#include "services/coordinator/coordinator_node.h"

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "common/rocksdb/rocksdb_util.h"
#include "common/status/status_macros.h"
#include "services/coordinator/api/coordinator_service.h"

ABSL_FLAG(std::string, broker_address, "",
          "The log broker host:port the coordinator asks for offsets and append times, or a "
          "comma-separated list of a cluster's brokers: the next is asked when one cannot be "
          "reached (empty: this server's own address, as in conduit-standalone)");
ABSL_FLAG(absl::Duration, lag_interval, absl::Seconds(15),
          "How often every group's lag is computed for the metrics");
ABSL_FLAG(absl::Duration, session_timeout, absl::Seconds(45),
          "Session timeout of members that do not ask for one");

namespace conduit::coordinator {

absl::StatusOr<std::unique_ptr<CoordinatorNode>> CoordinatorNode::Open(
    const std::string& data_dir, prometheus::Registry& registry, runtime::Runtime* runtime,
    CoordinatorNodeOptions options, const grpc_util::CallGuard& guard) {
  CONDUIT_RETURN_IF_ERROR(rocksdb_util::CreateDataDir(data_dir));
  std::unique_ptr<CoordinatorNode> node(new CoordinatorNode());
  auto store = RocksDbCoordinatorStore::Open(data_dir + "/coordinator");
  if (!store.ok()) return store.status();
  node->store_ = *std::move(store);
  node->topics_ = std::make_unique<GrpcTopicSource>(options.broker_address);
  node->metrics_ = std::make_unique<api::CoordinatorMetrics>(registry);
  node->coordinator_ =
      std::make_unique<GroupCoordinator>(node->store_.get(), node->topics_.get(), runtime->clock(),
                                         options.coordinator, node->metrics_.get());
  CONDUIT_RETURN_IF_ERROR(node->coordinator_->Recover());
  node->scope_ = std::make_unique<runtime::Scope>(runtime, runtime::Pool::kRemote);
  node->service_ = std::make_unique<api::CoordinatorService>(node->coordinator_.get(),
                                                             node->scope_.get(), guard);
  if (options.run_sweeper) {
    GroupCoordinator* c = node->coordinator_.get();
    node->scope_->Every(options.sweep_interval, [c] { c->Sweep(); });
    node->scope_->Every(options.lag_interval, [c] { c->SampleLag(); });
  }
  return node;
}

CoordinatorNode::~CoordinatorNode() { scope_.reset(); }

grpc::Service* CoordinatorNode::service() { return service_.get(); }

grpc_util::ServerComponent CoordinatorNode::Component() {
  auto node = std::make_shared<std::unique_ptr<CoordinatorNode>>();
  grpc_util::ServerComponent component;
  component.build = [node](const std::string& data_dir, prometheus::Registry& registry,
                           runtime::Runtime* runtime, const grpc_util::CallGuard& guard,
                           std::vector<grpc::Service*>* services) -> absl::Status {
    CoordinatorNodeOptions options;
    options.broker_address = absl::GetFlag(FLAGS_broker_address);
    options.lag_interval = absl::GetFlag(FLAGS_lag_interval);
    options.coordinator.default_session_timeout = absl::GetFlag(FLAGS_session_timeout);
    auto opened = Open(data_dir, registry, runtime, options, guard);
    if (!opened.ok()) return opened.status();
    *node = *std::move(opened);
    services->push_back((*node)->service());
    return absl::OkStatus();
  };
  component.started = [node](const std::string& address) {
    if (absl::GetFlag(FLAGS_broker_address).empty()) (*node)->SetBrokerAddress(address);
  };
  component.teardown = [node] { node->reset(); };
  component.health_services = {api::pb::GroupCoordinator::service_full_name()};
  return component;
}

}  // namespace conduit::coordinator
