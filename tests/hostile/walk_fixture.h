#pragma once

// The hostile walk's fixture: one real conduit-standalone for the suite, the seed every base
// request names (kept or restored), a snapshot of what a refused call must leave alone, a
// generic caller (unary or server-streaming, raw bytes), and the judge of every answer.

#include <google/protobuf/descriptor.h>
#include <google/protobuf/stubs/logging.h>
#include <google/protobuf/util/json_util.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/testing/temp_dir.h"
#include "conduit/coordinator/v1/coordinator.grpc.pb.h"
#include "conduit/log/v1/log.grpc.pb.h"
#include "conduit/queue/v1/bridge.grpc.pb.h"
#include "conduit/queue/v1/queue.grpc.pb.h"
#include "tests/hostile/request_mutations.h"
#include "tests/support/server_process.h"

namespace conduit::hostile {

namespace lpb = ::conduit::log::v1;
namespace qpb = ::conduit::queue::v1;
namespace cpb = ::conduit::coordinator::v1;
using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::MethodDescriptor;
using google::protobuf::Reflection;

inline constexpr size_t kMaxMessageBytes = 2048;
inline const char* kServices[] = {"conduit.log.v1.LogService", "conduit.queue.v1.WorkQueue",
                                  "conduit.coordinator.v1.GroupCoordinator",
                                  "conduit.queue.v1.Bridges"};

inline bool LongMode() {
  const char* v = std::getenv("CONDUIT_HOSTILE_LONG");
  return v != nullptr && std::string(v) == "1";
}

struct Answer {
  grpc::Status status;
  std::string response;  // serialized, when OK
};
class HostileWalk : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // This client serializes invalid UTF-8 on purpose; libprotobuf would log each time.
    google::protobuf::SetLogHandler(nullptr);
    dir_ = new testing::TempDir();
    const char* bin = std::getenv("CONDUIT_BIN_DIR");
    ASSERT_NE(bin, nullptr);
    server_ = new testing::ServerProcess(std::string(bin) + "/conduit-standalone",
                                         dir_->Sub("data"), dir_->path());
    ASSERT_TRUE(server_->running());
    // Default client settings (a 4 MiB receive limit, 8 KiB of metadata), as a user has them.
    channel_ = new std::shared_ptr<grpc::Channel>(
        grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials()));
  }
  static void TearDownTestSuite() {
    delete channel_;
    delete server_;  // SIGKILLs it if still running
    delete dir_;
  }

  void SetUp() override {
    ASSERT_TRUE(server_->running());
    log_ = lpb::LogService::NewStub(*channel_);
    queue_ = qpb::WorkQueue::NewStub(*channel_);
    coordinator_ = cpb::GroupCoordinator::NewStub(*channel_);
    EnsureSeed();
  }

  static std::unique_ptr<grpc::ClientContext> Context(absl::Duration timeout = absl::Seconds(10)) {
    auto ctx = std::make_unique<grpc::ClientContext>();
    ctx->set_deadline(absl::ToChronoTime(absl::Now() + timeout));
    return ctx;
  }

  // The seed every base request names: topic "seed" with records, queue "seedq" with ready,
  // leased and dead jobs, group "seedg" with a committed offset. Recreated when a call took it.
  void EnsureSeed() {
    lpb::DescribeTopicRequest describe;
    describe.set_name("seed");
    lpb::DescribeTopicResponse described;
    if (!log_->DescribeTopic(Context().get(), describe, &described).ok()) {
      lpb::CreateTopicRequest create;
      create.set_name("seed");
      create.set_partitions(2);
      create.mutable_config()->mutable_retention_time()->set_seconds(-1);  // keep everything
      lpb::CreateTopicResponse created;
      ASSERT_TRUE(log_->CreateTopic(Context().get(), create, &created).ok());
      lpb::ProduceRequest produce;
      produce.set_topic("seed");
      for (int i = 0; i < 5; ++i) produce.add_records()->set_value("seed-record");
      lpb::ProduceResponse produced;
      ASSERT_TRUE(log_->Produce(Context().get(), produce, &produced).ok());
    }
    qpb::GetQueueStatsRequest stats_req;
    stats_req.set_queue("seedq");
    qpb::GetQueueStatsResponse stats;
    if (!queue_->GetQueueStats(Context().get(), stats_req, &stats).ok()) {
      qpb::CreateQueueRequest create;
      create.set_name("seedq");
      // Leases that never lapse during the walk, so nothing changes unless a call changes it.
      create.mutable_config()->mutable_visibility_timeout()->set_seconds(12 * 3600);
      create.mutable_config()->set_max_attempts(1000);
      create.mutable_config()->set_max_lease_expiries(1000);
      qpb::CreateQueueResponse created;
      ASSERT_TRUE(queue_->CreateQueue(Context().get(), create, &created).ok());
      stats.set_dead(0);
      stats.set_ready(0);
    }
    if (stats.ready() < 2) {
      qpb::EnqueueRequest enqueue;
      enqueue.set_queue("seedq");
      for (int i = 0; i < 3; ++i) enqueue.add_jobs()->set_payload("seed-job");
      qpb::EnqueueResponse enqueued;
      ASSERT_TRUE(queue_->Enqueue(Context().get(), enqueue, &enqueued).ok());
    }
    if (stats.dead() == 0) {
      qpb::LeaseRequest lease;
      lease.set_queue("seedq");
      lease.set_worker_id("seeder");
      qpb::LeaseResponse leased;
      ASSERT_TRUE(queue_->Lease(Context().get(), lease, &leased).ok());
      ASSERT_EQ(leased.jobs_size(), 1);
      qpb::NackRequest nack;
      nack.set_queue("seedq");
      nack.set_job_id(leased.jobs(0).job_id());
      nack.set_lease_token(leased.jobs(0).lease_token());
      nack.set_reason("seeded dead letter");
      nack.set_failure_class(qpb::FAILURE_CLASS_PERMANENT);
      qpb::NackResponse nacked;
      ASSERT_TRUE(queue_->Nack(Context().get(), nack, &nacked).ok());
    }
    qpb::ListDeadLettersRequest dead_req;
    dead_req.set_queue("seedq");
    qpb::ListDeadLettersResponse dead;
    ASSERT_TRUE(queue_->ListDeadLetters(Context().get(), dead_req, &dead).ok());
    ASSERT_GT(dead.dead_letters_size(), 0);
    dead_id_ = dead.dead_letters(0).job_id();

    cpb::FetchOffsetsRequest fetch;
    fetch.set_group_id("seedg");
    cpb::FetchOffsetsResponse offsets;
    if (!coordinator_->FetchOffsets(Context().get(), fetch, &offsets).ok() ||
        offsets.offsets_size() == 0) {
      cpb::CommitOffsetsRequest commit;
      commit.set_group_id("seedg");
      commit.set_member_epoch(-1);
      auto* t = commit.add_topics();
      t->set_topic("seed");
      t->add_partitions()->set_offset(1);
      cpb::CommitOffsetsResponse committed;
      grpc::Status s = coordinator_->CommitOffsets(Context().get(), commit, &committed);
      // A walked heartbeat may have put a member in the group: then it has its seed already.
      ASSERT_TRUE(s.ok() || s.error_code() == grpc::StatusCode::FAILED_PRECONDITION)
          << s.error_message();
    }
  }

  // What a refused call must leave alone: topics with their configs and marks, queues with their
  // configs, job counts and dead letters, groups with their offsets. (Not times, member lists or
  // rates: they move on their own.)
  std::string Snapshot() {
    std::string out;
    lpb::ListTopicsResponse topics;
    EXPECT_TRUE(log_->ListTopics(Context().get(), {}, &topics).ok());
    for (const lpb::TopicInfo& t : topics.topics()) {
      absl::StrAppend(&out, "topic ", t.ShortDebugString(), "\n");
      lpb::DescribeTopicRequest req;
      req.set_name(t.name());
      lpb::DescribeTopicResponse d;
      EXPECT_TRUE(log_->DescribeTopic(Context().get(), req, &d).ok());
      for (const lpb::PartitionInfo& p : d.partitions()) {
        absl::StrAppend(&out, " p", p.partition(), " ", p.log_start_offset(), "..",
                        p.high_watermark(), " n=", p.record_count(), " b=", p.bytes(), "\n");
      }
    }
    qpb::ListQueuesResponse queues;
    EXPECT_TRUE(queue_->ListQueues(Context().get(), {}, &queues).ok());
    for (const qpb::QueueInfo& q : queues.queues()) {
      absl::StrAppend(&out, "queue ", q.ShortDebugString(), "\n");
      qpb::GetQueueStatsRequest req;
      req.set_queue(q.name());
      qpb::GetQueueStatsResponse s;
      EXPECT_TRUE(queue_->GetQueueStats(Context().get(), req, &s).ok());
      absl::StrAppend(&out, " jobs=", s.ready() + s.delayed() + s.leased(), " leased=", s.leased(),
                      " dead=", s.dead());
      qpb::ListDeadLettersRequest dl;
      dl.set_queue(q.name());
      dl.set_page_size(1000);
      qpb::ListDeadLettersResponse dead;
      EXPECT_TRUE(queue_->ListDeadLetters(Context().get(), dl, &dead).ok());
      for (const qpb::DeadLetter& d : dead.dead_letters()) {
        absl::StrAppend(&out, " ", d.job_id(), ":", d.redrives(), ":", d.payload().size());
      }
      absl::StrAppend(&out, "\n");
    }
    cpb::ListGroupsResponse groups;
    EXPECT_TRUE(coordinator_->ListGroups(Context().get(), {}, &groups).ok());
    for (const cpb::GroupListing& g : groups.groups()) {
      absl::StrAppend(&out, "group ", g.group_id(), "\n");
      cpb::FetchOffsetsRequest req;
      req.set_group_id(g.group_id());
      cpb::FetchOffsetsResponse offsets;
      EXPECT_TRUE(coordinator_->FetchOffsets(Context().get(), req, &offsets).ok());
      for (const cpb::CommittedOffset& o : offsets.offsets()) {
        absl::StrAppend(&out, " ", o.topic(), "/", o.partition(), "@", o.offset(), " ",
                        o.metadata().size(), "\n");
      }
    }
    return out;
  }

  static std::string MethodPath(const MethodDescriptor* m) {
    return absl::StrCat("/", m->service()->full_name(), "/", m->name());
  }

  // Sends `bytes` to `method` as it is, unary or server-streaming (the first message only).
  Answer Call(const MethodDescriptor* method, const std::string& bytes) {
    grpc::GenericStub stub(*channel_);
    auto ctx = Context(absl::Seconds(10));
    grpc::Slice slice(bytes);
    grpc::ByteBuffer request(&slice, 1);
    grpc::ByteBuffer response;
    grpc::CompletionQueue cq;
    Answer answer;
    void* tag = nullptr;
    bool ok = false;
    if (!method->server_streaming()) {
      auto rpc = stub.PrepareUnaryCall(ctx.get(), MethodPath(method), request, &cq);
      rpc->StartCall();
      rpc->Finish(&response, &answer.status, reinterpret_cast<void*>(1));
      cq.Next(&tag, &ok);
    } else {
      ctx->set_deadline(absl::ToChronoTime(absl::Now() + absl::Milliseconds(500)));
      auto rpc = stub.PrepareCall(ctx.get(), MethodPath(method), &cq);
      rpc->StartCall(reinterpret_cast<void*>(1));
      cq.Next(&tag, &ok);
      rpc->WriteLast(request, grpc::WriteOptions(), reinterpret_cast<void*>(2));
      cq.Next(&tag, &ok);
      rpc->Read(&response, reinterpret_cast<void*>(3));
      cq.Next(&tag, &ok);
      const bool got_message = ok;
      if (got_message) ctx->TryCancel();
      rpc->Finish(&answer.status, reinterpret_cast<void*>(4));
      cq.Next(&tag, &ok);
      // A stream that sent a message was accepted and we hung up; one still waiting for records
      // when its deadline ended it was accepted too.
      if (got_message || answer.status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
        answer.status = grpc::Status::OK;
      }
    }
    cq.Shutdown();
    while (cq.Next(&tag, &ok)) {
    }
    if (answer.status.ok()) {
      std::vector<grpc::Slice> slices;
      if (response.Dump(&slices).ok()) {
        for (const grpc::Slice& s : slices) {
          answer.response.append(reinterpret_cast<const char*>(s.begin()), s.size());
        }
      }
    }
    return answer;
  }

  // The checks every answer must pass. `refused_unchanged`: the snapshot taken before, to
  // compare with when the call was refused.
  void Judge(const MethodDescriptor* method, const std::string& what, const Answer& answer,
             const std::string& before) {
    SCOPED_TRACE(absl::StrCat(method->full_name(), " with ", what));
    const grpc::StatusCode code = answer.status.error_code();
    const std::string& message = answer.status.error_message();
    EXPECT_TRUE(code != grpc::StatusCode::UNKNOWN && code != grpc::StatusCode::INTERNAL &&
                code != grpc::StatusCode::UNIMPLEMENTED && code != grpc::StatusCode::UNAVAILABLE &&
                code != grpc::StatusCode::DEADLINE_EXCEEDED &&
                code != grpc::StatusCode::DATA_LOSS && code != grpc::StatusCode::CANCELLED)
        << "status " << code << ": " << message.substr(0, 300);
    if (code == grpc::StatusCode::RESOURCE_EXHAUSTED) {
      EXPECT_EQ(message.find("metadata"), std::string::npos)
          << "the status did not reach the client: " << message.substr(0, 300);
    }
    EXPECT_LE(message.size(), kMaxMessageBytes) << message.substr(0, 300);
    if (code != grpc::StatusCode::OK) {
      EXPECT_FALSE(message.empty()) << "a refusal says why";
      EXPECT_EQ(Snapshot(), before) << "a refused call changed the state";
      return;
    }
    std::unique_ptr<Message> response(google::protobuf::MessageFactory::generated_factory()
                                          ->GetPrototype(method->output_type())
                                          ->New());
    ASSERT_TRUE(response->ParseFromString(answer.response));
    std::string json;
    auto rendered = google::protobuf::util::MessageToJsonString(*response, &json);
    EXPECT_TRUE(rendered.ok()) << "the response cannot be rendered as proto3 JSON: " << rendered;
  }

  void ExpectServerAlive() {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
    lpb::ListTopicsResponse topics;
    ASSERT_TRUE(log_->ListTopics(&ctx, {}, &topics).ok()) << "the server stopped answering";
  }

  static std::vector<const MethodDescriptor*> AllMethods() {
    std::vector<const MethodDescriptor*> out;
    (void)::conduit::queue::v1::BridgeSpec::descriptor();  // links bridge.proto's descriptors in
    for (const char* name : kServices) {
      const auto* service =
          google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(name);
      EXPECT_NE(service, nullptr) << name;
      if (service == nullptr) continue;
      for (int i = 0; i < service->method_count(); ++i) out.push_back(service->method(i));
    }
    return out;
  }

  std::string BaseRequest(const MethodDescriptor* method, std::unique_ptr<Message>* out = nullptr) {
    std::unique_ptr<Message> request(google::protobuf::MessageFactory::generated_factory()
                                         ->GetPrototype(method->input_type())
                                         ->New());
    FillBase(request.get(), method->service()->full_name(), dead_id_);
    std::string bytes = request->SerializePartialAsString();
    if (out) *out = std::move(request);
    return bytes;
  }

  inline static testing::TempDir* dir_ = nullptr;
  inline static testing::ServerProcess* server_ = nullptr;
  inline static std::shared_ptr<grpc::Channel>* channel_ = nullptr;
  std::unique_ptr<lpb::LogService::Stub> log_;
  std::unique_ptr<qpb::WorkQueue::Stub> queue_;
  std::unique_ptr<cpb::GroupCoordinator::Stub> coordinator_;
  uint64_t dead_id_ = 0;
};

}  // namespace conduit::hostile
