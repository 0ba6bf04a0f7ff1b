#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "services/coordinator/domain/types.h"

namespace conduit::coordinator {

// One change of the coordinator's state, made durable atomically (one WriteBatch).
struct CoordinatorWrite {
  std::vector<GroupRecord> put_groups;
  // Removes the group with its members, offsets and audit entries.
  std::vector<std::string> delete_groups;
  std::vector<MemberRecord> put_members;
  std::vector<std::pair<std::string, std::string>> delete_members;  // (group, member)
  std::vector<OffsetRecord> put_offsets;
  std::vector<AuditRecord> put_audit;

  // What the write adds to the commit queue, for its byte cap (records are small and bounded).
  static int64_t ApproxBytes(const CoordinatorWrite& w) {
    return 64 + 256 * static_cast<int64_t>(w.put_groups.size() + w.delete_groups.size() +
                                          w.put_members.size() + w.delete_members.size() +
                                          w.put_offsets.size() + w.put_audit.size());
  }

  bool empty() const {
    return put_groups.empty() && delete_groups.empty() && put_members.empty() &&
           delete_members.empty() && put_offsets.empty() && put_audit.empty();
  }
};

struct StoredState {
  std::vector<GroupRecord> groups;
  std::vector<MemberRecord> members;
  std::vector<OffsetRecord> offsets;
};

// Durable state of the coordinator (storage/rocksdb_coordinator_store.h). Thread-safe.
class CoordinatorStore {
 public:
  virtual ~CoordinatorStore() = default;
  virtual absl::StatusOr<StoredState> Load() = 0;
  // Applies `writes` in order as one atomic, synced write.
  virtual absl::Status Write(const std::vector<const CoordinatorWrite*>& writes) = 0;
  // RESOURCE_EXHAUSTED "disk full" while the volume is below its free-space reserve: writes
  // that add data would be refused (the domain refuses the change before making it).
  virtual absl::Status CheckSpace() const { return absl::OkStatus(); }
  // Audit entries of `group` with id < before_id (0: no bound), newest first, at most `limit`.
  virtual absl::StatusOr<std::vector<AuditRecord>> ListAudit(const std::string& group_id,
                                                             uint64_t before_id, int limit) = 0;
};

}  // namespace conduit::coordinator
