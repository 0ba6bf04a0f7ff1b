#include "services/work_queue/domain/tenant_ready_index.h"

#include <utility>

namespace conduit::work_queue {

void TenantReadyIndex::AddReady(const Job& job) {
  std::set<ReadyKey>& tenant = ready_[job.tenant];
  if (tenant.empty()) ring_.push_back(job.tenant);
  tenant.insert(KeyOf(job));
}

void TenantReadyIndex::RemoveReady(const Job& job) {
  auto it = ready_.find(job.tenant);
  // An emptied tenant stays in the ring until TakeNext reaches it.
  if (it != ready_.end()) it->second.erase(KeyOf(job));
}

void TenantReadyIndex::RemoveLeased(const std::string& tenant) {
  auto it = leased_.find(tenant);
  if (it != leased_.end() && --it->second <= 0) leased_.erase(it);
}

void TenantReadyIndex::EndTurn(bool keep) {
  std::string tenant = std::move(ring_.front());
  ring_.pop_front();
  credit_ = 0;
  if (keep) ring_.push_back(std::move(tenant));
}

std::optional<uint64_t> TenantReadyIndex::TakeNext(const QueueConfig& config) {
  // A full lap of tenants at their in-flight limit ends the search.
  size_t passed_over = 0;
  while (!ring_.empty() && passed_over < ring_.size()) {
    const std::string& tenant = ring_.front();
    auto it = ready_.find(tenant);
    if (it == ready_.end() || it->second.empty()) {
      if (it != ready_.end()) ready_.erase(it);
      EndTurn(/*keep=*/false);
      continue;
    }
    if (config.max_in_flight_per_tenant > 0) {
      auto leased = leased_.find(tenant);
      if (leased != leased_.end() && leased->second >= config.max_in_flight_per_tenant) {
        EndTurn(/*keep=*/true);
        ++passed_over;
        continue;
      }
    }
    if (credit_ <= 0) credit_ = config.WeightOf(tenant);
    const uint64_t id = it->second.begin()->id;
    it->second.erase(it->second.begin());
    if (--credit_ <= 0 || it->second.empty()) {
      const bool more = !it->second.empty();
      if (!more) ready_.erase(it);
      EndTurn(/*keep=*/more);
    }
    return id;
  }
  return std::nullopt;
}

}  // namespace conduit::work_queue
