#include "services/security/api/convert.h"

#include <optional>
#include <string>

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
int ToEnum(T value) {
  return static_cast<int>(value) + 1;
}

// The four enum fields an entry and a filter share, unspecified ones nullopt; with `required`
// an unspecified one is INVALID_ARGUMENT too.
struct AclEnums {
  std::optional<security::ResourceType> type;
  std::optional<security::PatternType> pattern;
  std::optional<security::Operation> operation;
  std::optional<security::Permission> permission;
};

template <typename Message>
absl::StatusOr<AclEnums> ReadEnums(const Message& m, absl::string_view field, bool required) {
  AclEnums out;
  absl::Status status;
  auto read = [&](int value, auto last, const char* name, auto* into) {
    if (!status.ok()) return;
    const std::string path = absl::StrCat(field, ".", name);
    auto v = Enum(value, last, path);
    if (!v.ok()) {
      status = v.status();
    } else if (!v->has_value() && required) {
      status = absl::InvalidArgumentError(absl::StrCat(path, " is required"));
    } else {
      *into = *v;
    }
  };
  read(m.resource_type(), security::ResourceType::kCluster, "resource_type", &out.type);
  read(m.pattern_type(), security::PatternType::kAny, "pattern_type", &out.pattern);
  read(m.operation(), security::Operation::kViewPayload, "operation", &out.operation);
  read(m.permission(), security::Permission::kDeny, "permission", &out.permission);
  if (!status.ok()) return status;
  return out;
}

}  // namespace

absl::StatusOr<security::AclEntry> FromProto(const spb::AclEntry& e, absl::string_view field) {
  auto enums = ReadEnums(e, field, /*required=*/true);
  if (!enums.ok()) return enums.status();
  security::AclEntry out;
  out.principal = e.principal();
  out.resource_name = e.resource_name();
  out.resource_type = *enums->type;
  out.pattern_type = *enums->pattern;
  out.operation = *enums->operation;
  out.permission = *enums->permission;
  return out;
}

absl::StatusOr<AclFilter> FromProto(const spb::AclFilter& f, absl::string_view field) {
  auto enums = ReadEnums(f, field, /*required=*/false);
  if (!enums.ok()) return enums.status();
  AclFilter out;
  if (!f.principal().empty()) out.principal = f.principal();
  if (!f.resource_name().empty()) out.resource_name = f.resource_name();
  out.resource_type = enums->type;
  out.pattern_type = enums->pattern;
  out.operation = enums->operation;
  out.permission = enums->permission;
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
