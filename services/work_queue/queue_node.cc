#include "services/work_queue/queue_node.h"

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "common/logging/logging.h"
#include "common/rocksdb/rocksdb_util.h"
#include "common/status/status_macros.h"
#include "services/work_queue/api/bridge_service.h"
#include "services/work_queue/api/queue_service.h"
#include "services/work_queue/bridge/bridge_manager.h"

ABSL_FLAG(std::string, bridge_bootstrap, "",
          "Log brokers bridges read from and dead letters are redriven to, host:port or a "
          "comma-separated list of a cluster's brokers (default: this server's own address, as "
          "in conduit-standalone)");
ABSL_FLAG(std::string, bridge_coordinator, "",
          "Group coordinator bridges join through, host:port (default: the first bridge "
          "bootstrap broker)");

namespace conduit::work_queue {

absl::StatusOr<std::unique_ptr<QueueNode>> QueueNode::Open(const std::string& data_dir,
                                                           prometheus::Registry& registry,
                                                           runtime::Runtime* runtime,
                                                           WorkQueueOptions options,
                                                           const grpc_util::CallGuard& guard) {
  CONDUIT_RETURN_IF_ERROR(rocksdb_util::CreateDataDir(data_dir));
  std::unique_ptr<QueueNode> node(new QueueNode());
  auto store = RocksDbQueueStore::Open(data_dir + "/queue");
  if (!store.ok()) return store.status();
  node->store_ = *std::move(store);
  node->metrics_ = std::make_unique<api::QueueMetrics>(registry);
  node->queue_ =
      std::make_unique<WorkQueue>(node->store_.get(), runtime, options, node->metrics_.get());
  CONDUIT_RETURN_IF_ERROR(node->queue_->Recover());
  node->service_ = std::make_unique<api::QueueService>(node->queue_.get(), guard);
  node->bridge_metrics_ = std::make_unique<api::BridgeMetrics>(registry);
  node->bridges_ = std::make_unique<bridge::BridgeManager>(
      node->store_.get(), node->queue_.get(), runtime->clock(), node->bridge_metrics_.get());
  node->bridge_service_ = std::make_unique<api::BridgeService>(node->bridges_.get(), guard);
  return node;
}

QueueNode::~QueueNode() = default;

grpc::Service* QueueNode::service() { return service_.get(); }
grpc::Service* QueueNode::bridge_service() { return bridge_service_.get(); }

grpc_util::ServerComponent QueueNode::Component() {
  auto node = std::make_shared<std::unique_ptr<QueueNode>>();
  grpc_util::ServerComponent component;
  component.build = [node](const std::string& data_dir, prometheus::Registry& registry,
                           runtime::Runtime* runtime, const grpc_util::CallGuard& guard,
                           std::vector<grpc::Service*>* services) -> absl::Status {
    auto opened = Open(data_dir, registry, runtime, {}, guard);
    if (!opened.ok()) return opened.status();
    *node = *std::move(opened);
    services->push_back((*node)->service());
    services->push_back((*node)->bridge_service());
    return absl::OkStatus();
  };
  component.started = [node](const std::string& address) {
    const std::string bootstrap = absl::GetFlag(FLAGS_bridge_bootstrap);
    const absl::Status s = (*node)->bridges()->Start(
        bridge::BridgeEndpoints{bootstrap, absl::GetFlag(FLAGS_bridge_coordinator)}, address);
    if (!s.ok()) spdlog::error("bridges not started: {}", s.ToString());
    (*node)->StartPublisher(bootstrap.empty() ? address : bootstrap);
  };
  component.begin_shutdown = [node] {
    (*node)->bridges()->Stop();
    (*node)->StopPublisher();
  };
  component.teardown = [node] { node->reset(); };
  component.health_services = {api::pb::WorkQueue::service_full_name(),
                               api::bpb::Bridges::service_full_name()};
  return component;
}

void QueueNode::StartPublisher(const std::string& bootstrap) {
  publisher_ = std::make_unique<bridge::TopicPublisher>(bootstrap);
  queue_->SetPublisher(publisher_.get());
}

void QueueNode::StopPublisher() {
  queue_->SetPublisher(nullptr);
  publisher_.reset();
}

}  // namespace conduit::work_queue
