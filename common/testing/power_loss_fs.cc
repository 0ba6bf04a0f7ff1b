#include "common/testing/power_loss_fs.h"

#include <algorithm>
#include <filesystem>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace conduit::testing {

using rocksdb::FileOptions;
using rocksdb::FSDirectory;
using rocksdb::FSWritableFile;
using rocksdb::IODebugContext;
using rocksdb::IOOptions;
using rocksdb::IOStatus;
using rocksdb::Slice;

namespace {

// RocksDB names a file as given ("dir/000004.log", a directory as "dir" or "dir/"); one spelling
// per path lets a file be matched with the directory whose fsync makes its entry durable.
std::string Normalize(const std::string& path) {
  std::string out = std::filesystem::path(path).lexically_normal().string();
  while (out.size() > 1 && out.back() == '/') out.pop_back();
  return out;
}

std::string DirOf(const std::string& normalized_path) {
  return std::filesystem::path(normalized_path).parent_path().string();
}

// Cuts `path` to `size` bytes. PosixFileSystem (RocksDB 7.8) has no FileSystem::Truncate, but its
// writable files do.
IOStatus TruncateFile(rocksdb::FileSystem* fs, const std::string& path, uint64_t size) {
  std::unique_ptr<FSWritableFile> file;
  IOStatus s = fs->ReopenWritableFile(path, FileOptions(), &file, nullptr);
  if (s.ok()) s = file->Truncate(size, IOOptions(), nullptr);
  if (s.ok()) s = file->Close(IOOptions(), nullptr);
  return s;
}

absl::Status ToAbsl(const IOStatus& s, const std::string& context) {
  if (s.ok()) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(context, ": ", s.ToString()));
}

}  // namespace

// A writable file whose appends and syncs are counted in its FileState (guarded by the
// FileSystem's mutex). RocksDB uses one from one thread at a time, but may Sync it concurrently
// with Append when IsSyncThreadSafe(); SyncFile copes by counting only what preceded the sync.
class PowerLossFileSystem::TrackedFile final : public rocksdb::FSWritableFileOwnerWrapper {
 public:
  TrackedFile(std::unique_ptr<FSWritableFile> file, PowerLossFileSystem* fs,
              std::shared_ptr<FileState> state)
      : FSWritableFileOwnerWrapper(std::move(file)), fs_(fs), state_(std::move(state)) {}
  ~TrackedFile() override { fs_->FileClosed(); }

  IOStatus Append(const Slice& data, const IOOptions& options, IODebugContext* dbg) override {
    return Appended(data.size(), [&] { return target()->Append(data, options, dbg); });
  }
  IOStatus Append(const Slice& data, const IOOptions& options,
                  const rocksdb::DataVerificationInfo& info, IODebugContext* dbg) override {
    return Appended(data.size(), [&] { return target()->Append(data, options, info, dbg); });
  }
  IOStatus PositionedAppend(const Slice&, uint64_t, const IOOptions&, IODebugContext*) override {
    return IOStatus::NotSupported("PowerLossFileSystem does not model direct I/O");
  }
  IOStatus PositionedAppend(const Slice&, uint64_t, const IOOptions&,
                            const rocksdb::DataVerificationInfo&, IODebugContext*) override {
    return IOStatus::NotSupported("PowerLossFileSystem does not model direct I/O");
  }
  IOStatus Truncate(uint64_t size, const IOOptions& options, IODebugContext* dbg) override {
    absl::MutexLock lock(&fs_->mu_);
    if (IOStatus s = fs_->CheckPowered(); !s.ok()) return s;
    IOStatus s = target()->Truncate(size, options, dbg);
    if (s.ok()) {
      state_->size = size;
      state_->synced = std::min(state_->synced, size);
    }
    return s;
  }
  IOStatus Sync(const IOOptions& options, IODebugContext* dbg) override {
    return fs_->SyncFile(*state_, [&] { return target()->Sync(options, dbg); });
  }
  IOStatus Fsync(const IOOptions& options, IODebugContext* dbg) override {
    return fs_->SyncFile(*state_, [&] { return target()->Fsync(options, dbg); });
  }
  // Close and RangeSync pass through (see the class comment: neither makes data durable).

 private:
  IOStatus Appended(size_t n, const std::function<IOStatus()>& append) {
    {
      absl::MutexLock lock(&fs_->mu_);
      if (IOStatus s = fs_->CheckPowered(); !s.ok()) return s;
    }
    IOStatus s = append();
    if (s.ok()) {
      absl::MutexLock lock(&fs_->mu_);
      state_->size += n;
    }
    return s;
  }

