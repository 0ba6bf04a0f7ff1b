// A hostile client, as a reflection client would be one: every method of the three services is
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
#include <google/protobuf/descriptor.h>
#include <google/protobuf/stubs/logging.h>
#include <google/protobuf/util/json_util.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdlib>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/testing/temp_dir.h"
#include "conduit/coordinator/v1/coordinator.grpc.pb.h"
#include "conduit/log/v1/log.grpc.pb.h"
#include "conduit/queue/v1/queue.grpc.pb.h"
#include "tests/support/server_process.h"

namespace conduit {
namespace {

namespace lpb = ::conduit::log::v1;
namespace qpb = ::conduit::queue::v1;
namespace cpb = ::conduit::coordinator::v1;
using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::MethodDescriptor;
using google::protobuf::Reflection;

constexpr int64_t kMaxDurationSeconds = 315'576'000'000;
constexpr int64_t kMaxTimestampSeconds = 253'402'300'799;
constexpr int64_t kMinTimestampSeconds = -62'135'596'800;
constexpr size_t kMaxMessageBytes = 2048;
const char* kServices[] = {"conduit.log.v1.LogService", "conduit.queue.v1.WorkQueue",
                           "conduit.coordinator.v1.GroupCoordinator"};

bool LongMode() {
  const char* v = std::getenv("CONDUIT_HOSTILE_LONG");
  return v != nullptr && std::string(v) == "1";
}

// One mutation: what it does (for failure messages) and how.
struct Mutation {
  std::string what;
  std::function<void(Message*)> apply;
};

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

  // A request that gets past the first checks: names the seed, carries one element in every
  // list of messages, plausible strings where a name is wanted.
  void FillBase(Message* m, const std::string& service, int depth = 0) {
    const Descriptor* d = m->GetDescriptor();
    const Reflection* r = m->GetReflection();
    for (int i = 0; i < d->field_count(); ++i) {
      const FieldDescriptor* f = d->field(i);
      const std::string& name = f->name();
      if (f->is_map()) continue;
      if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
        if (f->is_repeated() && depth < 2 && !IsTime(f->message_type())) {
          FillBase(r->AddMessage(m, f), service, depth + 1);
        }
        continue;
      }
      if (f->type() == FieldDescriptor::TYPE_STRING) {
        std::string value = NameFor(name, service);
        if (value.empty()) continue;
        if (f->is_repeated()) {
          r->AddString(m, f, value);
        } else {
          r->SetString(m, f, value);
        }
      } else if (f->type() == FieldDescriptor::TYPE_BYTES && !f->is_repeated()) {
        r->SetString(m, f, "v");
      } else if (f->cpp_type() == FieldDescriptor::CPPTYPE_UINT64 && name == "job_id") {
        r->SetUInt64(m, f, dead_id_);
      } else if (f->cpp_type() == FieldDescriptor::CPPTYPE_UINT64 && name == "job_ids") {
        r->AddUInt64(m, f, dead_id_);
      }
    }
  }
  static std::string NameFor(const std::string& field, const std::string& service) {
    if (field == "name") return service == "conduit.queue.v1.WorkQueue" ? "seedq" : "seed";
    if (field == "topic" || field == "topics" || field == "subscribed_topics") return "seed";
    if (field == "queue") return "seedq";
    if (field == "group_id") return "seedg";
    if (field == "worker_id" || field == "actor" || field == "producer_name" || field == "reason" ||
        field == "client_id") {
      return "walker";
    }
    if (field == "lease_token") return "stale-token";
    return "";
  }
  static bool IsTime(const Descriptor* d) {
    return d->full_name() == "google.protobuf.Duration" ||
           d->full_name() == "google.protobuf.Timestamp";
  }

