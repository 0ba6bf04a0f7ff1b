#include "common/security/acl.h"

#include <array>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/security/principal.h"

namespace conduit::security {
namespace {

constexpr std::array<absl::string_view, 4> kResourceTypeNames = {"topic", "group", "queue",
                                                                 "cluster"};
constexpr std::array<absl::string_view, 3> kPatternTypeNames = {"literal", "prefixed", "any"};
constexpr std::array<absl::string_view, 8> kOperationNames = {
    "Read", "Write", "Create", "Delete", "Alter", "Describe", "Redrive", "ViewPayload"};
constexpr std::array<absl::string_view, 2> kPermissionNames = {"allow", "deny"};

// One name per enumerator, in declaration order.
static_assert(kResourceTypeNames.size() == static_cast<size_t>(ResourceType::kCluster) + 1);
static_assert(kPatternTypeNames.size() == static_cast<size_t>(PatternType::kAny) + 1);
static_assert(kOperationNames.size() == static_cast<size_t>(Operation::kViewPayload) + 1);
static_assert(kPermissionNames.size() == static_cast<size_t>(Permission::kDeny) + 1);

// A negative value converts to a huge index and is out of range too.
template <typename E>
size_t IndexOf(E value) {
  return static_cast<size_t>(static_cast<std::underlying_type_t<E>>(value));
}

template <typename E, size_t N>
bool Known(E value, const std::array<absl::string_view, N>& names) {
  return IndexOf(value) < N;
}

template <typename E, size_t N>
absl::string_view NameOf(E value, const std::array<absl::string_view, N>& names) {
  return Known(value, names) ? names[IndexOf(value)] : "invalid";
}

template <typename E, size_t N>
std::optional<E> Parse(absl::string_view name, const std::array<absl::string_view, N>& names) {
  for (size_t i = 0; i < N; ++i) {
    if (absl::EqualsIgnoreCase(name, names[i])) return static_cast<E>(i);
  }
  return std::nullopt;
}

bool HasSpaceOrControl(absl::string_view s) {
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (absl::ascii_isspace(u) || absl::ascii_iscntrl(u)) return true;
  }
  return false;
}

absl::Status ValidateResourceName(const AclEntry& entry) {
  const absl::string_view name = entry.resource_name;
  if (name.empty()) return absl::InvalidArgumentError("acl resource name is empty");
  if (name.size() > kMaxResourceNameBytes) {
    return absl::InvalidArgumentError(absl::StrCat("acl resource name is ", name.size(),
                                                   " bytes, longer than ", kMaxResourceNameBytes));
  }
  if (HasSpaceOrControl(name)) {
    return absl::InvalidArgumentError(absl::StrCat("acl resource name '", absl::CHexEscape(name),
                                                   "' contains whitespace or a control byte"));
  }
  const bool any_name = name == kAnyResourceName;
  if (entry.pattern_type == PatternType::kAny && !any_name) {
    return absl::InvalidArgumentError(
        absl::StrCat("acl pattern 'any' takes the resource name '*', not '", name, "'"));
  }
  if (entry.pattern_type != PatternType::kAny && any_name) {
    return absl::InvalidArgumentError(
        absl::StrCat("acl resource name '*' needs pattern 'any', not '",
                     PatternTypeName(entry.pattern_type), "'"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateAclEntry(const AclEntry& entry) {
  if (entry.principal != kAnyPrincipal) {
    if (absl::Status s = ValidatePrincipal(entry.principal); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("acl ", s.message()));
    }
  }
  if (!Known(entry.resource_type, kResourceTypeNames)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "acl resource type ", static_cast<int>(entry.resource_type), " is not a resource type"));
  }
  if (!Known(entry.pattern_type, kPatternTypeNames)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "acl pattern type ", static_cast<int>(entry.pattern_type), " is not a pattern type"));
  }
  if (!Known(entry.operation, kOperationNames)) {
    return absl::InvalidArgumentError(
        absl::StrCat("acl operation ", static_cast<int>(entry.operation), " is not an operation"));
  }
  if (!Known(entry.permission, kPermissionNames)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "acl permission ", static_cast<int>(entry.permission), " is neither allow nor deny"));
  }
  return ValidateResourceName(entry);
}

std::string FormatAclEntry(const AclEntry& entry) {
  return absl::StrCat(PermissionName(entry.permission), " ", entry.principal, " ",
                      ResourceTypeName(entry.resource_type), " ",
                      PatternTypeName(entry.pattern_type), " ", entry.resource_name, " ",
                      OperationName(entry.operation));
}

absl::string_view ResourceTypeName(ResourceType type) { return NameOf(type, kResourceTypeNames); }
absl::string_view PatternTypeName(PatternType type) { return NameOf(type, kPatternTypeNames); }
absl::string_view OperationName(Operation operation) { return NameOf(operation, kOperationNames); }
absl::string_view PermissionName(Permission permission) {
  return NameOf(permission, kPermissionNames);
}

std::optional<ResourceType> ParseResourceType(absl::string_view name) {
  return Parse<ResourceType>(name, kResourceTypeNames);
}
std::optional<PatternType> ParsePatternType(absl::string_view name) {
  return Parse<PatternType>(name, kPatternTypeNames);
}
std::optional<Operation> ParseOperation(absl::string_view name) {
  return Parse<Operation>(name, kOperationNames);
}
std::optional<Permission> ParsePermission(absl::string_view name) {
  return Parse<Permission>(name, kPermissionNames);
}

bool IsAdminOperation(Operation operation) {
  return operation == Operation::kCreate || operation == Operation::kDelete ||
         operation == Operation::kAlter || operation == Operation::kRedrive;
}

std::string OperationNames() { return absl::StrJoin(kOperationNames, ", "); }

}  // namespace conduit::security
