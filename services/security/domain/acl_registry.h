#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/security/acl.h"
#include "common/security/authorizer.h"
#include "services/security/domain/security_store.h"

namespace conduit::security_service {

// Matches an entry when every set field equals the entry's; an empty filter matches all.
struct AclFilter {
  std::optional<std::string> principal;
  std::optional<security::ResourceType> resource_type;
  std::optional<security::PatternType> pattern_type;
  std::optional<std::string> resource_name;
  std::optional<security::Operation> operation;
  std::optional<security::Permission> permission;

  bool Matches(const security::AclEntry& entry) const;
};

enum class AclSource { kStored, kFile };

struct ListedAcl {
  security::AclEntry entry;
  AclSource source;
};

// Most entries one CreateAcls may carry, and filters one DeleteAcls.
inline constexpr size_t kMaxAclsPerCall = 1000;
inline constexpr size_t kMaxFiltersPerCall = 100;
// Most entries the store holds (checks scan them all).
inline constexpr size_t kMaxStoredAcls = 10000;

// The stored ACL entries (the ACL RPCs'): durable in an AclStore and, after every change,
// swapped whole into the Authorizer every call checks (Authorizer::ReplaceStoredAcls), so a
// created deny applies to the next call. The bootstrap file's entries stay the Authorizer's own
// (reloaded from the file); listings show both.
//
// Thread-safe: changes are serialised; the store is written before the Authorizer is swapped, so
// a change the caller saw succeed survives a restart.
class AclRegistry {
 public:
  // `authorizer` null: authorisation is off on this server, and changes are refused
  // (FAILED_PRECONDITION) since they would have no effect.
  AclRegistry(AclStore* store, std::shared_ptr<security::Authorizer> authorizer)
      : store_(store), authorizer_(std::move(authorizer)) {}

  // Reads the stored entries and hands them to the Authorizer. Also how a change another server
  // made to a shared store (etcd) is taken in.
  absl::Status Load();

  // Stores the entries not stored yet; returns how many were new. INVALID_ARGUMENT (an invalid
  // entry, named by index; none or too many) changes nothing; RESOURCE_EXHAUSTED past
  // kMaxStoredAcls.
  absl::StatusOr<size_t> Create(std::vector<security::AclEntry> entries);
  // Removes the stored entries matching any filter; returns them.
  absl::StatusOr<std::vector<security::AclEntry>> Delete(const std::vector<AclFilter>& filters);
  // The file's entries then the stored ones, those matching `filter`.
  std::vector<ListedAcl> List(const AclFilter& filter) const;

 private:
  absl::Status Writable() const;

  // Under mu_: the store's entries (read again first, so a shared store's changes by other
  // servers count), then the change written, then stored_ and the Authorizer.
  absl::Status Refresh() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  AclStore* const store_;
  const std::shared_ptr<security::Authorizer> authorizer_;
  mutable absl::Mutex mu_;
  std::vector<security::AclEntry> stored_ ABSL_GUARDED_BY(mu_);
};

}  // namespace conduit::security_service
