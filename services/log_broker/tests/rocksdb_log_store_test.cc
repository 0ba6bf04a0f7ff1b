#include "services/log_broker/storage/rocksdb_log_store.h"

#include <algorithm>
#include <map>

#include <gtest/gtest.h>
#include <rocksdb/db.h>

#include "common/rocksdb/rocksdb_util.h"
#include "common/testing/temp_dir.h"
#include "services/log_broker/storage/codec.h"
#include "services/log_broker/storage/key_schema.h"

namespace conduit::log_broker {
namespace {

TopicMeta Topic(uint64_t id, std::string name, int32_t partitions) {
  return TopicMeta{TopicId(id), std::move(name), partitions, TopicConfig{}, absl::FromUnixSeconds(1)};
}

WriteSet Entries(uint64_t topic, int32_t partition, int64_t first, int n, const RecordData& data) {
  WriteSet out;
  for (int i = 0; i < n; ++i) {
    out.records.push_back({TopicId(topic), partition, first + i,
                           absl::FromUnixSeconds(100 + first + i), LeaderEpoch(2), &data});
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
    ASSERT_TRUE((*store)->Write(Entries(1, 1, 0, 5, data), true).ok());
    ASSERT_TRUE((*store)->Write(Entries(2, 0, 0, 3, data), false).ok());
  }
  auto store = RocksDbLogStore::Open(dir.path());
  ASSERT_TRUE(store.ok()) << store.status();
  auto topics = (*store)->LoadTopics();
  ASSERT_EQ(topics->size(), 2u);
  auto extent = (*store)->RecoverPartition(TopicId(1), 1);
  EXPECT_EQ(extent->first_offset, 0);
  EXPECT_EQ(extent->end_offset, 5);
  EXPECT_EQ(extent->first_append_time, absl::FromUnixSeconds(100));
  EXPECT_EQ(extent->last_append_time, absl::FromUnixSeconds(104));
  EXPECT_FALSE(extent->meta.has_value()) << "no bookkeeping was written";
  auto empty = (*store)->RecoverPartition(TopicId(1), 0);
  EXPECT_EQ(empty->end_offset, 0);
  EXPECT_EQ((*store)->RecoverPartition(TopicId(2), 0)->end_offset, 3);
}

TEST(RocksDbLogStore, ReadHonoursRangeAndLimits) {
  conduit::testing::TempDir dir;
  auto store = *RocksDbLogStore::Open(dir.path());
  ASSERT_TRUE(store->CreateTopic(Topic(1, "a", 3)).ok());
  RecordData data;
  data.value = std::string(100, 'v');
  ASSERT_TRUE(store->Write(Entries(1, 0, 0, 10, data), false).ok());
  ASSERT_TRUE(store->Write(Entries(1, 1, 0, 10, data), false).ok());

  auto range = store->Read(TopicId(1), 0, 3, 7, 100, 1 << 20);
  ASSERT_EQ(range->size(), 4u);
  EXPECT_EQ(range->front().offset, 3);
  EXPECT_EQ(range->back().offset, 6);
  EXPECT_EQ(store->Read(TopicId(1), 0, 0, 10, 2, 1 << 20)->size(), 2u);
  EXPECT_EQ(store->Read(TopicId(1), 0, 0, 10, 100, 250)->size(), 2u);
  EXPECT_EQ(store->Read(TopicId(1), 0, 0, 10, 100, 1)->size(), 1u) << "always at least one record";
  EXPECT_TRUE(store->Read(TopicId(1), 2, 0, 10, 100, 1 << 20)->empty());
  EXPECT_EQ(store->Read(TopicId(9), 0, 0, 10, 100, 1 << 20).status().code(), absl::StatusCode::kNotFound);
}

// What a leader ships to a follower (ReplicaFetch): the records as stored, which the follower's
// store decodes and writes back as they are.
TEST(RocksDbLogStore, EncodedRecordsCarryEveryFieldAndAreWrittenAsTheyAre) {
  conduit::testing::TempDir leader_dir, follower_dir;
  auto leader = *RocksDbLogStore::Open(leader_dir.path());
  auto follower = *RocksDbLogStore::Open(follower_dir.path());
  ASSERT_TRUE(leader->CreateTopic(Topic(1, "a", 2)).ok());
  ASSERT_TRUE(follower->CreateTopic(Topic(1, "a", 2)).ok());
  RecordData data;
  data.key = "k";
  data.value = std::string(100, 'v');
  data.headers = {{"h", "1"}};
  data.event_id = "e";
  data.event_time = absl::FromUnixSeconds(1234);
  WriteSet writes = Entries(1, 1, 0, 10, data);
  writes.records[3].producer = ProducerTag{7, 1, 3, 2, 0};
  writes.records[7].offset = 9;  // a hole, as compaction leaves
  writes.records.pop_back();
  writes.records.pop_back();
  ASSERT_TRUE(leader->Write(writes, false).ok());

  auto encoded = leader->ReadEncoded(TopicId(1), 1, 0, 10, 100, 1 << 20);
  ASSERT_TRUE(encoded.ok()) << encoded.status();
  EXPECT_EQ(encoded->count, 8);
  auto decoded = follower->DecodeRecords(encoded->bytes);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  auto expected = *leader->Read(TopicId(1), 1, 0, 10, 100, 1 << 20);
  const std::vector<ReplicaRecord>& records = (*decoded)->records;
  ASSERT_EQ(records.size(), expected.size());
  RecordData wrong;
  wrong.value = "not the leader's";
  WriteSet copy;
  for (size_t i = 0; i < expected.size(); ++i) {
    const ReplicaRecord& d = records[i];
    const StoredRecord& e = expected[i];
    EXPECT_EQ(d.offset, e.offset);
    EXPECT_EQ(d.append_time, e.append_time);
    EXPECT_EQ(d.leader_epoch, e.leader_epoch);
    EXPECT_EQ(d.payload_bytes, static_cast<int64_t>(e.data.PayloadBytes()));
    EXPECT_EQ(d.event_time, e.data.event_time);
    EXPECT_EQ(d.event_id, e.data.event_id);
    EXPECT_EQ(d.producer, e.producer);
    EXPECT_FALSE(d.stored.empty());
    EXPECT_EQ(d.data, nullptr);
    // The follower writes the stored bytes; the fields it is also given are deliberately wrong,
    // so reading back what the leader stored shows they were not used.
    copy.records.push_back({TopicId(1), 1, d.offset, absl::UnixEpoch(), LeaderEpoch(99), &wrong,
                            std::nullopt, d.stored});
  }
  EXPECT_EQ(expected[3].producer->producer_id, 7);
  EXPECT_EQ(expected.back().offset, 9);
  ASSERT_TRUE(follower->Write(copy, false).ok());
  auto copied = *follower->Read(TopicId(1), 1, 0, 10, 100, 1 << 20);
  ASSERT_EQ(copied.size(), expected.size());
  for (size_t i = 0; i < copied.size(); ++i) {
    EXPECT_EQ(copied[i].append_time, expected[i].append_time);
    EXPECT_EQ(copied[i].leader_epoch, LeaderEpoch(2));
    EXPECT_EQ(copied[i].producer.has_value(), i == 3);
    EXPECT_EQ(copied[i].data, expected[i].data);
  }

  // Limits as Read's, counting stored bytes; at least one record.
  EXPECT_EQ(leader->ReadEncoded(TopicId(1), 1, 0, 10, 3, 1 << 20)->count, 3);
  EXPECT_EQ(leader->ReadEncoded(TopicId(1), 1, 0, 10, 100, 1)->count, 1);
  EXPECT_EQ(leader->ReadEncoded(TopicId(1), 1, 2, 5, 100, 1 << 20)->count, 3);
  EXPECT_EQ(leader->ReadEncoded(TopicId(1), 0, 0, 10, 100, 1 << 20)->count, 0);
  EXPECT_EQ(leader->ReadEncoded(TopicId(9), 1, 0, 10, 100, 1 << 20).status().code(),
            absl::StatusCode::kNotFound);
  // Bytes cut short are refused, not half-applied.
  const std::string cut = encoded->bytes.substr(0, encoded->bytes.size() - 5);
  EXPECT_EQ(follower->DecodeRecords(cut).status().code(), absl::StatusCode::kDataLoss);
}

TEST(RocksDbLogStore, DeleteTopicRemovesRecordsAndIdsAreNotConfused) {
  conduit::testing::TempDir dir;
  RecordData data;
  data.value = "v";
  {
    auto store = *RocksDbLogStore::Open(dir.path());
    ASSERT_TRUE(store->CreateTopic(Topic(1, "a", 1)).ok());
    ASSERT_TRUE(store->Write(Entries(1, 0, 0, 4, data), true).ok());
    ASSERT_TRUE(store->DeleteTopic(Topic(1, "a", 1)).ok());
    EXPECT_EQ(store->Read(TopicId(1), 0, 0, 4, 10, 100).status().code(), absl::StatusCode::kNotFound);
    ASSERT_TRUE(store->CreateTopic(Topic(2, "a", 1)).ok());  // same name, new id
    EXPECT_TRUE(store->Read(TopicId(2), 0, 0, 4, 10, 100)->empty());
  }
  auto store = *RocksDbLogStore::Open(dir.path());
  auto topics = store->LoadTopics();
  ASSERT_EQ(topics->size(), 1u);
  EXPECT_EQ((*topics)[0].id, TopicId(2));
  EXPECT_EQ(store->RecoverPartition(TopicId(2), 0)->end_offset, 0);
}

TEST(RocksDbLogStore, BookkeepingAndDeletesApplyAtomicallyAndSurviveReopen) {
  conduit::testing::TempDir dir;
  RecordData data;
  data.key = "k";
  data.value = "v";
  ProducerPartitionState producer;
  producer.epoch = 3;
  producer.last_sequence = 41;
  producer.recent.push_back(ProducerBatch{40, 2, 7, {}});
  producer.recent.push_back(ProducerBatch{42, 3, 9, {{0, 9}, {1, 2}, {0, 10}}});
  {
    auto store = *RocksDbLogStore::Open(dir.path());
    ASSERT_TRUE(store->CreateTopic(Topic(1, "a", 2)).ok());
    WriteSet w = Entries(1, 0, 0, 10, data);
    w.partitions.push_back({TopicId(1), 0, PartitionMeta{0, 10, 10, 20, absl::FromUnixSeconds(5)}});
    w.producers.push_back({TopicId(1), 0, ProducerId(77), producer});
    w.epoch_starts.push_back({TopicId(1), 0, LeaderEpoch(2), 0});
    w.epoch_starts.push_back({TopicId(1), 1, LeaderEpoch(4), 17});
    w.dedup_puts.push_back({TopicId(1), "evt-1", DedupEntry{RecordPosition{0, 3}, absl::FromUnixSeconds(9)}});
    w.dedup_puts.push_back({TopicId(1), "evt-2", DedupEntry{RecordPosition{0, 4}, absl::FromUnixSeconds(9)}});
    ASSERT_TRUE(store->Write(w, true).ok());
    WriteSet cleanup;
    cleanup.range_deletes.push_back({TopicId(1), 0, 0, 3});
    cleanup.record_deletes.push_back({TopicId(1), 0, 5});
    cleanup.partitions.push_back({TopicId(1), 0, PartitionMeta{3, 10, 6, 12, absl::FromUnixSeconds(5)}});
    cleanup.dedup_deletes.push_back({TopicId(1), 0, "evt-1"});
    ASSERT_TRUE(store->Write(cleanup, false).ok());
    ASSERT_TRUE(store->SaveProducer(ProducerInfo{ProducerId(77), 3, "relay"}).ok());
  }
  auto store = *RocksDbLogStore::Open(dir.path());
  auto recovered = store->RecoverPartition(TopicId(1), 0);
  ASSERT_TRUE(recovered->meta.has_value());
  EXPECT_EQ(*recovered->meta, (PartitionMeta{3, 10, 6, 12, absl::FromUnixSeconds(5)}));
  EXPECT_EQ(recovered->first_offset, 3);
  std::vector<int64_t> offsets;
  auto records = store->Read(TopicId(1), 0, 0, 10, 100, 1 << 20);
  for (const auto& r : *records) {
    offsets.push_back(r.offset);
    EXPECT_EQ(r.leader_epoch, LeaderEpoch(2))
        << "the epoch a record was appended under is kept on disk";
  }
  EXPECT_EQ(offsets, (std::vector<int64_t>{3, 4, 6, 7, 8, 9}));
  auto producers = store->LoadProducerStates(TopicId(1));
  ASSERT_EQ(producers->size(), 1u);
  EXPECT_EQ((*producers)[0].producer_id, ProducerId(77));
  EXPECT_EQ((*producers)[0].partition, 0);
  EXPECT_EQ((*producers)[0].state, producer);
  auto epochs = store->LoadEpochStarts(TopicId(1));
  ASSERT_TRUE(epochs.ok()) << epochs.status();
  ASSERT_EQ(epochs->size(), 2u);
  EXPECT_EQ((*epochs)[1].partition, 1);
  EXPECT_EQ((*epochs)[1].epoch, LeaderEpoch(4));
  EXPECT_EQ((*epochs)[1].start_offset, 17);
  auto dedup = store->LoadDedupEntries(TopicId(1));
  ASSERT_EQ(dedup->size(), 1u);
  EXPECT_EQ((*dedup)[0].event_id, "evt-2");
  EXPECT_EQ((*dedup)[0].entry.position.offset, 4);
  EXPECT_EQ(*store->LoadProducers(), (std::vector<ProducerInfo>{{ProducerId(77), 3, "relay"}}));

  // Deleting the topic removes its bookkeeping too.
  ASSERT_TRUE(store->DeleteTopic(Topic(1, "a", 2)).ok());
  ASSERT_TRUE(store->CreateTopic(Topic(1, "a", 2)).ok());  // same id again
  EXPECT_FALSE(store->RecoverPartition(TopicId(1), 0)->meta.has_value());
  EXPECT_TRUE(store->LoadProducerStates(TopicId(1))->empty());
  EXPECT_TRUE(store->LoadDedupEntries(TopicId(1))->empty());
  EXPECT_TRUE(store->LoadEpochStarts(TopicId(1))->empty());
}

// The same event id in two partitions is two entries (dedup windows are per partition), and an
// entry written under the old topic-keyed layout is still found, then rewritten per partition.
TEST(RocksDbLogStore, DedupEntriesArePerPartitionAndLegacyEntriesMigrate) {
  conduit::testing::TempDir dir;
  const DedupEntry in_p0{RecordPosition{0, 3}, absl::FromUnixSeconds(9)};
  const DedupEntry in_p1{RecordPosition{1, 8}, absl::FromUnixSeconds(9)};
  const DedupEntry legacy{RecordPosition{1, 2}, absl::FromUnixSeconds(8)};
  {
    auto store = *RocksDbLogStore::Open(dir.path());
    ASSERT_TRUE(store->CreateTopic(Topic(1, "a", 2)).ok());
    WriteSet w;
    w.dedup_puts.push_back({TopicId(1), "evt", in_p0});
    w.dedup_puts.push_back({TopicId(1), "evt", in_p1});
    ASSERT_TRUE(store->Write(w, true).ok());
  }
  {  // plant an entry as the previous version wrote it: 'E' + BE64(topic id) + event id
    auto db =
        rocksdb_util::Open(dir.path(), rocksdb::DBOptions(), rocksdb::ColumnFamilyOptions(), {});
    ASSERT_TRUE(db.ok()) << db.status();
    rocksdb_util::OpenDb::Handle meta = db->Find("meta");
    ASSERT_NE(meta, nullptr);
    std::string key = keys::TopicScopeKey(keys::kLegacyDedupPrefix, TopicId(1)) + "old";
    ASSERT_TRUE(db->db()
                    ->Put(rocksdb::WriteOptions(), meta.get(), key, codec::EncodeDedupEntry(legacy))
                    .ok());
  }
  for (int open = 0; open < 2; ++open) {  // the second open reads the rewritten entry
    auto store = *RocksDbLogStore::Open(dir.path());
    auto dedup = store->LoadDedupEntries(TopicId(1));
    ASSERT_TRUE(dedup.ok()) << dedup.status();
    std::map<std::pair<int32_t, std::string>, DedupEntry> got;
    for (const auto& d : *dedup) got[{d.entry.position.partition, d.event_id}] = d.entry;
    EXPECT_EQ(got.size(), 3u) << open;
    EXPECT_EQ((got[{0, "evt"}].position), in_p0.position);
    EXPECT_EQ((got[{1, "evt"}].position), in_p1.position);
    EXPECT_EQ((got[{1, "old"}].position), legacy.position);
    if (open == 1) {  // expiring it deletes the one copy left
      WriteSet expire;
      expire.dedup_deletes.push_back({TopicId(1), 1, "old"});
      ASSERT_TRUE(store->Write(expire, true).ok());
      EXPECT_EQ(store->LoadDedupEntries(TopicId(1))->size(), 2u);
    }
  }
}

}  // namespace
}  // namespace conduit::log_broker
