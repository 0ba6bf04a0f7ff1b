#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <rocksdb/file_system.h>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace conduit::testing {

// What SimulatePowerLoss changed on disk.
struct PowerLossSummary {
  int files_deleted = 0;       // created and never synced, or created in an unsynced directory
  int renames_undone = 0;      // renames whose directory was not synced afterwards
  int files_truncated = 0;     // cut back to their last synced length
  uint64_t bytes_dropped = 0;  // unsynced bytes cut from the files that were truncated
};

// A RocksDB FileSystem for tests that loses, at a simulated power failure, what a real disk may
// lose: everything not made durable by an fsync. Wrap the local file system, open a database
// over it (rocksdb::NewCompositeEnv, or RocksDbLogStoreOptions::file_system), call Crash() at the
// instant the power goes, destroy the database, then SimulatePowerLoss() and reopen.
//
// Modelled, for files written through NewWritableFile / ReopenWritableFile / ReuseWritableFile:
// - File data: Sync and Fsync make durable the bytes appended before the call began. Flush,
//   Close and RangeSync (sync_file_range starts writeback and promises nothing) do not.
// - Directory entries (POSIX: only an fsync of the directory makes them durable): a creation or
//   a rename is undone unless an FSDirectory of its directory (the target's, for a rename) was
//   Fsync'ed after it; an undone rename brings back the durable content of a file it replaced.
// - A file created here and never synced is deleted even if its directory was synced (a real
//   disk may instead keep it empty or partly written).
// - Crash() freezes the disk: every later append, sync, create, rename, delete and truncate
//   fails with IOError and changes nothing, so nothing the database does on its way out (a
//   memtable flush, a WAL sync at Close) can make data durable after the power went.
//   SimulatePowerLoss() without Crash() models the power going right after a clean close.
// Not modelled: deletions are durable at once (a real disk may bring an unlinked file back);
// directory creation and removal are durable at once; the info LOG (written by the base
// FileSystem's logger) is not tracked; reordering of writes within a file (only a tail is ever
// lost). Refused with NotSupported, since they would be written past the model: NewRandomRWFile,
// LinkFile and PositionedAppend (direct I/O); the RocksDB options of common/rocksdb use none.
//
// The FileSystem must outlive every file and database opened over it. Thread-safe.
class PowerLossFileSystem final : public rocksdb::FileSystemWrapper {
 public:
  explicit PowerLossFileSystem(
      const std::shared_ptr<rocksdb::FileSystem>& base = rocksdb::FileSystem::Default());

  static const char* kClassName() { return "PowerLossFileSystem"; }
  const char* Name() const override { return kClassName(); }

  // The power fails now: from here on nothing reaches the disk (see the class comment). Reads
  // still work, so the database can be destroyed normally.
  void Crash();

  // Makes the disk look as it would after the power failure: undoes unsynced creations and
  // renames (newest first), deletes files never synced, and truncates every other tracked file
  // to its synced length plus at most `torn_tail_bytes` of the unsynced tail (non-zero models a
  // partly written page: a torn WAL record). Calls Crash() first if it was not called. Afterwards
  // every file counts as durable and the FileSystem is usable again, for the reopen.
  // FAILED_PRECONDITION (and no change) while a file opened for writing here is still open: close
  // the database first. Other errors are the base FileSystem's, mapped to INTERNAL.
  absl::StatusOr<PowerLossSummary> SimulatePowerLoss(uint64_t torn_tail_bytes = 0);

