#pragma once

// A Broker on a FakeLogStore and a FakeClock, with synchronous helpers. Reopen() is a restart.

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

class BrokerTest : public ::testing::Test {
 protected:
  BrokerTest() { Reopen(); }

  void Reopen() {
    broker_.reset();
    BrokerOptions options;
    options.maintenance_interval = absl::ZeroDuration();  // tests run passes themselves
    broker_ = std::make_unique<Broker>(&store_, &clock_, &observer_, options);
    ASSERT_TRUE(broker_->Recover().ok());
  }

  absl::StatusOr<ProduceResult> Produce(const std::string& topic,
                                        std::vector<ProduceRecordArgs> records,
                                        std::optional<ProducerArgs> producer = std::nullopt) {
    absl::Notification done;
    absl::StatusOr<ProduceResult> result;
    absl::Status queued = broker_->Produce(topic, std::move(records), producer, [&](auto r) {
      result = std::move(r);
      done.Notify();
    });
    if (!queued.ok()) return queued;
    done.WaitForNotification();
    return result;
  }

  absl::StatusOr<FetchResult> Fetch(FetchArgs args) {
    absl::Notification done;
    absl::StatusOr<FetchResult> result;
    absl::Status queued = broker_->Fetch(args, [&](auto r) {
      result = std::move(r);
      done.Notify();
    });
    if (!queued.ok()) return queued;
    done.WaitForNotification();
    return result;
  }

  FakeLogStore store_;
  time::FakeClock clock_;
  BrokerObserver observer_;
  std::unique_ptr<Broker> broker_;
};


}  // namespace conduit::log_broker::testing
