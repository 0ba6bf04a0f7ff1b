#pragma once

#include <memory>
#include <string>

#include "common/rocksdb/rocksdb_util.h"
#include "common/rocksdb/space_guard.h"
#include "services/coordinator/domain/coordinator_store.h"

namespace conduit::coordinator {

// CoordinatorStore on one RocksDB instance with column families groups, members, offsets and
// audit (storage/key_schema.h); values are storage/records.proto messages. Thread-safe.
class RocksDbCoordinatorStore final : public CoordinatorStore {
 public:
  static absl::StatusOr<std::unique_ptr<RocksDbCoordinatorStore>> Open(const std::string& path);

  absl::StatusOr<StoredState> Load() override;
  absl::Status Write(const std::vector<const CoordinatorWrite*>& writes) override;
  absl::Status CheckSpace() const override { return space_.Check(); }
  absl::StatusOr<std::vector<AuditRecord>> ListAudit(const std::string& group_id,
                                                     uint64_t before_id, int limit) override;

 private:
  RocksDbCoordinatorStore(rocksdb_util::OpenDb db, const std::string& path);

  rocksdb_util::OpenDb db_;
  const rocksdb_util::SpaceGuard space_;  // checked before every write that adds data
  rocksdb_util::OpenDb::Handle groups_, members_, offsets_, audit_;
};

}  // namespace conduit::coordinator