  PowerLossFileSystem* const fs_;
  const std::shared_ptr<FileState> state_;
};

// A directory whose fsyncs make the entry changes recorded for it durable.
class PowerLossFileSystem::TrackedDirectory final : public FSDirectory {
 public:
  TrackedDirectory(std::unique_ptr<FSDirectory> dir, PowerLossFileSystem* fs, std::string name)
      : dir_(std::move(dir)), fs_(fs), name_(std::move(name)) {}

  IOStatus Fsync(const IOOptions& options, IODebugContext* dbg) override {
    return fs_->SyncDirectory(name_, [&] { return dir_->Fsync(options, dbg); });
  }
  IOStatus FsyncWithDirOptions(const IOOptions& options, IODebugContext* dbg,
                               const rocksdb::DirFsyncOptions& dir_options) override {
    return fs_->SyncDirectory(name_,
                              [&] { return dir_->FsyncWithDirOptions(options, dbg, dir_options); });
  }
  IOStatus Close(const IOOptions& options, IODebugContext* dbg) override {
    return dir_->Close(options, dbg);
  }
  size_t GetUniqueId(char* id, size_t max_size) const override {
    return dir_->GetUniqueId(id, max_size);
  }

 private:
  const std::unique_ptr<FSDirectory> dir_;
  PowerLossFileSystem* const fs_;
  const std::string name_;
};

PowerLossFileSystem::PowerLossFileSystem(const std::shared_ptr<rocksdb::FileSystem>& base)
    : FileSystemWrapper(base) {}

void PowerLossFileSystem::Crash() {
  absl::MutexLock lock(&mu_);
  crashed_ = true;
}

IOStatus PowerLossFileSystem::CheckPowered() const {
  if (crashed_) return IOStatus::IOError("power lost (PowerLossFileSystem::Crash)");
  return IOStatus::OK();
}

IOStatus PowerLossFileSystem::IfPowered(const std::function<IOStatus()>& op) {
  absl::MutexLock lock(&mu_);
  if (IOStatus s = CheckPowered(); !s.ok()) return s;
  return op();
}

void PowerLossFileSystem::RecordEntryChange(EntryChange change) {
  change.seq = next_seq_++;
  unsynced_entries_.push_back(std::move(change));
}

void PowerLossFileSystem::MoveTracking(const std::string& from, const std::string& to) {
  auto it = files_.find(from);
  if (it == files_.end()) return;
  std::shared_ptr<FileState> state = std::move(it->second);
  files_.erase(it);  // before the insertion below, which may rehash
  files_[to] = std::move(state);
}

void PowerLossFileSystem::FileClosed() {
  absl::MutexLock lock(&mu_);
  --open_files_;
}

IOStatus PowerLossFileSystem::OpenTracked(
    const std::string& fname, std::unique_ptr<FSWritableFile>* result,
    const std::function<IOStatus(std::unique_ptr<FSWritableFile>*)>& open, bool keeps_content) {
  const std::string path = Normalize(fname);
  absl::MutexLock lock(&mu_);
  if (IOStatus s = CheckPowered(); !s.ok()) return s;
  const bool existed = target()->FileExists(path, IOOptions(), nullptr).ok();
  uint64_t old_size = 0;
  if (existed && keeps_content) {
    if (IOStatus s = target()->GetFileSize(path, IOOptions(), &old_size, nullptr); !s.ok()) {
      return s;
    }
  }
  std::unique_ptr<FSWritableFile> file;
  if (IOStatus s = open(&file); !s.ok()) return s;

  std::shared_ptr<FileState>& state = files_[path];
  if (!keeps_content || state == nullptr) {  // else reopened for append: what was synced still is
    // Content from before tracking began counts as durable.
    state = std::make_shared<FileState>(FileState{old_size, old_size, !existed});
  }
  if (!existed) RecordEntryChange({0, DirOf(path), path, std::nullopt, std::nullopt});
  ++open_files_;
  *result = std::make_unique<TrackedFile>(std::move(file), this, state);
  return IOStatus::OK();
}

IOStatus PowerLossFileSystem::NewWritableFile(const std::string& fname, const FileOptions& options,
                                              std::unique_ptr<FSWritableFile>* result,
                                              IODebugContext* dbg) {
  return OpenTracked(
      fname, result,
      [&](std::unique_ptr<FSWritableFile>* f) {
        return target()->NewWritableFile(fname, options, f, dbg);
      },
      /*keeps_content=*/false);
}

