#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/rocksdb/rocksdb_util.h"
#include "services/security/domain/security_store.h"

namespace conduit::security_service {

// SecurityStore on one RocksDB instance (<data dir>/security) with two column families:
//   acls   key: the entry in the ACL file format (security::FormatAclEntry; unique per entry),
//          value: empty. Loaded by parsing the keys back (security::ParseAclFile).
//   audit  key: the record id, 8 bytes big-endian (so key order is id order), value: a
//          storage/records.proto Audit.
// ACL writes are synced (a created ACL survives a power loss); audit appends go to the WAL
// unsynced (they survive a process crash; an OS crash may lose the last moments). Trimming
// keeps the newest record, so ids continue after a restart. Thread-safe.
class RocksDbSecurityStore final : public SecurityStore {
 public:
  static absl::StatusOr<std::unique_ptr<RocksDbSecurityStore>> Open(const std::string& path);

  absl::StatusOr<std::vector<security::AclEntry>> LoadAcls() override;
  absl::Status WriteAcls(const std::vector<security::AclEntry>& add,
                         const std::vector<security::AclEntry>& remove) override;
  absl::StatusOr<uint64_t> LastAuditId() override;
  absl::Status AppendAudit(const std::vector<security::AuditRecord>& records) override;
  absl::Status ScanAudit(uint64_t after_id,
                         const std::function<bool(const security::AuditRecord&)>& visit) override;
  absl::StatusOr<uint64_t> TrimAudit(absl::Time before) override;

 private:
  explicit RocksDbSecurityStore(rocksdb_util::OpenDb db);

  rocksdb_util::OpenDb db_;
  rocksdb_util::OpenDb::Handle acls_, audit_;
};

}  // namespace conduit::security_service
