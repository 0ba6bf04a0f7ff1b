#pragma once

// A real conduit-queue with bearer tokens and ACLs: a token file of
// SHA-256 hashes and an ACL bootstrap file written per test, and clients that present a token
// per call (one channel, so calls with different tokens share a connection).

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "common/security/tokens.h"
#include "common/testing/temp_dir.h"
#include "conduit/queue/v1/queue.grpc.pb.h"
#include "tests/support/server_process.h"

namespace conduit::testing {

namespace qpb = ::conduit::queue::v1;

inline std::string AuthBinary(const std::string& name) {
  const char* bin = std::getenv("CONDUIT_BIN_DIR");
  return std::string(bin ? bin : "build/bin") + "/" + name;
}

class AuthTest : public ::testing::Test {
 public:
  // A context carrying `token` (none when empty), with a deadline.
  static std::unique_ptr<grpc::ClientContext> As(const std::string& token) {
    auto ctx = std::make_unique<grpc::ClientContext>();
    if (!token.empty()) ctx->AddMetadata("authorization", "Bearer " + token);
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    return ctx;
  }

 protected:
  // Tokens: "alice-token" is User:alice, "bob-token" User:bob, "root-token" User:root (a
  // superuser), "svc-token" User:svc. `acls` is the ACL file's text.
  void StartServer(const std::string& acls, const std::string& binary = "conduit-queue",
                   std::vector<std::string> extra = {}) {
    Write("tokens", security::Sha256Hex("alice-token") + " User:alice\n" +
                        security::Sha256Hex("bob-token") + " User:bob\n" +
                        security::Sha256Hex("root-token") + " User:root\n" +
                        security::Sha256Hex("svc-token") + " User:svc\n");
    Write("acls", acls);
    // The token and ACL files are checked for changes every second.
    std::vector<std::string> args = {"--auth-token-file",
                                     dir_.Sub("tokens"),
                                     "--acl-file",
                                     dir_.Sub("acls"),
                                     "--superusers",
                                     "User:root",
                                     "--auth-reload-seconds",
                                     "1"};
    args.insert(args.end(), extra.begin(), extra.end());
    server_ =
        std::make_unique<ServerProcess>(AuthBinary(binary), dir_.Sub("data"), dir_.path(), args);
    ASSERT_TRUE(server_->running()) << "see " << dir_.path() << "/server.log";
    channel_ = grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials());
    queue_ = qpb::WorkQueue::NewStub(channel_);
  }

  grpc::Status CreateQueue(const std::string& token, const std::string& name) {
    qpb::CreateQueueRequest req;
    req.set_name(name);
    qpb::CreateQueueResponse resp;
    return queue_->CreateQueue(As(token).get(), req, &resp);
  }
  grpc::Status Enqueue(const std::string& token, const std::string& queue,
                       const std::string& payload = "p") {
    qpb::EnqueueRequest req;
    req.set_queue(queue);
    req.add_jobs()->set_payload(payload);
    qpb::EnqueueResponse resp;
    return queue_->Enqueue(As(token).get(), req, &resp);
  }
  grpc::Status Stats(const std::string& token, const std::string& queue,
                     qpb::GetQueueStatsResponse* resp = nullptr) {
    qpb::GetQueueStatsRequest req;
    req.set_queue(queue);
    qpb::GetQueueStatsResponse local;
    return queue_->GetQueueStats(As(token).get(), req, resp ? resp : &local);
  }

  // Replaces file `name` atomically (a temporary file renamed over it).
  void Write(const std::string& name, const std::string& text) {
    const std::string tmp = dir_.Sub(name + ".tmp");
    std::ofstream(tmp) << text;
    std::rename(tmp.c_str(), dir_.Sub(name).c_str());
  }

  TempDir dir_;
  std::unique_ptr<ServerProcess> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<qpb::WorkQueue::Stub> queue_;
};

}  // namespace conduit::testing