IOStatus PowerLossFileSystem::ReopenWritableFile(const std::string& fname,
                                                 const FileOptions& options,
                                                 std::unique_ptr<FSWritableFile>* result,
                                                 IODebugContext* dbg) {
  return OpenTracked(
      fname, result,
      [&](std::unique_ptr<FSWritableFile>* f) {
        return target()->ReopenWritableFile(fname, options, f, dbg);
      },
      /*keeps_content=*/true);
}

IOStatus PowerLossFileSystem::ReuseWritableFile(const std::string& fname,
                                                const std::string& old_fname,
                                                const FileOptions& options,
                                                std::unique_ptr<FSWritableFile>* result,
                                                IODebugContext* dbg) {
  // FileSystem's own version is RenameFile then NewWritableFile, which both go through here;
  // the base FileSystem's would rewrite the old file in place, past the model.
  return FileSystem::ReuseWritableFile(fname, old_fname, options, result, dbg);
}

IOStatus PowerLossFileSystem::NewRandomRWFile(const std::string&, const FileOptions&,
                                              std::unique_ptr<rocksdb::FSRandomRWFile>*,
                                              IODebugContext*) {
  return IOStatus::NotSupported("PowerLossFileSystem does not model random-write files");
}

IOStatus PowerLossFileSystem::LinkFile(const std::string&, const std::string&, const IOOptions&,
                                       IODebugContext*) {
  return IOStatus::NotSupported("PowerLossFileSystem does not model hard links");
}

IOStatus PowerLossFileSystem::NewDirectory(const std::string& name, const IOOptions& options,
                                           std::unique_ptr<FSDirectory>* result,
                                           IODebugContext* dbg) {
  std::unique_ptr<FSDirectory> dir;
  IOStatus s = target()->NewDirectory(name, options, &dir, dbg);
  if (!s.ok()) return s;
  *result = std::make_unique<TrackedDirectory>(std::move(dir), this, Normalize(name));
  return IOStatus::OK();
}

IOStatus PowerLossFileSystem::SyncFile(FileState& state, const std::function<IOStatus()>& sync) {
  uint64_t covered = 0;
  {
    absl::MutexLock lock(&mu_);
    if (IOStatus s = CheckPowered(); !s.ok()) return s;
    covered = state.size;
  }
  IOStatus s = sync();
  absl::MutexLock lock(&mu_);
  if (IOStatus powered = CheckPowered(); !powered.ok()) return powered;  // died mid-sync
  if (s.ok()) state.synced = std::max(state.synced, covered);
  return s;
}

IOStatus PowerLossFileSystem::SyncDirectory(const std::string& dir,
                                            const std::function<IOStatus()>& sync) {
  uint64_t before = 0;
  {
    absl::MutexLock lock(&mu_);
    if (IOStatus s = CheckPowered(); !s.ok()) return s;
    before = next_seq_;
  }
  IOStatus s = sync();
  absl::MutexLock lock(&mu_);
  if (IOStatus powered = CheckPowered(); !powered.ok()) return powered;
  if (s.ok()) {
    std::erase_if(unsynced_entries_,
                  [&](const EntryChange& c) { return c.dir == dir && c.seq < before; });
  }
  return s;
}

IOStatus PowerLossFileSystem::DeleteFile(const std::string& fname, const IOOptions& options,
                                         IODebugContext* dbg) {
  const std::string path = Normalize(fname);
  absl::MutexLock lock(&mu_);
  if (IOStatus s = CheckPowered(); !s.ok()) return s;
  IOStatus s = target()->DeleteFile(fname, options, dbg);
  if (s.ok()) files_.erase(path);  // not undone: see the class comment
  return s;
}

IOStatus PowerLossFileSystem::RenameFile(const std::string& src, const std::string& target_name,
                                         const IOOptions& options, IODebugContext* dbg) {
  const std::string from = Normalize(src);
  const std::string to = Normalize(target_name);
  absl::MutexLock lock(&mu_);
  if (IOStatus s = CheckPowered(); !s.ok()) return s;
  // What an undo must put back at `to`: the durable part of the file the rename replaces.
  std::optional<std::string> replaced;
  if (target()->FileExists(to, options, dbg).ok()) {
    std::string content;
    if (IOStatus s = rocksdb::ReadFileToString(target(), to, &content); !s.ok()) return s;
    if (auto it = files_.find(to); it != files_.end()) content.resize(it->second->synced);
    replaced = std::move(content);
  }
  IOStatus s = target()->RenameFile(src, target_name, options, dbg);
  if (!s.ok()) return s;
  files_.erase(to);
  MoveTracking(from, to);
  RecordEntryChange({0, DirOf(to), to, from, std::move(replaced)});
  return IOStatus::OK();
}

