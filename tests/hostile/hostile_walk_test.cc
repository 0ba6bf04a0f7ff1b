// A hostile client, as a reflection client would be one: every method of the three services (and
// the queue's bridges) is
// found through the descriptors, and each field of its request, at every depth, is given the
// boundary values a careless or malicious caller sends (empty, 1 MiB, NUL, invalid UTF-8,
// integer extremes, undefined enums, NaN and infinities, Durations and Timestamps outside the
// protobuf ranges, long lists), one at a time, against a real conduit-standalone. Each answer
// must be deliberate (no INTERNAL, UNKNOWN, UNIMPLEMENTED, UNAVAILABLE, DEADLINE_EXCEEDED, no
// status header too large to read), a refused call must leave the state as it was, an accepted
// call's response must render as proto3 JSON, and the server must live. Then malformed bytes.
//
// CONDUIT_HOSTILE_LONG=1 makes lists 100,001 long and adds random combinations of mutations
// (CONDUIT_HOSTILE_SEED, CONDUIT_HOSTILE_ROUNDS).
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "tests/hostile/walk_fixture.h"

namespace conduit::hostile {
namespace {

TEST_F(HostileWalk, EveryFieldOfEveryMethodAtItsBoundaries) {
  const size_t list_length = LongMode() ? 100'001 : 10'001;
  std::vector<const MethodDescriptor*> methods = AllMethods();
  ASSERT_GE(methods.size(), 30u) << "the walk found too few methods in the descriptors";
  size_t calls = 0;
  for (const MethodDescriptor* method : methods) {
    std::string before = Snapshot();
    for (const Mutation& mutation : MutationsOf(method->input_type(), list_length)) {
      std::unique_ptr<Message> request;
      BaseRequest(method, &request);
      mutation.apply(request.get());
      const Answer answer = Call(method, request->SerializePartialAsString());
      ++calls;
      Judge(method, mutation.what, answer, before);
      if (answer.status.ok()) {  // it may have changed the seed: restore it, look again
        EnsureSeed();
        before = Snapshot();
      }
      if (HasFatalFailure()) return;
    }
    ExpectServerAlive();
  }
  std::printf("hostile walk: %zu calls over %zu methods\n", calls, methods.size());
}

TEST_F(HostileWalk, RandomCombinationsOfMutations) {
  if (!LongMode()) GTEST_SKIP() << "CONDUIT_HOSTILE_LONG=1 runs it";
  const char* seed_env = std::getenv("CONDUIT_HOSTILE_SEED");
  const char* rounds_env = std::getenv("CONDUIT_HOSTILE_ROUNDS");
  std::mt19937_64 rng(seed_env ? std::strtoull(seed_env, nullptr, 10) : 13);
  const int rounds = rounds_env ? std::atoi(rounds_env) : 5000;
  std::vector<const MethodDescriptor*> methods = AllMethods();
  std::string before = Snapshot();
  for (int round = 0; round < rounds; ++round) {
    const MethodDescriptor* method = methods[rng() % methods.size()];
    std::vector<Mutation> mutations = MutationsOf(method->input_type(), 1000);
    std::unique_ptr<Message> request;
    BaseRequest(method, &request);
    std::string what;
    for (int k = 1 + static_cast<int>(rng() % 3); k > 0 && !mutations.empty(); --k) {
      const Mutation& m = mutations[rng() % mutations.size()];
      m.apply(request.get());
      absl::StrAppend(&what, m.what, "; ");
    }
    const Answer answer = Call(method, request->SerializePartialAsString());
    Judge(method, absl::StrCat("round ", round, ": ", what), answer, before);
    if (answer.status.ok()) {
      EnsureSeed();
      before = Snapshot();
    }
    if (HasFatalFailure()) return;
  }
  ExpectServerAlive();
}

// Bytes that are not a request of the method's type: INVALID_ARGUMENT saying so (gRPC alone
// would answer UNIMPLEMENTED with no message, as for a method that does not exist).
TEST_F(HostileWalk, MalformedBytesAreRefusedAsUnparsable) {
  std::mt19937_64 rng(7);
  std::string random(64, '\0');
  for (char& c : random) c = static_cast<char>(rng());
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"random bytes", random},
      {"a length past the end", std::string("\x0a\x7f"
                                            "abc",
                                            5)},
      {"field number 0", std::string("\x00\x01", 2)},
      {"wire type 6", std::string("\x0e\x01", 2)},
      {"wire type 7", std::string("\x0f\x01", 2)},
      {"an unterminated varint", std::string("\x08\xff\xff\xff", 4)},
      {"invalid UTF-8 in field 1", std::string("\x0a\x02\xff\xfe", 4)},
  };
  const std::string before = Snapshot();
  for (const MethodDescriptor* method : AllMethods()) {
    for (const auto& [what, bytes] : cases) {
      SCOPED_TRACE(absl::StrCat(method->full_name(), " with ", what));
      const Answer answer = Call(method, bytes);
      // A message may happen to parse (field 1 of some request is not a string, say): then it
      // is judged like any other request.
      if (answer.status.error_code() != grpc::StatusCode::INVALID_ARGUMENT) {
        Judge(method, what, answer, before);
        continue;
      }
      EXPECT_FALSE(answer.status.error_message().empty());
    }
  }
  // The canonical shape: truncated bytes of a valid Produce.
  const auto* produce = google::protobuf::DescriptorPool::generated_pool()->FindMethodByName(
      "conduit.log.v1.LogService.Produce");
  const std::string whole = BaseRequest(produce);
  const Answer truncated = Call(produce, whole.substr(0, whole.size() - 1));
  EXPECT_EQ(truncated.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(
      truncated.status.error_message().find("could not be parsed as conduit.log.v1.ProduceRequest"),
      std::string::npos)
      << truncated.status.error_message();
  EXPECT_EQ(Snapshot(), before);
  // A method that does not exist is still UNIMPLEMENTED.
  grpc::GenericStub stub(*channel_);
  auto ctx = Context();
  grpc::CompletionQueue cq;
  grpc::ByteBuffer request, response;
  grpc::Status status;
  auto rpc =
      stub.PrepareUnaryCall(ctx.get(), "/conduit.log.v1.LogService/NoSuchMethod", request, &cq);
  rpc->StartCall();
  rpc->Finish(&response, &status, nullptr);
  void* tag;
  bool ok;
  cq.Next(&tag, &ok);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNIMPLEMENTED);
  ExpectServerAlive();
}

