#include "common/rocksdb/rocksdb_util.h"

#include <rocksdb/cache.h>
#include <rocksdb/memtablerep.h>
#include <rocksdb/slice_transform.h>
#include <rocksdb/table.h>

#include <algorithm>
#include <filesystem>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/status/status_macros.h"

namespace conduit::rocksdb_util {

absl::Status ToStatus(const rocksdb::Status& status, absl::string_view context) {
  if (status.ok()) return absl::OkStatus();
  std::string message = absl::StrCat(context, ": ", status.ToString());
  switch (status.code()) {
    case rocksdb::Status::kNotFound:
      return absl::NotFoundError(message);
    case rocksdb::Status::kInvalidArgument:
      return absl::InvalidArgumentError(message);
    case rocksdb::Status::kCorruption:
      return absl::DataLossError(message);
    case rocksdb::Status::kIOError:
    case rocksdb::Status::kBusy:
    case rocksdb::Status::kTimedOut:
    case rocksdb::Status::kTryAgain:
      return absl::UnavailableError(message);
    default:
      return absl::InternalError(message);
  }
}

absl::Status Scan(rocksdb::DB* db, rocksdb::ColumnFamilyHandle* cf, std::string_view prefix,
                  const std::function<absl::Status(std::string_view, std::string_view)>& fn,
                  absl::string_view context) {
  std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions(), cf));
  for (it->Seek(rocksdb::Slice(prefix.data(), prefix.size()));
       it->Valid() && it->key().starts_with(rocksdb::Slice(prefix.data(), prefix.size()));
       it->Next()) {
    CONDUIT_RETURN_IF_ERROR(fn(it->key().ToStringView(), it->value().ToStringView()));
  }
  return ToStatus(it->status(), context);
}

absl::Status CreateDataDir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot create data directory '", dir, "': ", ec.message()));
  }
  return absl::OkStatus();
}

rocksdb::DBOptions DefaultDbOptions() {
  rocksdb::DBOptions options;
  options.create_if_missing = true;
  options.create_missing_column_families = true;
  int cores = static_cast<int>(std::max(2u, std::thread::hardware_concurrency()));
  options.IncreaseParallelism(cores);
  options.max_background_jobs = std::max(2, cores);
  options.enable_pipelined_write = true;
  // Keep the WAL bounded: flush memtables of column families holding old WAL files.
  options.max_total_wal_size = 256 << 20;
  return options;
}

namespace {

// The first `size` bytes of keys longer than that. Shorter and equal keys are outside the domain
// and are inserted without a hint: see DefaultCfOptions.
class InsertHintPrefix : public rocksdb::SliceTransform {
 public:
  explicit InsertHintPrefix(size_t size)
      : size_(size), name_(absl::StrCat("conduit.InsertHintPrefix.", size)) {}
  const char* Name() const override { return name_.c_str(); }
  rocksdb::Slice Transform(const rocksdb::Slice& key) const override {
    return rocksdb::Slice(key.data(), size_);
  }
  bool InDomain(const rocksdb::Slice& key) const override { return key.size() > size_; }

 private:
  size_t size_;
  std::string name_;
};

}  // namespace

rocksdb::ColumnFamilyOptions DefaultCfOptions(size_t insert_hint_prefix) {
  rocksdb::ColumnFamilyOptions options;
  if (insert_hint_prefix > 0) {
    options.memtable_insert_with_hint_prefix_extractor =
        std::make_shared<InsertHintPrefix>(insert_hint_prefix);
  }
  options.OptimizeLevelStyleCompaction(64 << 20);
  options.write_buffer_size = 32 << 20;
  // One compression at every level. OptimizeLevelStyleCompaction leaves L0 and L1 uncompressed,
  // and RocksDB moves a file down a level without rewriting it only when the compression stays
  // the same: records and jobs arrive in key order, so their files never overlap and every
  // compaction below L0 could be such a move, but the change at L2 made each flushed byte be
  // read back and rewritten once more (a fifth of the broker's CPU under produce).
  options.compression_per_level.clear();
  options.compression = rocksdb::kLZ4Compression;
  static std::shared_ptr<rocksdb::Cache> cache = rocksdb::NewLRUCache(128 << 20);
  rocksdb::BlockBasedTableOptions table;
  table.block_cache = cache;
  options.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  return options;
}

