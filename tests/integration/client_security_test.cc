// The C++ client library's own security options: a Producer, a GroupConsumer
// and a Worker given a DialSecurity (here a bearer token) reach a server that checks tokens and
// ACLs; the same clients without it are refused. The process default stays unset throughout, so
// only the options can have carried the token.

#include <gtest/gtest.h>

#include <atomic>

#include "absl/synchronization/notification.h"
#include "client/group_consumer.h"
#include "client/producer.h"
#include "client/worker.h"
#include "tests/integration/auth_fixture.h"

namespace conduit::testing {
namespace {

grpc_util::DialSecurity Token(const std::string& token) {
  grpc_util::DialSecurity security;
  security.token = token;
  return security;
}

class ClientSecurityTest : public AuthTest {
 protected:
  void SetUp() override {
    // The coordinator asks the broker (the same process) as User:svc.
    Write("peer-token", "svc-token\n");
    ASSERT_NO_FATAL_FAILURE(StartServer(
        "allow User:svc topic any * Describe\n"
        "allow User:alice topic prefixed app. Create,Write,Read,ViewPayload\n"
        "allow User:alice cluster literal conduit Write\n"  // InitProducer (idempotence)
        "allow User:alice group prefixed app. Read\n"
        "allow User:alice queue prefixed app. Create,Write,Read,ViewPayload\n",
        "conduit-standalone", {"--peer-token-file", dir_.Sub("peer-token")}));
    ASSERT_TRUE(CreateQueue("alice-token", "app.jobs").ok());
    auto producer = Producer(Token("alice-token"));
    ASSERT_TRUE(producer.ok()) << producer.status();
  }
  absl::StatusOr<std::unique_ptr<client::Producer>> Producer(
      std::optional<grpc_util::DialSecurity> security) {
    // Creates the topic first, as alice (the producer needs it to exist).
    log::v1::CreateTopicRequest req;
    req.set_name("app.events");
    req.set_partitions(1);
    log::v1::CreateTopicResponse resp;
    (void)log::v1::LogService::NewStub(channel_)->CreateTopic(As("alice-token").get(), req, &resp);
    client::ProducerOptions options;
    options.address = server_->address();
    options.topic = "app.events";
    options.max_retries = 0;
    options.security = std::move(security);
    return client::Producer::Create(std::move(options));
  }
};

TEST_F(ClientSecurityTest, AProducerAndAConsumerWithATokenAreServedWithoutOneRefused) {
  auto producer = Producer(Token("alice-token"));
  ASSERT_TRUE(producer.ok()) << producer.status();
  auto sent = (*producer)->Send({.key = "k", .value = "v"}).get();
  ASSERT_TRUE(sent.ok()) << sent.status();

  // The process default (no token): the topic is not even visible to an anonymous caller.
  auto anonymous = Producer(std::nullopt);
  EXPECT_EQ(anonymous.status().code(), absl::StatusCode::kNotFound) << anonymous.status();
  auto mallory = Producer(Token("not-a-token"));
  EXPECT_EQ(mallory.status().code(), absl::StatusCode::kUnauthenticated) << mallory.status();

  client::ConsumerOptions options;
  options.address = server_->address();
  options.group = "app.readers";
  options.topics = {"app.events"};
  options.security = Token("alice-token");
  auto consumer = client::GroupConsumer::Create(options);
  ASSERT_TRUE(consumer.ok()) << consumer.status();
  std::vector<client::ConsumedRecord> got;
  const absl::Time deadline = absl::Now() + absl::Seconds(15);
  while (got.empty() && absl::Now() < deadline) {
    auto polled = (*consumer)->Poll(absl::Seconds(1));
    ASSERT_TRUE(polled.ok()) << polled.status();
    got.insert(got.end(), polled->begin(), polled->end());
  }
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].value, std::optional<std::string>("v"));
}

TEST_F(ClientSecurityTest, AWorkerWithATokenTakesJobs) {
  ASSERT_TRUE(Enqueue("alice-token", "app.jobs", "job-1").ok());
  absl::Notification handled;
  std::atomic<int> jobs{0};
  client::WorkerOptions options;
  options.address = server_->address();
  options.queue = "app.jobs";
  options.worker_id = "w";
  options.security = Token("alice-token");
  client::Worker worker(options, [&](const client::Job& job) {
    if (job.payload == "job-1" && jobs.fetch_add(1) == 0) handled.Notify();
    return client::Outcome::Ack();
  });
  worker.Start();
  EXPECT_TRUE(handled.WaitForNotificationWithTimeout(absl::Seconds(15))) << worker.error();
  worker.Stop();
  EXPECT_TRUE(worker.error().ok()) << worker.error();

  // Without the token the same worker stops on its first Lease: refused, not retried.
  options.security = std::nullopt;
  client::Worker anonymous(options, [](const client::Job&) { return client::Outcome::Ack(); });
  anonymous.Start();
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (anonymous.error().ok() && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(20));  // polling the worker's own thread
  }
  EXPECT_EQ(anonymous.error().code(), absl::StatusCode::kPermissionDenied) << anonymous.error();
  anonymous.Stop();
}

}  // namespace
}  // namespace conduit::testing