  // The boundary values for field `f` of the message that `get` reaches.
  static void AddMutations(const std::string& path, const FieldDescriptor* f,
                           std::function<Message*(Message*)> get, size_t list_length,
                           std::vector<Mutation>* out) {
    auto add = [&](std::string what, std::function<void(Message*, const Reflection*)> set) {
      out->push_back({absl::StrCat(path, " = ", what), [get, set](Message* root) {
                        Message* m = get(root);
                        set(m, m->GetReflection());
                      }});
    };
    if (f->is_map() || (f->is_repeated() && f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE)) {
      add(absl::StrCat(list_length, " elements"), [f, list_length](Message* m,
                                                                   const Reflection* r) {
        const Message* first = r->FieldSize(*m, f) > 0 ? &r->GetRepeatedMessage(*m, f, 0) : nullptr;
        for (size_t i = 0; i < list_length; ++i) {
          Message* e = r->AddMessage(m, f);
          if (first != nullptr && !f->is_map()) {
            e->CopyFrom(r->GetRepeatedMessage(*m, f, 0));
          }
          if (f->is_map()) {  // distinct keys, or the map holds one entry
            const FieldDescriptor* key = e->GetDescriptor()->FindFieldByNumber(1);
            if (key->type() == FieldDescriptor::TYPE_STRING) {
              e->GetReflection()->SetString(e, key, absl::StrCat("k", i));
            }
          }
        }
      });
      if (!f->is_map()) {
        // Each field of the first element.
        const Descriptor* type = f->message_type();
        for (int i = 0; i < type->field_count(); ++i) {
          AddMutations(
              absl::StrCat(path, "[0].", type->field(i)->name()), type->field(i),
              [get, f](Message* root) {
                Message* m = get(root);
                const Reflection* r = m->GetReflection();
                if (r->FieldSize(*m, f) == 0) r->AddMessage(m, f);
                return r->MutableRepeatedMessage(m, f, 0);
              },
              list_length, out);
        }
      }
      return;
    }
    if (f->is_repeated()) {
      add(absl::StrCat(list_length, " elements"),
          [f, list_length](Message* m, const Reflection* r) {
            for (size_t i = 0; i < list_length; ++i) {
              switch (f->cpp_type()) {
                case FieldDescriptor::CPPTYPE_STRING:
                  r->AddString(m, f, absl::StrCat("x", i));
                  break;
                case FieldDescriptor::CPPTYPE_INT32:
                  r->AddInt32(m, f, static_cast<int32_t>(i));
                  break;
                case FieldDescriptor::CPPTYPE_INT64:
                  r->AddInt64(m, f, static_cast<int64_t>(i));
                  break;
                case FieldDescriptor::CPPTYPE_UINT64:
                  r->AddUInt64(m, f, i);
                  break;
                case FieldDescriptor::CPPTYPE_UINT32:
                  r->AddUInt32(m, f, static_cast<uint32_t>(i));
                  break;
                case FieldDescriptor::CPPTYPE_ENUM:
                  r->AddEnumValue(m, f, static_cast<int>(i % 4));
                  break;
                default:
                  break;
              }
            }
          });
      if (f->cpp_type() == FieldDescriptor::CPPTYPE_INT32) {
        add("[INT32_MIN, -1]", [f](Message* m, const Reflection* r) {
          r->AddInt32(m, f, std::numeric_limits<int32_t>::min());
          r->AddInt32(m, f, -1);
        });
      }
      return;
    }
    switch (f->cpp_type()) {
      case FieldDescriptor::CPPTYPE_STRING: {
        const bool bytes = f->type() == FieldDescriptor::TYPE_BYTES;
        add("\"\"", [f](Message* m, const Reflection* r) { r->SetString(m, f, ""); });
        add("1 MiB", [f](Message* m, const Reflection* r) {
          r->SetString(m, f, std::string(1 << 20, 'n'));
        });
        add("300 bytes",
            [f](Message* m, const Reflection* r) { r->SetString(m, f, std::string(300, 'n')); });
        add("NUL inside",
            [f](Message* m, const Reflection* r) { r->SetString(m, f, std::string("se\0ed", 5)); });
        if (!bytes) {
          add("invalid UTF-8",
              [f](Message* m, const Reflection* r) { r->SetString(m, f, "se\xff\xfe"); });
        }
        break;
      }
      case FieldDescriptor::CPPTYPE_INT32:
        for (int32_t v :
             {std::numeric_limits<int32_t>::min(), -1, 0, std::numeric_limits<int32_t>::max()}) {
          add(std::to_string(v), [f, v](Message* m, const Reflection* r) { r->SetInt32(m, f, v); });
        }
        break;
      case FieldDescriptor::CPPTYPE_INT64:
        for (int64_t v : {std::numeric_limits<int64_t>::min(), int64_t{-1},
                          std::numeric_limits<int64_t>::max()}) {
          add(std::to_string(v), [f, v](Message* m, const Reflection* r) { r->SetInt64(m, f, v); });
        }
        break;
      case FieldDescriptor::CPPTYPE_UINT32:
        add("UINT32_MAX", [f](Message* m, const Reflection* r) {
          r->SetUInt32(m, f, std::numeric_limits<uint32_t>::max());
        });
        break;
      case FieldDescriptor::CPPTYPE_UINT64:
        for (uint64_t v : {uint64_t{0}, std::numeric_limits<uint64_t>::max()}) {
          add(std::to_string(v),
              [f, v](Message* m, const Reflection* r) { r->SetUInt64(m, f, v); });
        }
        break;
      case FieldDescriptor::CPPTYPE_DOUBLE:
        for (double v : {std::nan(""), std::numeric_limits<double>::infinity(),
                         -std::numeric_limits<double>::infinity(), 1e-300, -1.0, 1e300}) {
          add(std::to_string(v),
              [f, v](Message* m, const Reflection* r) { r->SetDouble(m, f, v); });
        }
        break;
      case FieldDescriptor::CPPTYPE_FLOAT:
        add("NaN", [f](Message* m, const Reflection* r) { r->SetFloat(m, f, std::nanf("")); });
        break;
      case FieldDescriptor::CPPTYPE_BOOL:
        add("true", [f](Message* m, const Reflection* r) { r->SetBool(m, f, true); });
        add("false", [f](Message* m, const Reflection* r) { r->SetBool(m, f, false); });
        break;
      case FieldDescriptor::CPPTYPE_ENUM:
        for (int v : {99, -1}) {
          add(absl::StrCat("enum ", v),
              [f, v](Message* m, const Reflection* r) { r->SetEnumValue(m, f, v); });
        }
        break;
      case FieldDescriptor::CPPTYPE_MESSAGE: {
        const Descriptor* type = f->message_type();
        auto set_time = [f](int64_t seconds, int32_t nanos) {
          return [f, seconds, nanos](Message* m, const Reflection* r) {
            Message* t = r->MutableMessage(m, f);
            const Descriptor* td = t->GetDescriptor();
            t->GetReflection()->SetInt64(t, td->FindFieldByNumber(1), seconds);
            t->GetReflection()->SetInt32(t, td->FindFieldByNumber(2), nanos);
          };
        };
        if (type->full_name() == "google.protobuf.Duration") {
          for (auto [s, n] :
               std::vector<std::pair<int64_t, int32_t>>{{kMaxDurationSeconds + 1, 0},
                                                        {std::numeric_limits<int64_t>::max(), 0},
                                                        {-kMaxDurationSeconds - 1, 0},
                                                        {kMaxDurationSeconds, 0},
                                                        {0, 1'000'000'000},
                                                        {1, -1},
                                                        {-1, 0}}) {
            add(absl::StrCat("Duration{", s, ", ", n, "}"), set_time(s, n));
          }
        } else if (type->full_name() == "google.protobuf.Timestamp") {
          for (auto [s, n] :
               std::vector<std::pair<int64_t, int32_t>>{{kMaxTimestampSeconds + 1, 0},
                                                        {std::numeric_limits<int64_t>::min(), 0},
                                                        {kMaxTimestampSeconds, 999'999'999},
                                                        {kMinTimestampSeconds, 0},
                                                        {0, -1},
                                                        {0, 1'000'000'000}}) {
            add(absl::StrCat("Timestamp{", s, ", ", n, "}"), set_time(s, n));
          }
        } else if (path.find('.') == std::string::npos ||
                   std::count(path.begin(), path.end(), '.') < 2) {
          for (int i = 0; i < type->field_count(); ++i) {
            AddMutations(
                absl::StrCat(path, ".", type->field(i)->name()), type->field(i),
                [get, f](Message* root) {
                  Message* m = get(root);
                  return m->GetReflection()->MutableMessage(m, f);
                },
                list_length, out);
          }
        }
        break;
      }
    }
  }

  static std::vector<Mutation> MutationsOf(const Descriptor* request, size_t list_length) {
    std::vector<Mutation> out;
    for (int i = 0; i < request->field_count(); ++i) {
      AddMutations(
          request->field(i)->name(), request->field(i), [](Message* m) { return m; }, list_length,
          &out);
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
    FillBase(request.get(), method->service()->full_name());
    std::string bytes = request->SerializePartialAsString();
    if (out) *out = std::move(request);
    return bytes;
  }

  static testing::TempDir* dir_;
  static testing::ServerProcess* server_;
  static std::shared_ptr<grpc::Channel>* channel_;
  std::unique_ptr<lpb::LogService::Stub> log_;
  std::unique_ptr<qpb::WorkQueue::Stub> queue_;
  std::unique_ptr<cpb::GroupCoordinator::Stub> coordinator_;
  uint64_t dead_id_ = 0;
};

testing::TempDir* HostileWalk::dir_ = nullptr;
testing::ServerProcess* HostileWalk::server_ = nullptr;
std::shared_ptr<grpc::Channel>* HostileWalk::channel_ = nullptr;

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

// The named cases of issue 13, at the wire, each with the status it must get.
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
}  // namespace conduit
