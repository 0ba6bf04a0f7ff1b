#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include <rocksdb/file_system.h>
#include <rocksdb/write_batch.h>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/synchronization/mutex.h"
#include "common/rocksdb/rocksdb_util.h"
#include "common/rocksdb/space_guard.h"
#include "services/log_broker/domain/log_store.h"

namespace conduit::log_broker {

// How RocksDbLogStore::Open reaches the disk.
struct RocksDbLogStoreOptions {
  // The file system under the database; null is RocksDB's default, the local disk. Tests pass
  // a conduit::testing::PowerLossFileSystem to lose what was not synced.
  std::shared_ptr<rocksdb::FileSystem> file_system;
  // A Write packs each partition's appended records into chunks of about this many bytes, one
  // RocksDB entry each (codec.h).
  int64_t max_chunk_bytes = 64 << 10;
};

// LogStore on one RocksDB instance: a "meta" column family for topic metadata and one column
// family per topic for its records (see key_schema.h), stored as chunks of the records one Write
// appends to a partition (codec.h). Topic creation and deletion are ordered
// so that a crash between steps leaves at most an orphan column family, dropped at next Open.
//
// Thread-safe.
class RocksDbLogStore final : public LogStore {
 public:
  // Opens or creates the store at `path`.
  static absl::StatusOr<std::unique_ptr<RocksDbLogStore>> Open(
      const std::string& path, const RocksDbLogStoreOptions& options = {});
  ~RocksDbLogStore() override;

  absl::StatusOr<std::vector<TopicMeta>> LoadTopics() override;
  absl::StatusOr<PartitionRecovery> RecoverPartition(TopicId topic_id, int32_t partition) override;
  absl::StatusOr<std::vector<WriteSet::ProducerUpdate>> LoadProducerStates(
      TopicId topic_id) override;
  absl::StatusOr<std::vector<WriteSet::DedupPut>> LoadDedupEntries(TopicId topic_id) override;
  absl::StatusOr<std::vector<WriteSet::EpochStart>> LoadEpochStarts(TopicId topic_id) override;
  absl::Status CreateTopic(const TopicMeta& topic) override;
  absl::Status UpdateTopic(const TopicMeta& topic) override;
  absl::Status DeleteTopic(const TopicMeta& topic) override;
  absl::StatusOr<std::vector<ProducerInfo>> LoadProducers() override;
  absl::Status SaveProducer(const ProducerInfo& producer) override;
  absl::Status Write(const WriteSet& writes, bool sync) override;
  absl::Status CheckSpace() const override { return space_.Check(); }
  absl::Status SyncWal() override;

  // Compacts the RocksDB key range of a whole topic so deleted records free their space now
  // (retention and compaction otherwise reclaim it as RocksDB compacts in the background).
  absl::Status CompactTopic(TopicId topic_id);
  // Live SST bytes of the database (an estimate from RocksDB's properties).
  int64_t LiveDataBytes() const;
  absl::StatusOr<std::vector<StoredRecord>> Read(TopicId topic_id, int32_t partition,
                                                 int64_t from, int64_t end, int32_t max_records,
                                                 int64_t max_bytes) override;
  // Per record: codec::AppendEncodedRecord.
  absl::StatusOr<EncodedRecords> ReadEncoded(TopicId topic_id, int32_t partition, int64_t from,
                                             int64_t end, int32_t max_records,
                                             int64_t max_bytes) override;
  absl::StatusOr<std::unique_ptr<ReplicaRecords>> DecodeRecords(std::string bytes) override;

 private:
  RocksDbLogStore(rocksdb_util::OpenDb db, const std::string& path, int64_t max_chunk_bytes);
  // Adds the WriteSet's record deletes and appends to `batch`, reading the chunks that deletes
  // cut into (rocksdb_log_store_records.cc; Write runs on one thread, so they cannot change
  // meanwhile).
  absl::Status AddRecordWrites(const WriteSet& writes, rocksdb::WriteBatch* batch);
  // Calls `take` with each record of `partition` in [from, end), in offset order, until it
  // returns false or an error (returned).
  absl::Status Scan(
      TopicId topic_id, int32_t partition, int64_t from, int64_t end,
      absl::FunctionRef<absl::StatusOr<bool>(int64_t offset, std::string_view value)> take);
  absl::StatusOr<rocksdb_util::OpenDb::Handle> TopicHandle(TopicId topic_id) const;
  // Calls fn(key, value) for every meta key starting with `prefix`.
  absl::Status ScanMeta(const std::string& prefix,
                        const std::function<absl::Status(std::string_view, std::string_view)>& fn);

  rocksdb_util::OpenDb db_;
  const rocksdb_util::SpaceGuard space_;  // checked before every write that adds data
  rocksdb_util::OpenDb::Handle meta_;
  const int64_t max_chunk_bytes_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<TopicId, rocksdb_util::OpenDb::Handle> topics_ ABSL_GUARDED_BY(mu_);
};

}  // namespace conduit::log_broker
