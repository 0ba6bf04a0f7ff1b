#pragma once

// Proto <-> domain conversions of the security service. The proto enums are the domain's shifted
// by one (0 is UNSPECIFIED: "any" in a filter, invalid in an entry).

#include "absl/status/statusor.h"
#include "common/security/acl.h"
#include "common/security/audit.h"
#include "conduit/security/v1/security.pb.h"
#include "services/security/domain/acl_registry.h"
#include "services/security/domain/audit_trail.h"

namespace conduit::security_service::api {

namespace spb = ::conduit::security::v1;

// INVALID_ARGUMENT naming `field` for an unspecified or unknown enum value.
absl::StatusOr<security::AclEntry> FromProto(const spb::AclEntry& entry, absl::string_view field);
absl::StatusOr<AclFilter> FromProto(const spb::AclFilter& filter, absl::string_view field);
absl::StatusOr<AuditQuery> FromProto(const spb::ListAuditRequest& request);

void ToProto(const security::AclEntry& entry, spb::AclEntry* out);
void ToProto(const security::AuditRecord& record, spb::AuditEntry* out);

}  // namespace conduit::security_service::api
