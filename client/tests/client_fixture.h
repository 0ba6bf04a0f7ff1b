#pragma once

// The client library's test fixture: a real server on 127.0.0.1:0 hosting the broker, the
// coordinator and the queue (as conduit-standalone does), with helpers to set up topics and
// queues.

#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/grpc/proto_time.h"
#include "common/grpc/server_runner.h"
#include "common/testing/temp_dir.h"
#include "conduit/queue/v1/queue.grpc.pb.h"
#include "services/coordinator/coordinator_node.h"
#include "services/log_broker/log_broker_node.h"
#include "services/work_queue/queue_node.h"
#include "tests/support/log_client.h"

namespace conduit::client {

class ClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto broker = log_broker::LogBrokerNode::Open(dir_.path(), registry_, &runtime_);
    ASSERT_TRUE(broker.ok()) << broker.status();
    broker_ = *std::move(broker);
    coordinator::CoordinatorNodeOptions options;
    options.sweep_interval = absl::Milliseconds(100);
    options.coordinator.min_session_timeout = absl::Milliseconds(100);
    options.coordinator.heartbeat_interval = absl::Milliseconds(100);
    auto node = coordinator::CoordinatorNode::Open(dir_.path(), registry_, &runtime_, options);
    ASSERT_TRUE(node.ok()) << node.status();
    coordinator_ = *std::move(node);
    auto queue = work_queue::QueueNode::Open(dir_.path(), registry_, &runtime_);
    ASSERT_TRUE(queue.ok()) << queue.status();
    queue_ = *std::move(queue);
    auto server = grpc_util::StartServer(
        {}, {broker_->service(), coordinator_->service(), queue_->service()});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    broker_->SetAddress(server_->address());  // what GetMetadata names (as ServerMain)
    coordinator_->SetBrokerAddress(server_->address());
    log_ = std::make_unique<testing::LogClient>(server_->address());
  }
  void TearDown() override {
    broker_->BeginShutdown();
    server_->Shutdown();
  }
  std::string address() { return server_->address(); }
  double ProduceRequests() {
    for (const auto& family : registry_.Collect()) {
      if (family.name == "conduit_log_produce_latency_seconds") {
        double n = 0;
        for (const auto& m : family.metric) n += m.histogram.sample_count;
        return n;
      }
    }
    return -1;
  }
  void CreateQueue(const std::string& name, absl::Duration visibility, int max_attempts) {
    auto stub = ::conduit::queue::v1::WorkQueue::NewStub(
        grpc::CreateChannel(address(), grpc::InsecureChannelCredentials()));
    grpc::ClientContext ctx;
    ::conduit::queue::v1::CreateQueueRequest req;
    req.set_name(name);
    grpc_util::SetDuration(visibility, req.mutable_config()->mutable_visibility_timeout());
    req.mutable_config()->set_max_attempts(max_attempts);
    req.mutable_config()->mutable_backoff_initial()->set_nanos(10'000'000);
    req.mutable_config()->mutable_backoff_max()->set_nanos(10'000'000);
    ::conduit::queue::v1::CreateQueueResponse resp;
    ASSERT_TRUE(stub->CreateQueue(&ctx, req, &resp).ok());
  }
  void Enqueue(const std::string& queue, const std::vector<std::string>& payloads) {
    auto stub = ::conduit::queue::v1::WorkQueue::NewStub(
        grpc::CreateChannel(address(), grpc::InsecureChannelCredentials()));
    grpc::ClientContext ctx;
    ::conduit::queue::v1::EnqueueRequest req;
    req.set_queue(queue);
    for (const std::string& p : payloads) req.add_jobs()->set_payload(p);
    ::conduit::queue::v1::EnqueueResponse resp;
    ASSERT_TRUE(stub->Enqueue(&ctx, req, &resp).ok());
  }

  testing::TempDir dir_;
  prometheus::Registry registry_;
  runtime::Runtime runtime_;
  std::unique_ptr<log_broker::LogBrokerNode> broker_;
  std::unique_ptr<coordinator::CoordinatorNode> coordinator_;
  std::unique_ptr<work_queue::QueueNode> queue_;
  std::unique_ptr<grpc_util::RunningServer> server_;
  std::unique_ptr<testing::LogClient> log_;
};

}  // namespace conduit::client
