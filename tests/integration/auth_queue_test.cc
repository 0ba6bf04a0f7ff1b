// Tokens and ACLs on a real conduit-queue: bearer tokens decide the principal per call, ACLs
// decide what it may do (deny wins, prefix boundaries, no ACL means denied, Read implies
// Describe, superusers), streams are refused before their first job, a redrive needs Write where
// the letters go, and dead letters come back without payloads to a caller without ViewPayload.

#include <cstdlib>
#include <string>

#include "absl/time/clock.h"
#include "tests/integration/auth_fixture.h"

namespace conduit::testing {
namespace {

constexpr char kAcls[] = R"(# a deny-wins example, on queues
allow User:alice queue prefixed orders.   Create,Write,Read
deny  User:alice queue literal  orders.pii Write
allow User:bob   queue literal  reports   Read
allow User:bob   queue literal  dlq       Redrive,Describe
)";

class AuthQueueTest : public AuthTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(StartServer(kAcls));
    for (const char* q : {"orders.eu", "orders.pii", "orders", "ordersx", "reports", "dlq"}) {
      ASSERT_TRUE(CreateQueue("root-token", q).ok()) << q;  // a superuser passes every check
    }
  }
  int64_t Ready(const std::string& queue) {
    qpb::GetQueueStatsResponse stats;
    EXPECT_TRUE(Stats("root-token", queue, &stats).ok());
    return stats.ready();
  }
};

