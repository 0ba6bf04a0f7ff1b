// Dead letters for log consumers, against a real server hosting the broker,
// the coordinator and the queue: a record whose tries run out, or that fails permanently, goes
// to the queue's dead-letter lane with its evidence and the consumer commits past it; a
// transient failure that clears is just retried. Plus the pure rules (backoff, evidence).

#include <map>
#include <random>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "client/dead_letters.h"
#include "client/group_consumer.h"
#include "client/producer.h"
#include "client/tests/client_fixture.h"

namespace conduit::client {
namespace {

namespace qpb = ::conduit::queue::v1;

std::string HeaderOf(const qpb::DeadLetter& d, const std::string& key) {
  for (const auto& h : d.headers()) {
    if (h.key() == key) return h.value();
  }
  return "<absent>";
}

TEST(DeadLetterRules, BackoffIsFullJitterUnderTheCappedExponential) {
  const RetryPolicy p{.max_attempts = 5,
                      .backoff_initial = absl::Milliseconds(100),
                      .backoff_multiplier = 2,
                      .backoff_max = absl::Milliseconds(300)};
  std::mt19937_64 rng(3);
  absl::Duration longest[4] = {};
  for (int i = 0; i < 2000; ++i) {
    for (int failed = 1; failed <= 4; ++failed) {
      const absl::Duration d = RetryBackoff(p, failed, rng);
      EXPECT_GE(d, absl::ZeroDuration());
      longest[failed - 1] = std::max(longest[failed - 1], d);
    }
  }
  EXPECT_LE(longest[0], absl::Milliseconds(100));
  EXPECT_GT(longest[0], absl::Milliseconds(90)) << "the whole range is used";
  EXPECT_LE(longest[1], absl::Milliseconds(200));
  EXPECT_GT(longest[1], absl::Milliseconds(180));
  EXPECT_LE(longest[3], absl::Milliseconds(300)) << "capped at backoff_max";
}

TEST(DeadLetterRules, PermanentErrorsAreToldApart) {
  EXPECT_TRUE(IsPermanent(PermanentError("no currency")));
  EXPECT_FALSE(IsPermanent(absl::FailedPreconditionError("no currency")));
  EXPECT_FALSE(IsPermanent(absl::OkStatus()));
}

class DeadLetterConsumerTest : public ClientTest {};

// Records 0..5 of one partition: r1 fails twice then works, r2 fails permanently (the poison
// record), r4 fails every time. r2 and r4 end in the dead-letter lane with every attempt, the
// others are processed, and the group's committed offset moves past all six.
TEST_F(DeadLetterConsumerTest, ExhaustedAndPoisonRecordsAreDeadLetteredAndCommittedPast) {
  ASSERT_TRUE(log_->CreateTopic("prices", 1).ok());
  CreateQueue("price-dlq", absl::Seconds(30), 3);
  {
    auto producer = Producer::Create({.address = address(), .topic = "prices"});
    ASSERT_TRUE(producer.ok());
    for (int i = 0; i < 6; ++i) {
      ProducerRecord r{.key = "sku-" + std::to_string(i), .value = "r" + std::to_string(i)};
      r.event_id = "evt-" + std::to_string(i);
      r.headers = {{"schema-version", "3"}};
      (*producer)->Send(std::move(r), [](auto) {});
    }
    ASSERT_TRUE((*producer)->Flush().ok());
  }
  ConsumerOptions options{
      .address = address(), .group = "search", .topics = {"prices"}, .client_id = "indexer-1"};
  options.retry = RetryPolicy{.max_attempts = 3,
                              .backoff_initial = absl::Milliseconds(1),
                              .backoff_max = absl::Milliseconds(5)};
  options.dead_letter = DeadLetterTarget{
      .queue_address = address(), .queue = "price-dlq", .consumer_version = "indexer 1.4.2"};
  auto consumer = GroupConsumer::Create(options);
  ASSERT_TRUE(consumer.ok()) << consumer.status();
  std::map<std::string, int> tries;
  std::vector<std::string> done;
  const auto handle = [&](const ConsumedRecord& r) -> absl::Status {
    const int n = ++tries[*r.value];
    if (*r.value == "r1" && n <= 2) return absl::UnavailableError("index busy");
    if (*r.value == "r2") return PermanentError("price without a currency");
    if (*r.value == "r4") return absl::DeadlineExceededError(absl::StrCat("timeout ", n));
    done.push_back(*r.value);
    return absl::OkStatus();
  };
  int processed = 0;
  for (int round = 0; round < 50 && processed < 6; ++round) {
    auto n = (*consumer)->ProcessAndCommit(absl::Milliseconds(200), handle);
    ASSERT_TRUE(n.ok()) << n.status();
    processed += *n;
  }
  EXPECT_EQ(processed, 6);
  EXPECT_THAT(done, ::testing::ElementsAre("r0", "r1", "r3", "r5"));
  EXPECT_EQ(tries["r1"], 3) << "retried until it worked";
  EXPECT_EQ(tries["r2"], 1) << "a permanent error is not retried";
  EXPECT_EQ(tries["r4"], 3) << "max_attempts";

  auto stub =
      qpb::WorkQueue::NewStub(grpc::CreateChannel(address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  qpb::ListDeadLettersRequest list;
  list.set_queue("price-dlq");
  qpb::ListDeadLettersResponse letters;
  ASSERT_TRUE(stub->ListDeadLetters(&ctx, list, &letters).ok());
  ASSERT_EQ(letters.dead_letters_size(), 2);
  std::map<std::string, qpb::DeadLetter> by_payload;
  for (const auto& d : letters.dead_letters()) by_payload[d.payload()] = d;
  const qpb::DeadLetter& poison = by_payload["r2"];
  EXPECT_EQ(poison.source().topic(), "prices");
  EXPECT_EQ(poison.source().offset(), 2);
  EXPECT_EQ(HeaderOf(poison, "conduit-source-key"), "sku-2");
  EXPECT_EQ(HeaderOf(poison, "conduit-event-id"), "evt-2");
  EXPECT_EQ(HeaderOf(poison, "conduit-schema-version"), "3");
  EXPECT_EQ(HeaderOf(poison, "conduit-consumer-version"), "indexer 1.4.2");
  EXPECT_EQ(HeaderOf(poison, "conduit-consumer-group"), "search");
  EXPECT_EQ(HeaderOf(poison, "schema-version"), "3") << "the record's own headers are kept";
  EXPECT_THAT(poison.reason(), ::testing::HasSubstr("price without a currency"));
  ASSERT_EQ(poison.attempts_size(), 1);
  EXPECT_EQ(poison.attempts(0).failure_class(), qpb::FAILURE_CLASS_PERMANENT);
  EXPECT_EQ(poison.attempts(0).worker_id(), "indexer-1");
  const qpb::DeadLetter& exhausted = by_payload["r4"];
  ASSERT_EQ(exhausted.attempts_size(), 3) << "every attempt, with its time and error";
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(exhausted.attempts(i).attempt(), static_cast<uint32_t>(i + 1));
    EXPECT_THAT(exhausted.attempts(i).reason(),
                ::testing::HasSubstr(absl::StrCat("timeout ", i + 1)));
    EXPECT_EQ(exhausted.attempts(i).failure_class(), qpb::FAILURE_CLASS_TRANSIENT);
    EXPECT_TRUE(exhausted.attempts(i).has_ended_at());
  }
  EXPECT_THAT(exhausted.reason(), ::testing::HasSubstr("timeout 3"));

  (*consumer)->Close();
  // The group committed past every record: a new member of it reads nothing.
  auto next =
      GroupConsumer::Create({.address = address(), .group = "search", .topics = {"prices"}});
  ASSERT_TRUE(next.ok());
  auto rest = (*next)->Poll(absl::Milliseconds(300));
  ASSERT_TRUE(rest.ok());
  EXPECT_TRUE(rest->empty()) << "committed past the dead-lettered records";
}

// When the dead-letter lane cannot take the record (its queue is missing), nothing is committed
// past it: ProcessAndCommit answers the error and the record comes again.
TEST_F(DeadLetterConsumerTest, ARecordIsNotSkippedWhenItsDeadLetterCannotBeAdded) {
  ASSERT_TRUE(log_->CreateTopic("prices", 1).ok());
  {
    auto producer = Producer::Create({.address = address(), .topic = "prices"});
    ASSERT_TRUE(producer.ok());
    (*producer)->Send(ProducerRecord{.value = "poison"}, [](auto) {});
    ASSERT_TRUE((*producer)->Flush().ok());
  }
  ConsumerOptions options{.address = address(), .group = "g", .topics = {"prices"}};
  options.retry.max_attempts = 1;
  options.dead_letter = DeadLetterTarget{.queue_address = address(), .queue = "no-such-queue"};
  auto consumer = GroupConsumer::Create(options);
  ASSERT_TRUE(consumer.ok()) << consumer.status();
  const auto fail = [](const ConsumedRecord&) { return PermanentError("bad"); };
  absl::StatusOr<int> n = 0;
  for (int round = 0; round < 20 && n.ok() && *n == 0; ++round) {
    n = (*consumer)->ProcessAndCommit(absl::Milliseconds(200), fail);
  }
  EXPECT_EQ(n.status().code(), absl::StatusCode::kNotFound) << n.status();
  int seen = 0;
  n = (*consumer)->ProcessAndCommit(absl::Milliseconds(500), [&](const ConsumedRecord& r) {
    ++seen;
    return absl::OkStatus();
  });
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(seen, 1) << "the record comes again";
}

}  // namespace
}  // namespace conduit::client
