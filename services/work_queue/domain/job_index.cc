#include "services/work_queue/domain/job_index.h"

#include <algorithm>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"

namespace conduit::work_queue {

uint32_t JobIndex::TenantNumber(const std::string& tenant) {
  auto [it, added] = tenant_numbers_.try_emplace(tenant, tenant_names_.size());
  if (added) tenant_names_.push_back(tenant);
  return it->second;
}

void JobIndex::AddQueued(uint64_t id, const std::string& tenant, int32_t priority,
                         absl::Time ready_at, absl::Time now) {
  // In whole microseconds, as stored and as PromoteDue compares.
  if (absl::ToUnixMicros(ready_at) > absl::ToUnixMicros(now)) {
    delayed_.emplace(DelayedKey{absl::ToUnixMicros(ready_at), id},
                     std::pair{TenantNumber(tenant), priority});
  } else {
    ready_.AddReady(tenant, TenantReadyIndex::Entry{id, priority, ready_at});
  }
}

void JobIndex::AddLeased(Job job) {
  if (leased_.contains(job.id)) return;
  ready_.AddLeased(job.tenant);
  Hold(std::move(job));
}

void JobIndex::StartLease(Job job) {
  --starting_;
  Hold(std::move(job));
}

void JobIndex::Hold(Job job) {
  const uint64_t id = job.id;
  auto [it, added] = leased_.emplace(id, std::move(job));
  if (added) leases_.Add(it->second);
}

std::optional<std::pair<std::string, TenantReadyIndex::Entry>> JobIndex::TakeNextReady(
    const QueueConfig& config) {
  auto next = ready_.TakeNext(config);
  if (next) {
    ready_.AddLeased(next->first);
    ++starting_;
  }
  return next;
}

void JobIndex::ReturnReady(const std::string& tenant, const TenantReadyIndex::Entry& entry,
                           absl::Time now) {
  --starting_;
  ready_.RemoveLeased(tenant);
  AddQueued(entry.id, tenant, entry.priority, entry.ready_at, now);
}

void JobIndex::Requeue(Job& job, absl::Time ready_at, absl::Time now) {
  job.state = JobState::kQueued;
  job.ready_at = ready_at;
  AddQueued(job.id, job.tenant, job.priority, job.ready_at, now);
}

void JobIndex::Kill(Job& job, std::string reason, absl::Time now) {
  job.state = JobState::kDead;
  job.died_at = now;
  job.death_reason = std::move(reason);
  job.lease_token = LeaseToken();
  dead_.Add(job.id, job.died_at);
}

Job* JobIndex::FindLeased(uint64_t id) {
  auto it = leased_.find(id);
  return it == leased_.end() ? nullptr : &it->second;
}

std::optional<Job> JobIndex::TakeLeased(uint64_t id) {
  auto it = leased_.find(id);
  if (it == leased_.end()) return std::nullopt;
  leases_.Remove(it->second);
  ready_.RemoveLeased(it->second.tenant);
  Job job = std::move(it->second);
  leased_.erase(it);
  return job;
}

bool JobIndex::PromoteDue(absl::Time now) {
  bool made_ready = false;
  const int64_t now_us = absl::ToUnixMicros(now);
  while (!delayed_.empty() && delayed_.begin()->first.first <= now_us) {
    const auto& [key, value] = *delayed_.begin();
    // Nothing to persist: ready follows from time.
    ready_.AddReady(
        tenant_names_[value.first],
        TenantReadyIndex::Entry{key.second, value.second, absl::FromUnixMicros(key.first)});
    delayed_.erase(delayed_.begin());
    made_ready = true;
  }
  return made_ready;
}

std::optional<Job> JobIndex::TakeExpiredLease(absl::Time now) {
  const std::optional<uint64_t> expired = leases_.FirstExpired(now);
  if (!expired) return std::nullopt;
  return TakeLeased(*expired);
}

JobIndex::Depth JobIndex::Indexed() const {
  Depth d;
  d.ready = ready_.size();
  d.delayed = static_cast<int64_t>(delayed_.size());
  d.leased = static_cast<int64_t>(leased_.size()) + starting_;
  d.dead = static_cast<int64_t>(dead_.size());
  if (auto oldest = ready_.OldestReady()) d.oldest_ready = *oldest;
  if (!dead_.empty()) d.oldest_dead = dead_.OldestDeath();
  return d;
}

JobIndex::Depth JobIndex::At(absl::Time now) const {
  Depth d = Indexed();
  auto due_end = delayed_.upper_bound(DelayedKey{absl::ToUnixMicros(now), UINT64_MAX});
  const int64_t due = std::distance(delayed_.begin(), due_end);
  d.ready += due;
  d.delayed -= due;
  if (due > 0) {
    d.oldest_ready = std::min(d.oldest_ready, absl::FromUnixMicros(delayed_.begin()->first.first));
  }
  return d;
}

absl::Status JobIndex::CheckInvariants() const {
  if (starting_ != 0) {
    return absl::InternalError(absl::StrCat(starting_, " jobs taken out of READY are in no index"));
  }
  if (leases_.size() != leased_.size()) {
    return absl::InternalError(
        absl::StrCat(leased_.size(), " leased jobs but ", leases_.size(), " in the lease book"));
  }
  absl::flat_hash_map<std::string, int32_t> per_tenant;
  for (const auto& [id, job] : leased_) {
    if (job.state != JobState::kLeased || !leases_.Contains(job)) {
      return absl::InternalError(absl::StrCat("leased job ", id, " is not in the lease book"));
    }
    if (dead_.Contains(id)) {
      return absl::InternalError(absl::StrCat("job ", id, " is both leased and dead"));
    }
    ++per_tenant[job.tenant];
  }
  if (per_tenant != ready_.leased()) {
    return absl::InternalError("leased counts per tenant do not match the leased jobs");
  }
  absl::flat_hash_set<uint64_t> queued;
  for (const auto& [key, value] : delayed_) queued.insert(key.second);
  bool twice = queued.size() != delayed_.size();
  ready_.ForEachReady([&](uint64_t id) { twice |= !queued.insert(id).second; });
  for (uint64_t id : queued) twice |= leased_.contains(id) || dead_.Contains(id);
  if (twice) return absl::InternalError("a queued job is in more than one state index");
  if (absl::Status s = dead_.Check(); !s.ok()) return s;
  return ready_.Check();
}

}  // namespace conduit::work_queue
