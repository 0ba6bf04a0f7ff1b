#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/security/acl.h"
#include "common/security/audit.h"

namespace conduit::security_service {

// Where the stored ACL entries live: the server's RocksDB on one node
// (storage/rocksdb_security_store.h), etcd in a cluster (cluster/etcd_acl_store.h), so that
// every broker decides by the same entries. Thread-safe.
class AclStore {
 public:
  virtual ~AclStore() = default;

  // Every stored entry, in a stable order.
  virtual absl::StatusOr<std::vector<security::AclEntry>> LoadAcls() = 0;
  // Adds `add` and removes `remove` in one durable write.
  virtual absl::Status WriteAcls(const std::vector<security::AclEntry>& add,
                                 const std::vector<security::AclEntry>& remove) = 0;
};

// The server's own store: its ACL entries (on one node) and its audit trail. Thread-safe.
class SecurityStore : public AclStore {
 public:
  // The highest audit id stored, 0 when none.
  virtual absl::StatusOr<uint64_t> LastAuditId() = 0;
  // Appends records whose ids are set and above every stored one.
  virtual absl::Status AppendAudit(const std::vector<security::AuditRecord>& records) = 0;
  // Calls visit(record) for the records with id > after_id in id order until it returns false
  // or there are no more.
  virtual absl::Status ScanAudit(
      uint64_t after_id, const std::function<bool(const security::AuditRecord&)>& visit) = 0;
  // Removes the records older than `before` (from the oldest on, up to the first that is not).
  // Returns how many.
  virtual absl::StatusOr<uint64_t> TrimAudit(absl::Time before) = 0;
};

}  // namespace conduit::security_service
