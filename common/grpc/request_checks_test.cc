#include "common/grpc/request_checks.h"

#include <google/protobuf/descriptor.pb.h>
#include <google/protobuf/dynamic_message.h>
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>

#include <limits>

#include "common/grpc/proto_time.h"
#include "common/grpc/status.h"

namespace conduit::grpc_util {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::DescriptorPool;
using google::protobuf::FileDescriptorProto;
using google::protobuf::Message;

// A request shape with times at every depth, built at run time:
//   message Item { google.protobuf.Timestamp at = 1; string payload = 2; }
//   message Request { google.protobuf.Duration wait = 1; repeated Item items = 2;
//                     Item first = 3; string name = 4; }
class TimeFieldsTest : public ::testing::Test {
 protected:
  TimeFieldsTest() : pool_(DescriptorPool::generated_pool()) {
    (void)google::protobuf::Duration::descriptor();
    (void)google::protobuf::Timestamp::descriptor();
    FileDescriptorProto file;
    file.set_name("checks_test.proto");
    file.set_package("test");
    file.set_syntax("proto3");
    file.add_dependency("google/protobuf/duration.proto");
    file.add_dependency("google/protobuf/timestamp.proto");
    auto* item = file.add_message_type();
    item->set_name("Item");
    AddField(item, "at", 1, ".google.protobuf.Timestamp", false);
    AddScalar(item, "payload", 2);
    auto* request = file.add_message_type();
    request->set_name("Request");
    AddField(request, "wait", 1, ".google.protobuf.Duration", false);
    AddField(request, "items", 2, ".test.Item", true);
    AddField(request, "first", 3, ".test.Item", false);
    AddScalar(request, "name", 4);
    EXPECT_NE(pool_.BuildFile(file), nullptr);
    descriptor_ = pool_.FindMessageTypeByName("test.Request");
  }
  static void AddField(google::protobuf::DescriptorProto* m, const char* name, int number,
                       const char* type, bool repeated) {
    auto* f = m->add_field();
    f->set_name(name);
    f->set_number(number);
    f->set_type(google::protobuf::FieldDescriptorProto::TYPE_MESSAGE);
    f->set_type_name(type);
    f->set_label(repeated ? google::protobuf::FieldDescriptorProto::LABEL_REPEATED
                          : google::protobuf::FieldDescriptorProto::LABEL_OPTIONAL);
  }
  static void AddScalar(google::protobuf::DescriptorProto* m, const char* name, int number) {
    auto* f = m->add_field();
    f->set_name(name);
    f->set_number(number);
    f->set_type(google::protobuf::FieldDescriptorProto::TYPE_STRING);
    f->set_label(google::protobuf::FieldDescriptorProto::LABEL_OPTIONAL);
  }
  std::unique_ptr<Message> New() {
    return std::unique_ptr<Message>(factory_.GetPrototype(descriptor_)->New());
  }
  static void SetTime(Message* time, int64_t seconds, int32_t nanos) {
    const Descriptor* d = time->GetDescriptor();
    time->GetReflection()->SetInt64(time, d->FindFieldByNumber(1), seconds);
    time->GetReflection()->SetInt32(time, d->FindFieldByNumber(2), nanos);
  }
  Message* Wait(Message* request) {
    return request->GetReflection()->MutableMessage(request, descriptor_->FindFieldByName("wait"),
                                                    &factory_);
  }
  Message* AddItemTime(Message* request) {
    Message* item = request->GetReflection()->AddMessage(
        request, descriptor_->FindFieldByName("items"), &factory_);
    return item->GetReflection()->MutableMessage(item, item->GetDescriptor()->FindFieldByName("at"),
                                                 &factory_);
  }

