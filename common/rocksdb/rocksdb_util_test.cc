#include "common/rocksdb/rocksdb_util.h"

#include <gtest/gtest.h>

#include <rocksdb/memtablerep.h>

#include "common/testing/temp_dir.h"

namespace conduit::rocksdb_util {
namespace {

constexpr char kWriteMostly[] = "write_mostly";
constexpr char kServed[] = "served";

absl::StatusOr<OpenDb> OpenWithWriteMostly(const std::string& path) {
  return Open(path, DefaultDbOptions(), DefaultCfOptions(), {kWriteMostly, kServed}, nullptr,
              {{kWriteMostly, WriteMostlyCfOptions()}});
}

// Keys and values of `cf`, in the order a scan returns them.
std::vector<std::pair<std::string, std::string>> ScanAll(const OpenDb& db, const char* cf) {
  std::vector<std::pair<std::string, std::string>> out;
  absl::Status s = Scan(
      db.db(), db.Find(cf).get(), "",
      [&](std::string_view k, std::string_view v) {
        out.emplace_back(k, v);
        return absl::OkStatus();
      },
      "scan");
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

TEST(WriteMostlyColumnFamily, OpensBesideSkipListFamiliesWithoutConcurrentMemtableInserts) {
  testing::TempDir dir;
  // DefaultDbOptions asks for concurrent memtable inserts, which a vector memtable cannot take:
  // RocksDB refuses to open unless Open turns them off.
  ASSERT_TRUE(DefaultDbOptions().allow_concurrent_memtable_write);
  auto db = OpenWithWriteMostly(dir.path());
  ASSERT_TRUE(db.ok()) << db.status();
  EXPECT_FALSE(db->db()->GetDBOptions().allow_concurrent_memtable_write);
  EXPECT_STREQ(db->db()->GetOptions(db->Find(kWriteMostly).get()).memtable_factory->Name(),
               rocksdb::VectorRepFactory().Name());
  EXPECT_STREQ(db->db()->GetOptions(db->Find(kServed).get()).memtable_factory->Name(),
               rocksdb::SkipListFactory().Name());
}

TEST(WriteMostlyColumnFamily, ScansInKeyOrderWithDeletesAppliedBeforeAndAfterReopen) {
  testing::TempDir dir;
  const std::vector<std::pair<std::string, std::string>> want = {{"a", "1"}, {"c", "3b"}};
  {
    auto db = OpenWithWriteMostly(dir.path());
    ASSERT_TRUE(db.ok()) << db.status();
    rocksdb::ColumnFamilyHandle* cf = db->Find(kWriteMostly).get();
    // Out of key order, a delete after its put, a put over an older one: what an ack and a
    // requeue write.
    ASSERT_TRUE(db->db()->Put(rocksdb::WriteOptions(), cf, "c", "3").ok());
    ASSERT_TRUE(db->db()->Put(rocksdb::WriteOptions(), cf, "b", "2").ok());
    ASSERT_TRUE(db->db()->Put(rocksdb::WriteOptions(), cf, "a", "1").ok());
    ASSERT_TRUE(db->db()->Delete(rocksdb::WriteOptions(), cf, "b").ok());
    ASSERT_TRUE(db->db()->Put(rocksdb::WriteOptions(), cf, "c", "3b").ok());
    EXPECT_EQ(ScanAll(*db, kWriteMostly), want);  // from the unflushed memtable
  }
  // Reopened: the same from the WAL replayed into a vector memtable.
  auto db = OpenWithWriteMostly(dir.path());
  ASSERT_TRUE(db.ok()) << db.status();
  EXPECT_EQ(ScanAll(*db, kWriteMostly), want);
  // And from a flushed table file.
  ASSERT_TRUE(db->db()->Flush(rocksdb::FlushOptions(), db->Find(kWriteMostly).get()).ok());
  EXPECT_EQ(ScanAll(*db, kWriteMostly), want);
}

}  // namespace
}  // namespace conduit::rocksdb_util
