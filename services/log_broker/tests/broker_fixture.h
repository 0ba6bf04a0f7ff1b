#pragma once

// A Broker on a FakeLogStore and a FakeClock, with synchronous helpers. Reopen() is a restart.

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/synchronization/notification.h"
#include "services/log_broker/domain/broker.h"
#include "services/log_broker/tests/fake_log_store.h"

namespace conduit::log_broker::testing {

inline TopicConfigPatch MaxRecordBytes(int32_t n) {
  TopicConfigPatch patch;
  patch.max_record_bytes = n;
  return patch;
}

inline ProduceRecordArgs Keyed(std::string key, std::string value) {
  ProduceRecordArgs r;
  r.data.key = std::move(key);
  r.data.value = std::move(value);
  return r;
}
inline ProduceRecordArgs Keyless(std::string value) {
  ProduceRecordArgs r;
  r.data.value = std::move(value);
  return r;
}
inline ProduceRecordArgs To(int32_t partition, std::string value) {
  ProduceRecordArgs r = Keyless(std::move(value));
  r.partition = partition;
  return r;
}

// Broker::Produce, waiting for the answer (a refusal at submission is returned as is).
inline absl::StatusOr<ProduceResult> ProduceNow(Broker& broker, const std::string& topic,
                                                std::vector<ProduceRecordArgs> records,
                                                std::optional<ProducerArgs> producer = std::nullopt) {
  absl::Notification done;
  absl::StatusOr<ProduceResult> result;
  absl::Status queued = broker.Produce(topic, std::move(records), producer, [&](auto r) {
    result = std::move(r);
    done.Notify();
  });
  if (!queued.ok()) return queued;
  done.WaitForNotification();
  return result;
}

// Broker::Fetch, waiting for the answer (a refusal at submission is returned as is).
inline absl::StatusOr<FetchResult> FetchNow(Broker& broker, const FetchArgs& args) {
  absl::Notification done;
  absl::StatusOr<FetchResult> result;
  absl::Status queued = broker.Fetch(args, [&](auto r) {
    result = std::move(r);
    done.Notify();
  });
  if (!queued.ok()) return queued;
  done.WaitForNotification();
  return result;
}

// Counts the produce requests the writer has written (each Broker::Produce, or each group of
// Broker::ProduceParts, is one).
class RequestCounter : public BrokerObserver {
 public:
  void OnBatchWritten(int requests, int records, bool synced, absl::Duration latency) override {
    written_requests += requests;
  }
  std::atomic<int> written_requests{0};
};

class BrokerTest : public ::testing::Test {
 protected:
  BrokerTest() { Reopen(); }

  void Reopen() {
    broker_.reset();
    BrokerOptions options;
    options.maintenance_interval = absl::ZeroDuration();  // tests run passes themselves
    options.cluster = cluster_;
    options.pipeline = pipeline_options_;
    broker_ = std::make_unique<Broker>(&store_, &runtime_, &observer_, options);
    ASSERT_TRUE(broker_->Recover().ok());
  }

  absl::StatusOr<ProduceResult> Produce(const std::string& topic,
                                        std::vector<ProduceRecordArgs> records,
                                        std::optional<ProducerArgs> producer = std::nullopt) {
    return ProduceNow(*broker_, topic, std::move(records), std::move(producer));
  }

  absl::StatusOr<FetchResult> Fetch(FetchArgs args) { return FetchNow(*broker_, args); }

  FakeLogStore store_;
  time::FakeClock clock_;
  runtime::Runtime runtime_{&clock_};
  RequestCounter observer_;
  ClusterMetadata* cluster_ = nullptr;  // cluster mode when set (then Reopen())
  PipelineOptions pipeline_options_;     // for the broker the next Reopen() makes
  std::unique_ptr<Broker> broker_;
};


// BrokerTest with helpers for the log's lifecycle (retention, compaction, producers, dedup).
class LifecycleTest : public BrokerTest {
 protected:
  // Every record of a partition from the log start, following next_offset across gaps.
  std::vector<StoredRecord> ReadAll(const std::string& topic, int32_t partition) {
    std::vector<StoredRecord> out;
    auto described = broker_->DescribeTopic(topic);
    int64_t offset = described->partitions[partition].meta.log_start_offset;
    const int64_t hw = described->partitions[partition].high_watermark;
    while (offset < hw) {
      auto fetched = Fetch({topic, partition, offset});
      EXPECT_TRUE(fetched.ok()) << fetched.status();
      if (!fetched.ok()) break;
      for (auto& r : fetched->records) out.push_back(std::move(r));
      EXPECT_GT(fetched->next_offset, offset) << "fetch makes progress";
      offset = fetched->next_offset;
    }
    return out;
  }
  PartitionDescription Describe(const std::string& topic, int32_t partition = 0) {
    return broker_->DescribeTopic(topic)->partitions[partition];
  }
  ProducerArgs Stamp(const ProducerInfo& p, std::vector<std::pair<int32_t, int32_t>> sequences) {
    return ProducerArgs{p.id, p.epoch, std::move(sequences)};
  }
  // Broker::Produce answering into `done`/`result` of *answer (a struct with those members).
  template <typename AnswerT>
  void ProduceAsync(const std::string& topic, std::vector<ProduceRecordArgs> records,
                    ProducerArgs producer, AnswerT* answer) {
    ASSERT_TRUE(broker_
                    ->Produce(topic, std::move(records), std::move(producer),
                              [answer](absl::StatusOr<ProduceResult> r) {
                                answer->result = std::move(r);
                                answer->done.Notify();
                              })
                    .ok());
  }
  // Returns once the writer has handled every request queued before the call: a plain produce
  // to a topic of its own goes through the queue behind them.
  void WaitForWriter() {
    if (!broker_->DescribeTopic("writer-mark").ok()) {
      ASSERT_TRUE(broker_->CreateTopic("writer-mark", 1, {}).ok());
    }
    ASSERT_TRUE(Produce("writer-mark", {To(0, "mark")}).ok());
  }
  // A produce that may be parked after a sequence gap (PipelineOptions::reorder_wait): the
  // fake clock is moved past the wait until it is answered.
  absl::StatusOr<ProduceResult> ProducePastReorderWait(const std::string& topic,
                                                       std::vector<ProduceRecordArgs> records,
                                                       ProducerArgs producer) {
    struct {
      absl::Notification done;
      absl::StatusOr<ProduceResult> result;
    } answer;
    ProduceAsync(topic, std::move(records), std::move(producer), &answer);
    WaitForWriter();
    clock_.Advance(PipelineOptions{}.reorder_wait);
    if (!answer.done.WaitForNotificationWithTimeout(absl::Seconds(10))) {
      ADD_FAILURE() << "not answered after the reorder wait";
    }
    answer.done.WaitForNotification();  // the callback refers to `answer`
    return std::move(answer.result);
  }
};

inline ProduceRecordArgs WithEventId(std::string value, std::string event_id) {
  ProduceRecordArgs r = To(0, std::move(value));
  r.data.event_id = std::move(event_id);
  return r;
}
}  // namespace conduit::log_broker::testing
