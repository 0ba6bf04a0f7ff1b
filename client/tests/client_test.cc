// The Producer and the GroupConsumer against a real server on 127.0.0.1:0 hosting the broker,
// the coordinator and the queue (as conduit-standalone does).
#include <atomic>
#include <map>
#include <set>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "client/group_consumer.h"
#include "client/producer.h"
#include "client/tests/client_fixture.h"
#include "common/hash/murmur2.h"

namespace conduit::client {
namespace {

namespace logpb = ::conduit::log::v1;

TEST_F(ClientTest, ProducerBatchesPlacesKeysLikeTheBrokerAndKeepsOrder) {
  ASSERT_TRUE(log_->CreateTopic("orders", 4).ok());
  auto producer = Producer::Create({.address = address(), .topic = "orders"});
  ASSERT_TRUE(producer.ok()) << producer.status();
  std::vector<std::future<absl::StatusOr<RecordPosition>>> results;
  for (int i = 0; i < 2000; ++i) {
    results.push_back((*producer)->Send(
        ProducerRecord{.key = "customer-" + std::to_string(i % 50), .value = std::to_string(i)}));
  }
  ASSERT_TRUE((*producer)->Flush().ok());
  std::map<int32_t, int64_t> last_offset;
  for (int i = 0; i < 2000; ++i) {
    absl::StatusOr<RecordPosition> p = results[i].get();
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_EQ(p->partition, hash::PartitionForKey("customer-" + std::to_string(i % 50), 4));
    auto [it, fresh] = last_offset.emplace(p->partition, p->offset);
    if (!fresh) {
      EXPECT_GT(p->offset, it->second) << "send order is kept within a partition";
      it->second = p->offset;
    }
  }
  EXPECT_LT(ProduceRequests(), 200) << "records were batched";
  // Keyless records fill one partition per batch and rotate.
  std::set<int32_t> used;
  for (int i = 0; i < 8; ++i) {
    auto p = (*producer)->Send(ProducerRecord{.value = "x"}).get();
    ASSERT_TRUE(p.ok());
    used.insert(p->partition);
    ASSERT_TRUE((*producer)->Flush().ok());
  }
  EXPECT_EQ(used.size(), 4u);
  auto bad = (*producer)->Send(ProducerRecord{.value = "x", .partition = 9}).get();
  EXPECT_TRUE(absl::IsInvalidArgument(bad.status()));
}

// A batch that fills up goes at once, and so does whatever Flush asks for, however long the
// linger; a lone record waits out its linger (that is how records get batched).
TEST_F(ClientTest, ProducerSendsFullBatchesAtOnceAndLoneRecordsAfterTheirLinger) {
  ASSERT_TRUE(log_->CreateTopic("linger", 1).ok());
  auto patient = Producer::Create({.address = address(),
                                   .topic = "linger",
                                   .max_batch_records = 10,
                                   .linger = absl::Seconds(60)});
  ASSERT_TRUE(patient.ok()) << patient.status();
  absl::SleepFor(absl::Milliseconds(100));  // records come once the producer has settled
  std::vector<std::future<absl::StatusOr<RecordPosition>>> full;
  for (int i = 0; i < 10; ++i) full.push_back((*patient)->Send(ProducerRecord{.value = "full"}));
  for (auto& f : full) {
    ASSERT_EQ(f.wait_for(std::chrono::seconds(10)), std::future_status::ready)
        << "a full batch waited for its linger";
    EXPECT_TRUE(f.get().ok());
  }
  auto flushed = (*patient)->Send(ProducerRecord{.value = "flushed"});
  const absl::Time flush_start = absl::Now();
  ASSERT_TRUE((*patient)->Flush().ok());
  EXPECT_LT(absl::Now() - flush_start, absl::Seconds(10)) << "Flush waited for the linger";
  EXPECT_TRUE(flushed.get().ok());

  const absl::Duration linger = absl::Milliseconds(300);
  auto lingering = Producer::Create({.address = address(), .topic = "linger", .linger = linger});
  ASSERT_TRUE(lingering.ok()) << lingering.status();
  const absl::Time sent = absl::Now();
  auto lone = (*lingering)->Send(ProducerRecord{.value = "lone"});
  ASSERT_EQ(lone.wait_for(std::chrono::seconds(10)), std::future_status::ready)
      << "a lone record was never sent";
  EXPECT_GE(absl::Now() - sent, linger) << "a lone record went before its linger was over";
  absl::StatusOr<RecordPosition> p = lone.get();
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->offset, 11);
}

// Pipelined batches (one record each, five in flight): one is refused outright. The batches
// behind it that were already in flight fail with it rather than leave a gap; every record that
// succeeded is in the log once, in send order; and the producer carries on afterwards.
TEST_F(ClientTest, PipelinedProducerKeepsOrderWhenABatchIsRefused) {
  ASSERT_TRUE(log_->CreateTopic("pipe", 1).ok());
  auto producer = Producer::Create({.address = address(), .topic = "pipe",
                                    .max_batch_records = 1, .linger = absl::ZeroDuration(),
                                    .max_in_flight = 5});
  ASSERT_TRUE(producer.ok()) << producer.status();
  constexpr int kRecords = 41, kTooBig = 20;
  std::vector<std::future<absl::StatusOr<RecordPosition>>> results;
  for (int i = 0; i < kRecords; ++i) {
    const std::string value = i == kTooBig ? std::string(2 << 20, 'x') : std::to_string(i);
    results.push_back((*producer)->Send(ProducerRecord{.value = value}));
  }
  EXPECT_FALSE((*producer)->Flush().ok());
  std::vector<std::string> appended;  // in send order
  int64_t expected_offset = 0;
  for (int i = 0; i < kRecords; ++i) {
    absl::StatusOr<RecordPosition> p = results[i].get();
    if (i == kTooBig) {
      EXPECT_TRUE(absl::IsInvalidArgument(p.status())) << p.status();
    } else if (!p.ok()) {
      EXPECT_GT(i, kTooBig) << "only batches behind the refused one fail with it";
      EXPECT_TRUE(absl::IsAborted(p.status())) << p.status();
      EXPECT_THAT(std::string(p.status().message()), ::testing::HasSubstr("was refused"));
    } else {
      EXPECT_EQ(p->offset, expected_offset++) << "record " << i << ": no gap, no reordering";
      appended.push_back(std::to_string(i));
    }
  }
  std::printf("records failed with the refused batch: %d\n",
              kRecords - 1 - static_cast<int>(appended.size()));
  auto after = (*producer)->Send(ProducerRecord{.value = "after"}).get();
  ASSERT_TRUE(after.ok()) << after.status() << ": the next batch takes the refused sequences";
  EXPECT_EQ(after->offset, expected_offset);
  appended.push_back("after");
  logpb::FetchResponse fetched;
  ASSERT_TRUE(log_->Fetch("pipe", 0, 0, &fetched).ok());
  std::vector<std::string> in_log;
  for (const auto& r : fetched.records()) in_log.push_back(r.value());
  EXPECT_EQ(in_log, appended);
}

// A producer fenced by a newer instance of the same name stops at its next batch: that batch
// and every record queued behind it fail at once with the fencing error (no retries), and a
// send after that fails too; the new instance carries on.
TEST_F(ClientTest, FencedProducerFailsItsQueuedRecordsAtOnce) {
  ASSERT_TRUE(log_->CreateTopic("fenced", 1).ok());
  ProducerOptions options{.address = address(), .topic = "fenced", .max_batch_records = 10,
                          .linger = absl::Milliseconds(50), .producer_name = "billing"};
  auto old_producer = Producer::Create(options);
  ASSERT_TRUE(old_producer.ok()) << old_producer.status();
  auto new_producer = Producer::Create(options);  // the next epoch: fences the old one
  ASSERT_TRUE(new_producer.ok()) << new_producer.status();
  std::vector<std::future<absl::StatusOr<RecordPosition>>> results;
  for (int i = 0; i < 500; ++i) {
    results.push_back((*old_producer)->Send(ProducerRecord{.value = std::to_string(i)}));
  }
  const absl::Time started = absl::Now();
  EXPECT_FALSE((*old_producer)->Flush().ok());
  EXPECT_LT(absl::Now() - started, absl::Seconds(5)) << "failed records were retried";
  for (auto& r : results) {
    absl::StatusOr<RecordPosition> p = r.get();
    EXPECT_TRUE(absl::IsFailedPrecondition(p.status())) << p.status();
  }
  EXPECT_FALSE((*old_producer)->Send(ProducerRecord{.value = "late"}).get().ok());
  auto fresh = (*new_producer)->Send(ProducerRecord{.value = "new"}).get();
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  EXPECT_EQ(fresh->offset, 0);
}

// Three consumers share six partitions; one is killed (stops heartbeating without leaving).
// Its partitions move to the others, and after draining no record is missing; a record is
// processed twice only if the killed consumer processed it without committing.
TEST_F(ClientTest, ConsumerGroupSurvivesAKilledMemberWithoutLosingRecords) {
  ASSERT_TRUE(log_->CreateTopic("events", 6).ok());
  constexpr int kRecords = 600;
  {
    auto producer = Producer::Create({.address = address(), .topic = "events"});
    ASSERT_TRUE(producer.ok());
    for (int i = 0; i < kRecords; ++i) {
      (*producer)->Send(ProducerRecord{.value = "e", .partition = i % 6}, [](auto) {});
    }
    ASSERT_TRUE((*producer)->Flush().ok());
  }
  absl::Mutex mu;
  std::map<std::pair<int32_t, int64_t>, std::vector<int>> seen;  // record → consumers
  std::atomic<bool> stop{false};
  std::atomic<int> processed_by_victim{0};
  std::vector<std::unique_ptr<GroupConsumer>> consumers;
  for (int i = 0; i < 3; ++i) {
    auto c = GroupConsumer::Create({.address = address(),
                                    .group = "workers",
                                    .topics = {"events"},
                                    .client_id = "c" + std::to_string(i),
                                    .session_timeout = absl::Milliseconds(800),
                                    .max_poll_records = 10});
    ASSERT_TRUE(c.ok()) << c.status();
    consumers.push_back(*std::move(c));
  }
  std::vector<std::thread> threads;
  for (int i = 0; i < 3; ++i) {
    threads.emplace_back([&, i] {
      GroupConsumer& c = *consumers[i];
      while (!stop.load()) {
        if (i == 2 && processed_by_victim.load() >= 60) {
          // Killed between processing a batch and committing it: no leave, no commit.
          auto last = c.Poll(absl::Milliseconds(200));
          if (last.ok()) {
            absl::MutexLock lock(&mu);
            for (const ConsumedRecord& r : *last) seen[{r.partition, r.offset}].push_back(i);
          }
          c.Abandon();
          return;
        }
        (void)c.ProcessAndCommit(absl::Milliseconds(50), [&](const ConsumedRecord& r) {
          absl::MutexLock lock(&mu);
          seen[{r.partition, r.offset}].push_back(i);
          if (i == 2) processed_by_victim.fetch_add(1);
          return absl::OkStatus();
        });
        absl::SleepFor(absl::Milliseconds(5));  // leave room for the others
      }
    });
  }
  const absl::Time give_up = absl::Now() + absl::Seconds(30);
  while (absl::Now() < give_up) {
    {
      absl::MutexLock lock(&mu);
      if (seen.size() == kRecords) break;
    }
    absl::SleepFor(absl::Milliseconds(50));
  }
  stop.store(true);
  for (auto& t : threads) t.join();
  absl::MutexLock lock(&mu);
  ASSERT_EQ(seen.size(), static_cast<size_t>(kRecords)) << "a record is missing";
  int duplicates = 0;
  for (const auto& [record, by] : seen) {
    if (by.size() == 1) continue;
    ++duplicates;
    EXPECT_EQ(by.front(), 2) << "only the killed consumer's uncommitted work is redone";
  }
  EXPECT_GE(processed_by_victim.load(), 60);
  for (int i = 0; i < 2; ++i) EXPECT_FALSE(consumers[i]->assignment().empty());
  std::printf("records %d, processed twice %d (the killed consumer's uncommitted batch)\n",
              kRecords, duplicates);
  consumers.clear();
}

}  // namespace
}  // namespace conduit::client