TEST_F(AuthQueueTest, DenyWinsOverAPrefixedAllow) {
  EXPECT_TRUE(Enqueue("alice-token", "orders.eu").ok());
  const grpc::Status pii = Enqueue("alice-token", "orders.pii");
  EXPECT_EQ(pii.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_NE(pii.error_message().find("deny User:alice queue literal orders.pii Write"),
            std::string::npos)
      << pii.error_message();
  EXPECT_EQ(Ready("orders.pii"), 0) << "a refused call changes nothing";
  EXPECT_EQ(Ready("orders.eu"), 1);
}

TEST_F(AuthQueueTest, PrefixesStopAtTheirEndAndNoAllowMeansDenied) {
  for (const char* q : {"orders", "ordersx"}) {
    EXPECT_EQ(Enqueue("alice-token", q).error_code(), grpc::StatusCode::PERMISSION_DENIED) << q;
  }
  EXPECT_EQ(Enqueue("bob-token", "orders.eu").error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(Enqueue("", "orders.eu").error_code(), grpc::StatusCode::PERMISSION_DENIED)
      << "no token: User:ANONYMOUS, which no entry allows";
  EXPECT_TRUE(Stats("bob-token", "reports").ok()) << "Read implies Describe";
  EXPECT_EQ(Stats("bob-token", "orders.eu").error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_TRUE(Enqueue("root-token", "ordersx").ok()) << "a superuser passes";
  EXPECT_EQ(Ready("orders"), 0);
  EXPECT_EQ(Ready("ordersx"), 1);
}

TEST_F(AuthQueueTest, ListingShowsOnlyWhatTheCallerMayDescribe) {
  qpb::ListQueuesResponse listed;
  ASSERT_TRUE(queue_->ListQueues(As("alice-token").get(), {}, &listed).ok());
  std::vector<std::string> names;
  for (const auto& q : listed.queues()) names.push_back(q.name());
  EXPECT_EQ(names, (std::vector<std::string>{"orders.eu", "orders.pii"}));
}

TEST_F(AuthQueueTest, ABadTokenIsUnauthenticatedNeverAnonymous) {
  EXPECT_EQ(Enqueue("not-a-token", "orders.eu").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(Enqueue("a.b.c", "orders.eu").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  qpb::EnqueueRequest req;
  req.set_queue("orders.eu");
  req.add_jobs()->set_payload("p");
  qpb::EnqueueResponse resp;
  grpc::ClientContext basic;
  basic.AddMetadata("authorization", "Basic YWxpY2U6cHc=");
  EXPECT_EQ(queue_->Enqueue(&basic, req, &resp).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(Ready("orders.eu"), 0);
}

// Identity is per call: calls on one connection with different tokens get different
// principals (never one stored on the connection).
TEST_F(AuthQueueTest, TwoTokensOnOneConnectionAreTwoPrincipals) {
  EXPECT_TRUE(Enqueue("alice-token", "orders.eu").ok());
  EXPECT_EQ(Enqueue("bob-token", "orders.eu").error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_TRUE(Enqueue("alice-token", "orders.eu").ok());
  EXPECT_EQ(Ready("orders.eu"), 2);
}

TEST_F(AuthQueueTest, AConsumeStreamWithoutReadIsRefusedBeforeAnyJob) {
  ASSERT_TRUE(Enqueue("root-token", "orders.eu").ok());
  auto ctx = As("bob-token");
  auto stream = queue_->Consume(ctx.get());
  qpb::ConsumeRequest start;
  start.mutable_start()->set_queue("orders.eu");
  start.mutable_start()->set_worker_id("w");
  start.mutable_start()->set_credits(10);
  stream->Write(start);
  qpb::ConsumeResponse response;
  EXPECT_FALSE(stream->Read(&response)) << "no message before the refusal";
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::PERMISSION_DENIED);
  qpb::GetQueueStatsResponse stats;
  ASSERT_TRUE(Stats("root-token", "orders.eu", &stats).ok());
  EXPECT_EQ(stats.ready(), 1);
  EXPECT_EQ(stats.leased(), 0);
}

TEST_F(AuthQueueTest, ARedriveNeedsWriteWhereTheLettersGoAndPayloadsNeedViewPayload) {
  qpb::AddDeadLettersRequest add;
  add.set_queue("dlq");
  auto* letter = add.add_dead_letters();
  letter->mutable_job()->set_payload("card 4242");
  letter->set_reason("schema violation");
  qpb::AddDeadLettersResponse added;
  ASSERT_TRUE(queue_->AddDeadLetters(As("root-token").get(), add, &added).ok());

  qpb::RedriveDeadLettersRequest redrive;
  redrive.set_queue("dlq");
  redrive.add_job_ids(added.jobs(0).job_id());
  redrive.set_dry_run(false);
  qpb::RedriveDeadLettersResponse redriven;
  EXPECT_EQ(queue_->RedriveDeadLetters(As("bob-token").get(), redrive, &redriven).error_code(),
            grpc::StatusCode::PERMISSION_DENIED)
      << "Redrive on the source, but no Write on the target";
  qpb::GetQueueStatsResponse stats;
  ASSERT_TRUE(Stats("root-token", "dlq", &stats).ok());
  EXPECT_EQ(stats.dead(), 1);
  EXPECT_EQ(stats.ready(), 0);

  qpb::ListDeadLettersRequest list;
  list.set_queue("dlq");
  qpb::ListDeadLettersResponse as_bob, as_root;
  ASSERT_TRUE(queue_->ListDeadLetters(As("bob-token").get(), list, &as_bob).ok());
  ASSERT_EQ(as_bob.dead_letters_size(), 1);
  EXPECT_EQ(as_bob.dead_letters(0).payload(), "") << "no ViewPayload";
  EXPECT_EQ(as_bob.dead_letters(0).reason(), "schema violation") << "the metadata stays";
  ASSERT_TRUE(queue_->ListDeadLetters(As("root-token").get(), list, &as_root).ok());
  EXPECT_EQ(as_root.dead_letters(0).payload(), "card 4242");
}

// Test 7: over its produce byte rate a principal is refused RESOURCE_EXHAUSTED with a pushback
// (gRFC A6) at least the wait its bucket needs; after that wait it succeeds; another principal
// is unaffected throughout. (The bucket rule itself is unit-tested on a fake clock.)
TEST_F(AuthTest, OverItsByteQuotaAPrincipalIsToldWhenToRetryAndOthersGoOn) {
  ASSERT_NO_FATAL_FAILURE(StartServer("allow * queue any * Create,Write,Read\n", "conduit-queue",
                                      {"--quota-produce-bytes", "1000"}));
  ASSERT_TRUE(CreateQueue("alice-token", "jobs").ok());
  const std::string kilobyte(1000, 'x'), half(500, 'x');
  ASSERT_TRUE(Enqueue("alice-token", "jobs", kilobyte).ok()) << "a second's burst";
  qpb::EnqueueRequest req;
  req.set_queue("jobs");
  req.add_jobs()->set_payload(half);
  qpb::EnqueueResponse resp;
  auto ctx = As("alice-token");
  const grpc::Status over = queue_->Enqueue(ctx.get(), req, &resp);
  const absl::Time refused_at = absl::Now();  // after the server reckoned the wait
  ASSERT_EQ(over.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << over.error_message();
  auto pushback = ctx->GetServerTrailingMetadata().find("grpc-retry-pushback-ms");
  ASSERT_NE(pushback, ctx->GetServerTrailingMetadata().end());
  const int64_t wait_ms = std::stoll(std::string(pushback->second.data(), pushback->second.size()));
  // 500 bytes at 1000/s, less what refilled between the two calls (well under 100 ms here).
  EXPECT_GE(wait_ms, 400);
  EXPECT_LE(wait_ms, 500);
  EXPECT_TRUE(Enqueue("bob-token", "jobs", kilobyte).ok()) << "bob has a bucket of his own";
  absl::SleepFor(refused_at + absl::Milliseconds(wait_ms) - absl::Now());
  EXPECT_TRUE(Enqueue("alice-token", "jobs", half).ok()) << "after the pushback";
  qpb::GetQueueStatsResponse stats;
  ASSERT_TRUE(Stats("root-token", "jobs", &stats).ok());
  EXPECT_EQ(stats.ready(), 3) << "the refused enqueue added nothing";
}

// The token and ACL files are read again when replaced (--auth-reload-seconds 1 here), without
// a restart: a new token and its ACL work, a removed token no longer does.
TEST_F(AuthQueueTest, ReplacedTokenAndAclFilesApplyWithoutARestart) {
  ASSERT_TRUE(Enqueue("alice-token", "orders.eu").ok());
  EXPECT_EQ(Enqueue("carol-token", "reports").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  Write("acls", std::string(kAcls) + "allow User:carol queue literal reports Write\n");
  Write("tokens", security::Sha256Hex("carol-token") + " User:carol\n");
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (!Enqueue("carol-token", "reports").ok() && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(100));
  }
  EXPECT_TRUE(Enqueue("carol-token", "reports").ok()) << "the new token and ACL";
  EXPECT_EQ(Enqueue("alice-token", "orders.eu").error_code(), grpc::StatusCode::UNAUTHENTICATED)
      << "alice's token is gone";
}

// The CLI presents --token (or CONDUIT_TOKEN) on its calls.
TEST_F(AuthQueueTest, TheCliSendsItsToken) {
  const std::string cli = AuthBinary("conduit") + " --addr " + server_->address();
  const std::string quiet = " >/dev/null 2>&1";
  EXPECT_EQ(std::system((cli + " --token alice-token queue stats orders.eu" + quiet).c_str()), 0);
  EXPECT_NE(std::system((cli + " --token bob-token queue stats orders.eu" + quiet).c_str()), 0);
  EXPECT_NE(std::system((cli + " queue stats orders.eu" + quiet).c_str()), 0);
  EXPECT_EQ(
      std::system(("CONDUIT_TOKEN=alice-token " + cli + " queue stats orders.eu" + quiet).c_str()),
      0);
}

}  // namespace
}  // namespace conduit::testing