  DescriptorPool pool_;
  google::protobuf::DynamicMessageFactory factory_;
  const Descriptor* descriptor_ = nullptr;
};

TEST_F(TimeFieldsTest, ValuesInsideTheProtobufRangesPass) {
  auto request = New();
  EXPECT_TRUE(CheckTimeFields(*request).ok()) << "absent times are fine";
  SetTime(Wait(request.get()), -kMaxDurationSeconds, -999'999'999);
  SetTime(AddItemTime(request.get()), kMinTimestampSeconds, 0);
  SetTime(AddItemTime(request.get()), kMaxTimestampSeconds, 999'999'999);
  EXPECT_TRUE(CheckTimeFields(*request).ok()) << CheckTimeFields(*request);
}

TEST_F(TimeFieldsTest, AnOutOfRangeDurationIsRefusedByName) {
  for (auto [seconds, nanos] :
       std::vector<std::pair<int64_t, int32_t>>{{kMaxDurationSeconds + 1, 0},
                                                {std::numeric_limits<int64_t>::max(), 0},
                                                {-kMaxDurationSeconds - 1, 0},
                                                {0, 1'000'000'000},
                                                {1, -1},
                                                {-1, 1}}) {
    auto request = New();
    SetTime(Wait(request.get()), seconds, nanos);
    absl::Status s = CheckTimeFields(*request);
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << seconds << "s " << nanos << "ns: " << s;
    EXPECT_EQ(s.message().substr(0, 4), "wait") << s;
  }
}

TEST_F(TimeFieldsTest, AnOutOfRangeTimestampDeepInAListIsRefusedWithItsPath) {
  auto request = New();
  SetTime(AddItemTime(request.get()), 0, 0);
  SetTime(AddItemTime(request.get()), kMaxTimestampSeconds + 1, 0);  // the year 10000
  absl::Status s = CheckTimeFields(*request);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_EQ(s.message().substr(0, 17), "items[1].at is a ") << s;
  auto negative_nanos = New();
  SetTime(AddItemTime(negative_nanos.get()), 0, -1);
  EXPECT_TRUE(absl::IsInvalidArgument(CheckTimeFields(*negative_nanos)));
}

TEST_F(TimeFieldsTest, TimeFieldPathsNameWhatTheCheckVisits) {
  EXPECT_EQ(TimeFieldPaths(descriptor_),
            (std::vector<std::string>{"wait", "items.at", "first.at"}));
  EXPECT_TRUE(TimeFieldPaths(google::protobuf::FileDescriptorProto::descriptor()).empty());
}

TEST(ProtoTime, WhatGoesOutIsClampedSoItAlwaysRendersAsJson) {
  google::protobuf::Duration d;
  SetDuration(absl::InfiniteDuration(), &d);
  std::string json;
  EXPECT_TRUE(google::protobuf::util::MessageToJsonString(d, &json).ok());
  EXPECT_EQ(d.seconds(), kMaxDurationSeconds);
  SetDuration(-absl::Seconds(kMaxDurationSeconds) - absl::Hours(1), &d);
  EXPECT_TRUE(google::protobuf::util::MessageToJsonString(d, &json).ok());
  google::protobuf::Timestamp t;
  SetTimestamp(absl::FromUnixSeconds(kMaxTimestampSeconds) + absl::Hours(1), &t);
  EXPECT_TRUE(google::protobuf::util::MessageToJsonString(t, &json).ok()) << t.DebugString();
  SetTimestamp(absl::InfinitePast(), &t);
  EXPECT_TRUE(google::protobuf::util::MessageToJsonString(t, &json).ok()) << t.DebugString();
  SetTimestamp(absl::FromUnixSeconds(1'700'000'000) + absl::Microseconds(5), &t);
  EXPECT_EQ(t.seconds(), 1'700'000'000);
  EXPECT_EQ(t.nanos(), 5000) << "values in range are untouched";
}

TEST(StatusMessages, AHugeEchoIsCutBeforeItBecomesAHeaderTooLarge) {
  const std::string name(1 << 20, 'n');
  grpc::Status s = ToGrpcStatus(absl::NotFoundError("topic '" + name + "' does not exist"));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_LE(s.error_message().size(), kMaxStatusMessageBytes + 64);
  EXPECT_NE(s.error_message().find("more bytes)"), std::string::npos);
  // A cut never splits a UTF-8 character: 'é' is two bytes, placed across the limit.
  std::string accents(kMaxStatusMessageBytes - 1, 'a');
  accents += "é and more";
  const std::string cut = BoundedMessage(accents);
  EXPECT_EQ(cut.substr(0, kMaxStatusMessageBytes - 1),
            std::string(kMaxStatusMessageBytes - 1, 'a'));
  EXPECT_EQ(cut[kMaxStatusMessageBytes - 1], '\xE2')
      << "the cut starts the ellipsis, not half an é";
  EXPECT_EQ(BoundedMessage("short"), "short");
}

}  // namespace
}  // namespace conduit::grpc_util
