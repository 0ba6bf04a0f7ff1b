#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/btree_map.h"
#include "absl/container/btree_set.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
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
// Compact: a ready job is 16 bytes in a B-tree of its tenant and priority, (ready µs, id); no
// payload, no copy of the tenant. The first entry of every such bucket is also in `fronts_`, so
// the oldest ready time is found without a scan.
//
// Invariants (Check): every tenant with ready jobs is in the ring, once; buckets are never
// empty; `fronts_` holds exactly the first entry of each bucket; counts match the buckets;
// leased counts are positive (a tenant at zero is dropped). Not thread-safe: the queue's mutex
// guards it.
class TenantReadyIndex {
 public:
  struct Entry {
    uint64_t id = 0;
    int32_t priority = 0;
    absl::Time ready_at;
  };

  void AddReady(const std::string& tenant, const Entry& entry);
  void AddLeased(const std::string& tenant) { ++leased_[tenant]; }
  void RemoveLeased(const std::string& tenant);

  // The next job to lease, taken out of the index (the caller leases it and calls AddLeased),
  // with its tenant; nullopt when no tenant may take one.
  std::optional<std::pair<std::string, Entry>> TakeNext(const QueueConfig& config);

  int64_t size() const { return size_; }
  // About `n` ids of ready jobs that TakeNext would give out soon, without taking them: each
  // tenant's next jobs in its order (priority, then ready time), a like share per tenant in ring
  // order. A guess for reading records ahead; in-flight limits and weights are not applied.
  std::vector<uint64_t> PeekNext(size_t n) const;
  // The earliest ready time of a ready job; nullopt when there is none.
  std::optional<absl::Time> OldestReady() const;
  // Calls `fn` with the id of every ready job (linear: for checks).
  void ForEachReady(const std::function<void(uint64_t id)>& fn) const;
  // Ready jobs per tenant.
  void ForEachTenant(const std::function<void(const std::string&, int64_t ready)>& fn) const;
  const absl::flat_hash_map<std::string, int32_t>& leased() const { return leased_; }

  // OK when the invariants above hold, else INTERNAL naming what breaks. Linear: for tests.
  absl::Status Check() const;

 private:
  using Key = std::pair<int64_t, uint64_t>;  // (ready µs, job id)
  using Bucket = absl::btree_set<Key>;
  struct Tenant {
    absl::btree_map<int32_t, Bucket, std::greater<int32_t>> by_priority;
    int64_t size = 0;
  };

  // Ends the turn of the tenant at the ring's front: to the back (`keep`) or out of the ring.
  void EndTurn(bool keep);

  absl::flat_hash_map<std::string, Tenant> ready_;  // tenants with ready jobs only
  std::deque<std::string> ring_;                    // those tenants, each once
  int32_t credit_ = 0;  // jobs the tenant at the ring's front may still take this turn
  absl::btree_set<Key> fronts_;
  int64_t size_ = 0;
  absl::flat_hash_map<std::string, int32_t> leased_;
};

}  // namespace conduit::work_queue
