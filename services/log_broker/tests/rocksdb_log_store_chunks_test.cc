// RocksDbLogStore keeps the records one Write appends to a partition as chunks (one RocksDB
// entry for several records): reads from any offset, deletes that cut into chunks, and entries
// stored one record each (before chunks) read and deleted alongside them.
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rocksdb/db.h>

#include "common/rocksdb/rocksdb_util.h"
#include "common/testing/temp_dir.h"
#include "services/log_broker/storage/codec.h"
#include "services/log_broker/storage/key_schema.h"
#include "services/log_broker/storage/rocksdb_log_store.h"

namespace conduit::log_broker {
namespace {

TopicMeta Topic(int32_t partitions) {
  return TopicMeta{TopicId(1), "t", partitions, TopicConfig{}, absl::FromUnixSeconds(1)};
}

// Records whose value names their partition and offset, so a record read back can be checked.
class Records {
 public:
  void Add(WriteSet* w, int32_t partition, int64_t offset) {
    auto data = std::make_unique<RecordData>();
    data->value = Value(partition, offset);
    w->records.push_back({TopicId(1), partition, offset, absl::FromUnixSeconds(1000 + offset),
                          LeaderEpoch(1), data.get()});
    data_.push_back(std::move(data));
  }
  static std::string Value(int32_t partition, int64_t offset) {
    return "p" + std::to_string(partition) + "-" + std::to_string(offset) + std::string(90, '.');
  }