rocksdb::ColumnFamilyOptions WriteMostlyCfOptions() {
  rocksdb::ColumnFamilyOptions options = DefaultCfOptions();
  options.memtable_factory = std::make_shared<rocksdb::VectorRepFactory>();
  return options;
}

OpenDb::~OpenDb() {
  if (!db_) return;
  handles_.clear();
  (void)db_->Close();
}

OpenDb& OpenDb::operator=(OpenDb&& other) noexcept {
  OpenDb old(std::move(*this));  // closes when it goes, at the end of this call
  env_ = std::move(other.env_);
  db_ = std::move(other.db_);
  handles_ = std::move(other.handles_);
  return *this;
}

OpenDb::Handle OpenDb::Find(std::string_view name) const {
  for (const auto& h : handles_) {
    if (h->GetName() == name) return h;
  }
  return nullptr;
}

OpenDb::Handle OpenDb::Share(rocksdb::ColumnFamilyHandle* raw) {
  rocksdb::DB* db = db_.get();
  return Handle(raw,
                [db](rocksdb::ColumnFamilyHandle* h) { (void)db->DestroyColumnFamilyHandle(h); });
}

absl::StatusOr<OpenDb::Handle> OpenDb::CreateColumnFamily(
    const std::string& name, const rocksdb::ColumnFamilyOptions& options) {
  rocksdb::ColumnFamilyHandle* raw = nullptr;
  rocksdb::Status s = db_->CreateColumnFamily(options, name, &raw);
  if (!s.ok()) return ToStatus(s, absl::StrCat("create column family '", name, "'"));
  return Share(raw);
}

absl::StatusOr<OpenDb> Open(const std::string& path, const rocksdb::DBOptions& db_options,
                            const rocksdb::ColumnFamilyOptions& cf_options,
                            const std::vector<std::string>& required_cfs,
                            std::shared_ptr<rocksdb::FileSystem> file_system,
                            const CfOptionsByName& own_options) {
  OpenDb result;
  rocksdb::DBOptions options = db_options;
  if (file_system) {
    result.env_ = rocksdb::NewCompositeEnv(file_system);
    options.env = result.env_.get();
  }
  std::vector<std::string> names;
  rocksdb::Status s = rocksdb::DB::ListColumnFamilies(options, path, &names);
  if (!s.ok()) names.clear();  // a new database: nothing to list yet
  if (std::find(names.begin(), names.end(), rocksdb::kDefaultColumnFamilyName) == names.end()) {
    names.push_back(rocksdb::kDefaultColumnFamilyName);
  }
  for (const auto& cf : required_cfs) {
    if (std::find(names.begin(), names.end(), cf) == names.end()) names.push_back(cf);
  }
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  for (const auto& name : names) {
    auto own = own_options.find(name);
    descriptors.emplace_back(name, own == own_options.end() ? cf_options : own->second);
    if (!descriptors.back().options.memtable_factory->IsInsertConcurrentlySupported()) {
      options.allow_concurrent_memtable_write = false;
    }
  }

  std::vector<rocksdb::ColumnFamilyHandle*> raw;
  rocksdb::DB* db = nullptr;
  s = rocksdb::DB::Open(options, path, descriptors, &raw, &db);
  if (!s.ok()) return ToStatus(s, absl::StrCat("open rocksdb at '", path, "'"));
  result.db_.reset(db);
  for (auto* h : raw) result.handles_.push_back(result.Share(h));
  return result;
}

}  // namespace conduit::rocksdb_util
