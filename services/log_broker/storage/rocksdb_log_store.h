#pragma once

#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "common/rocksdb/rocksdb_util.h"
#include "services/log_broker/domain/log_store.h"

namespace conduit::log_broker {

// LogStore on one RocksDB instance: a "meta" column family for topic metadata and one column
// family per topic for its records (see key_schema.h). Topic creation and deletion are ordered
// so that a crash between steps leaves at most an orphan column family, dropped at next Open.
//
// Thread-safe.
class RocksDbLogStore final : public LogStore {
 public:
  // Opens or creates the store at `path`.
  static absl::StatusOr<std::unique_ptr<RocksDbLogStore>> Open(const std::string& path);
  ~RocksDbLogStore() override;

  absl::StatusOr<std::vector<TopicMeta>> LoadTopics() override;
  absl::StatusOr<PartitionExtent> RecoverPartition(uint64_t topic_id, int32_t partition) override;
  absl::Status CreateTopic(const TopicMeta& topic) override;
  absl::Status DeleteTopic(const TopicMeta& topic) override;
  absl::Status Append(const std::vector<AppendEntry>& entries, bool sync) override;
  absl::Status SyncWal() override;
  absl::StatusOr<std::vector<StoredRecord>> Read(uint64_t topic_id, int32_t partition,
                                                 int64_t from, int64_t end, int32_t max_records,
                                                 int64_t max_bytes) override;

 private:
  explicit RocksDbLogStore(rocksdb_util::OpenDb db);
  absl::StatusOr<rocksdb_util::OpenDb::Handle> TopicHandle(uint64_t topic_id) const;

  rocksdb_util::OpenDb db_;
  rocksdb_util::OpenDb::Handle meta_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<uint64_t, rocksdb_util::OpenDb::Handle> topics_ ABSL_GUARDED_BY(mu_);
};

}  // namespace conduit::log_broker