// Streams the given messages as they are to a bidi `method`, then half-closes; returns the
// responses read and the stream's end status.
struct StreamAnswer {
  std::vector<std::string> responses;
  grpc::Status status;
};
StreamAnswer RawStream(std::shared_ptr<grpc::Channel> channel, const std::string& method,
                       const std::vector<std::string>& messages) {
  grpc::GenericStub stub(std::move(channel));
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
  grpc::CompletionQueue cq;
  void* tag = nullptr;
  bool ok = false;
  auto rpc = stub.PrepareCall(&ctx, method, &cq);
  rpc->StartCall(reinterpret_cast<void*>(1));
  cq.Next(&tag, &ok);
  for (const std::string& bytes : messages) {
    grpc::Slice slice(bytes);
    grpc::ByteBuffer message(&slice, 1);
    rpc->Write(message, reinterpret_cast<void*>(2));
    cq.Next(&tag, &ok);
  }
  rpc->WritesDone(reinterpret_cast<void*>(3));
  cq.Next(&tag, &ok);
  StreamAnswer answer;
  while (true) {
    grpc::ByteBuffer response;
    rpc->Read(&response, reinterpret_cast<void*>(4));
    cq.Next(&tag, &ok);
    if (!ok) break;
    std::vector<grpc::Slice> slices;
    std::string bytes;
    if (response.Dump(&slices).ok()) {
      for (const grpc::Slice& s : slices) {
        bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
      }
    }
    answer.responses.push_back(std::move(bytes));
  }
  rpc->Finish(&answer.status, reinterpret_cast<void*>(5));
  cq.Next(&tag, &ok);
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
  return answer;
}

