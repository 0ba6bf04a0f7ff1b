#include "services/security/domain/audit_trail.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace conduit::security_service {
namespace {

bool Wanted(const AuditQuery& q, const security::AuditRecord& r) {
  if (q.denied_only && !r.denied) return false;
  if (!q.principal.empty() && r.principal != q.principal) return false;
  if (q.since && r.time < *q.since) return false;
  if (q.resource_name.empty()) return true;
  for (const security::AuditCheck& c : r.checks) {
    if (c.resource_name == q.resource_name) return true;
  }
  return false;
}

}  // namespace

absl::Status AuditTrail::Open() {
  auto last = store_->LastAuditId();
  if (!last.ok()) return last.status();
  absl::MutexLock lock(&mu_);
  last_id_ = *last;
  return absl::OkStatus();
}

void AuditTrail::Record(security::AuditRecord record) {
  absl::MutexLock lock(&mu_);
  record.id = last_id_ + 1;
  if (absl::Status s = store_->AppendAudit({record}); !s.ok()) {
    ++dropped_;
    last_error_ = std::move(s);
    return;
  }
  last_id_ = record.id;
}

std::pair<uint64_t, absl::Status> AuditTrail::Dropped() const {
  absl::MutexLock lock(&mu_);
  return {dropped_, last_error_};
}

absl::StatusOr<AuditPage> AuditTrail::List(const AuditQuery& query) const {
  if (query.limit == 0 || query.limit > kMaxAuditPage) {
    return absl::InvalidArgumentError(
        absl::StrCat("limit: give 1..", kMaxAuditPage, ", got ", query.limit));
  }
  AuditPage page;
  size_t examined = 0;
  bool more = false;
  uint64_t last_seen = query.after_id;
  absl::Status s = store_->ScanAudit(query.after_id, [&](const security::AuditRecord& r) {
    if (page.records.size() == query.limit || examined == kMaxAuditScan) {
      more = true;
      return false;
    }
    ++examined;
    last_seen = r.id;
    if (Wanted(query, r)) page.records.push_back(r);
    return true;
  });
  if (!s.ok()) return s;
  page.next_after_id = more ? last_seen : 0;
  return page;
}

}  // namespace conduit::security_service
