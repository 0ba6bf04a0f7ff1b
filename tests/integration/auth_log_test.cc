// Issue 19 on a real conduit-standalone's log: the fetch byte quota, which is known only after
// a fetch — the answer is debited, and the caller's next fetch waits until the debt is paid
// (RESOURCE_EXHAUSTED with grpc-retry-pushback-ms); another principal is unaffected — and
// record values withheld from a reader without ViewPayload.

#include <string>

#include "absl/time/clock.h"
#include "conduit/log/v1/log.grpc.pb.h"
#include "tests/integration/auth_fixture.h"

namespace conduit::testing {
namespace {

namespace lpb = ::conduit::log::v1;

class AuthLogTest : public AuthTest {
 protected:
  void Start(std::vector<std::string> extra) {
    ASSERT_NO_FATAL_FAILURE(StartServer(
        "allow * topic any * Read,Write,Create\nallow User:alice topic literal t ViewPayload\n",
        "conduit-standalone", std::move(extra)));
    log_ = lpb::LogService::NewStub(channel_);
    lpb::CreateTopicRequest create;
    create.set_name("t");
    create.set_partitions(1);
    lpb::CreateTopicResponse created;
    ASSERT_TRUE(log_->CreateTopic(As("root-token").get(), create, &created).ok());
    lpb::ProduceRequest produce;
    produce.set_topic("t");
    for (int i = 0; i < 3; ++i) produce.add_records()->set_value(std::string(1000, 'v'));
    lpb::ProduceResponse produced;
    ASSERT_TRUE(log_->Produce(As("root-token").get(), produce, &produced).ok());
  }
  grpc::Status Fetch(const std::string& token, lpb::FetchResponse* out,
                     int64_t* pushback_ms = nullptr) {
    lpb::FetchRequest req;
    req.set_topic("t");
    auto ctx = As(token);
    grpc::Status s = log_->Fetch(ctx.get(), req, out);
    auto it = ctx->GetServerTrailingMetadata().find("grpc-retry-pushback-ms");
    if (pushback_ms != nullptr && it != ctx->GetServerTrailingMetadata().end()) {
      *pushback_ms = std::stoll(std::string(it->second.data(), it->second.size()));
    }
    return s;
  }
  std::unique_ptr<lpb::LogService::Stub> log_;
};

TEST_F(AuthLogTest, AFetchIsDebitedAfterTheFactAndTheNextWaitsForTheDebt) {
  ASSERT_NO_FATAL_FAILURE(Start({"--quota-fetch-bytes", "2000"}));
  lpb::FetchResponse first;
  ASSERT_TRUE(Fetch("alice-token", &first).ok());
  ASSERT_EQ(first.records_size(), 3);
  const double answered = static_cast<double>(first.ByteSizeLong());  // over 3000 bytes
  lpb::FetchResponse second;
  int64_t wait_ms = -1;
  const grpc::Status over = Fetch("alice-token", &second, &wait_ms);
  ASSERT_EQ(over.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << over.error_message();
  // The debt (answer - 2000 + 1) at 2000/s, less what refilled since (well under 100 ms).
  const double debt_ms = (answered - 2000 + 1) / 2.0;
  EXPECT_GE(wait_ms, debt_ms - 100);
  EXPECT_LE(wait_ms, debt_ms + 1);
  lpb::FetchResponse bobs;
  EXPECT_TRUE(Fetch("bob-token", &bobs).ok()) << "bob's bucket is his own";
  absl::SleepFor(absl::Milliseconds(wait_ms));
  EXPECT_TRUE(Fetch("alice-token", &second).ok()) << "after the pushback";
}

TEST_F(AuthLogTest, RecordValuesNeedViewPayload) {
  ASSERT_NO_FATAL_FAILURE(Start({}));
  lpb::FetchResponse alice, bob;
  ASSERT_TRUE(Fetch("alice-token", &alice).ok());
  ASSERT_TRUE(Fetch("bob-token", &bob).ok());
  ASSERT_EQ(alice.records_size(), 3);
  ASSERT_EQ(bob.records_size(), 3);
  EXPECT_EQ(alice.records(0).value().size(), 1000u);
  EXPECT_FALSE(bob.records(0).has_value()) << "withheld: no ViewPayload";
  EXPECT_EQ(bob.records(2).offset(), 2) << "offsets and the rest stay";
}

}  // namespace
}  // namespace conduit::testing
