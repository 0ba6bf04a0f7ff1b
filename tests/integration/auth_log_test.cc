// Security on a real conduit-standalone's log: the fetch byte quota, which is known only after
// a fetch — the answer is debited, and the caller's next fetch waits until the debt is paid
// (RESOURCE_EXHAUSTED with grpc-retry-pushback-ms), its next Tail message is held back as long;
// another principal is unaffected; the throttling is counted per principal on /metrics — and
// record values withheld from a reader without ViewPayload.

#include <unistd.h>

#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "conduit/coordinator/v1/coordinator.grpc.pb.h"
#include "conduit/log/v1/log.grpc.pb.h"
#include "tests/integration/auth_fixture.h"
#include "tests/support/http_metrics.h"

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
  // The server's /metrics page (the port from its startup log line, at --log-level info); empty
  // when it cannot be read.
  std::string Metrics() {
    std::ifstream in(dir_.Sub("server.log"));
    std::stringstream log;
    log << in.rdbuf();
    static const std::regex kServing("metrics on http://127\\.0\\.0\\.1:([0-9]+)/metrics");
    std::smatch m;
    const std::string text = log.str();
    if (!std::regex_search(text, m, kServing)) return "";
    return HttpGetMetrics(std::stoi(m[1]));
  }
  // The value of quota counter `name` for `principal` and `kind` in `page`; -1 when absent.
  static double QuotaCounter(const std::string& page, const std::string& name,
                             const std::string& principal, const std::string& kind) {
    for (absl::string_view line : absl::StrSplit(page, '\n')) {
      if (!absl::StartsWith(line, absl::StrCat(name, "{")) ||
          !absl::StrContains(line, absl::StrCat("principal=\"", principal, "\"")) ||
          !absl::StrContains(line, absl::StrCat("kind=\"", kind, "\""))) {
        continue;
      }
      double value = 0;
      if (absl::SimpleAtod(line.substr(line.rfind(' ') + 1), &value)) return value;
    }
    return -1;
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

// Kafka delays a throttled fetch's answer rather than failing it: a Tail over its quota is held
// back until the debt is paid, then goes on. Another principal's Tail is not held back, and
// /metrics counts the throttling per principal.
TEST_F(AuthLogTest, ATailOverItsFetchQuotaIsHeldBackAndAnotherPrincipalsIsNot) {
  ASSERT_NO_FATAL_FAILURE(Start(
      {"--quota-fetch-bytes", "2000", "--metrics-listen", "127.0.0.1:0", "--log-level", "info"}));
  lpb::ProduceRequest produce;  // 5 records of 1000 bytes in all
  produce.set_topic("t");
  for (int i = 0; i < 2; ++i) produce.add_records()->set_value(std::string(1000, 'w'));
  lpb::ProduceResponse produced;
  ASSERT_TRUE(log_->Produce(As("root-token").get(), produce, &produced).ok());
  lpb::FetchResponse fetched;
  ASSERT_TRUE(Fetch("alice-token", &fetched).ok());
  ASSERT_EQ(fetched.records_size(), 5);
  // Alice owes about 3000 bytes now: 1.5 s at 2000/s.
  const double answered = static_cast<double>(fetched.ByteSizeLong());
  const absl::Duration debt = absl::Seconds((answered + 1 - 2000) / 2000);

  const absl::Time started = absl::Now();
  auto alice_ctx = As("alice-token");
  lpb::TailRequest alice_req;
  alice_req.set_topic("t");
  auto alice = log_->Tail(alice_ctx.get(), alice_req);
  // Bob tails the same records while alice is held back; without ViewPayload he is sent no
  // values, so his messages stay within his own bucket and he is never paused.
  auto bob_ctx = As("bob-token");
  lpb::TailRequest bob_req;
  bob_req.set_topic("t");
  auto bob = log_->Tail(bob_ctx.get(), bob_req);
  lpb::TailResponse bobs;
  ASSERT_TRUE(bob->Read(&bobs));
  const absl::Duration bob_waited = absl::Now() - started;
  ASSERT_EQ(bobs.records_size(), 5);
  lpb::TailResponse alices;
  ASSERT_TRUE(alice->Read(&alices)) << "the stream goes on once the debt is paid";
  const absl::Duration alice_waited = absl::Now() - started;
  ASSERT_EQ(alices.records_size(), 5);
  EXPECT_GE(alice_waited, debt - absl::Milliseconds(300)) << "held back until the debt is paid";
  EXPECT_LT(bob_waited, alice_waited) << "bob's bucket is his own";
  EXPECT_LT(bob_waited, absl::Seconds(1));

  // Alice is in debt again (5 records sent): her stream is paused when she leaves it.
  alice_ctx->TryCancel();
  bob_ctx->TryCancel();
  EXPECT_EQ(alice->Finish().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_EQ(bob->Finish().error_code(), grpc::StatusCode::CANCELLED);

  const std::string page = Metrics();
  ASSERT_FALSE(page.empty()) << "see " << dir_.path() << "/server.log";
  EXPECT_GE(QuotaCounter(page, "conduit_quota_throttled_total", "User:alice", "fetch_bytes"), 1)
      << page;
  EXPECT_GE(QuotaCounter(page, "conduit_quota_throttle_seconds_total", "User:alice", "fetch_bytes"),
            absl::ToDoubleSeconds(debt) - 0.3);
  EXPECT_GE(QuotaCounter(page, "conduit_quota_used_total", "User:alice", "fetch_bytes"),
            2 * answered - 100)
      << "the fetch and the tail message (the same records)";
  EXPECT_EQ(QuotaCounter(page, "conduit_quota_throttled_total", "User:bob", "fetch_bytes"), 0);
  EXPECT_GT(QuotaCounter(page, "conduit_quota_used_total", "User:bob", "fetch_bytes"),
            static_cast<double>(bobs.ByteSizeLong()))
      << "his message and the byte charged before it";
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
