#include "services/log_broker/storage/rocksdb_log_store.h"

#include <gtest/gtest.h>

#include "common/testing/temp_dir.h"

namespace conduit::log_broker {
namespace {

TopicMeta Topic(uint64_t id, std::string name, int32_t partitions) {
  return TopicMeta{id, std::move(name), partitions, TopicConfig{}, absl::FromUnixSeconds(1)};
}

std::vector<AppendEntry> Entries(uint64_t topic, int32_t partition, int64_t first, int n,
                                 const RecordData& data) {
  std::vector<AppendEntry> out;
  for (int i = 0; i < n; ++i) {
    out.push_back({topic, partition, first + i, absl::FromUnixSeconds(100 + first + i), &data});
  }
  return out;
}

TEST(RocksDbLogStore, TopicsAndRecordsSurviveReopen) {
  conduit::testing::TempDir dir;
  RecordData data;
  data.key = "k";
  data.value = std::string(100, 'v');
  {
    auto store = RocksDbLogStore::Open(dir.path());
    ASSERT_TRUE(store.ok()) << store.status();
    ASSERT_TRUE((*store)->CreateTopic(Topic(1, "a", 2)).ok());
    ASSERT_TRUE((*store)->CreateTopic(Topic(2, "b", 1)).ok());
    ASSERT_TRUE((*store)->Append(Entries(1, 1, 0, 5, data), true).ok());
    ASSERT_TRUE((*store)->Append(Entries(2, 0, 0, 3, data), false).ok());
  }
  auto store = RocksDbLogStore::Open(dir.path());
  ASSERT_TRUE(store.ok()) << store.status();
  auto topics = (*store)->LoadTopics();
  ASSERT_EQ(topics->size(), 2u);
  auto extent = (*store)->RecoverPartition(1, 1);
  EXPECT_EQ(extent->log_start_offset, 0);
  EXPECT_EQ(extent->next_offset, 5);
  EXPECT_EQ(extent->last_append_time, absl::FromUnixSeconds(104));
  auto empty = (*store)->RecoverPartition(1, 0);
  EXPECT_EQ(empty->next_offset, 0);
  EXPECT_EQ((*store)->RecoverPartition(2, 0)->next_offset, 3);
}

TEST(RocksDbLogStore, ReadHonoursRangeAndLimits) {
  conduit::testing::TempDir dir;
  auto store = *RocksDbLogStore::Open(dir.path());
  ASSERT_TRUE(store->CreateTopic(Topic(1, "a", 3)).ok());
  RecordData data;
  data.value = std::string(100, 'v');
  ASSERT_TRUE(store->Append(Entries(1, 0, 0, 10, data), false).ok());
  ASSERT_TRUE(store->Append(Entries(1, 1, 0, 10, data), false).ok());

  auto range = store->Read(1, 0, 3, 7, 100, 1 << 20);
  ASSERT_EQ(range->size(), 4u);
  EXPECT_EQ(range->front().offset, 3);
  EXPECT_EQ(range->back().offset, 6);
  EXPECT_EQ(store->Read(1, 0, 0, 10, 2, 1 << 20)->size(), 2u);
  EXPECT_EQ(store->Read(1, 0, 0, 10, 100, 250)->size(), 2u);
  EXPECT_EQ(store->Read(1, 0, 0, 10, 100, 1)->size(), 1u) << "always at least one record";
  EXPECT_TRUE(store->Read(1, 2, 0, 10, 100, 1 << 20)->empty());
  EXPECT_EQ(store->Read(9, 0, 0, 10, 100, 1 << 20).status().code(), absl::StatusCode::kNotFound);
}

TEST(RocksDbLogStore, DeleteTopicRemovesRecordsAndIdsAreNotConfused) {
  conduit::testing::TempDir dir;
  RecordData data;
  data.value = "v";
  {
    auto store = *RocksDbLogStore::Open(dir.path());
    ASSERT_TRUE(store->CreateTopic(Topic(1, "a", 1)).ok());
    ASSERT_TRUE(store->Append(Entries(1, 0, 0, 4, data), true).ok());
    ASSERT_TRUE(store->DeleteTopic(Topic(1, "a", 1)).ok());
    EXPECT_EQ(store->Read(1, 0, 0, 4, 10, 100).status().code(), absl::StatusCode::kNotFound);
    ASSERT_TRUE(store->CreateTopic(Topic(2, "a", 1)).ok());  // same name, new id
    EXPECT_TRUE(store->Read(2, 0, 0, 4, 10, 100)->empty());
  }
  auto store = *RocksDbLogStore::Open(dir.path());
  auto topics = store->LoadTopics();
  ASSERT_EQ(topics->size(), 1u);
  EXPECT_EQ((*topics)[0].id, 2u);
  EXPECT_EQ(store->RecoverPartition(2, 0)->next_offset, 0);
}

}  // namespace
}  // namespace conduit::log_broker
