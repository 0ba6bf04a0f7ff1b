// An interval topic across a power failure, on one Broker over a real RocksDbLogStore on
// PowerLossFileSystem (the disk keeps only what was fsynced), with a fake clock so that the
// interval fsync runs only when the test advances it. A clean stop fsyncs what the interval has
// not yet covered, so a power failure after it loses nothing; a power failure while running
// loses what came after the last interval fsync (the negative control: the test sees a loss).

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "common/testing/power_loss_fs.h"
#include "common/testing/temp_dir.h"
#include "common/time/clock.h"
#include "services/log_broker/domain/broker.h"
#include "services/log_broker/storage/rocksdb_log_store.h"
#include "services/log_broker/tests/broker_fixture.h"

namespace conduit::log_broker {
namespace {

using conduit::testing::PowerLossFileSystem;

// Counts WAL fsyncs: the interval's, and those of synced writes.
class SyncCounter final : public BrokerObserver {
 public:
  void OnWalSynced(absl::Duration) override { ++syncs; }
  std::atomic<int> syncs{0};
};

class BrokerPowerLoss : public ::testing::Test {
 protected:
  BrokerPowerLoss() { Open(); }

  void Open() {
    auto store = RocksDbLogStore::Open(dir_.path(), {.file_system = fs_});
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    BrokerOptions options;
    options.maintenance_interval = absl::ZeroDuration();
    broker_ = std::make_unique<Broker>(store_.get(), &runtime_, &observer_, options);
    ASSERT_TRUE(broker_->Recover().ok());
  }
  // The broker and its store stop (cleanly, unless the power already went).
  void Stop() {
    broker_.reset();
    store_.reset();
  }
  void PowerLossThenRestart() {
    Stop();
    auto summary = fs_->SimulatePowerLoss();
    ASSERT_TRUE(summary.ok()) << summary.status();
    Open();
  }

  // Produces records `from`..`to`-1 to partition 0 of "t", one request each; all answered OK.
  void ProduceValues(int from, int to) {
    for (int i = from; i < to; ++i) {
      std::vector<ProduceRecordArgs> records;
      records.push_back(testing::To(0, absl::StrCat("v", i)));
      auto result = testing::ProduceNow(*broker_, "t", std::move(records));
      ASSERT_TRUE(result.ok()) << result.status();
    }
  }
  // The values of partition 0 of "t", in offset order.
  std::vector<std::string> Values() {
    auto fetched = testing::FetchNow(*broker_, FetchArgs{"t", 0, 0});
    EXPECT_TRUE(fetched.ok()) << fetched.status();
    std::vector<std::string> out;
    if (!fetched.ok()) return out;
    for (const StoredRecord& r : fetched->records) out.push_back(r.data.value.value_or(""));
    return out;
  }
  static std::vector<std::string> Expected(int from, int to) {
    std::vector<std::string> out;
    for (int i = from; i < to; ++i) out.push_back(absl::StrCat("v", i));
    return out;
  }
  void CreateIntervalTopic() {
    TopicConfigPatch interval;
    interval.durability = Durability::kInterval;
    interval.flush_interval = absl::Seconds(10);  // never reached unless the clock is advanced
    auto created = broker_->CreateTopic("t", 1, interval);
    ASSERT_TRUE(created.ok()) << created.status();
  }

  conduit::testing::TempDir dir_;
  std::shared_ptr<PowerLossFileSystem> fs_ = std::make_shared<PowerLossFileSystem>();
  time::FakeClock clock_;
  runtime::Runtime runtime_{&clock_};
  SyncCounter observer_;
  std::unique_ptr<RocksDbLogStore> store_;
  std::unique_ptr<Broker> broker_;
};

TEST_F(BrokerPowerLoss, AnIntervalTopicLosesNothingToAPowerFailureAfterACleanStop) {
  CreateIntervalTopic();
  ProduceValues(0, 20);
  PowerLossThenRestart();
  EXPECT_EQ(Values(), Expected(0, 20)) << "the stop fsynced what the interval had not";
}

TEST_F(BrokerPowerLoss, WhileRunningAnIntervalTopicLosesWhatCameAfterTheLastIntervalFsync) {
  CreateIntervalTopic();
  ProduceValues(0, 10);
  const int before = observer_.syncs.load();
  clock_.Advance(absl::Seconds(10));  // the interval fsync, on the runtime's thread, covers v0..v9
  const absl::Time give_up = absl::Now() + absl::Seconds(5);
  while (observer_.syncs.load() == before && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  ASSERT_GT(observer_.syncs.load(), before) << "the interval fsync ran";
  ProduceValues(10, 20);
  fs_->Crash();  // the power goes while the broker runs: its stop cannot fsync any more
  PowerLossThenRestart();
  EXPECT_EQ(Values(), Expected(0, 10));
}

}  // namespace
}  // namespace conduit::log_broker
