#include "services/security/api/convert.h"

#include "absl/strings/str_cat.h"
#include "common/grpc/proto_time.h"

namespace conduit::security_service::api {
namespace {

// The domain value of proto enum `value` (domain = proto - 1); nullopt for 0 (unspecified).
template <typename T>
absl::StatusOr<std::optional<T>> Enum(int value, T last, absl::string_view field) {
  if (value == 0) return std::nullopt;
  if (value < 0 || value - 1 > static_cast<int>(last)) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": unknown value ", value));
  }
  return static_cast<T>(value - 1);
}

template <typename T>
absl::StatusOr<T> Required(int value, T last, absl::string_view field) {
  auto v = Enum<T>(value, last, field);
  if (!v.ok()) return v.status();
  if (!v->has_value()) return absl::InvalidArgumentError(absl::StrCat(field, " is required"));
  return **v;
}

template <typename T>
int ToEnum(T value) {
  return static_cast<int>(value) + 1;
}

}  // namespace

absl::StatusOr<security::AclEntry> FromProto(const spb::AclEntry& e, absl::string_view field) {
  security::AclEntry out;
  out.principal = e.principal();
  out.resource_name = e.resource_name();
  auto type = Required(e.resource_type(), security::ResourceType::kCluster,
                       absl::StrCat(field, ".resource_type"));
  auto pattern =
      Required(e.pattern_type(), security::PatternType::kAny, absl::StrCat(field, ".pattern_type"));
  auto op =
      Required(e.operation(), security::Operation::kViewPayload, absl::StrCat(field, ".operation"));
  auto permission =
      Required(e.permission(), security::Permission::kDeny, absl::StrCat(field, ".permission"));
  for (const absl::Status& s :
       {type.status(), pattern.status(), op.status(), permission.status()}) {
    if (!s.ok()) return s;
  }
  out.resource_type = *type;
  out.pattern_type = *pattern;
  out.operation = *op;
  out.permission = *permission;
  return out;
}

absl::StatusOr<AclFilter> FromProto(const spb::AclFilter& f, absl::string_view field) {
  AclFilter out;
  if (!f.principal().empty()) out.principal = f.principal();
  if (!f.resource_name().empty()) out.resource_name = f.resource_name();
  auto type = Enum(f.resource_type(), security::ResourceType::kCluster,
                   absl::StrCat(field, ".resource_type"));
  auto pattern =
      Enum(f.pattern_type(), security::PatternType::kAny, absl::StrCat(field, ".pattern_type"));
  auto op =
      Enum(f.operation(), security::Operation::kViewPayload, absl::StrCat(field, ".operation"));
  auto permission =
      Enum(f.permission(), security::Permission::kDeny, absl::StrCat(field, ".permission"));
  for (const absl::Status& s :
       {type.status(), pattern.status(), op.status(), permission.status()}) {
    if (!s.ok()) return s;
  }
  out.resource_type = *type;
  out.pattern_type = *pattern;
  out.operation = *op;
  out.permission = *permission;
  return out;
}

absl::StatusOr<AuditQuery> FromProto(const spb::ListAuditRequest& r) {
  AuditQuery q;
  q.after_id = r.after_id();
  q.limit = r.limit() == 0 ? 100 : r.limit();
  q.principal = r.principal();
  q.resource_name = r.resource_name();
  q.denied_only = r.denied_only();
  if (r.has_since()) {
    if (r.since().nanos() < 0 || r.since().nanos() > 999'999'999) {
      return absl::InvalidArgumentError("since: nanos must be 0..999999999");
    }
    q.since = grpc_util::FromTimestamp(r.since());
  }
  return q;
}

void ToProto(const security::AclEntry& e, spb::AclEntry* out) {
  out->set_principal(e.principal);
  out->set_resource_type(static_cast<spb::ResourceType>(ToEnum(e.resource_type)));
  out->set_pattern_type(static_cast<spb::PatternType>(ToEnum(e.pattern_type)));
  out->set_resource_name(e.resource_name);
  out->set_operation(static_cast<spb::Operation>(ToEnum(e.operation)));
  out->set_permission(static_cast<spb::Permission>(ToEnum(e.permission)));
}

void ToProto(const security::AuditRecord& r, spb::AuditEntry* out) {
  out->set_id(r.id);
  grpc_util::SetTimestamp(r.time, out->mutable_time());
  out->set_principal(r.principal);
  out->set_peer(r.peer);
  out->set_method(r.method);
  for (const security::AuditCheck& c : r.checks) {
    spb::AuditCheck* check = out->add_checks();
    check->set_resource_type(static_cast<spb::ResourceType>(ToEnum(c.resource_type)));
    check->set_resource_name(c.resource_name);
    check->set_operation(static_cast<spb::Operation>(ToEnum(c.operation)));
    check->set_allowed(c.allowed);
    check->set_reason(c.reason);
  }
  out->set_status_code(r.status_code);
  out->set_status_message(r.status_message);
  for (const std::string& d : r.details) out->add_details(d);
  out->set_denied(r.denied);
}

}  // namespace conduit::security_service::api
