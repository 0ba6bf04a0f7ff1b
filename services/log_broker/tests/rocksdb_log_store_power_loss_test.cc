// RocksDbLogStore across a simulated power failure (the foundation of replica_power_loss_test): what Write
// acknowledged with sync=true is on disk after the power goes; what it wrote without sync is not.

#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/testing/power_loss_fs.h"
#include "common/testing/temp_dir.h"
#include "services/log_broker/storage/rocksdb_log_store.h"

namespace conduit::log_broker {
namespace {

using conduit::testing::PowerLossFileSystem;

constexpr int32_t kPartition = 0;

TopicMeta Topic() {
  return TopicMeta{TopicId(1), "orders", 2, TopicConfig{}, absl::FromUnixSeconds(1)};
}

// The bookkeeping of partition 0 holding records [0, next_offset) of 100 bytes each.
PartitionMeta Meta(int64_t next_offset) {
  return PartitionMeta{
      0, next_offset, next_offset, next_offset * 100, absl::InfinitePast(), LeaderEpoch(3)};
}

// Records [first, first + n) of partition 0 and the partition bookkeeping that goes with them,
// as the broker writes them: in one WriteSet.
WriteSet Batch(int64_t first, int n, const RecordData& data) {
  WriteSet out;
  for (int i = 0; i < n; ++i) {
    out.records.push_back({TopicId(1), kPartition, first + i,
                           absl::FromUnixSeconds(100 + first + i), LeaderEpoch(3), &data});
  }
  out.partitions.push_back({TopicId(1), kPartition, Meta(first + n)});
  return out;
}

class RocksDbLogStorePowerLoss : public ::testing::Test {
 protected:
  RocksDbLogStorePowerLoss() { data_.value = std::string(100, 'v'); }

  std::unique_ptr<RocksDbLogStore> Open() { return Open(dir_.path()); }
  std::unique_ptr<RocksDbLogStore> Open(const std::string& path) {
    auto store = RocksDbLogStore::Open(path, {.file_system = fs_});
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? *std::move(store) : nullptr;
  }
  // The power goes now; then the process dies (the store is destroyed, but its Close can no
  // longer reach the disk) and the disk keeps only what was synced.
  conduit::testing::PowerLossSummary PowerFailure(std::unique_ptr<RocksDbLogStore> store,
                                                  uint64_t torn_tail_bytes = 0) {
    fs_->Crash();
    store.reset();
    auto summary = fs_->SimulatePowerLoss(torn_tail_bytes);
    EXPECT_TRUE(summary.ok()) << summary.status();
    return summary.value_or(conduit::testing::PowerLossSummary{});
  }
  // The offsets stored in partition 0.
  std::vector<int64_t> Offsets(RocksDbLogStore& store) {
    std::vector<int64_t> out;
    auto records = store.Read(TopicId(1), kPartition, 0, 1000, 1000, 1 << 30);
    EXPECT_TRUE(records.ok()) << records.status();
    if (!records.ok()) return out;
    for (const auto& r : *records) {
      EXPECT_EQ(r.data, data_) << r.offset;
      out.push_back(r.offset);
    }
    return out;
  }
  static std::vector<int64_t> Range(int64_t from, int64_t to) {
    std::vector<int64_t> out;
    for (int64_t o = from; o < to; ++o) out.push_back(o);
    return out;
  }

  conduit::testing::TempDir dir_;
  std::shared_ptr<PowerLossFileSystem> fs_ = std::make_shared<PowerLossFileSystem>();
  RecordData data_;
};

TEST_F(RocksDbLogStorePowerLoss, SyncedWritesSurvive) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->CreateTopic(Topic()).ok());
  ASSERT_TRUE(store->Write(Batch(0, 5, data_), /*sync=*/true).ok());
  ASSERT_TRUE(store->Write(Batch(5, 5, data_), /*sync=*/true).ok());
  PowerFailure(std::move(store));

  store = Open();
  ASSERT_NE(store, nullptr);
  auto topics = store->LoadTopics();
  ASSERT_TRUE(topics.ok()) << topics.status();
  ASSERT_EQ(topics->size(), 1u);
  EXPECT_EQ((*topics)[0].name, "orders");
  auto recovered = store->RecoverPartition(TopicId(1), kPartition);
  ASSERT_TRUE(recovered.ok()) << recovered.status();
  ASSERT_TRUE(recovered->meta.has_value());
  EXPECT_EQ(*recovered->meta, Meta(10));
  EXPECT_EQ(recovered->end_offset, 10);
  EXPECT_EQ(recovered->last_append_time, absl::FromUnixSeconds(109));
  EXPECT_EQ(Offsets(*store), Range(0, 10));
}

