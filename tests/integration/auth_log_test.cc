// Issue 19 on a real conduit-standalone's log: the fetch byte quota, which is known only after
// a fetch — the answer is debited, and the caller's next fetch waits until the debt is paid
// (RESOURCE_EXHAUSTED with grpc-retry-pushback-ms); another principal is unaffected — and
// record values withheld from a reader without ViewPayload.

#include <string>

#include "absl/time/clock.h"
#include "conduit/coordinator/v1/coordinator.grpc.pb.h"
#include "conduit/log/v1/log.grpc.pb.h"
#include "tests/integration/auth_fixture.h"

namespace conduit::testing {
namespace {

namespace lpb = ::conduit::log::v1;
namespace cpb = ::conduit::coordinator::v1;

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

// Servers call each other with their own identity (--peer-token-file): with ACLs on, the
// coordinator reads the topic's partitions from the broker as User:svc, so a member is assigned
// them; without a peer token it calls as User:ANONYMOUS, sees no topic, and assigns nothing.
class AuthPeerTest : public AuthTest {
 protected:
  // Heartbeats as alice for up to `wait` until the member is assigned partitions of "t".
  int AssignedPartitions(absl::Duration wait) {
    auto coordinator = cpb::GroupCoordinator::NewStub(channel_);
    cpb::HeartbeatRequest req;
    req.set_group_id("g");
    req.add_subscribed_topics("t");
    req.mutable_session_timeout()->set_seconds(10);
    const absl::Time deadline = absl::Now() + wait;
    while (absl::Now() < deadline) {
      cpb::HeartbeatResponse resp;
      grpc::Status s = coordinator->Heartbeat(As("alice-token").get(), req, &resp);
      EXPECT_TRUE(s.ok()) << s.error_message();
      if (!s.ok()) return -1;
      req.set_member_id(resp.member_id());
      req.set_member_epoch(resp.member_epoch());
      int assigned = 0;
      for (const auto& tp : resp.assignment()) assigned += tp.partitions_size();
      if (assigned > 0) return assigned;
      absl::SleepFor(absl::Milliseconds(100));
    }
    return 0;
  }
  void Start(bool peer_token) {
    Write("svc", "svc-token\n");
    std::vector<std::string> extra;
    if (peer_token) extra = {"--peer-token-file", dir_.Sub("svc")};
    ASSERT_NO_FATAL_FAILURE(
        StartServer("allow User:alice group literal g Read\n"
                    "allow User:alice topic literal t Read\n"
                    "allow User:svc topic any * Read\n",
                    "conduit-standalone", extra));
    auto log = lpb::LogService::NewStub(channel_);
    lpb::CreateTopicRequest create;
    create.set_name("t");
    create.set_partitions(2);
    lpb::CreateTopicResponse created;
    ASSERT_TRUE(log->CreateTopic(As("root-token").get(), create, &created).ok());
  }
};

TEST_F(AuthPeerTest, TheCoordinatorCallsTheBrokerAsItsPeerPrincipal) {
  ASSERT_NO_FATAL_FAILURE(Start(/*peer_token=*/true));
  EXPECT_EQ(AssignedPartitions(absl::Seconds(10)), 2);
}

TEST_F(AuthPeerTest, WithoutAPeerTokenTheCoordinatorSeesNoTopic) {
  ASSERT_NO_FATAL_FAILURE(Start(/*peer_token=*/false));
  EXPECT_EQ(AssignedPartitions(absl::Seconds(3)), 0);
}

}  // namespace
}  // namespace conduit::testing
