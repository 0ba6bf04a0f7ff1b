#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/grpc/server_main.h"
#include "common/runtime/runtime.h"
#include "services/work_queue/api/bridge_metrics.h"
#include "services/work_queue/api/queue_metrics.h"
#include "services/work_queue/bridge/topic_publisher.h"
#include "services/work_queue/domain/work_queue.h"
#include "services/work_queue/storage/rocksdb_queue_store.h"

namespace grpc {
class Service;
}  // namespace grpc

namespace conduit::work_queue {

// The gRPC services are declared, not included: their headers instantiate gRPC's generated
// service templates, which cost every includer seconds of compile time.
namespace api {
class BridgeService;
class QueueService;
}  // namespace api
namespace bridge {
class BridgeManager;
}  // namespace bridge

// The work queue wired together: RocksDB under <data_dir>/queue, the WorkQueue (recovered), its
// bridges (started once the server serves) and their gRPC services. Used by conduit-queue,
// conduit-standalone and the tests.
class QueueNode {
 public:
  static absl::StatusOr<std::unique_ptr<QueueNode>> Open(
      const std::string& data_dir, prometheus::Registry& registry, runtime::Runtime* runtime,
      WorkQueueOptions options = {},
      const grpc_util::CallGuard& guard = grpc_util::CallGuard::Open());
  // The queue as a component of a server binary.
  static grpc_util::ServerComponent Component();

  ~QueueNode();

  // The gRPC services to host (owned by the node).
  grpc::Service* service();
  grpc::Service* bridge_service();
  bridge::BridgeManager* bridges() { return bridges_.get(); }
  // Dead letters redriven to a topic go through the log at `bootstrap` (once serving).
  void StartPublisher(const std::string& bootstrap);
  void StopPublisher();
  WorkQueue* queue() { return queue_.get(); }

 private:
  QueueNode() = default;
  std::unique_ptr<RocksDbQueueStore> store_;
  std::unique_ptr<api::QueueMetrics> metrics_;
  std::unique_ptr<WorkQueue> queue_;
  std::unique_ptr<api::QueueService> service_;
  std::unique_ptr<api::BridgeMetrics> bridge_metrics_;
  std::unique_ptr<bridge::BridgeManager> bridges_;
  std::unique_ptr<api::BridgeService> bridge_service_;
  std::unique_ptr<bridge::TopicPublisher> publisher_;
};

}  // namespace conduit::work_queue
