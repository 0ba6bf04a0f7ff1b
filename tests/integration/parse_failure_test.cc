// Requests whose bytes do not parse, sent over real gRPC on 127.0.0.1 with a generic stub: the
// server's wire layer (common/grpc/parse_failure_interceptor.h), seen from a client.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "conduit/queue/v1/queue.pb.h"
#include "grpcpp/generic/generic_stub.h"
#include "tests/integration/log_server_fixture.h"

namespace conduit::testing {
namespace {

using ::testing::HasSubstr;

// Sends `bytes` as they are to `method` on `address`.
grpc::Status RawCall(const std::string& address, const std::string& method,
                     const std::string& bytes) {
  grpc::GenericStub stub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
  grpc::Slice slice(bytes);
  grpc::ByteBuffer request(&slice, 1), response;
  grpc::CompletionQueue cq;
  grpc::Status status;
  auto rpc = stub.PrepareUnaryCall(&ctx, method, request, &cq);
  rpc->StartCall();
  rpc->Finish(&response, &status, nullptr);
  void* tag;
  bool ok;
  cq.Next(&tag, &ok);
  return status;
}

// Unparsable bytes get INVALID_ARGUMENT for the services a server hosts, and only for those: a
// broker-only server still answers UNIMPLEMENTED for the queue's methods, whose descriptors it
// links in all the same.
TEST(ParseFailures, AreInvalidArgumentOnlyForTheServicesTheServerHosts) {
  TempDir dir;
  prometheus::Registry registry;
  runtime::Runtime runtime;
  auto node = log_broker::LogBrokerNode::Open(dir.path(), registry, &runtime);
  ASSERT_TRUE(node.ok()) << node.status();
  grpc_util::ServerOptions options;
  options.health_services = {"conduit.log.v1.LogService"};
  auto server = grpc_util::StartServer(options, {(*node)->service()});
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string garbage(
      "\x0a\x7f"
      "abc",
      5);  // a length past the end
  grpc::Status hosted =
      RawCall((*server)->address(), "/conduit.log.v1.LogService/Produce", garbage);
  EXPECT_EQ(hosted.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(hosted.error_message(),
              HasSubstr("could not be parsed as conduit.log.v1.ProduceRequest"));
  // The queue's descriptors are in this process (linked and referenced), yet not hosted.
  ASSERT_NE(conduit::queue::v1::EnqueueRequest::descriptor(), nullptr);
  grpc::Status other =
      RawCall((*server)->address(), "/conduit.queue.v1.WorkQueue/Enqueue", garbage);
  EXPECT_EQ(other.error_code(), grpc::StatusCode::UNIMPLEMENTED) << other.error_message();
  (*node)->BeginShutdown();
  (*server)->Shutdown();
}

}  // namespace
}  // namespace conduit::testing
