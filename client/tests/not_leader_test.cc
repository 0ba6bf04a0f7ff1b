// The client's routing rule against fake brokers (fake_brokers.h says why fakes): a not-leader
// answer is followed to the leader it names, and a leader that goes down is left for the one
// fresh metadata names, without losing, repeating or reordering a record.
#include <future>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "client/cluster_router.h"
#include "client/group_consumer.h"
#include "client/producer.h"
#include "client/tests/client_fixture.h"
#include "client/tests/fake_brokers.h"

namespace conduit::client {
namespace {

namespace lpb = ::conduit::log::v1;
using fakes::FakeBroker;
using fakes::FakeLog;
using fakes::FakeMetadata;
using Results = std::vector<std::future<absl::StatusOr<RecordPosition>>>;

constexpr int32_t kPartitions = 2;

std::string Value(int i) { return "r" + std::to_string(i); }

// Sends records first..first+n-1, record i to partition i % kPartitions.
void SendNumbered(Producer& producer, int first, int n, Results* results) {
  for (int i = first; i < first + n; ++i) {
    results->push_back(
        producer.Send(ProducerRecord{.value = Value(i), .partition = i % kPartitions}));
  }
}

std::vector<absl::StatusOr<RecordPosition>> Collect(Results& results) {
  std::vector<absl::StatusOr<RecordPosition>> out;
  for (auto& r : results) out.push_back(r.get());
  return out;
}

// Every record (numbered from 0) succeeded at the next offset of its partition, and each
// partition's log holds exactly those records in send order.
void ExpectInLogOnceInOrder(const std::vector<absl::StatusOr<RecordPosition>>& positions,
                            FakeLog& log) {
  std::map<int32_t, std::vector<std::string>> sent;
  for (size_t i = 0; i < positions.size(); ++i) {
    const absl::StatusOr<RecordPosition>& p = positions[i];
    ASSERT_TRUE(p.ok()) << "record " << i << ": " << p.status();
    const int32_t partition = static_cast<int32_t>(i % kPartitions);
    EXPECT_EQ(p->partition, partition);
    EXPECT_EQ(p->offset, static_cast<int64_t>(sent[partition].size())) << "record " << i;
    sent[partition].push_back(Value(static_cast<int>(i)));
  }
  for (int32_t p = 0; p < kPartitions; ++p) EXPECT_EQ(log.values(p), sent[p]) << "partition " << p;
}

// Per partition, the batches appended (not the recognised resends), in arrival order, carry
// contiguous sequences from 0: the producer's sequences went on across the move.
void ExpectContiguousSequences(FakeLog& log) {
  std::map<int32_t, int32_t> next;
  for (const FakeLog::Batch& b : log.batches()) {
    if (b.duplicate) continue;
    EXPECT_EQ(b.base_sequence, next[b.partition]) << "partition " << b.partition;
    next[b.partition] = b.base_sequence + b.count;
  }
}

// A, which the bootstrap names, answers GetMetadata naming itself leader (stale) and refuses
// Produce naming B at a newer epoch; B serves. Everything lands on B, once and in order, and
// the producer asks A nothing more once it has been redirected.
TEST(NotLeaderTest, ProducerFollowsTheNamedLeaderInOrderExactlyOnceAndLeavesTheOldOne) {
  FakeLog log("moved", kPartitions);
  FakeBroker a(0, &log), b(1, &log);
  const std::map<int32_t, std::string> brokers = {{0, a.address()}, {1, b.address()}};
  a.AnswerMetadata(FakeMetadata(log, brokers, /*leader=*/0, /*epoch=*/1));
  a.RefuseNamingLeader(1, b.address(), 2);
  b.AnswerMetadata(FakeMetadata(log, brokers, 1, 2));
  auto producer = Producer::Create({.bootstrap = {a.address()},
                                    .topic = "moved",
                                    .max_batch_records = 5,
                                    .linger = absl::ZeroDuration(),
                                    .max_in_flight = 5});
  ASSERT_TRUE(producer.ok()) << producer.status();
  Results results;
  SendNumbered(**producer, 0, 100, &results);
  ASSERT_TRUE((*producer)->Flush().ok());
  const int refused = a.produce_calls();
  EXPECT_GE(refused, 1);
  SendNumbered(**producer, 100, 100, &results);
  ASSERT_TRUE((*producer)->Flush().ok());
  EXPECT_EQ(a.produce_calls(), refused) << "the producer went on sending to the old leader";
  EXPECT_EQ(a.metadata_calls(), 1) << "a newer leader epoch is followed without a refresh";
  ExpectInLogOnceInOrder(Collect(results), log);
  for (const FakeLog::Batch& batch : log.batches()) {
    EXPECT_EQ(batch.broker, 1);
    EXPECT_FALSE(batch.duplicate);
  }
  ExpectContiguousSequences(log);
}

// A leads and serves; then it appends a batch but dies before acknowledging it (and stops
// listening), while the cluster moves its partitions to B. The producer refreshes its metadata
// from B, resends the unacknowledged batch there (recognised: not appended twice), and goes on.
TEST(NotLeaderTest, ProducerRefreshesFromAnotherBrokerWhenTheLeaderGoesDown) {
  FakeLog log("failover", kPartitions);
  FakeBroker a(0, &log), b(1, &log);
  const std::map<int32_t, std::string> brokers = {{0, a.address()}, {1, b.address()}};
  a.AnswerMetadata(FakeMetadata(log, brokers, 0, 1));
  b.AnswerMetadata(FakeMetadata(log, brokers, 0, 1));
  b.RefuseNamingLeader(0, a.address(), 1);
  auto producer = Producer::Create({.bootstrap = {a.address()},
                                    .topic = "failover",
                                    .max_batch_records = 5,
                                    .linger = absl::ZeroDuration(),
                                    .max_in_flight = 5});
  ASSERT_TRUE(producer.ok()) << producer.status();
  Results results;
  SendNumbered(**producer, 0, 40, &results);
  ASSERT_TRUE((*producer)->Flush().ok());
  b.AnswerMetadata(FakeMetadata(log, brokers, 1, 2));
  b.Serve();
  a.LoseNextAckThenFail();
  SendNumbered(**producer, 40, 1, &results);  // the batch whose acknowledgement is lost
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  while (a.lost_acks() == 0 && absl::Now() < give_up) absl::SleepFor(absl::Milliseconds(1));
  ASSERT_EQ(a.lost_acks(), 1);
  a.Shutdown();
  SendNumbered(**producer, 41, 39, &results);
  ASSERT_TRUE((*producer)->Flush().ok());
  EXPECT_GE(b.metadata_calls(), 1) << "the new leader was learned from B";
  int resent_duplicates = 0;
  for (const FakeLog::Batch& batch : log.batches()) {
    if (batch.duplicate) {
      ++resent_duplicates;
      EXPECT_EQ(batch.broker, 1);
      EXPECT_EQ(batch.base_sequence, 20) << "the 21st record of partition 0 is the lost batch";
    }
  }
  EXPECT_EQ(resent_duplicates, 1);
  const std::vector<absl::StatusOr<RecordPosition>> positions = Collect(results);
  ASSERT_TRUE(positions[40].ok()) << positions[40].status();
  EXPECT_TRUE(positions[40]->duplicate) << "B recognised the resent batch";
  ExpectInLogOnceInOrder(positions, log);
  ExpectContiguousSequences(log);
}

// The router alone: a hint is taken in only at a newer epoch, and stale metadata (A's) does not
// move a partition back; a hint that is not news is retried after a refresh, then returned.
TEST(NotLeaderTest, RouterKeepsTheNewestLeaderEpoch) {
  FakeLog log("epochs", 1);
  FakeBroker a(0, &log), b(1, &log);
  const std::map<int32_t, std::string> brokers = {{0, a.address()}, {1, b.address()}};
  a.AnswerMetadata(FakeMetadata(log, brokers, 0, 1));
  a.RefuseNamingLeader(1, b.address(), 2);
  b.AnswerMetadata(FakeMetadata(log, brokers, 1, 2));
  auto router = ClusterRouter::Create({.bootstrap = {a.address()}});
  ASSERT_TRUE(router.ok()) << router.status();
  auto fetch = [](ClusterRouter::Stub& stub, grpc::ClientContext& ctx) {
    lpb::FetchRequest req;
    req.set_topic("epochs");
    lpb::FetchResponse resp;
    return stub.Fetch(&ctx, req, &resp);
  };
  ASSERT_EQ((*router)->Leader("epochs", 0)->leader, 0);
  ASSERT_TRUE((*router)->CallLeader("epochs", 0, fetch).ok());
  EXPECT_EQ((*router)->Leader("epochs", 0)->leader, 1);
  ASSERT_TRUE((*router)->Refresh().ok());
  EXPECT_EQ((*router)->answered_address(), a.address());
  EXPECT_EQ((*router)->Leader("epochs", 0)->leader, 1) << "A's stale epoch 1 moved it back";
  b.RefuseNamingLeader(0, a.address(), 1);  // B now lags: names the old leader
  const int before = b.fetch_calls();
  EXPECT_EQ((*router)->CallLeader("epochs", 0, fetch).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(b.fetch_calls() - before, 5) << "max_attempts calls, each to the newest leader";
  EXPECT_EQ((*router)->Leader("epochs", 0)->epoch, 2);
}

// The GroupConsumer (with the real coordinator of the fixture) finds its start offsets and
// records on B through A's refusals, and stops asking A.
TEST_F(ClientTest, GroupConsumerReadsEachPartitionFromTheLeaderANotLeaderAnswerNames) {
  ASSERT_TRUE(log_->CreateTopic("moved", kPartitions).ok());  // what the coordinator assigns
  FakeLog log("moved", kPartitions);
  for (int i = 0; i < 30; ++i) log.Add(i % kPartitions, Value(i));
  FakeBroker a(0, &log), b(1, &log);
  const std::map<int32_t, std::string> brokers = {{0, a.address()}, {1, b.address()}};
  a.AnswerMetadata(FakeMetadata(log, brokers, 0, 1));
  a.RefuseNamingLeader(1, b.address(), 2);
  b.AnswerMetadata(FakeMetadata(log, brokers, 1, 2));
  auto consumer = GroupConsumer::Create({.bootstrap = {a.address()},
                                         .coordinator_address = address(),
                                         .group = "routed",
                                         .topics = {"moved"}});
  ASSERT_TRUE(consumer.ok()) << consumer.status();
  std::map<int32_t, std::vector<std::string>> got;
  int total = 0;
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  while (total < 30 && absl::Now() < give_up) {
    auto records = (*consumer)->Poll(absl::Milliseconds(200));
    ASSERT_TRUE(records.ok()) << records.status();
    for (const ConsumedRecord& r : *records) {
      EXPECT_EQ(r.offset, static_cast<int64_t>(got[r.partition].size()));
      got[r.partition].push_back(r.value.value_or(""));
      ++total;
    }
  }
  for (int32_t p = 0; p < kPartitions; ++p) EXPECT_EQ(got[p], log.values(p)) << "partition " << p;
  const int refused = a.fetch_calls();
  EXPECT_GE(refused, 1);
  auto idle = (*consumer)->Poll(absl::Milliseconds(300));
  ASSERT_TRUE(idle.ok()) << idle.status();
  EXPECT_TRUE(idle->empty());
  EXPECT_EQ(a.fetch_calls(), refused) << "the consumer went on asking the old leader";
}

}  // namespace
}  // namespace conduit::client
