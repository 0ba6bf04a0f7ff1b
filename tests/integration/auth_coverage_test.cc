// Every RPC of every Conduit service takes the authorise step. A real
// conduit-standalone (all three services and the security service) runs with authorisation on
// and no ACL; the test
// enumerates each service's methods from their descriptors (what server reflection serves) and
// calls each one without credentials: every call is refused PERMISSION_DENIED (a stream before
// any message), or, for the listings (ListQueues, ListTopics, ListGroups, GetMetadata),
// answered with nothing the caller may not Describe — a queue and a topic exist, made by a
// superuser — so a method added without the check fails here. Streaming methods need a typed
// call each: one missing from the table below fails the test too. (ReplicaService, hosted by
// brokers in cluster mode only, is not in conduit-standalone.)

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <string>

#include "absl/synchronization/notification.h"
#include "conduit/coordinator/v1/coordinator.grpc.pb.h"
#include "conduit/log/v1/log.grpc.pb.h"
#include "conduit/queue/v1/bridge.grpc.pb.h"
#include "conduit/queue/v1/queue.grpc.pb.h"
#include "conduit/security/v1/security.grpc.pb.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/dynamic_message.h"
#include "tests/integration/auth_fixture.h"

namespace conduit::testing {
namespace {

namespace lpb = ::conduit::log::v1;
namespace cpb = ::conduit::coordinator::v1;
namespace spb = ::conduit::security::v1;

using StreamCall = std::function<grpc::StatusCode(grpc::Channel*)>;

std::unique_ptr<grpc::ClientContext> Anonymous() { return AuthTest::As(""); }

// How each streaming method is called: the status code of its refusal.
std::map<std::string, StreamCall> StreamCalls() {
  std::map<std::string, StreamCall> calls;
  calls["/conduit.queue.v1.WorkQueue/Consume"] = [](grpc::Channel* ch) {
    auto stub = qpb::WorkQueue::NewStub(std::shared_ptr<grpc::Channel>(ch, [](auto*) {}));
    auto ctx = Anonymous();
    auto stream = stub->Consume(ctx.get());
    qpb::ConsumeRequest start;
    start.mutable_start()->set_queue("q");
    start.mutable_start()->set_credits(1);
    stream->Write(start);
    qpb::ConsumeResponse r;
    EXPECT_FALSE(stream->Read(&r)) << "a message before the refusal";
    return stream->Finish().error_code();
  };
  calls["/conduit.log.v1.LogService/Tail"] = [](grpc::Channel* ch) {
    auto stub = lpb::LogService::NewStub(std::shared_ptr<grpc::Channel>(ch, [](auto*) {}));
    auto ctx = Anonymous();
    lpb::TailRequest req;
    req.set_topic("t");
    auto stream = stub->Tail(ctx.get(), req);
    lpb::TailResponse r;
    EXPECT_FALSE(stream->Read(&r)) << "a message before the refusal";
    return stream->Finish().error_code();
  };
  calls["/conduit.log.v1.LogService/ProduceStream"] = [](grpc::Channel* ch) {
    auto stub = lpb::LogService::NewStub(std::shared_ptr<grpc::Channel>(ch, [](auto*) {}));
    auto ctx = Anonymous();
    auto stream = stub->ProduceStream(ctx.get());
    lpb::ProduceStreamRequest req;
    req.mutable_request()->set_topic("t");
    req.mutable_request()->add_records()->set_value("v");
    stream->Write(req);
    stream->WritesDone();
    lpb::ProduceStreamResponse r;
    // Refused per message (the stream goes on), or the stream as a whole.
    const bool answered = stream->Read(&r);
    const grpc::Status finished = stream->Finish();
    return answered && r.answers_size() == 1 ? static_cast<grpc::StatusCode>(r.answers(0).code())
                                             : finished.error_code();
  };
  return calls;
}

class AuthCoverageTest : public AuthTest {};

TEST_F(AuthCoverageTest, EveryMethodOfEveryServiceIsRefusedWithoutAGrant) {
  ASSERT_NO_FATAL_FAILURE(StartServer("# no ACL: everything is denied\n", "conduit-standalone"));
  ASSERT_TRUE(CreateQueue("root-token", "q").ok());
  {
    auto log = lpb::LogService::NewStub(channel_);
    lpb::CreateTopicRequest req;
    req.set_name("t");
    req.set_partitions(1);
    lpb::CreateTopicResponse resp;
    ASSERT_TRUE(log->CreateTopic(As("root-token").get(), req, &resp).ok());
  }
  const auto streams = StreamCalls();
  grpc::GenericStub generic(channel_);
  int checked = 0;
  // Each service by a message of its file (which links the file's descriptor in).
  const std::vector<std::pair<const google::protobuf::FileDescriptor*, std::string>> services = {
      {qpb::EnqueueRequest::descriptor()->file(), "conduit.queue.v1.WorkQueue"},
      {qpb::CreateBridgeRequest::descriptor()->file(), "conduit.queue.v1.Bridges"},
      {lpb::ProduceRequest::descriptor()->file(), "conduit.log.v1.LogService"},
      {cpb::HeartbeatRequest::descriptor()->file(), "conduit.coordinator.v1.GroupCoordinator"},
      {spb::ListAclsRequest::descriptor()->file(), "conduit.security.v1.Security"}};
  for (const auto& [file, service] : services) {
    const google::protobuf::ServiceDescriptor* descriptor =
        file->pool()->FindServiceByName(service);
    ASSERT_NE(descriptor, nullptr) << service;
    for (int i = 0; i < descriptor->method_count(); ++i) {
      const google::protobuf::MethodDescriptor* method = descriptor->method(i);
      const std::string path = "/" + std::string(service) + "/" + method->name();
      SCOPED_TRACE(path);
      grpc::StatusCode code;
      if (method->client_streaming() || method->server_streaming()) {
        auto call = streams.find(path);
        ASSERT_NE(call, streams.end()) << "a streaming method this test does not know how to call";
        code = call->second(channel_.get());
      } else {
        grpc::Slice no_bytes("");  // the empty message: every field at its default
        grpc::ByteBuffer request(&no_bytes, 1);
        grpc::ByteBuffer response;
        auto ctx = Anonymous();
        absl::Notification done;
        grpc::Status status;
        generic.UnaryCall(ctx.get(), path, grpc::StubOptions(), &request, &response,
                          [&](grpc::Status s) {
                            status = std::move(s);
                            done.Notify();
                          });
        done.WaitForNotification();
        code = status.error_code();
        if (code == grpc::StatusCode::OK) {
          // A listing: what it shows must not name the queue or the topic.
          std::vector<grpc::Slice> slices;
          ASSERT_TRUE(response.Dump(&slices).ok());
          std::string bytes;
          for (const grpc::Slice& s : slices) bytes.append(s.begin(), s.end());
          EXPECT_TRUE(method->name() == "ListQueues" || method->name() == "ListTopics" ||
                      method->name() == "ListGroups" || method->name() == "GetMetadata")
              << "answered OK";
          google::protobuf::DynamicMessageFactory factory;
          std::unique_ptr<google::protobuf::Message> message(
              factory.GetPrototype(method->output_type())->New());
          ASSERT_TRUE(message->ParseFromString(bytes));
          const std::string text = message->ShortDebugString();
          EXPECT_EQ(text.find("\"q\""), std::string::npos) << text;
          EXPECT_EQ(text.find("\"t\""), std::string::npos) << text;
        } else {
          EXPECT_EQ(code, grpc::StatusCode::PERMISSION_DENIED) << status.error_message();
        }
        ++checked;
        continue;
      }
      EXPECT_EQ(code, grpc::StatusCode::PERMISSION_DENIED);
      ++checked;
    }
  }
  EXPECT_GE(checked, 44);
}

}  // namespace
}  // namespace conduit::testing