// A streamed message that does not parse ends the stream INVALID_ARGUMENT, after the answers of
// the messages before it, and nothing of it is applied (gRPC's typed reactor would see a failed
// read, as at the caller's half-close, and the stream would end OK).
TEST_F(HostileWalk, AStreamedMessageThatDoesNotParseEndsItsStreamInvalidArgument) {
  const std::string garbage("\x0a\x7f"
                            "abc",
                            5);  // a length past the end
  lpb::ProduceStreamRequest good;
  good.set_sequence(41);
  good.mutable_request()->set_topic("seed");
  good.mutable_request()->add_records()->set_value("streamed");
  const std::string before = Snapshot();
  StreamAnswer produced = RawStream(*channel_, "/conduit.log.v1.LogService/ProduceStream",
                                    {good.SerializeAsString(), garbage, good.SerializeAsString()});
  EXPECT_EQ(produced.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(produced.status.error_message().find(
                "could not be parsed as conduit.log.v1.ProduceStreamRequest"),
            std::string::npos)
      << produced.status.error_message();
  int answers = 0;
  for (const std::string& bytes : produced.responses) {
    lpb::ProduceStreamResponse response;
    ASSERT_TRUE(response.ParseFromString(bytes));
    for (const auto& a : response.answers()) {
      EXPECT_EQ(a.sequence(), 41);
      EXPECT_EQ(a.code(), 0) << a.message();
      ++answers;
    }
  }
  EXPECT_EQ(answers, 1) << "the message before the bad one is answered, none after it";
  EXPECT_NE(Snapshot(), before) << "the good message was appended";

  const std::string after_produce = Snapshot();
  StreamAnswer consumed =
      RawStream(*channel_, "/conduit.queue.v1.WorkQueue/Consume", {garbage});
  EXPECT_EQ(consumed.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(consumed.status.error_message().find(
                "could not be parsed as conduit.queue.v1.ConsumeRequest"),
            std::string::npos)
      << consumed.status.error_message();
  EXPECT_TRUE(consumed.responses.empty());
  EXPECT_EQ(Snapshot(), after_produce) << "nothing leased or settled";
  ExpectServerAlive();
}

// The named hostile-input cases, at the wire, each with the status it must get.
TEST_F(HostileWalk, TheReportedCasesGetTheirStatus) {
  const std::string before = Snapshot();
  {  // (2) retention past the protobuf range, and past the product's
    for (int64_t seconds :
         {int64_t{315576000001}, std::numeric_limits<int64_t>::max(), int64_t{200} * 365 * 86400}) {
      lpb::UpdateTopicConfigRequest req;
      req.set_name("seed");
      req.mutable_config()->mutable_retention_time()->set_seconds(seconds);
      lpb::UpdateTopicConfigResponse resp;
      grpc::Status s = log_->UpdateTopicConfig(Context().get(), req, &resp);
      EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << seconds;
      EXPECT_NE(s.error_message().find("retention_time"), std::string::npos) << s.error_message();
    }
    lpb::ProduceRequest produce;
    produce.set_topic("seed");
    auto* record = produce.add_records();
    record->set_value("v");
    record->mutable_event_time()->set_seconds(253402300800);  // the year 10000
    lpb::ProduceResponse produced;
    grpc::Status s = log_->Produce(Context().get(), produce, &produced);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(s.error_message().find("records[0].event_time"), std::string::npos)
        << s.error_message();
    qpb::CreateQueueRequest create;
    create.set_name("ages");
    create.mutable_config()->mutable_max_ready_age()->set_seconds(315576000001);
    qpb::CreateQueueResponse created;
    s = queue_->CreateQueue(Context().get(), create, &created);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(s.error_message().find("config.max_ready_age"), std::string::npos)
        << s.error_message();
  }
  {  // (7) a 1 MiB name: the NOT_FOUND (or INVALID_ARGUMENT) reaches a default client
    lpb::DescribeTopicRequest req;
    req.set_name(std::string(1 << 20, 'n'));
    lpb::DescribeTopicResponse resp;
    grpc::Status s = log_->DescribeTopic(Context().get(), req, &resp);
    EXPECT_TRUE(s.error_code() == grpc::StatusCode::NOT_FOUND ||
                s.error_code() == grpc::StatusCode::INVALID_ARGUMENT)
        << s.error_code() << " " << s.error_message().substr(0, 200);
  }
  {  // (8) an undefined failure class is refused, not taken as transient
    qpb::NackRequest nack;
    nack.set_queue("seedq");
    nack.set_job_id(dead_id_);
    nack.set_lease_token("x");
    nack.set_failure_class(static_cast<qpb::FailureClass>(99));
    qpb::NackResponse resp;
    grpc::Status s = queue_->Nack(Context().get(), nack, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  }
  {  // (8) to_latest: false names no target
    cpb::ResetOffsetsRequest reset;
    reset.set_group_id("seedg");
    reset.set_topic("seed");
    reset.set_to_latest(false);
    reset.set_execute(true);
    cpb::ResetOffsetsResponse resp;
    grpc::Status s = coordinator_->ResetOffsets(Context().get(), reset, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  }
  {  // (1) a heartbeat naming 100,000 topics is refused at once
    cpb::HeartbeatRequest hb;
    hb.set_group_id("hb-group");
    for (int i = 0; i < 100000; ++i) hb.add_subscribed_topics(absl::StrCat("x", i));
    hb.mutable_session_timeout()->set_seconds(1800);
    cpb::HeartbeatResponse resp;
    grpc::Status s = coordinator_->Heartbeat(Context(absl::Seconds(5)).get(), hb, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  }
  EXPECT_EQ(Snapshot(), before);
}

}  // namespace
}  // namespace conduit::hostile
