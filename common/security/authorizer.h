#pragma once

#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "common/security/acl.h"

namespace conduit::security {

// The outcome of one authorisation check. `reason` names the rule that decided, quoted in the
// ACL file format, for audit lines and PERMISSION_DENIED messages, e.g.
// "denied by acl 'deny * topic literal orders.pii Write'".
struct Decision {
  bool allowed = false;
  std::string reason;
};

// Decides whether a principal may perform an operation on a resource, from a set of ACL entries
// and a set of superusers. The rules, in order:
//   1. An empty principal is denied (the transport names unauthenticated callers, see
//      kAnonymousPrincipal).
//   2. A superuser is allowed, whatever the entries say.
//   3. An entry matches when its principal is the caller's or `*`, its resource type is the
//      requested one, and its pattern matches the name: literal = equal, prefixed = the name
//      starts with the entry's name, any = every name.
//   4. A matching deny of the operation denies (deny wins over allow).
//   5. A matching allow of the operation allows; Describe is also allowed by an allow of Read,
//      Write, Delete or Alter. (A deny of Read does not deny Describe: as in Kafka, implication
//      widens allows only.)
//   6. Otherwise denied: no matching allow means no access.
// Among several matching entries the reason quotes the first in the order they were given.
//
// Each check scans the entries of the requested resource type: meant for hundreds of entries.
//
// Thread-safe: Authorize may run on any number of threads while ReplaceAcls or
// ReplaceSuperusers swaps a set; each check sees either the old set or the new one, never a mix.
class Authorizer {
 public:
  Authorizer() = default;
  Authorizer(const Authorizer&) = delete;
  Authorizer& operator=(const Authorizer&) = delete;

  // Replaces every ACL entry of the bootstrap file at once. Validates each first
  // (ValidateAclEntry); on the first invalid one returns INVALID_ARGUMENT naming its index and
  // keeps the old set.
  absl::Status ReplaceAcls(std::vector<AclEntry> acls);
  // The same for the stored entries (the ACL RPCs', services/security). Checks consider both
  // sets, the file's first.
  absl::Status ReplaceStoredAcls(std::vector<AclEntry> acls);

  // Replaces the superusers at once. Each must be a concrete principal (ValidatePrincipal; `*`
  // is refused); otherwise returns INVALID_ARGUMENT and keeps the old set.
  absl::Status ReplaceSuperusers(std::vector<std::string> superusers);

  // The current entries, in the order given to ReplaceAcls (ReplaceStoredAcls).
  std::vector<AclEntry> Acls() const;
  std::vector<AclEntry> StoredAcls() const;

  // The decision for `principal` performing `operation` on the resource `resource_name` of
  // `resource_type` (rules above). Never fails: an out-of-range enum is simply matched by no
  // entry, so it is denied.
  Decision Authorize(absl::string_view principal, ResourceType resource_type,
                     absl::string_view resource_name, Operation operation) const;

 private:
  mutable absl::Mutex mu_;
  std::vector<AclEntry> acls_ ABSL_GUARDED_BY(mu_);
  std::vector<AclEntry> stored_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<std::string> superusers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace conduit::security
