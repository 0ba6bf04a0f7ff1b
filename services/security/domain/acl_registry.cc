#include "services/security/domain/acl_registry.h"

#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"

namespace conduit::security_service {

bool AclFilter::Matches(const security::AclEntry& entry) const {
  return (!principal || *principal == entry.principal) &&
         (!resource_type || *resource_type == entry.resource_type) &&
         (!pattern_type || *pattern_type == entry.pattern_type) &&
         (!resource_name || *resource_name == entry.resource_name) &&
         (!operation || *operation == entry.operation) &&
         (!permission || *permission == entry.permission);
}

absl::Status AclRegistry::Writable() const {
  if (authorizer_ != nullptr) return absl::OkStatus();
  return absl::FailedPreconditionError(
      "authorisation is off on this server: ACLs would have no effect (start it with "
      "--authorization or --acl-file)");
}

absl::Status AclRegistry::Load() {
  absl::MutexLock lock(&mu_);
  return Refresh();
}

absl::Status AclRegistry::Refresh() {
  auto stored = store_->LoadAcls();
  if (!stored.ok()) return stored.status();
  stored_ = *std::move(stored);
  if (authorizer_ == nullptr) return absl::OkStatus();
  return authorizer_->ReplaceStoredAcls(stored_);
}

absl::StatusOr<size_t> AclRegistry::Create(std::vector<security::AclEntry> entries) {
  if (absl::Status s = Writable(); !s.ok()) return s;
  if (entries.empty() || entries.size() > kMaxAclsPerCall) {
    return absl::InvalidArgumentError(
        absl::StrCat("entries: give 1..", kMaxAclsPerCall, ", got ", entries.size()));
  }
  for (size_t i = 0; i < entries.size(); ++i) {
    if (absl::Status s = security::ValidateAclEntry(entries[i]); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("entries[", i, "]: ", s.message()));
    }
  }
  absl::MutexLock lock(&mu_);
  if (absl::Status s = Refresh(); !s.ok()) return s;
  absl::flat_hash_set<std::string> known;
  for (const security::AclEntry& e : stored_) known.insert(security::FormatAclEntry(e));
  std::vector<security::AclEntry> added;
  for (security::AclEntry& e : entries) {
    if (known.insert(security::FormatAclEntry(e)).second) added.push_back(std::move(e));
  }
  if (added.empty()) return 0;
  if (stored_.size() + added.size() > kMaxStoredAcls) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "at most ", kMaxStoredAcls, " ACL entries are stored; ", stored_.size(), " are"));
  }
  if (absl::Status s = store_->WriteAcls(added, {}); !s.ok()) return s;
  stored_.insert(stored_.end(), added.begin(), added.end());
  if (absl::Status s = authorizer_->ReplaceStoredAcls(stored_); !s.ok()) return s;
  return added.size();
}

absl::StatusOr<std::vector<security::AclEntry>> AclRegistry::Delete(
    const std::vector<AclFilter>& filters) {
  if (absl::Status s = Writable(); !s.ok()) return s;
  if (filters.empty() || filters.size() > kMaxFiltersPerCall) {
    return absl::InvalidArgumentError(
        absl::StrCat("filters: give 1..", kMaxFiltersPerCall, ", got ", filters.size()));
  }
  absl::MutexLock lock(&mu_);
  if (absl::Status s = Refresh(); !s.ok()) return s;
  std::vector<security::AclEntry> kept, removed;
  for (const security::AclEntry& e : stored_) {
    bool match = false;
    for (const AclFilter& f : filters) match = match || f.Matches(e);
    (match ? removed : kept).push_back(e);
  }
  if (removed.empty()) return removed;
  if (absl::Status s = store_->WriteAcls({}, removed); !s.ok()) return s;
  stored_ = std::move(kept);
  if (absl::Status s = authorizer_->ReplaceStoredAcls(stored_); !s.ok()) return s;
  return removed;
}

std::vector<ListedAcl> AclRegistry::List(const AclFilter& filter) const {
  std::vector<ListedAcl> out;
  if (authorizer_ != nullptr) {
    for (security::AclEntry& e : authorizer_->Acls()) {
      if (filter.Matches(e)) out.push_back({std::move(e), AclSource::kFile});
    }
  }
  absl::MutexLock lock(&mu_);
  for (const security::AclEntry& e : stored_) {
    if (filter.Matches(e)) out.push_back({e, AclSource::kStored});
  }
  return out;
}

}  // namespace conduit::security_service
