#include "services/work_queue/domain/job_index.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"

namespace conduit::work_queue {

Job* JobIndex::Find(uint64_t id) {
  auto it = jobs_.find(id);
  return it == jobs_.end() ? nullptr : &it->second;
}

const Job* JobIndex::Find(uint64_t id) const {
  auto it = jobs_.find(id);
  return it == jobs_.end() ? nullptr : &it->second;
}

void JobIndex::Add(Job job, absl::Time now) {
  auto [it, inserted] = jobs_.emplace(job.id, std::move(job));
  if (inserted) Index(it->second, now);
}

void JobIndex::Erase(uint64_t id) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return;
  Unindex(it->second);
  jobs_.erase(it);
}

void JobIndex::Index(const Job& job, absl::Time now) {
  switch (job.state) {
    case JobState::kQueued:
      if (job.ready_at > now) {
        delayed_.emplace(job.ready_at, job.id);
      } else {
        ready_.AddReady(job);
        ready_by_time_.emplace(job.ready_at, job.id);
      }
      break;
    case JobState::kLeased:
      leases_.Add(job);
      ready_.AddLeased(job.tenant);
      break;
    case JobState::kDead:
      dead_.Add(job);
      break;
  }
}

void JobIndex::Unindex(const Job& job) {
  switch (job.state) {
    case JobState::kQueued:
      if (delayed_.erase({job.ready_at, job.id}) == 0) {
        ready_.RemoveReady(job);
        ready_by_time_.erase({job.ready_at, job.id});
      }
      break;
    case JobState::kLeased:
      if (leases_.Remove(job)) ready_.RemoveLeased(job.tenant);
      break;
    case JobState::kDead:
      dead_.Remove(job);
      break;
  }
}

void JobIndex::Requeue(Job& job, absl::Time ready_at, absl::Time now) {
  job.state = JobState::kQueued;
  job.ready_at = ready_at;
  Index(job, now);
}

void JobIndex::Kill(Job& job, std::string reason, absl::Time now) {
  job.state = JobState::kDead;
  job.died_at = now;
  job.death_reason = std::move(reason);
  job.lease_token = LeaseToken();
  Index(job, now);
}

bool JobIndex::PromoteDue(absl::Time now) {
  bool made_ready = false;
  while (!delayed_.empty() && delayed_.begin()->first <= now) {
    const uint64_t id = delayed_.begin()->second;
    delayed_.erase(delayed_.begin());
    Index(jobs_.at(id), now);  // now ready; nothing to persist (ready follows from time)
    made_ready = true;
  }
  return made_ready;
}

Job* JobIndex::TakeNextReady(const QueueConfig& config) {
  const std::optional<uint64_t> next = ready_.TakeNext(config);
  if (!next) return nullptr;
  Job& job = jobs_.at(*next);
  Unindex(job);  // the rest of its ready indexes
  return &job;
}

Job* JobIndex::TakeExpiredLease(absl::Time now) {
  const std::optional<uint64_t> expired = leases_.FirstExpired(now);
  if (!expired) return nullptr;
  Job& job = jobs_.at(*expired);
  Unindex(job);
  return &job;
}

JobIndex::Depth JobIndex::Indexed() const {
  Depth d;
  d.ready = static_cast<int64_t>(ready_by_time_.size());
  d.delayed = static_cast<int64_t>(delayed_.size());
  d.leased = static_cast<int64_t>(leases_.size());
  d.dead = static_cast<int64_t>(dead_.size());
  if (!ready_by_time_.empty()) d.oldest_ready = ready_by_time_.begin()->first;
  if (!dead_.empty()) d.oldest_dead = dead_.OldestDeath();
  return d;
}

JobIndex::Depth JobIndex::At(absl::Time now) const {
  Depth d = Indexed();
  auto due_end = delayed_.lower_bound({now, UINT64_MAX});
  const int64_t due = std::distance(delayed_.begin(), due_end);
  d.ready += due;
  d.delayed -= due;
  if (due > 0) d.oldest_ready = std::min(d.oldest_ready, delayed_.begin()->first);
  return d;
}

absl::Status JobIndex::CheckInvariants() const {
  const size_t indexed = ready_by_time_.size() + delayed_.size() + leases_.size() + dead_.size();
  if (indexed != jobs_.size()) {
    return absl::InternalError(
        absl::StrCat(jobs_.size(), " jobs but ", indexed, " state index entries"));
  }
  for (const auto& [id, job] : jobs_) {
    bool in_its_index = false;
    switch (job.state) {
      case JobState::kQueued:
        in_its_index =
            ready_by_time_.contains({job.ready_at, id}) != delayed_.contains({job.ready_at, id});
        break;
      case JobState::kLeased:
        in_its_index = leases_.Contains(job);
        break;
      case JobState::kDead:
        in_its_index = dead_.Contains(job);
        break;
    }
    if (!in_its_index) {
      return absl::InternalError(absl::StrCat("job ", id, " is not in the index of its state ",
                                              static_cast<int>(job.state)));
    }
  }
  if (absl::Status s = CheckReady(); !s.ok()) return s;
  return CheckLeasedCounts();
}

absl::Status JobIndex::CheckReady() const {
  size_t in_tenants = 0;
  for (const auto& [tenant, keys] : ready_.ready()) in_tenants += keys.size();
  if (in_tenants != ready_by_time_.size()) {
    return absl::InternalError(absl::StrCat(ready_by_time_.size(), " ready jobs by time but ",
                                            in_tenants, " in tenant order"));
  }
  for (const auto& [ready_at, id] : ready_by_time_) {
    const Job& job = jobs_.at(id);
    auto tenant = ready_.ready().find(job.tenant);
    const TenantReadyIndex::ReadyKey key{-int64_t{job.priority}, job.ready_at, id};
    if (tenant == ready_.ready().end() || !tenant->second.contains(key)) {
      return absl::InternalError(absl::StrCat("ready job ", id, " is not in its tenant's order"));
    }
  }
  return absl::OkStatus();
}

absl::Status JobIndex::CheckLeasedCounts() const {
  absl::flat_hash_map<std::string, int32_t> leased;
  for (const auto& [id, job] : jobs_) {
    if (job.state == JobState::kLeased) ++leased[job.tenant];
  }
  if (leased != ready_.leased()) {
    return absl::InternalError("leased counts per tenant do not match the leased jobs");
  }
  return absl::OkStatus();
}

}  // namespace conduit::work_queue
