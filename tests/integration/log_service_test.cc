// The log broker over real gRPC on 127.0.0.1, as a client sees it.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <prometheus/text_serializer.h>

#include <atomic>
#include <map>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "tests/integration/log_server_fixture.h"

namespace conduit::testing {
namespace {

using ::testing::HasSubstr;

TEST_F(LogServerTest, RecordsComeBackInPartitionOrderWithEverything) {
  ASSERT_TRUE(client().CreateTopic("orders", 3).ok());
  std::map<std::string, std::vector<std::string>> sent_by_key;
  for (int request = 0; request < 30; ++request) {
    logpb::ProduceRequest produce;
    produce.set_topic("orders");
    for (int i = 0; i < 10; ++i) {
      std::string key = absl::StrCat("customer-", i);
      std::string value = absl::StrCat("r", request, "-", i);
      auto* record = AddRecord(&produce, value, &key);
      auto* header = record->add_headers();
      header->set_key("trace");
      header->set_value(value);
      record->mutable_event_time()->set_seconds(1'700'000'000 + request);
      sent_by_key[key].push_back(value);
    }
    logpb::ProduceResponse response;
    ASSERT_TRUE(client().Produce(produce, &response).ok());
    ASSERT_EQ(response.positions_size(), 10);
  }
  std::map<std::string, std::vector<std::string>> read_by_key;
  int64_t total = 0;
  for (int p = 0; p < 3; ++p) {
    std::vector<logpb::Record> records;
    ASSERT_TRUE(client().FetchAll("orders", p, &records).ok());
    for (size_t i = 0; i < records.size(); ++i) {
      const auto& r = records[i];
      EXPECT_EQ(r.offset(), static_cast<int64_t>(i)) << "dense offsets in partition " << p;
      EXPECT_EQ(r.partition(), p);
      ASSERT_EQ(r.headers_size(), 1);
      EXPECT_EQ(r.headers(0).value(), r.value());
      EXPECT_GE(r.event_time().seconds(), 1'700'000'000);
      EXPECT_GT(r.append_time().seconds(), 0);
      if (i > 0) {
        EXPECT_GE(absl::Seconds(r.append_time().seconds()) + absl::Nanoseconds(r.append_time().nanos()),
                  absl::Seconds(records[i - 1].append_time().seconds()) +
                      absl::Nanoseconds(records[i - 1].append_time().nanos()));
      }
      read_by_key[r.key()].push_back(r.value());
    }
    total += static_cast<int64_t>(records.size());
  }
  EXPECT_EQ(total, 300);
  EXPECT_EQ(read_by_key, sent_by_key) << "same key, same partition, produce order kept";
}

TEST_F(LogServerTest, LongPollIsWokenByAnAppend) {
  ASSERT_TRUE(client().CreateTopic("events", 1).ok());
  logpb::FetchResponse fetched;
  grpc::Status fetch_status;
  const absl::Time started = absl::Now();
  std::thread poller([&] {
    fetch_status = client().Fetch("events", 0, 0, &fetched, 100, absl::Seconds(25));
  });
  logpb::ProduceRequest produce;
  produce.set_topic("events");
  AddRecord(&produce, "hello");
  logpb::ProduceResponse produced;
  ASSERT_TRUE(client().Produce(produce, &produced).ok());
  poller.join();
  ASSERT_TRUE(fetch_status.ok()) << fetch_status.error_message();
  ASSERT_EQ(fetched.records_size(), 1);
  EXPECT_EQ(fetched.records(0).value(), "hello");
  EXPECT_LT(absl::Now() - started, absl::Seconds(15)) << "returned on the append, not the 25 s wait";
}

TEST_F(LogServerTest, TailStreamsExistingThenLiveRecords) {
  ASSERT_TRUE(client().CreateTopic("feed", 2).ok());
  auto produce = [&](const std::string& value) {
    logpb::ProduceRequest request;
    request.set_topic("feed");
    AddRecord(&request, value, nullptr, 1);
    logpb::ProduceResponse response;
    ASSERT_TRUE(client().Produce(request, &response).ok());
  };
  produce("before");

  grpc::ClientContext ctx;
  LogClient::SetDeadline(&ctx, absl::Seconds(30));
  logpb::TailRequest tail;
  tail.set_topic("feed");
  tail.set_partition(1);
  tail.set_start(logpb::OFFSET_SPEC_EARLIEST);
  auto reader = client().stub()->Tail(&ctx, tail);

  std::vector<std::string> seen;
  logpb::TailResponse message;
  ASSERT_TRUE(reader->Read(&message));
  for (const auto& r : message.records()) seen.push_back(r.value());
  for (int i = 0; i < 3; ++i) {
    produce(absl::StrCat("live-", i));
    while (seen.size() < static_cast<size_t>(i + 2)) {
      ASSERT_TRUE(reader->Read(&message));
      for (const auto& r : message.records()) seen.push_back(r.value());
    }
  }
  EXPECT_EQ(seen, (std::vector<std::string>{"before", "live-0", "live-1", "live-2"}));
  ctx.TryCancel();
  while (reader->Read(&message)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
}

TEST_F(LogServerTest, TailOfAnUnknownTopicEndsNotFound) {
  grpc::ClientContext ctx;
  LogClient::SetDeadline(&ctx);
  logpb::TailRequest tail;
  tail.set_topic("missing");
  auto reader = client().stub()->Tail(&ctx, tail);
  logpb::TailResponse message;
  EXPECT_FALSE(reader->Read(&message));
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(LogServerTest, TopicsAndRecordsSurviveRestart) {
  ASSERT_TRUE(client().CreateTopic("durable", 2).ok());
  ASSERT_TRUE(client().CreateTopic("gone", 1).ok());
  logpb::ProduceRequest produce;
  produce.set_topic("durable");
  for (int i = 0; i < 50; ++i) AddRecord(&produce, absl::StrCat("v", i), nullptr, i % 2);
  logpb::ProduceResponse produced;
  ASSERT_TRUE(client().Produce(produce, &produced).ok());
  {
    grpc::ClientContext ctx;
    LogClient::SetDeadline(&ctx);
    logpb::DeleteTopicRequest del;
    del.set_name("gone");
    logpb::DeleteTopicResponse deleted;
    ASSERT_TRUE(client().stub()->DeleteTopic(&ctx, del, &deleted).ok());
  }

  Restart();

  grpc::ClientContext ctx;
  LogClient::SetDeadline(&ctx);
  logpb::ListTopicsResponse topics;
  ASSERT_TRUE(client().stub()->ListTopics(&ctx, {}, &topics).ok());
  ASSERT_EQ(topics.topics_size(), 1);
  EXPECT_EQ(topics.topics(0).name(), "durable");
  EXPECT_EQ(topics.topics(0).partitions(), 2);
  for (int p = 0; p < 2; ++p) {
    std::vector<logpb::Record> records;
    ASSERT_TRUE(client().FetchAll("durable", p, &records).ok());
    ASSERT_EQ(records.size(), 25u);
    for (int i = 0; i < 25; ++i) EXPECT_EQ(records[i].value(), absl::StrCat("v", 2 * i + p));
  }
  // Offsets continue after the recovered high watermark.
  logpb::ProduceRequest more;
  more.set_topic("durable");
  AddRecord(&more, "after", nullptr, 0);
  logpb::ProduceResponse after;
  ASSERT_TRUE(client().Produce(more, &after).ok());
  EXPECT_EQ(after.positions(0).offset(), 25);
}

TEST_F(LogServerTest, ConcurrentProducersGetDenseOffsetsWithoutDuplicates) {
  constexpr int kThreads = 8, kRequests = 100, kRecordsPerRequest = 5, kPartitions = 4;
  ASSERT_TRUE(client().CreateTopic("busy", kPartitions).ok());
  std::mutex mu;
  std::map<int, std::vector<int64_t>> offsets;            // partition → offsets acked
  std::map<std::pair<int, int64_t>, std::string> values;  // position → value acked
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int r = 0; r < kRequests; ++r) {
        logpb::ProduceRequest request;
        request.set_topic("busy");
        for (int i = 0; i < kRecordsPerRequest; ++i) {
          std::string key = absl::StrCat("k", (t * 7 + r + i) % 13);
          AddRecord(&request, absl::StrCat(t, "/", r, "/", i), &key);
        }
        logpb::ProduceResponse response;
        if (!client().Produce(request, &response).ok()) {
          failures++;
          continue;
        }
        std::lock_guard<std::mutex> lock(mu);
        for (int i = 0; i < response.positions_size(); ++i) {
          const auto& pos = response.positions(i);
          offsets[pos.partition()].push_back(pos.offset());
          values[{pos.partition(), pos.offset()}] = request.records(i).value();
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  ASSERT_EQ(failures.load(), 0);
  int64_t total = 0;
  for (auto& [partition, list] : offsets) {
    std::sort(list.begin(), list.end());
    for (size_t i = 0; i < list.size(); ++i) {
      ASSERT_EQ(list[i], static_cast<int64_t>(i)) << "gap or duplicate in partition " << partition;
    }
    std::vector<logpb::Record> stored;
    ASSERT_TRUE(client().FetchAll("busy", partition, &stored).ok());
    ASSERT_EQ(stored.size(), list.size());
    for (const auto& r : stored) EXPECT_EQ(r.value(), (values[{partition, r.offset()}]));
    total += static_cast<int64_t>(list.size());
  }
  EXPECT_EQ(total, kThreads * kRequests * kRecordsPerRequest);
}

TEST_F(LogServerTest, BadInputGetsAClearStatusAndChangesNothing) {
  auto create = [&](const std::string& name, int partitions) {
    return client().CreateTopic(name, partitions).error_code();
  };
  EXPECT_EQ(create("bad name", 1), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(create(std::string(250, 'a'), 1), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(create("zero", 0), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(create("huge", 100000), grpc::StatusCode::INVALID_ARGUMENT);
  ASSERT_EQ(create("t", 2), grpc::StatusCode::OK);
  EXPECT_EQ(create("t", 2), grpc::StatusCode::ALREADY_EXISTS);

  logpb::ProduceResponse produced;
  logpb::ProduceRequest unknown;
  unknown.set_topic("nope");
  AddRecord(&unknown, "x");
  EXPECT_EQ(client().Produce(unknown, &produced).error_code(), grpc::StatusCode::NOT_FOUND);
  logpb::ProduceRequest bad_partition;
  bad_partition.set_topic("t");
  AddRecord(&bad_partition, "fine", nullptr, 0);
  AddRecord(&bad_partition, "x", nullptr, 2);
  grpc::Status status = client().Produce(bad_partition, &produced);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(status.error_message(), HasSubstr("partition 2 of topic 't'"));
  logpb::ProduceRequest too_big;
  too_big.set_topic("t");
  AddRecord(&too_big, std::string((1 << 20) + 1, 'x'));
  EXPECT_EQ(client().Produce(too_big, &produced).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  logpb::ProduceRequest empty;
  empty.set_topic("t");
  EXPECT_EQ(client().Produce(empty, &produced).error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  logpb::FetchResponse fetched;
  EXPECT_EQ(client().Fetch("t", 0, -1, &fetched).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(client().Fetch("t", 5, 0, &fetched).error_code(), grpc::StatusCode::NOT_FOUND);
  status = client().Fetch("t", 0, 7, &fetched);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::OUT_OF_RANGE);
  EXPECT_THAT(status.error_message(), HasSubstr("valid offsets are 0..0"));
  {
    grpc::ClientContext ctx;
    LogClient::SetDeadline(&ctx);
    logpb::FetchRequest request;
    request.set_topic("t");
    request.set_max_bytes(0);
    EXPECT_EQ(client().stub()->Fetch(&ctx, request, &fetched).error_code(),
              grpc::StatusCode::INVALID_ARGUMENT);
  }
  {
    grpc::ClientContext ctx;
    LogClient::SetDeadline(&ctx);
    logpb::ListOffsetsRequest request;
    request.set_topic("t");
    logpb::ListOffsetsResponse offsets;
    EXPECT_EQ(client().stub()->ListOffsets(&ctx, request, &offsets).error_code(),
              grpc::StatusCode::INVALID_ARGUMENT)
        << "spec is required";
  }
  // Nothing above changed the topic.
  grpc::ClientContext ctx;
  LogClient::SetDeadline(&ctx);
  logpb::DescribeTopicRequest describe;
  describe.set_name("t");
  logpb::DescribeTopicResponse described;
  ASSERT_TRUE(client().stub()->DescribeTopic(&ctx, describe, &described).ok());
  for (const auto& p : described.partitions()) EXPECT_EQ(p.high_watermark(), 0);
}

TEST_F(LogServerTest, IdempotentRetryOverTheWireReturnsTheOriginalOffsets) {
  ASSERT_TRUE(client().CreateTopic("idem", 1).ok());
  logpb::InitProducerResponse producer;
  {
    grpc::ClientContext ctx;
    LogClient::SetDeadline(&ctx);
    logpb::InitProducerRequest init;
    init.set_producer_name("outbox-relay");
    ASSERT_TRUE(client().stub()->InitProducer(&ctx, init, &producer).ok());
  }
  logpb::ProduceRequest produce;
  produce.set_topic("idem");
  produce.set_producer_id(producer.producer_id());
  produce.set_producer_epoch(producer.producer_epoch());
  auto* seq = produce.add_sequences();
  seq->set_partition(0);
  seq->set_base_sequence(0);
  AddRecord(&produce, "a", nullptr, 0);
  AddRecord(&produce, "b", nullptr, 0);
  logpb::ProduceResponse first, retry;
  ASSERT_TRUE(client().Produce(produce, &first).ok());
  ASSERT_TRUE(client().Produce(produce, &retry).ok());
  ASSERT_EQ(retry.positions_size(), 2);
  EXPECT_TRUE(retry.positions(0).duplicate());
  EXPECT_EQ(retry.positions(1).offset(), first.positions(1).offset());
  logpb::FetchResponse fetched;
  ASSERT_TRUE(client().Fetch("idem", 0, 0, &fetched).ok());
  EXPECT_EQ(fetched.high_watermark(), 2);

  seq->set_base_sequence(5);
  grpc::Status gap = client().Produce(produce, &retry);
  EXPECT_EQ(gap.error_code(), grpc::StatusCode::ABORTED);
  EXPECT_THAT(gap.error_message(), HasSubstr("sequence gap"));
}

TEST_F(LogServerTest, UpdateTopicConfigAndTimestampSeek) {
  ASSERT_TRUE(client().CreateTopic("cfg", 1).ok());
  {
    grpc::ClientContext ctx;
    LogClient::SetDeadline(&ctx);
    logpb::UpdateTopicConfigRequest update;
    update.set_name("cfg");
    update.mutable_config()->set_cleanup_policy(logpb::CLEANUP_POLICY_COMPACT_DELETE);
    update.mutable_config()->mutable_dedup_window()->set_seconds(600);
    logpb::UpdateTopicConfigResponse updated;
    ASSERT_TRUE(client().stub()->UpdateTopicConfig(&ctx, update, &updated).ok());
    EXPECT_EQ(updated.topic().config().cleanup_policy(), logpb::CLEANUP_POLICY_COMPACT_DELETE);
    EXPECT_EQ(updated.topic().config().dedup_window().seconds(), 600);
    EXPECT_EQ(updated.topic().config().retention_time().seconds(), 7 * 24 * 3600)
        << "unset fields keep their values";
  }
  {
    grpc::ClientContext ctx;
    LogClient::SetDeadline(&ctx);
    logpb::UpdateTopicConfigRequest update;
    update.set_name("cfg");
    update.mutable_config()->set_retention_bytes(0);
    logpb::UpdateTopicConfigResponse updated;
    EXPECT_EQ(client().stub()->UpdateTopicConfig(&ctx, update, &updated).error_code(),
              grpc::StatusCode::INVALID_ARGUMENT);
  }
  logpb::ProduceRequest produce;
  produce.set_topic("cfg");
  std::string key = "k";
  AddRecord(&produce, "v", &key)->set_event_id("evt");
  logpb::ProduceResponse first, second;
  ASSERT_TRUE(client().Produce(produce, &first).ok());
  ASSERT_TRUE(client().Produce(produce, &second).ok());
  EXPECT_TRUE(second.positions(0).duplicate()) << "the dedup window applies after the update";

  grpc::ClientContext ctx;
  LogClient::SetDeadline(&ctx);
  logpb::ListOffsetsRequest seek;
  seek.set_topic("cfg");
  seek.set_spec(logpb::OFFSET_SPEC_TIMESTAMP);
  *seek.mutable_timestamp() = first.append_time();
  logpb::ListOffsetsResponse offsets;
  ASSERT_TRUE(client().stub()->ListOffsets(&ctx, seek, &offsets).ok());
  EXPECT_EQ(offsets.offsets(0).offset(), 0);
}

TEST_F(LogServerTest, MetricsCountProducedRecords) {
  ASSERT_TRUE(client().CreateTopic("metered", 1).ok());
  logpb::ProduceRequest produce;
  produce.set_topic("metered");
  for (int i = 0; i < 7; ++i) AddRecord(&produce, "x");
  logpb::ProduceResponse produced;
  ASSERT_TRUE(client().Produce(produce, &produced).ok());
  std::string text = prometheus::TextSerializer().Serialize(registry().Collect());
  EXPECT_THAT(text, HasSubstr("conduit_log_records_produced_total{topic=\"metered\"} 7"));
  EXPECT_THAT(text, HasSubstr("conduit_log_high_watermark{partition=\"0\",topic=\"metered\"} 7"));
  EXPECT_THAT(text, HasSubstr("conduit_log_produce_latency_seconds_count 1"));
  EXPECT_THAT(text, HasSubstr("conduit_log_group_commit_records_count"));
  // Produce calls by final status: one OK so far, then one NOT_FOUND.
  EXPECT_THAT(text, HasSubstr("conduit_log_produce_requests_total{code=\"OK\"} 1"));
  produce.set_topic("missing");
  EXPECT_EQ(client().Produce(produce, &produced).error_code(), grpc::StatusCode::NOT_FOUND);
  text = prometheus::TextSerializer().Serialize(registry().Collect());
  EXPECT_THAT(text, HasSubstr("conduit_log_produce_requests_total{code=\"NOT_FOUND\"} 1"));
}

}  // namespace
}  // namespace conduit::testing