// The negative control: the layer must be able to lose something, or the test above proves
// nothing. RocksDB writes unsynced records into the WAL file (the OS page cache), so a process
// crash would keep them; the power loss does not.
TEST_F(RocksDbLogStorePowerLoss, UnsyncedWritesAreLost) {
  constexpr int kWritten = 20;
  auto store = Open();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->CreateTopic(Topic()).ok());  // synced: the topic itself survives
  for (int i = 0; i < kWritten; i += 5) {
    ASSERT_TRUE(store->Write(Batch(i, 5, data_), /*sync=*/false).ok());
  }
  EXPECT_EQ(Offsets(*store).size(), size_t{kWritten}) << "readable before the power goes";
  auto summary = PowerFailure(std::move(store));
  EXPECT_GT(summary.bytes_dropped, 0u);

  store = Open();
  ASSERT_NE(store, nullptr);
  ASSERT_EQ(store->LoadTopics()->size(), 1u);
  auto recovered = store->RecoverPartition(TopicId(1), kPartition);
  ASSERT_TRUE(recovered.ok()) << recovered.status();
  EXPECT_LT(recovered->end_offset, kWritten);
  EXPECT_EQ(recovered->end_offset, 0) << "nothing was synced after the topic was created";
  EXPECT_FALSE(recovered->meta.has_value());
  EXPECT_TRUE(Offsets(*store).empty());
}

// A synced batch, then an unsynced one. The synced batch survives whole with its bookkeeping.
// The unsynced one is one WAL record (one WriteSet, 716 bytes here): cut at the sync point
// it is gone; torn in its middle (part of a page reached the disk) it is gone too, and the torn
// tail does not stop the open, since the store runs RocksDB's default wal_recovery_mode,
// kPointInTimeRecovery, which replays up to the first bad record; if all of it reached the
// disk it is back, whole. Either way the bookkeeping agrees with the records.
TEST_F(RocksDbLogStorePowerLoss, SyncedBatchSurvivesAnUnsyncedOneAfterIt) {
  struct Case {
    uint64_t torn_tail_bytes;  // of the unsynced WAL tail that reached the disk
    int64_t end_offset;        // after the reopen
  };
  for (const Case& c : {Case{0, 5}, Case{100, 5}, Case{1000, 10}}) {
    SCOPED_TRACE(c.torn_tail_bytes);
    conduit::testing::TempDir dir;
    fs_ = std::make_shared<PowerLossFileSystem>();
    auto store = Open(dir.path());
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(store->CreateTopic(Topic()).ok());
    ASSERT_TRUE(store->Write(Batch(0, 5, data_), /*sync=*/true).ok());
    ASSERT_TRUE(store->Write(Batch(5, 5, data_), /*sync=*/false).ok());
    auto summary = PowerFailure(std::move(store), c.torn_tail_bytes);
    EXPECT_EQ(summary.bytes_dropped > 0, c.end_offset == 5) << "lost exactly when cut";

    store = Open(dir.path());
    ASSERT_NE(store, nullptr) << "a torn WAL tail must not stop the store from opening";
    auto recovered = store->RecoverPartition(TopicId(1), kPartition);
    ASSERT_TRUE(recovered.ok()) << recovered.status();
    ASSERT_TRUE(recovered->meta.has_value());
    EXPECT_EQ(*recovered->meta, Meta(c.end_offset));
    EXPECT_EQ(recovered->end_offset, c.end_offset);
    EXPECT_EQ(Offsets(*store), Range(0, c.end_offset));
  }
}

// SyncWal (the broker's interval fsync, and its last act at shutdown) makes every earlier
// unsynced write durable.
TEST_F(RocksDbLogStorePowerLoss, SyncWalMakesEarlierUnsyncedWritesDurable) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->CreateTopic(Topic()).ok());
  ASSERT_TRUE(store->Write(Batch(0, 5, data_), /*sync=*/false).ok());
  ASSERT_TRUE(store->SyncWal().ok());
  ASSERT_TRUE(store->Write(Batch(5, 5, data_), /*sync=*/false).ok());
  PowerFailure(std::move(store));

  store = Open();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(Offsets(*store), Range(0, 5));
}

}  // namespace
}  // namespace conduit::log_broker
