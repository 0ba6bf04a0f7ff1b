// The C++ client library in a process that hosts no gRPC server, as a user's application is.
//
// There, gRPC 1.51 (Debian 12) runs the callback API's completions on a pool of "nexting"
// threads that lives while some grpc::Channel that made a callback call lives. Should the last
// reference to such a channel be dropped on one of those threads, gRPC shuts the pool down from
// inside it, cannot join the thread it runs on, and aborts the process (grpc/grpc PR 32584
// describes it). A client that keeps a call's ClientContext (it holds the channel) until after
// its object is gone does exactly that when it is destroyed right after its last answer: the
// Producer did, and `replication_bench` aborted in one run of three with "ref_counted.h:183
// assertion failed: prior > 0". A test process that hosts a server in-process keeps the pool
// alive and cannot see it; this one starts conduit-standalone as a child process. The
// coordinator's GrpcTopicSource is checked here too: in conduit-coordinator it outlives the
// server at shutdown, as a client in such a process.

#include <stdlib.h>

#include <atomic>
#include <filesystem>
#include <future>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "client/group_consumer.h"
#include "client/producer.h"
#include "common/testing/temp_dir.h"
#include "conduit/log/v1/log.grpc.pb.h"
#include "services/coordinator/broker/grpc_topic_source.h"
#include "tests/support/server_process.h"

namespace conduit::testing {
namespace {

namespace logpb = ::conduit::log::v1;

std::string Binary(const char* name) {
  const char* dir = std::getenv("CONDUIT_BIN_DIR");
  return std::string(dir ? dir : "build/bin") + "/" + name;
}

// Keeps the other core busy while it lives, so that gRPC's thread is often still winding a call
// down when the client that made it is destroyed.
class BusyCore {
 public:
  BusyCore()
      : thread_([this] {
          while (!stop_.load(std::memory_order_relaxed)) {
          }
        }) {}
  ~BusyCore() {
    stop_.store(true);
    thread_.join();
  }

 private:
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

class ClientShutdown : public ::testing::Test {
 protected:
  void SetUp() override {
    std::filesystem::create_directories(dir_.Sub("work"));
    server_ = std::make_unique<ServerProcess>(Binary("conduit-standalone"), dir_.Sub("data"),
                                              dir_.Sub("work"));
    ASSERT_TRUE(server_->running()) << "see " << dir_.path() << "/work/server.log";
    // A synchronous stub: it makes no callback call, so it does not keep the pool alive.
    auto stub = logpb::LogService::NewStub(
        grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials()));
    for (const char* topic : {"events", "commits"}) {
      grpc::ClientContext ctx;
      logpb::CreateTopicRequest req;
      req.set_name(topic);
      req.set_partitions(2);
      logpb::CreateTopicResponse resp;
      ASSERT_TRUE(stub->CreateTopic(&ctx, req, &resp).ok());
    }
  }

  TempDir dir_;
  std::unique_ptr<ServerProcess> server_;
};

// Each round: a Producer whose records are all answered, destroyed at once, with the other
// core kept busy so that gRPC's thread is often still winding the last call down when the
// Producer is gone. Reaching the end is the test: the bug aborts the process.
TEST_F(ClientShutdown, ProducersDestroyedRightAfterTheirLastAnswerDoNotAbortTheProcess) {
  BusyCore busy;
  for (int round = 0; round < 500; ++round) {
    auto producer = client::Producer::Create({.address = server_->address(),
                                              .topic = "events",
                                              .linger = absl::ZeroDuration()});
    ASSERT_TRUE(producer.ok()) << producer.status();
    std::vector<std::future<absl::StatusOr<client::RecordPosition>>> sent;
    for (int i = 0; i < 4; ++i) {
      sent.push_back((*producer)->Send(client::ProducerRecord{.value = absl::StrCat(round)}));
    }
    for (auto& f : sent) ASSERT_TRUE(f.get().ok()) << round;
    producer->reset();
  }
}

// The same for a GroupConsumer destroyed right after its CommitAsync is answered (abandoned, as
// a process that stops without leaving its group).
TEST_F(ClientShutdown, ConsumersDestroyedRightAfterAnAsyncCommitDoNotAbortTheProcess) {
  BusyCore busy;
  for (int round = 0; round < 120; ++round) {
    auto consumer = client::GroupConsumer::Create({.address = server_->address(),
                                                   .group = absl::StrCat("g", round),
                                                   .topics = {"commits"}});
    ASSERT_TRUE(consumer.ok()) << consumer.status();
    ASSERT_TRUE((*consumer)->Poll(absl::Milliseconds(10)).ok()) << round;
    std::promise<absl::Status> committed;
    (*consumer)->CommitAsync([&](absl::Status s) { committed.set_value(s); });
    // No LeaveGroup call at the end (it would give gRPC's thread time to finish first).
    (*consumer)->Abandon();
    ASSERT_TRUE(committed.get_future().get().ok()) << round;
    consumer->reset();
  }
}

// The coordinator's view of the broker (GrpcTopicSource) is such a client too, and in
// conduit-coordinator it outlives the server: at shutdown the gRPC server goes first, then the
// group coordinator and the topic source. Each round: a Describe answered, the source destroyed
// at once.
TEST_F(ClientShutdown, TopicSourcesDestroyedRightAfterAnAnswerDoNotAbortTheProcess) {
  BusyCore busy;
  for (int round = 0; round < 300; ++round) {
    auto source = std::make_unique<coordinator::GrpcTopicSource>(server_->address());
    auto marks = source->Describe("events");
    ASSERT_TRUE(marks.ok()) << round << ": " << marks.status();
    ASSERT_EQ(marks->size(), 2u);
    source.reset();
  }
}

// The coordinator's --broker-address list, as an operator writes it ("a, b"): a broker that
// cannot be reached (nothing listens on port 1) is passed over, and the next one, named after a
// space, answers every kind of question the coordinator asks.
TEST_F(ClientShutdown, ATopicSourceMovesPastAnUnreachableBrokerInItsList) {
  coordinator::GrpcTopicSource source("127.0.0.1:1, " + server_->address());
  auto marks = source.Describe("events");
  ASSERT_TRUE(marks.ok()) << marks.status();
  EXPECT_EQ(marks->size(), 2u);
  std::promise<absl::StatusOr<std::vector<coordinator::PartitionMarks>>> async;
  source.DescribeAsync("events", [&](auto result) { async.set_value(std::move(result)); });
  EXPECT_TRUE(async.get_future().get().ok());
  auto offset = source.OffsetForTime("events", 0, absl::InfinitePast());
  ASSERT_TRUE(offset.ok()) << offset.status();
  EXPECT_EQ(*offset, 0);
}

}  // namespace
}  // namespace conduit::testing
