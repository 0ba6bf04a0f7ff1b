#pragma once

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace conduit::security {

// The ACL model, Kafka's shape: principal (or `*`) × resource type × pattern ×
// operation × allow/deny. The decision is Authorizer's (authorizer.h); the bootstrap file format
// is acl_file.h's.

enum class ResourceType { kTopic, kGroup, kQueue, kCluster };

// How an entry's resource name matches a requested name.
enum class PatternType {
  kLiteral,   // the names are equal
  kPrefixed,  // the requested name starts with the entry's ("orders." matches "orders.eu")
  kAny,       // every name; the entry's name is "*"
};

enum class Operation {
  kRead,
  kWrite,
  kCreate,
  kDelete,
  kAlter,
  kDescribe,  // implied by an allow of Read, Write, Delete or Alter
  kRedrive,
  kViewPayload,
};

enum class Permission { kAllow, kDeny };

// The resource name of kAny entries.
inline constexpr absl::string_view kAnyResourceName = "*";

// Longest resource name (or prefix) an entry may hold.
inline constexpr size_t kMaxResourceNameBytes = 1024;

// One ACL rule. Plain value; see ValidateAclEntry for what a well-formed one holds.
struct AclEntry {
  std::string principal;  // "User:alice", or kAnyPrincipal
  ResourceType resource_type = ResourceType::kTopic;
  PatternType pattern_type = PatternType::kLiteral;
  std::string resource_name;  // the name, the prefix, or kAnyResourceName
  Operation operation = Operation::kRead;
  Permission permission = Permission::kAllow;

  friend bool operator==(const AclEntry&, const AclEntry&) = default;
};

// Checks an entry: a valid principal or `*`; enums in range; a non-empty resource name of at
// most kMaxResourceNameBytes without whitespace or control bytes; the name of a kAny entry is
// "*" and a literal or prefixed name is not "*" (use kAny). Returns INVALID_ARGUMENT naming the
// problem.
absl::Status ValidateAclEntry(const AclEntry& entry);

// The entry as one line of the bootstrap file format (acl_file.h), e.g.
// "allow User:alice topic prefixed orders. Write". Also the form decisions quote.
std::string FormatAclEntry(const AclEntry& entry);

// Names as written in the file format and in messages: "topic", "prefixed", "Write", "allow".
// An out-of-range value gives "invalid".
absl::string_view ResourceTypeName(ResourceType type);
absl::string_view PatternTypeName(PatternType type);
absl::string_view OperationName(Operation operation);
absl::string_view PermissionName(Permission permission);

// The inverses, case-insensitive; nullopt for an unknown name.
std::optional<ResourceType> ParseResourceType(absl::string_view name);
std::optional<PatternType> ParsePatternType(absl::string_view name);
std::optional<Operation> ParseOperation(absl::string_view name);
std::optional<Permission> ParsePermission(absl::string_view name);

// Create, Delete, Alter and Redrive: the admin operations, whose calls the audit trail records
// when allowed too (audit.h).
bool IsAdminOperation(Operation operation);

// Every operation's name joined by ", " (for "expected one of ..." messages).
std::string OperationNames();

}  // namespace conduit::security
