#include "common/testing/power_loss_fs.h"

#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "common/testing/temp_dir.h"

namespace conduit::testing {
namespace {

using rocksdb::FileOptions;
using rocksdb::IOOptions;

// Drives the FileSystem the way RocksDB does, one call at a time.
class PowerLossFileSystemTest : public ::testing::Test {
 protected:
  std::unique_ptr<rocksdb::FSWritableFile> Create(const std::string& name) {
    std::unique_ptr<rocksdb::FSWritableFile> file;
    EXPECT_TRUE(fs_->NewWritableFile(dir_.Sub(name), FileOptions(), &file, nullptr).ok());
    return file;
  }
  void Append(rocksdb::FSWritableFile* file, const std::string& data) {
    ASSERT_TRUE(file->Append(data, IOOptions(), nullptr).ok());
  }
  void SyncDir() {
    std::unique_ptr<rocksdb::FSDirectory> dir;
    ASSERT_TRUE(fs_->NewDirectory(dir_.path() + "/", IOOptions(), &dir, nullptr).ok());
    ASSERT_TRUE(dir->Fsync(IOOptions(), nullptr).ok());
  }
  // The file's content, or "<missing>".
  std::string Read(const std::string& name) {
    std::string content;
    if (!rocksdb::ReadFileToString(fs_.get(), dir_.Sub(name), &content).ok()) return "<missing>";
    return content;
  }

  TempDir dir_;
  std::shared_ptr<PowerLossFileSystem> fs_ = std::make_shared<PowerLossFileSystem>();
};

TEST_F(PowerLossFileSystemTest, KeepsSyncedBytesAndDropsTheUnsyncedTail) {
  auto file = Create("wal");
  Append(file.get(), "durable|");
  ASSERT_TRUE(file->Sync(IOOptions(), nullptr).ok());
  Append(file.get(), "lost");
  ASSERT_TRUE(file->Close(IOOptions(), nullptr).ok());  // a close is not a sync
  file.reset();
  SyncDir();
  auto summary = fs_->SimulatePowerLoss();
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(Read("wal"), "durable|");
  EXPECT_EQ(summary->files_truncated, 1);
  EXPECT_EQ(summary->bytes_dropped, 4u);
}

TEST_F(PowerLossFileSystemTest, TornTailKeepsPartOfTheUnsyncedBytes) {
  auto file = Create("wal");
  Append(file.get(), "durable|");
  ASSERT_TRUE(file->Fsync(IOOptions(), nullptr).ok());
  Append(file.get(), "torn-record");
  file.reset();
  SyncDir();
  ASSERT_TRUE(fs_->SimulatePowerLoss(/*torn_tail_bytes=*/4).ok());
  EXPECT_EQ(Read("wal"), "durable|torn");
}

TEST_F(PowerLossFileSystemTest, DeletesFilesNeverSyncedOrInAnUnsyncedDirectory) {
  auto never_synced = Create("never-synced");
  Append(never_synced.get(), "x");
  never_synced.reset();
  SyncDir();  // its name is durable, its data is not
  auto entry_unsynced = Create("entry-unsynced");
  Append(entry_unsynced.get(), "y");
  ASSERT_TRUE(entry_unsynced->Sync(IOOptions(), nullptr).ok());  // data durable, name not
  entry_unsynced.reset();
  auto summary = fs_->SimulatePowerLoss();
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(Read("never-synced"), "<missing>");
  EXPECT_EQ(Read("entry-unsynced"), "<missing>");
  EXPECT_EQ(summary->files_deleted, 2);
}

// RocksDB's CURRENT: write a temp file, sync it, rename it over the old one, fsync the
// directory. Without that last fsync the old CURRENT is what the disk holds.
TEST_F(PowerLossFileSystemTest, UndoesARenameNotFollowedByADirectorySync) {
  for (bool sync_dir : {false, true}) {
    SCOPED_TRACE(sync_dir);
    ASSERT_TRUE(rocksdb::WriteStringToFile(fs_.get(), "old", dir_.Sub("CURRENT"), true).ok());
    SyncDir();
    ASSERT_TRUE(rocksdb::WriteStringToFile(fs_.get(), "new", dir_.Sub("tmp"), true).ok());
    ASSERT_TRUE(fs_->RenameFile(dir_.Sub("tmp"), dir_.Sub("CURRENT"), IOOptions(), nullptr).ok());
    if (sync_dir) SyncDir();
    auto summary = fs_->SimulatePowerLoss();
    ASSERT_TRUE(summary.ok()) << summary.status();
    EXPECT_EQ(Read("CURRENT"), sync_dir ? "new" : "old");
    EXPECT_EQ(Read("tmp"), "<missing>") << "never durably named: its creation is undone too";
    EXPECT_EQ(summary->renames_undone, sync_dir ? 0 : 1);
  }
}

TEST_F(PowerLossFileSystemTest, NothingChangesTheDiskAfterTheCrash) {
  auto file = Create("wal");
  Append(file.get(), "a");
  ASSERT_TRUE(file->Sync(IOOptions(), nullptr).ok());
  SyncDir();
  ASSERT_TRUE(rocksdb::WriteStringToFile(fs_.get(), "kept", dir_.Sub("other"), true).ok());
  SyncDir();
  fs_->Crash();
  EXPECT_FALSE(file->Append("b", IOOptions(), nullptr).ok());
  EXPECT_FALSE(file->Sync(IOOptions(), nullptr).ok());
  EXPECT_FALSE(fs_->DeleteFile(dir_.Sub("other"), IOOptions(), nullptr).ok());
  EXPECT_FALSE(fs_->RenameFile(dir_.Sub("other"), dir_.Sub("x"), IOOptions(), nullptr).ok());
  std::unique_ptr<rocksdb::FSWritableFile> late;
  EXPECT_FALSE(fs_->NewWritableFile(dir_.Sub("late"), FileOptions(), &late, nullptr).ok());
  EXPECT_EQ(Read("other"), "kept") << "reads still work";

  EXPECT_EQ(fs_->SimulatePowerLoss().status().code(), absl::StatusCode::kFailedPrecondition)
      << "a file is still open for writing";
  file.reset();
  ASSERT_TRUE(fs_->SimulatePowerLoss().ok());
  EXPECT_EQ(Read("wal"), "a");
  EXPECT_EQ(Read("other"), "kept");
  // Usable again afterwards, and what survived counts as durable.
  auto again = Create("after");
  EXPECT_NE(again, nullptr);
}

}  // namespace
}  // namespace conduit::testing
