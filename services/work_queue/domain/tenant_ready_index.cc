#include "services/work_queue/domain/tenant_ready_index.h"

#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"

namespace conduit::work_queue {

void TenantReadyIndex::AddReady(const std::string& tenant, const Entry& entry) {
  auto [it, new_tenant] = ready_.try_emplace(tenant);
  if (new_tenant) ring_.push_back(tenant);
  Bucket& bucket = it->second.by_priority[entry.priority];
  const Key key{absl::ToUnixMicros(entry.ready_at), entry.id};
  if (bucket.empty() || key < *bucket.begin()) {
    if (!bucket.empty()) fronts_.erase(*bucket.begin());
    fronts_.insert(key);
  }
  if (bucket.insert(key).second) {
    ++it->second.size;
    ++size_;
  }
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

std::optional<std::pair<std::string, TenantReadyIndex::Entry>> TenantReadyIndex::TakeNext(
    const QueueConfig& config) {
  // A full lap of tenants at their in-flight limit ends the search.
  size_t passed_over = 0;
  while (!ring_.empty() && passed_over < ring_.size()) {
    const std::string& tenant = ring_.front();
    if (config.max_in_flight_per_tenant > 0) {
      auto leased = leased_.find(tenant);
      if (leased != leased_.end() && leased->second >= config.max_in_flight_per_tenant) {
        EndTurn(/*keep=*/true);
        ++passed_over;
        continue;
      }
    }
    if (credit_ <= 0) credit_ = config.WeightOf(tenant);
    auto it = ready_.find(tenant);
    Tenant& t = it->second;
    auto top = t.by_priority.begin();
    const Key key = *top->second.begin();
    std::pair<std::string, Entry> out{
        tenant, Entry{key.second, top->first, absl::FromUnixMicros(key.first)}};
    fronts_.erase(key);
    top->second.erase(top->second.begin());
    if (top->second.empty()) {
      t.by_priority.erase(top);
    } else {
      fronts_.insert(*top->second.begin());
    }
    --size_;
    const bool more = --t.size > 0;
    if (!more) ready_.erase(it);
    if (--credit_ <= 0 || !more) EndTurn(/*keep=*/more);
    return out;
  }
  return std::nullopt;
}

std::vector<uint64_t> TenantReadyIndex::PeekNext(size_t n) const {
  std::vector<uint64_t> out;
  if (ring_.empty() || n == 0) return out;
  const size_t share = (n + ring_.size() - 1) / ring_.size();
  for (const std::string& tenant : ring_) {
    size_t taken = 0;
    for (const auto& [priority, bucket] : ready_.at(tenant).by_priority) {
      for (auto key = bucket.begin(); key != bucket.end() && taken < share; ++key, ++taken) {
        out.push_back(key->second);
      }
      if (taken == share) break;
    }
    if (out.size() >= n) break;
  }
  return out;
}

std::optional<absl::Time> TenantReadyIndex::OldestReady() const {
  if (fronts_.empty()) return std::nullopt;
  return absl::FromUnixMicros(fronts_.begin()->first);
}

void TenantReadyIndex::ForEachTenant(
    const std::function<void(const std::string&, int64_t)>& fn) const {
  for (const auto& [tenant, t] : ready_) fn(tenant, t.size);
}

void TenantReadyIndex::ForEachReady(const std::function<void(uint64_t)>& fn) const {
  for (const auto& [tenant, t] : ready_) {
    for (const auto& [priority, bucket] : t.by_priority) {
      for (const Key& key : bucket) fn(key.second);
    }
  }
}

absl::Status TenantReadyIndex::Check() const {
  absl::flat_hash_set<std::string> in_ring(ring_.begin(), ring_.end());
  if (in_ring.size() != ring_.size() || in_ring.size() != ready_.size()) {
    return absl::InternalError(absl::StrCat(ring_.size(), " ring places, ", in_ring.size(),
                                            " tenants in the ring, ", ready_.size(),
                                            " tenants with ready jobs"));
  }
  int64_t total = 0;
  size_t buckets = 0;
  for (const auto& [tenant, t] : ready_) {
    if (!in_ring.contains(tenant)) {
      return absl::InternalError(absl::StrCat("tenant '", tenant, "' is not in the ring"));
    }
    int64_t n = 0;
    for (const auto& [priority, bucket] : t.by_priority) {
      if (bucket.empty()) return absl::InternalError("an empty priority bucket");
      if (!fronts_.contains(*bucket.begin())) {
        return absl::InternalError(absl::StrCat("the first job of tenant '", tenant, "' priority ",
                                                priority, " is not a front"));
      }
      n += static_cast<int64_t>(bucket.size());
      ++buckets;
    }
    if (n != t.size) return absl::InternalError(absl::StrCat("tenant '", tenant, "' miscounted"));
    total += n;
  }
  if (total != size_ || buckets != fronts_.size()) {
    return absl::InternalError(absl::StrCat(total, " ready jobs counted ", size_, "; ", buckets,
                                            " buckets, ", fronts_.size(), " fronts"));
  }
  for (const auto& [tenant, n] : leased_) {
    if (n <= 0) return absl::InternalError(absl::StrCat("tenant '", tenant, "' leased ", n));
  }
  return absl::OkStatus();
}

}  // namespace conduit::work_queue
