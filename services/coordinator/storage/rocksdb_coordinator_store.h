#pragma once

#include <memory>
#include <string>

#include "common/rocksdb/rocksdb_util.h"
#include "services/coordinator/domain/coordinator_store.h"

namespace conduit::coordinator {

// CoordinatorStore on one RocksDB instance with column families groups, members, offsets and
// audit (storage/key_schema.h); values are storage/records.proto messages. Thread-safe.
class RocksDbCoordinatorStore final : public CoordinatorStore {
 public:
  static absl::StatusOr<std::unique_ptr<RocksDbCoordinatorStore>> Open(const std::string& path);

  absl::StatusOr<StoredState> Load() override;
  absl::Status Write(const std::vector<const CoordinatorWrite*>& writes) override;
  absl::Status Resume() override { return db_.Resume(); }
  absl::StatusOr<std::vector<AuditRecord>> ListAudit(const std::string& group_id,
                                                     uint64_t before_id, int limit) override;

 private:
  explicit RocksDbCoordinatorStore(rocksdb_util::OpenDb db);

  rocksdb_util::OpenDb db_;
  rocksdb_util::OpenDb::Handle groups_, members_, offsets_, audit_;
};

}  // namespace conduit::coordinator
