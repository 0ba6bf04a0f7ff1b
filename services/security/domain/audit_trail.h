#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/security/audit.h"
#include "services/security/domain/security_store.h"

namespace conduit::security_service {

// What ListAudit asks for.
struct AuditQuery {
  uint64_t after_id = 0;
  size_t limit = 100;         // 1..kMaxAuditPage
  std::string principal;      // empty: any
  std::string resource_name;  // empty: any; else a check on a resource of this name
  bool denied_only = false;
  std::optional<absl::Time> since;
};

struct AuditPage {
  std::vector<security::AuditRecord> records;
  // Where the next page starts; 0 when the scan reached the end of the trail.
  uint64_t next_after_id = 0;
};

inline constexpr size_t kMaxAuditPage = 1000;
// Most records one query examines (a narrow filter over a long trail pages on).
inline constexpr size_t kMaxAuditScan = 100000;

// The audit trail of this server: records from the audit interceptor get
// increasing ids and are written to the store as they come (on the answering thread, before the
// client sees the status), listed by queries, and trimmed past the retention.
// A record the store fails to take is dropped and counted (Dropped): auditing never fails a
// call.
// Thread-safe.
class AuditTrail final : public security::AuditSink {
 public:
  explicit AuditTrail(SecurityStore* store) : store_(store) {}

  // Continues the ids after the stored ones.
  absl::Status Open();

  void Record(security::AuditRecord record) override;

  absl::StatusOr<AuditPage> List(const AuditQuery& query) const;

  // How many records were dropped so far, and the last store error.
  std::pair<uint64_t, absl::Status> Dropped() const;

  // Removes the records older than `before`; returns how many.
  absl::StatusOr<uint64_t> Trim(absl::Time before) { return store_->TrimAudit(before); }

 private:
  SecurityStore* const store_;
  mutable absl::Mutex mu_;  // orders ids with appends
  uint64_t last_id_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t dropped_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status last_error_ ABSL_GUARDED_BY(mu_);
};

}  // namespace conduit::security_service
