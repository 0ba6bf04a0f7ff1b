#pragma once

#include <memory>

#include <gtest/gtest.h>

#include "common/grpc/server_runner.h"
#include "common/testing/temp_dir.h"
#include "services/log_broker/log_broker_node.h"
#include "tests/support/log_client.h"

namespace conduit::testing {

// A real LogService gRPC server on 127.0.0.1:0 over a temp data dir, restartable on the same dir.
class LogServerTest : public ::testing::Test {
 protected:
  LogServerTest() { Start(); }
  ~LogServerTest() override { Stop(); }

  void Start() {
    registry_ = std::make_shared<prometheus::Registry>();
    auto node = log_broker::LogBrokerNode::Open(dir_.path(), *registry_, &runtime_);
    ASSERT_TRUE(node.ok()) << node.status();
    node_ = *std::move(node);
    auto server = grpc_util::StartServer({}, {node_->service()});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    node_->SetAddress(server_->address());
    client_ = std::make_unique<LogClient>(server_->address());
  }

  void Stop() {
    if (!server_) return;
    node_->BeginShutdown();
    server_->Shutdown();
    server_.reset();
    node_.reset();
    client_.reset();
  }

  void Restart() {
    Stop();
    Start();
  }

  LogClient& client() { return *client_; }
  std::string address() const { return server_->address(); }
  prometheus::Registry& registry() { return *registry_; }

 private:
  TempDir dir_;
  std::shared_ptr<prometheus::Registry> registry_;
  runtime::Runtime runtime_;
  std::unique_ptr<log_broker::LogBrokerNode> node_;
  std::unique_ptr<grpc_util::RunningServer> server_;
  std::unique_ptr<LogClient> client_;
};

}  // namespace conduit::testing