  rocksdb::IOStatus NewWritableFile(const std::string& fname, const rocksdb::FileOptions& options,
                                    std::unique_ptr<rocksdb::FSWritableFile>* result,
                                    rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus ReopenWritableFile(const std::string& fname,
                                       const rocksdb::FileOptions& options,
                                       std::unique_ptr<rocksdb::FSWritableFile>* result,
                                       rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus ReuseWritableFile(const std::string& fname, const std::string& old_fname,
                                      const rocksdb::FileOptions& options,
                                      std::unique_ptr<rocksdb::FSWritableFile>* result,
                                      rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus NewRandomRWFile(const std::string& fname, const rocksdb::FileOptions& options,
                                    std::unique_ptr<rocksdb::FSRandomRWFile>* result,
                                    rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus NewDirectory(const std::string& name, const rocksdb::IOOptions& options,
                                 std::unique_ptr<rocksdb::FSDirectory>* result,
                                 rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus DeleteFile(const std::string& fname, const rocksdb::IOOptions& options,
                               rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus RenameFile(const std::string& src, const std::string& target,
                               const rocksdb::IOOptions& options,
                               rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus LinkFile(const std::string& src, const std::string& target,
                             const rocksdb::IOOptions& options,
                             rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus Truncate(const std::string& fname, size_t size,
                             const rocksdb::IOOptions& options,
                             rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus CreateDir(const std::string& dirname, const rocksdb::IOOptions& options,
                              rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus CreateDirIfMissing(const std::string& dirname,
                                       const rocksdb::IOOptions& options,
                                       rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus DeleteDir(const std::string& dirname, const rocksdb::IOOptions& options,
                              rocksdb::IODebugContext* dbg) override;

 private:
  class TrackedFile;
  class TrackedDirectory;

  // One file's data, shared by its open TrackedFile and the path it has now (renames move it).
  // Guarded by mu_ (an annotation cannot name the enclosing object's mutex).
  struct FileState {
    uint64_t size = 0;     // bytes appended so far
    uint64_t synced = 0;   // bytes a Sync or Fsync made durable
    bool created = false;  // did not exist before it was opened here
  };
  // A directory entry change not yet made durable by an fsync of `dir`.
  struct EntryChange {
    uint64_t seq;
    std::string dir;
    std::string path;                         // the file created, or the rename target
    std::optional<std::string> renamed_from;  // set for a rename
    std::optional<std::string> replaced;      // durable content of the file a rename replaced
  };

  // Shared by NewWritableFile and ReopenWritableFile: opens through `open` and tracks the file.
  rocksdb::IOStatus OpenTracked(
      const std::string& fname, std::unique_ptr<rocksdb::FSWritableFile>* result,
      const std::function<rocksdb::IOStatus(std::unique_ptr<rocksdb::FSWritableFile>*)>& open,
      bool keeps_content);
  // Runs a file sync and, unless the power went meanwhile, marks `state` synced up to its size
  // when the sync began.
  rocksdb::IOStatus SyncFile(FileState& state, const std::function<rocksdb::IOStatus()>& sync);
  // Runs a directory fsync and, unless the power went meanwhile, makes the entry changes of
  // `dir` recorded before it began durable.
  rocksdb::IOStatus SyncDirectory(const std::string& dir,
                                  const std::function<rocksdb::IOStatus()>& sync);
  // IOError if the power went, else OK.
  rocksdb::IOStatus CheckPowered() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Runs `op` (a change to the disk) unless the power went: atomic with respect to Crash().
  rocksdb::IOStatus IfPowered(const std::function<rocksdb::IOStatus()>& op)
      ABSL_LOCKS_EXCLUDED(mu_);
  void RecordEntryChange(EntryChange change) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  rocksdb::IOStatus UndoEntryChange(const EntryChange& change, PowerLossSummary* summary)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Moves the tracking of the file at `from` (if any) to `to`, after a rename.
  void MoveTracking(const std::string& from, const std::string& to)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FileClosed();

  mutable absl::Mutex mu_;
  bool crashed_ ABSL_GUARDED_BY(mu_) = false;
  int open_files_ ABSL_GUARDED_BY(mu_) = 0;  // TrackedFiles not yet destroyed
  uint64_t next_seq_ ABSL_GUARDED_BY(mu_) = 0;
  // Tracked files by normalized current path.
  absl::flat_hash_map<std::string, std::shared_ptr<FileState>> files_ ABSL_GUARDED_BY(mu_);
  std::vector<EntryChange> unsynced_entries_ ABSL_GUARDED_BY(mu_);  // oldest first
};

}  // namespace conduit::testing
