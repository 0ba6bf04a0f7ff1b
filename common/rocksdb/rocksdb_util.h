#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string_view>
#include <string>
#include <vector>

#include <rocksdb/db.h>
#include <rocksdb/env.h>
#include <rocksdb/file_system.h>
#include <rocksdb/options.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace conduit::rocksdb_util {

// rocksdb::Status → absl::Status. `context` names the operation ("append to topic 'x'").
// Corruption maps to DATA_LOSS, IO errors and busy/timeouts to UNAVAILABLE, the rest to INTERNAL
// except NotFound / InvalidArgument.
absl::Status ToStatus(const rocksdb::Status& status, absl::string_view context);

// Calls fn(key, value) for each entry of `cf` whose key starts with `prefix` ("" for all), in
// key order, and stops at fn's first error; an iterator error maps through ToStatus(context).
absl::Status Scan(rocksdb::DB* db, rocksdb::ColumnFamilyHandle* cf, std::string_view prefix,
                  const std::function<absl::Status(std::string_view, std::string_view)>& fn,
                  absl::string_view context);

// Creates `dir` (and its parents) if missing: FAILED_PRECONDITION naming it when that fails.
absl::Status CreateDataDir(const std::string& dir);

// Options every Conduit database shares: create if missing, bounded background jobs sized to
// the machine, pipelined writes, a shared block cache.
rocksdb::DBOptions DefaultDbOptions();
// `insert_hint_prefix` > 0: keys longer than that many bytes that share them (one queue's jobs)
// mostly arrive in ascending order, so each memtable insert starts from where that prefix's last
// one ended (RocksDB's memtable_insert_with_hint_prefix_extractor) instead of searching the skip
// list from its top. Reads and the files on disk do not change. A DeleteRange in such a column
// family must start at a key no longer than the prefix: RocksDB 7.8 shares a prefix's hint
// between point and range-deletion entries, which live in different skip lists (fixed upstream
// later), so range deletions must stay outside the hint's domain.
rocksdb::ColumnFamilyOptions DefaultCfOptions(size_t insert_hint_prefix = 0);
// For a column family that is written while serving and read only when the database opens
// (a recovery scan). Its memtable is RocksDB's vector memtable: an insert appends, with no
// search of a skip list (which an insert hint does not spare a key that sorts before the last
// one, such as a delete of a key put earlier); the memtable is sorted once, when it is flushed
// or scanned. A point read or an iterator on an unflushed memtable copies and sorts all of it:
// never read such a column family while serving.
rocksdb::ColumnFamilyOptions WriteMostlyCfOptions();

// Column family name → the options it is opened with.
using CfOptionsByName = std::map<std::string, rocksdb::ColumnFamilyOptions>;

// An open database and the column family handles opened with it. Handles are shared_ptrs whose
// deleter returns them to the DB, so a reader may keep a dropped column family's handle until it
// is done. Every handle copy must be released before the OpenDb is destroyed (which closes the
// DB). Not thread-safe itself; the DB is.
class OpenDb {
 public:
  using Handle = std::shared_ptr<rocksdb::ColumnFamilyHandle>;

  OpenDb() = default;
  OpenDb(OpenDb&&) = default;
  // Closes the DB it held first, then frees that DB's Env (a defaulted one would free the Env
  // of a still open DB).
  OpenDb& operator=(OpenDb&& other) noexcept;
  ~OpenDb();

  rocksdb::DB* db() const { return db_.get(); }
  const std::vector<Handle>& handles() const { return handles_; }
  // The handle of `name`, or null.
  Handle Find(std::string_view name) const;
  // Creates a column family; the returned handle is not kept in handles().
  absl::StatusOr<Handle> CreateColumnFamily(const std::string& name,
                                            const rocksdb::ColumnFamilyOptions& options);
  // Wraps a raw handle of this DB in a shared handle.
  Handle Share(rocksdb::ColumnFamilyHandle* raw);
  // Releases handles() (the caller keeps the copies it wants).
  void ForgetHandles() { handles_.clear(); }

 private:
  friend absl::StatusOr<OpenDb> Open(const std::string&, const rocksdb::DBOptions&,
                                     const rocksdb::ColumnFamilyOptions&,
                                     const std::vector<std::string>&,
                                     std::shared_ptr<rocksdb::FileSystem>, const CfOptionsByName&);
  std::unique_ptr<rocksdb::Env> env_;  // before db_: the DB must close before its Env goes
  std::unique_ptr<rocksdb::DB> db_;
  std::vector<Handle> handles_;
};

// Opens (creating if needed) the database at `path` with every column family it already has,
// plus `required_cfs`, each opened with `cf_options` unless `own_options` names it. A non-null
// `file_system` replaces db_options.env with an Env over it, owned by the OpenDb (tests pass one
// that simulates a power loss). When a column family's memtable cannot take concurrent inserts
// (WriteMostlyCfOptions), the database is opened without them
// (allow_concurrent_memtable_write), which RocksDB requires.
absl::StatusOr<OpenDb> Open(const std::string& path, const rocksdb::DBOptions& db_options,
                            const rocksdb::ColumnFamilyOptions& cf_options,
                            const std::vector<std::string>& required_cfs,
                            std::shared_ptr<rocksdb::FileSystem> file_system = nullptr,
                            const CfOptionsByName& own_options = {});

}  // namespace conduit::rocksdb_util