 private:
  std::vector<std::unique_ptr<RecordData>> data_;
};

// The offsets Read returns for [from, end), checking each record's contents on the way.
std::vector<int64_t> Offsets(RocksDbLogStore* store, int32_t partition, int64_t from, int64_t end,
                             int32_t max_records = 100000) {
  auto records = store->Read(TopicId(1), partition, from, end, max_records, 1 << 30);
  EXPECT_TRUE(records.ok()) << records.status();
  std::vector<int64_t> out;
  if (!records.ok()) return out;
  for (const StoredRecord& r : *records) {
    EXPECT_EQ(r.data.value, Records::Value(partition, r.offset));
    EXPECT_EQ(r.append_time, absl::FromUnixSeconds(1000 + r.offset));
    out.push_back(r.offset);
  }
  return out;
}

std::vector<int64_t> Span(int64_t from, int64_t end) {
  std::vector<int64_t> out;
  for (int64_t o = from; o < end; ++o) out.push_back(o);
  return out;
}

TEST(RocksDbLogStoreChunks, ReadsStartAndStopAnywhereInsideChunks) {
  conduit::testing::TempDir dir;
  // About four 100-byte records per chunk.
  auto store = *RocksDbLogStore::Open(dir.path(), {.max_chunk_bytes = 400});
  ASSERT_TRUE(store->CreateTopic(Topic(2)).ok());
  Records records;
  for (int64_t first : {0, 10, 20}) {
    WriteSet w;  // the two partitions' records interleaved, as one request can send them
    for (int64_t o = first; o < first + 10; ++o) {
      records.Add(&w, 0, o);
      records.Add(&w, 1, o);
    }
    ASSERT_TRUE(store->Write(w, false).ok());
  }
  for (int64_t from = 0; from < 30; ++from) {
    for (int64_t end = from + 1; end <= 31; ++end) {
      ASSERT_EQ(Offsets(store.get(), 0, from, end), Span(from, std::min<int64_t>(end, 30)))
          << "[" << from << ", " << end << ")";
    }
  }
  EXPECT_EQ(Offsets(store.get(), 1, 7, 30, /*max_records=*/5), Span(7, 12));
  auto encoded = store->ReadEncoded(TopicId(1), 1, 13, 30, 3, 1 << 20);
  ASSERT_TRUE(encoded.ok()) << encoded.status();
  auto decoded = store->DecodeRecords(encoded->bytes);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  const std::vector<ReplicaRecord>& fetched = (*decoded)->records;
  ASSERT_EQ(fetched.size(), 3u);
  EXPECT_EQ(fetched[0].offset, 13);
  codec::RecordView view;
  ASSERT_TRUE(codec::DecodeRecordView(fetched[2].stored, &view).ok());
  EXPECT_EQ(view.value, Records::Value(1, 15));
  auto extent = store->RecoverPartition(TopicId(1), 1);
  EXPECT_EQ(extent->first_offset, 0);
  EXPECT_EQ(extent->end_offset, 30);
  EXPECT_EQ(extent->last_append_time, absl::FromUnixSeconds(1029));
}

// A chunk must hold rising offsets to be read back: appends out of order are refused whole,
// and nothing of them is written. A negative first offset reads from the start.
TEST(RocksDbLogStoreChunks, AppendsOutOfOffsetOrderAreRefusedAndNothingIsWritten) {
  conduit::testing::TempDir dir;
  auto store = *RocksDbLogStore::Open(dir.path());
  ASSERT_TRUE(store->CreateTopic(Topic(1)).ok());
  Records records;
  WriteSet good;
  for (int64_t o = 0; o < 3; ++o) records.Add(&good, 0, o);
  ASSERT_TRUE(store->Write(good, false).ok());
  WriteSet bad;
  records.Add(&bad, 0, 4);
  records.Add(&bad, 0, 3);
  EXPECT_EQ(store->Write(bad, false).code(), absl::StatusCode::kInternal);
  EXPECT_EQ(Offsets(store.get(), 0, 0, 10), Span(0, 3));
  EXPECT_EQ(Offsets(store.get(), 0, -5, 2), Span(0, 2));
}

// Deletes as retention (a range from the log start), a follower's truncation (a range to the
// end, then new records there) and compaction (single offsets, many per write) cut chunks at
// random places; after each write, and after a reopen, the store holds exactly what a model
// says.
TEST(RocksDbLogStoreChunks, DeletesThatCutChunksKeepEveryOtherRecord) {
  conduit::testing::TempDir dir;
  const RocksDbLogStoreOptions options{.max_chunk_bytes = 700};
  auto store = *RocksDbLogStore::Open(dir.path(), options);
  ASSERT_TRUE(store->CreateTopic(Topic(1)).ok());
  Records records;
  std::set<int64_t> model;
  int64_t end = 0;
  auto append = [&](int n) {
    WriteSet w;
    for (int i = 0; i < n; ++i) {
      records.Add(&w, 0, end);
      model.insert(end++);
    }
    ASSERT_TRUE(store->Write(w, false).ok());
  };
  auto check = [&](const std::string& what) {
    ASSERT_EQ(Offsets(store.get(), 0, 0, end + 10),
              std::vector<int64_t>(model.begin(), model.end()))
        << what;
    auto extent = store->RecoverPartition(TopicId(1), 0);
    ASSERT_TRUE(extent.ok());
    EXPECT_EQ(extent->end_offset, model.empty() ? 0 : *model.rbegin() + 1) << what;
    if (!model.empty()) {
      EXPECT_EQ(extent->first_offset, *model.begin()) << what;
    }
  };
  for (int i = 0; i < 10; ++i) append(25);
  check("appended");

  std::mt19937 rng(20261203);
  auto below = [&](int64_t n) { return std::uniform_int_distribution<int64_t>(0, n - 1)(rng); };
  for (int round = 0; round < 60; ++round) {
    WriteSet w;
    std::string what = "round " + std::to_string(round) + ":";
    switch (below(3)) {
      case 0: {  // retention: [log start, x)
        const int64_t start = model.empty() ? end : *model.begin();
        const int64_t to = start + below(12) + 1;
        w.range_deletes.push_back({TopicId(1), 0, start, to});
        what += " range [" + std::to_string(start) + ", " + std::to_string(to) + ")";
        model.erase(model.begin(), model.lower_bound(to));
        break;
      }
      case 1: {  // compaction: single offsets, some in one chunk, some not there any more
        for (int k = 0; k < 8; ++k) {
          const int64_t at = below(end);
          w.record_deletes.push_back({TopicId(1), 0, at});
          what += " " + std::to_string(at);
          model.erase(at);
        }
        break;
      }
      default: {  // retention and compaction in one write, a range inside the log too
        const int64_t from = below(end), to = from + below(6) + 1;
        w.range_deletes.push_back({TopicId(1), 0, from, to});
        model.erase(model.lower_bound(from), model.lower_bound(to));
        const int64_t at = below(end);
        w.record_deletes.push_back({TopicId(1), 0, at});
        model.erase(at);
        what += " range [" + std::to_string(from) + ", " + std::to_string(to) + ") and " +
                std::to_string(at);
      }
    }
    ASSERT_TRUE(store->Write(w, false).ok());
    check(what);
    if (round % 10 == 9) {  // a follower's truncation, and new records from there
      const int64_t cut = end - below(20) - 1;
      WriteSet t;
      t.range_deletes.push_back({TopicId(1), 0, cut, end});
      ASSERT_TRUE(store->Write(t, false).ok());
      model.erase(model.lower_bound(cut), model.end());
      end = cut;
      append(15);
      check("truncated at " + std::to_string(cut) + " and appended");
    }
  }
  store.reset();
  store = *RocksDbLogStore::Open(dir.path(), options);
  check("reopened");
}

// Stores written before chunks hold one record per entry; those entries are read, and deleted,
// alongside chunks appended after them.
TEST(RocksDbLogStoreChunks, RecordsStoredOnePerEntryAreReadAndDeletedAlongsideChunks) {
  conduit::testing::TempDir dir;
  { ASSERT_TRUE((*RocksDbLogStore::Open(dir.path()))->CreateTopic(Topic(1)).ok()); }
  {
    // As an older broker wrote them: the record value under each offset's key.
    auto db =
        rocksdb_util::Open(dir.path(), rocksdb::DBOptions(), rocksdb::ColumnFamilyOptions(), {});
    ASSERT_TRUE(db.ok()) << db.status();
    rocksdb_util::OpenDb::Handle topic_cf = db->Find(keys::TopicColumnFamily(TopicId(1)));
    ASSERT_NE(topic_cf, nullptr);
    for (int64_t o = 0; o < 10; ++o) {
      RecordData data;
      data.value = Records::Value(0, o);
      std::string value;
      codec::EncodeRecord(data, absl::FromUnixSeconds(1000 + o), 1, &value);
      ASSERT_FALSE(codec::IsChunk(value));
      ASSERT_TRUE(db->db()
                      ->Put(rocksdb::WriteOptions(), topic_cf.get(), keys::RecordKey(0, o), value)
                      .ok());
    }
  }
  auto store = *RocksDbLogStore::Open(dir.path(), {.max_chunk_bytes = 400});
  Records records;
  WriteSet w;
  for (int64_t o = 10; o < 20; ++o) records.Add(&w, 0, o);
  ASSERT_TRUE(store->Write(w, false).ok());
  EXPECT_EQ(Offsets(store.get(), 0, 0, 20), Span(0, 20));
  EXPECT_EQ(Offsets(store.get(), 0, 8, 13), Span(8, 13));

  WriteSet cut;
  cut.range_deletes.push_back({TopicId(1), 0, 0, 3});
  cut.range_deletes.push_back({TopicId(1), 0, 7, 12});
  cut.record_deletes.push_back({TopicId(1), 0, 5});
  cut.record_deletes.push_back({TopicId(1), 0, 17});
  ASSERT_TRUE(store->Write(cut, false).ok());
  EXPECT_EQ(Offsets(store.get(), 0, 0, 20),
            (std::vector<int64_t>{3, 4, 6, 12, 13, 14, 15, 16, 18, 19}));
  auto extent = store->RecoverPartition(TopicId(1), 0);
  EXPECT_EQ(extent->first_offset, 3);
  EXPECT_EQ(extent->end_offset, 20);
}

}  // namespace
}  // namespace conduit::log_broker
