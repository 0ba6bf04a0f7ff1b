// The Producer's memory bound (ProducerOptions::max_buffered_bytes and max_block) against a
// fake broker that holds its answers, as a broker slow to make batches durable would
// (fake_brokers.h says why fakes): Send waits for room rather than buffering without bound.
#include <atomic>
#include <functional>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "client/producer.h"
#include "client/tests/fake_brokers.h"

namespace conduit::client {
namespace {

using fakes::FakeBroker;
using fakes::FakeLog;
using fakes::FakeMetadata;
using Result = std::future<absl::StatusOr<RecordPosition>>;

constexpr int kRoom = 10;  // records of kValue the buffer holds

const std::string kValue(100, 'v');

class ProducerBufferTest : public ::testing::Test {
 protected:
  ProducerBufferTest() {
    broker_.AnswerMetadata(FakeMetadata(log_, {{0, broker_.address()}}, 0, 1));
  }

  std::unique_ptr<Producer> Create(absl::Duration max_block) {
    auto producer = Producer::Create(
        {.address = broker_.address(),
         .topic = "buffered",
         .max_batch_records = 1,
         .linger = absl::ZeroDuration(),
         .max_buffered_bytes = kRoom * (kValue.size() + Producer::kRecordOverhead),
         .max_block = max_block});
    EXPECT_TRUE(producer.ok()) << producer.status();
    return producer.ok() ? *std::move(producer) : nullptr;
  }

  // A producer on a broker that holds its answers, and its buffer filled with kRoom records.
  std::unique_ptr<Producer> CreateFilled(absl::Duration max_block, std::vector<Result>* results) {
    broker_.HoldProduce();
    auto producer = Create(max_block);
    if (producer == nullptr) return nullptr;
    for (int i = 0; i < kRoom; ++i) {
      results->push_back(producer->Send(ProducerRecord{.value = kValue}));
    }
    return producer;
  }
  // Sends "last" from another thread: the full buffer holds it back until `answer` has the
  // broker answer what it holds. Returns its result.
  Result SendLastHeldBack(Producer& producer, const std::function<void()>& answer) {
    std::atomic<bool> returned{false};
    Result last;
    std::thread sender([&] {
      last = producer.Send(ProducerRecord{.value = "last"});
      returned = true;
    });
    absl::SleepFor(absl::Milliseconds(300));
    EXPECT_FALSE(returned.load()) << "the buffer holds " << kRoom << " records without results";
    answer();
    sender.join();
    return last;
  }

  FakeLog log_{"buffered", 1};
  FakeBroker broker_{0, &log_};
};

TEST_F(ProducerBufferTest, SendWaitsWhileTheBufferIsFullAndGoesOnOnceResultsFreeIt) {
  std::vector<Result> results;
  auto producer = CreateFilled(absl::Seconds(30), &results);
  ASSERT_NE(producer, nullptr);
  results.push_back(SendLastHeldBack(*producer, [&] { broker_.ReleaseHeld(); }));
  for (size_t i = 0; i < results.size(); ++i) {
    absl::StatusOr<RecordPosition> r = results[i].get();
    ASSERT_TRUE(r.ok()) << "record " << i << ": " << r.status();
    EXPECT_EQ(r->offset, static_cast<int64_t>(i));
  }
  EXPECT_EQ(log_.values(0).size(), static_cast<size_t>(kRoom + 1));
  EXPECT_EQ(log_.values(0).back(), "last");
}

TEST_F(ProducerBufferTest, ARecordThatFindsNoRoomWithinMaxBlockFailsResourceExhausted) {
  std::vector<Result> results;
  auto producer = CreateFilled(absl::Milliseconds(100), &results);
  ASSERT_NE(producer, nullptr);
  absl::StatusOr<RecordPosition> refused = producer->Send(ProducerRecord{.value = "late"}).get();
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted) << refused.status();
  broker_.ReleaseHeld();
  EXPECT_EQ(producer->Flush().code(), absl::StatusCode::kResourceExhausted)
      << "Flush reports the refused record";
  for (Result& r : results) EXPECT_TRUE(r.get().ok());
  EXPECT_EQ(log_.values(0).size(), static_cast<size_t>(kRoom)) << "the refused record never went";
  EXPECT_TRUE(producer->Flush().ok()) << "reported once";
}

// Records that fail free their room as those that succeed do.
TEST_F(ProducerBufferTest, RefusedRecordsFreeTheirRoom) {
  std::vector<Result> results;
  // max_block bounds how long a leak of room would hold the last phase up; generous, as
  // results reach their futures before RunCompletions frees their room.
  auto producer = CreateFilled(absl::Seconds(5), &results);
  ASSERT_NE(producer, nullptr);
  Result last = SendLastHeldBack(*producer, [&] { broker_.RefuseHeld(); });
  // The refused batch fails, and those in flight behind it; what was still queued goes after.
  EXPECT_EQ(results[0].get().status().code(), absl::StatusCode::kInvalidArgument);
  size_t appended = 0;
  for (size_t i = 1; i < results.size(); ++i) appended += results[i].get().ok() ? 1 : 0;
  absl::StatusOr<RecordPosition> after = last.get();
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_LT(appended, results.size() - 1) << "some records failed";
  EXPECT_EQ(log_.values(0).size(), appended + 1);
  EXPECT_EQ(log_.values(0).back(), "last");

  // Everything settled, the whole buffer is free again: kRoom more fit with answers held.
  broker_.HoldProduce();
  std::vector<Result> again;
  for (int i = 0; i < kRoom; ++i) again.push_back(producer->Send(ProducerRecord{.value = kValue}));
  broker_.ReleaseHeld();
  for (Result& r : again) EXPECT_TRUE(r.get().ok()) << "no room left behind by the failures";
}

// A result callback that sends runs while the buffer still counts its own record: waiting for
// room there would wait for itself (until max_block).
TEST_F(ProducerBufferTest, SendFromAResultCallbackDoesNotWaitForRoom) {
  broker_.HoldProduce();
  auto producer = Create(absl::Seconds(30));
  ASSERT_NE(producer, nullptr);
  std::promise<absl::StatusOr<RecordPosition>> follow_up;
  producer->Send(ProducerRecord{.value = kValue}, [&](absl::StatusOr<RecordPosition> r) {
    ASSERT_TRUE(r.ok()) << r.status();
    producer->Send(ProducerRecord{.value = "follow-up"}, [&](absl::StatusOr<RecordPosition> f) {
      follow_up.set_value(std::move(f));
    });
  });
  for (int i = 1; i < kRoom; ++i) producer->Send(ProducerRecord{.value = kValue});
  broker_.ReleaseHeld();
  auto result = follow_up.get_future();
  ASSERT_EQ(result.wait_for(std::chrono::seconds(10)), std::future_status::ready)
      << "the callback's Send waited for room only its own return frees";
  absl::StatusOr<RecordPosition> f = result.get();
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_TRUE(producer->Flush().ok());
  EXPECT_EQ(log_.values(0).size(), static_cast<size_t>(kRoom + 1));
}

TEST_F(ProducerBufferTest, BadBufferOptionsAreRefused) {
  auto zero = Producer::Create(
      {.address = broker_.address(), .topic = "buffered", .max_buffered_bytes = 0});
  EXPECT_EQ(zero.status().code(), absl::StatusCode::kInvalidArgument);
  auto negative = Producer::Create(
      {.address = broker_.address(), .topic = "buffered", .max_block = -absl::Seconds(1)});
  EXPECT_EQ(negative.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace conduit::client