IOStatus PowerLossFileSystem::Truncate(const std::string& fname, size_t size,
                                       const IOOptions& options, IODebugContext* dbg) {
  const std::string path = Normalize(fname);
  absl::MutexLock lock(&mu_);
  if (IOStatus s = CheckPowered(); !s.ok()) return s;
  IOStatus s = target()->Truncate(fname, size, options, dbg);
  if (auto it = files_.find(path); s.ok() && it != files_.end()) {
    it->second->size = size;
    it->second->synced = std::min<uint64_t>(it->second->synced, size);
  }
  return s;
}

IOStatus PowerLossFileSystem::CreateDir(const std::string& dirname, const IOOptions& options,
                                        IODebugContext* dbg) {
  return IfPowered([&] { return target()->CreateDir(dirname, options, dbg); });
}

IOStatus PowerLossFileSystem::CreateDirIfMissing(const std::string& dirname,
                                                 const IOOptions& options, IODebugContext* dbg) {
  return IfPowered([&] { return target()->CreateDirIfMissing(dirname, options, dbg); });
}

IOStatus PowerLossFileSystem::DeleteDir(const std::string& dirname, const IOOptions& options,
                                        IODebugContext* dbg) {
  return IfPowered([&] { return target()->DeleteDir(dirname, options, dbg); });
}

IOStatus PowerLossFileSystem::UndoEntryChange(const EntryChange& change,
                                              PowerLossSummary* summary) {
  const IOOptions io;
  const bool present = target()->FileExists(change.path, io, nullptr).ok();
  if (!change.renamed_from) {  // a creation
    files_.erase(change.path);
    if (!present) return IOStatus::OK();  // deleted since: nothing to undo
    ++summary->files_deleted;
    return target()->DeleteFile(change.path, io, nullptr);
  }
  if (!present) return IOStatus::OK();  // deleted since (deletions are not undone)
  if (IOStatus s = target()->RenameFile(change.path, *change.renamed_from, io, nullptr); !s.ok()) {
    return s;
  }
  ++summary->renames_undone;
  MoveTracking(change.path, *change.renamed_from);
  if (!change.replaced) return IOStatus::OK();
  return rocksdb::WriteStringToFile(target(), *change.replaced, change.path, /*should_sync=*/true);
}

absl::StatusOr<PowerLossSummary> PowerLossFileSystem::SimulatePowerLoss(uint64_t torn_tail_bytes) {
  absl::MutexLock lock(&mu_);
  if (open_files_ > 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(open_files_,
                     " file(s) opened for writing are still open: close the "
                     "database before simulating the power loss"));
  }
  crashed_ = true;
  PowerLossSummary summary;
  for (auto it = unsynced_entries_.rbegin(); it != unsynced_entries_.rend(); ++it) {
    IOStatus s = UndoEntryChange(*it, &summary);
    if (!s.ok()) return ToAbsl(s, absl::StrCat("undo entry change of '", it->path, "'"));
  }
  const IOOptions io;
  for (const auto& [path, state] : files_) {
    // Gone behind the FileSystem's back (a test removed its directory): nothing to lose.
    if (!target()->FileExists(path, io, nullptr).ok()) continue;
    if (state->created && state->synced == 0) {
      IOStatus s = target()->DeleteFile(path, io, nullptr);
      if (!s.ok()) return ToAbsl(s, absl::StrCat("delete never-synced '", path, "'"));
      ++summary.files_deleted;
      continue;
    }
    uint64_t size = 0;
    IOStatus s = target()->GetFileSize(path, io, &size, nullptr);
    if (!s.ok()) return ToAbsl(s, absl::StrCat("size of '", path, "'"));
    const uint64_t keep = std::min(size, state->synced + torn_tail_bytes);
    if (keep == size) continue;
    s = TruncateFile(target(), path, keep);
    if (!s.ok()) return ToAbsl(s, absl::StrCat("truncate '", path, "'"));
    ++summary.files_truncated;
    summary.bytes_dropped += size - keep;
  }
  // What is left is what the disk holds: all of it durable from now on.
  files_.clear();
  unsynced_entries_.clear();
  crashed_ = false;
  return summary;
}

}  // namespace conduit::testing
