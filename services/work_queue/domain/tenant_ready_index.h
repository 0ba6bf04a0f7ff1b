#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <set>
#include <string>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "services/work_queue/domain/job.h"

namespace conduit::work_queue {

// The ready jobs of one queue by tenant, and the fair order they are leased in:
// - within a tenant: priority (higher first), then ready time, then job id;
// - across tenants: weighted round-robin over the tenants with ready jobs — the tenant at the
//   front takes up to its weight (QueueConfig::WeightOf) in jobs, then goes to the back;
// - a tenant with max_in_flight_per_tenant leased jobs is passed over until one ends.
// It also counts each tenant's leased jobs (for that limit and the per-tenant metrics).
//
// Invariants: every tenant with ready jobs is in the ring; a tenant emptied by RemoveReady stays
// in it until it reaches the front (so a removal costs no ring search), and if it gets a ready
// job before then it is in the ring twice for that lap; leased counts are positive (a tenant at
// zero is dropped). Not thread-safe: the queue's mutex guards it.
class TenantReadyIndex {
 public:
  void AddReady(const Job& job);
  void RemoveReady(const Job& job);
  void AddLeased(const std::string& tenant) { ++leased_[tenant]; }
  void RemoveLeased(const std::string& tenant);

  // The id of the next job to lease, taken out of the index (the caller leases it and calls
  // AddLeased), or nullopt when no tenant may take one.
  std::optional<uint64_t> TakeNext(const QueueConfig& config);

  // Per tenant: ready jobs, and leased jobs.
  struct ReadyKey {
    int64_t neg_priority;  // int64: negating INT32_MIN must not overflow
    absl::Time ready_at;
    uint64_t id;
    bool operator<(const ReadyKey& o) const {
      return std::tie(neg_priority, ready_at, id) < std::tie(o.neg_priority, o.ready_at, o.id);
    }
  };
  const absl::flat_hash_map<std::string, std::set<ReadyKey>>& ready() const { return ready_; }
  const absl::flat_hash_map<std::string, int32_t>& leased() const { return leased_; }

 private:
  static ReadyKey KeyOf(const Job& job) {
    return ReadyKey{-int64_t{job.priority}, job.ready_at, job.id};
  }
  // Moves the tenant at the front of the ring to the back (or drops it), ending its turn.
  void EndTurn(bool keep);

  absl::flat_hash_map<std::string, std::set<ReadyKey>> ready_;
  std::deque<std::string> ring_;  // tenants with ready jobs, each once
  int32_t credit_ = 0;            // jobs the tenant at the ring's front may still take this turn
  absl::flat_hash_map<std::string, int32_t> leased_;
};

}  // namespace conduit::work_queue
