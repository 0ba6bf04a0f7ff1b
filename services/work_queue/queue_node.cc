#include "services/work_queue/queue_node.h"

#include "absl/strings/str_cat.h"
#include "common/rocksdb/rocksdb_util.h"
#include "common/status/status_macros.h"

namespace conduit::work_queue {

absl::StatusOr<std::unique_ptr<QueueNode>> QueueNode::Open(const std::string& data_dir,
                                                           prometheus::Registry& registry,
                                                           runtime::Runtime* runtime,
                                                           WorkQueueOptions options) {
  CONDUIT_RETURN_IF_ERROR(rocksdb_util::CreateDataDir(data_dir));
  std::unique_ptr<QueueNode> node(new QueueNode());
  auto store = RocksDbQueueStore::Open(data_dir + "/queue");
  if (!store.ok()) return store.status();
  node->store_ = *std::move(store);
  node->metrics_ = std::make_unique<api::QueueMetrics>(registry);
  node->queue_ =
      std::make_unique<WorkQueue>(node->store_.get(), runtime, options, node->metrics_.get());
  CONDUIT_RETURN_IF_ERROR(node->queue_->Recover());
  node->service_ = std::make_unique<api::QueueService>(node->queue_.get());
  return node;
}

grpc_util::ServerComponent QueueNode::Component() {
  auto node = std::make_shared<std::unique_ptr<QueueNode>>();
  grpc_util::ServerComponent component;
  component.build = [node](const std::string& data_dir, prometheus::Registry& registry,
                           runtime::Runtime* runtime,
                           std::vector<grpc::Service*>* services) -> absl::Status {
    auto opened = Open(data_dir, registry, runtime);
    if (!opened.ok()) return opened.status();
    *node = *std::move(opened);
    services->push_back((*node)->service());
    return absl::OkStatus();
  };
  component.teardown = [node] { node->reset(); };
  component.health_services = {api::pb::WorkQueue::service_full_name()};
  return component;
}

}  // namespace conduit::work_queue
