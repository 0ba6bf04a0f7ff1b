// Broker::ProduceParts: several produce requests appended as one (ProduceStream's plain
// messages). Cluster-mode cases are in broker_replication_test.cc.

#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "services/log_broker/domain/limits.h"
#include "services/log_broker/tests/broker_fixture.h"

namespace conduit::log_broker {
namespace {

using ::testing::ElementsAre;
using namespace ::conduit::log_broker::testing;  // NOLINT: test fixture helpers

// Broker::ProduceParts, waiting for every part's answer.
std::vector<absl::StatusOr<ProduceResult>> ProducePartsNow(
    Broker& broker, const std::string& topic, std::vector<std::vector<ProduceRecordArgs>> parts) {
  std::vector<absl::StatusOr<ProduceResult>> answers(parts.size(),
                                                     absl::InternalError("no answer"));
  absl::Mutex mu;
  size_t answered = 0;
  std::vector<Broker::ProducePart> args;
  for (size_t i = 0; i < parts.size(); ++i) {
    args.push_back({std::move(parts[i]), [&, i](absl::StatusOr<ProduceResult> r) {
                      absl::MutexLock lock(&mu);
                      EXPECT_EQ(answers[i].status().message(), "no answer") << "answered twice";
                      answers[i] = std::move(r);
                      ++answered;
                    }});
  }
  broker.ProduceParts(topic, std::move(args));
  auto all_answered = [&] { return answered == answers.size(); };
  absl::MutexLock lock(&mu);
  mu.Await(absl::Condition(&all_answered));
  return answers;
}

TEST_F(BrokerTest, ProducePartsAppendsThePartsAsOneRequestAndAnswersEachWithItsPositions) {
  ASSERT_TRUE(broker_->CreateTopic("t", 3, {}).ok());
  ASSERT_TRUE(Produce("t", {To(0, "warm")}).ok());
  const int before = observer_.written_requests.load();
  auto answers = ProducePartsNow(
      *broker_, "t", {{To(0, "a"), To(1, "b")}, {Keyless("d")}, {To(0, "c")}, {Keyless("e")}});
  ASSERT_EQ(answers.size(), 4u);
  for (const auto& a : answers) ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(observer_.written_requests.load() - before, 1) << "the parts went as one request";
  EXPECT_THAT(answers[0]->positions, ElementsAre(RecordPosition{0, 1}, RecordPosition{1, 0}));
  ASSERT_EQ(answers[1]->positions.size(), 1u);
  ASSERT_EQ(answers[3]->positions.size(), 1u);
  EXPECT_EQ(answers[1]->positions[0].partition, answers[3]->positions[0].partition)
      << "keyless records of the parts share one sticky partition";
  const int32_t sticky = answers[1]->positions[0].partition;
  EXPECT_THAT(answers[2]->positions, ElementsAre(RecordPosition{0, sticky == 0 ? 3 : 2}));
  EXPECT_EQ(answers[3]->positions[0].offset,
            answers[1]->positions[0].offset + (sticky == 0 ? 2 : 1));
  EXPECT_EQ(answers[0]->append_time, answers[3]->append_time);
  auto fetched = Fetch({"t", 0, 0});
  ASSERT_TRUE(fetched.ok());
  ASSERT_GE(fetched->records.size(), 3u);
  EXPECT_EQ(*fetched->records[1].data.value, "a");
}

TEST_F(BrokerTest, AProducePartWithABadRecordIsRefusedAloneAndTheOtherPartsAreAppended) {
  ASSERT_TRUE(broker_->CreateTopic("t", 2, MaxRecordBytes(16)).ok());
  auto answers = ProducePartsNow(*broker_, "t",
                                 {{To(0, "one")},
                                  {To(0, "ok"), To(5, "no such partition")},
                                  {},
                                  {Keyless(std::string(17, 'x'))},
                                  {To(0, "two")}});
  ASSERT_TRUE(answers[0].ok()) << answers[0].status();
  EXPECT_EQ(answers[1].status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(answers[2].status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(answers[3].status().code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(answers[4].ok()) << answers[4].status();
  EXPECT_THAT(answers[0]->positions, ElementsAre(RecordPosition{0, 0}));
  EXPECT_THAT(answers[4]->positions, ElementsAre(RecordPosition{0, 1}))
      << "the refused parts consumed no offsets";
  EXPECT_EQ(store_.record_count(), 2u) << "nothing of a refused part is appended";
}

TEST_F(BrokerTest, ARefusalOfAllTheProducePartsAnswersEachPart) {
  ASSERT_TRUE(broker_->CreateTopic("t", 1, {}).ok());
  for (const auto& a : ProducePartsNow(*broker_, "nope", {{To(0, "a")}, {To(0, "b")}})) {
    EXPECT_EQ(a.status().code(), absl::StatusCode::kNotFound) << a.status();
  }
  // Refused by the write (the disk filled after the request was queued).
  store_.FailWrites(absl::ResourceExhaustedError("disk full: test"));
  for (const auto& a : ProducePartsNow(*broker_, "t", {{To(0, "a")}, {To(0, "b")}})) {
    EXPECT_EQ(a.status().code(), absl::StatusCode::kResourceExhausted) << a.status();
  }
  // Refused at submission (a failed write stopped the pipeline).
  store_.FailWrites(absl::UnavailableError("disk on fire"));
  EXPECT_EQ(Produce("t", {To(0, "x")}).status().code(), absl::StatusCode::kUnavailable);
  for (const auto& a : ProducePartsNow(*broker_, "t", {{To(0, "a")}, {To(0, "b")}})) {
    EXPECT_EQ(a.status().code(), absl::StatusCode::kUnavailable) << a.status();
  }
  EXPECT_EQ(store_.record_count(), 0u);
}

TEST_F(BrokerTest, ProducePartsBeyondOneRequestsLimitsGoInFurtherRequestsAllInOrder) {
  ASSERT_TRUE(broker_->CreateTopic("t", 1, {}).ok());
  const size_t per_part = kMaxRecordsPerProduce / 2 + 1;
  std::vector<std::vector<ProduceRecordArgs>> parts(3);
  for (auto& part : parts) {
    for (size_t i = 0; i < per_part; ++i) part.push_back(To(0, "v"));
  }
  int before = observer_.written_requests.load();
  auto answers = ProducePartsNow(*broker_, "t", std::move(parts));
  EXPECT_EQ(observer_.written_requests.load() - before, 3) << "no two parts fit in one request";
  int64_t next = 0;
  for (const auto& a : answers) {
    ASSERT_TRUE(a.ok()) << a.status();
    ASSERT_EQ(a->positions.size(), per_part);
    for (const RecordPosition& p : a->positions) EXPECT_EQ(p.offset, next++);
  }

  // By bytes: two parts of 14 MiB fit in one request (32 MiB), a third does not.
  ASSERT_TRUE(broker_->CreateTopic("big", 1, MaxRecordBytes(8 << 20)).ok());
  std::vector<std::vector<ProduceRecordArgs>> big(3);
  for (auto& part : big) {
    for (int i = 0; i < 2; ++i) part.push_back(To(0, std::string(7 << 20, 'x')));
  }
  before = observer_.written_requests.load();
  for (const auto& a : ProducePartsNow(*broker_, "big", std::move(big))) {
    EXPECT_TRUE(a.ok()) << a.status();
  }
  EXPECT_EQ(observer_.written_requests.load() - before, 2);
}

}  // namespace
}  // namespace conduit::log_broker
