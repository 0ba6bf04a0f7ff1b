#include "common/security/authorizer.h"

#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/security/principal.h"

namespace conduit::security {
namespace {

bool PatternMatches(const AclEntry& entry, absl::string_view name) {
  switch (entry.pattern_type) {
    case PatternType::kLiteral:
      return name == entry.resource_name;
    case PatternType::kPrefixed:
      return absl::StartsWith(name, entry.resource_name);
    case PatternType::kAny:
      return true;
  }
  return false;
}

bool EntryMatches(const AclEntry& entry, absl::string_view principal, ResourceType type,
                  absl::string_view name) {
  return entry.resource_type == type &&
         (entry.principal == kAnyPrincipal || entry.principal == principal) &&
         PatternMatches(entry, name);
}

// Whether an allow of `granted` also allows `requested`.
bool AllowCovers(Operation granted, Operation requested) {
  if (granted == requested) return true;
  if (requested != Operation::kDescribe) return false;
  return granted == Operation::kRead || granted == Operation::kWrite ||
         granted == Operation::kDelete || granted == Operation::kAlter;
}

absl::Status ValidateAll(const std::vector<AclEntry>& acls) {
  for (size_t i = 0; i < acls.size(); ++i) {
    if (absl::Status s = ValidateAclEntry(acls[i]); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("acl entry ", i, ": ", s.message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status Authorizer::ReplaceAcls(std::vector<AclEntry> acls) {
  if (absl::Status s = ValidateAll(acls); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  acls_ = std::move(acls);
  return absl::OkStatus();
}

absl::Status Authorizer::ReplaceStoredAcls(std::vector<AclEntry> acls) {
  if (absl::Status s = ValidateAll(acls); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  stored_ = std::move(acls);
  return absl::OkStatus();
}

absl::Status Authorizer::ReplaceSuperusers(std::vector<std::string> superusers) {
  absl::flat_hash_set<std::string> set;
  for (std::string& principal : superusers) {
    if (absl::Status s = ValidatePrincipal(principal); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("superuser ", s.message()));
    }
    set.insert(std::move(principal));
  }
  absl::MutexLock lock(&mu_);
  superusers_ = std::move(set);
  return absl::OkStatus();
}

std::vector<AclEntry> Authorizer::Acls() const {
  absl::ReaderMutexLock lock(&mu_);
  return acls_;
}

std::vector<AclEntry> Authorizer::StoredAcls() const {
  absl::ReaderMutexLock lock(&mu_);
  return stored_;
}

Decision Authorizer::Authorize(absl::string_view principal, ResourceType resource_type,
                               absl::string_view resource_name, Operation operation) const {
  if (principal.empty()) return {false, "the caller has no principal"};
  absl::ReaderMutexLock lock(&mu_);
  if (superusers_.contains(principal)) {
    return {true, absl::StrCat("principal '", principal, "' is a superuser")};
  }
  const AclEntry* allow = nullptr;
  for (const std::vector<AclEntry>* set : {&acls_, &stored_}) {
    for (const AclEntry& entry : *set) {
      if (!EntryMatches(entry, principal, resource_type, resource_name)) continue;
      if (entry.permission == Permission::kDeny) {
        if (entry.operation == operation) {
          return {false, absl::StrCat("denied by acl '", FormatAclEntry(entry), "'")};
        }
      } else if (allow == nullptr && AllowCovers(entry.operation, operation)) {
        allow = &entry;  // keep scanning: a later deny still wins
      }
    }
  }
  if (allow != nullptr) {
    std::string reason = absl::StrCat("allowed by acl '", FormatAclEntry(*allow), "'");
    if (allow->operation != operation) {
      absl::StrAppend(&reason, " (", OperationName(allow->operation), " implies ",
                      OperationName(operation), ")");
    }
    return {true, std::move(reason)};
  }
  return {false, absl::StrCat("no acl allows '", principal, "' to ", OperationName(operation), " ",
                              ResourceTypeName(resource_type), " '",
                              absl::CHexEscape(resource_name), "'")};
}

}  // namespace conduit::security
