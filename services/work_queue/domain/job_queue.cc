// JobQueue: recovery, idempotency keys, the scheduler's pass, stats and observation. Enqueue,
// leases and dead letters are in enqueue.cc, leases.cc and dead_letters.cc.

#include "services/work_queue/domain/job_queue.h"

#include <algorithm>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "common/status/status_macros.h"
#include "services/work_queue/domain/queue_rules.h"

namespace conduit::work_queue {
namespace {

// The stats a depth gives at `now` (ages), without the rates.
QueueStats StatsOfDepth(const JobIndex::Depth& d, absl::Time now) {
  QueueStats stats;
  stats.ready = d.ready;
  stats.delayed = d.delayed;
  stats.leased = d.leased;
  stats.dead = d.dead;
  if (d.oldest_ready != absl::InfiniteFuture()) {
    stats.oldest_ready_age = std::max(absl::ZeroDuration(), now - d.oldest_ready);
  }
  if (d.dead > 0) stats.oldest_dead_age = now - d.oldest_dead;
  return stats;
}

}  // namespace

// --- idempotency keys ------------------------------------------------------------------------

void IdempotencyKeys::Load(std::vector<QueueWrite::KeyEntry> keys) {
  std::sort(keys.begin(), keys.end(), [](const auto& a, const auto& b) { return a.at < b.at; });
  for (const auto& k : keys) {
    keys_[k.key] = {k.job_id, k.at};
    order_.emplace_back(k.at, k.key);
  }
}

std::optional<EnqueuedJob> IdempotencyKeys::Known(const std::string& key) const {
  if (key.empty()) return std::nullopt;
  auto it = keys_.find(key);
  if (it == keys_.end()) return std::nullopt;
  return EnqueuedJob{it->second.first, true};
}

int64_t IdempotencyKeys::CountNew(const std::vector<NewJob>& jobs) const {
  int64_t new_jobs = 0;
  absl::flat_hash_map<std::string, bool> keys_in_request;
  for (const NewJob& j : jobs) {
    if (j.idempotency_key.empty()) {
      ++new_jobs;
    } else if (!keys_.contains(j.idempotency_key) &&
               keys_in_request.emplace(j.idempotency_key, true).second) {
      ++new_jobs;
    }
  }
  return new_jobs;
}

void IdempotencyKeys::Remember(const Job& job, absl::Time now, QueueWrite* write) {
  if (job.idempotency_key.empty()) return;
  keys_[job.idempotency_key] = {job.id, now};
  order_.emplace_back(now, job.idempotency_key);
  write->key_puts.push_back({write->queue_id, job.idempotency_key, job.id, now});
}

void IdempotencyKeys::Expire(absl::Time cutoff, QueueWrite* write) {
  while (!order_.empty() && order_.front().first <= cutoff) {
    auto it = keys_.find(order_.front().second);
    if (it != keys_.end() && it->second.second == order_.front().first) {
      write->key_deletes.push_back(it->first);
      keys_.erase(it);
    }
    order_.pop_front();
  }
}

// --- the queue -------------------------------------------------------------------------------

JobQueue::JobQueue(QueueMeta meta, QueueStore* store, QueueObserver* observer,
                   runtime::Scope* scope)
    : meta_(std::move(meta)),
      store_(store),
      observer_(observer),
      scope_(scope),
      records_(meta_.id, meta_.name, store, observer) {}

absl::Status JobQueue::Recover(absl::Time now, uint64_t* next_job_id) {
  // Leases first (few), so that the scan of index entries (every job, no payload) knows which
  // queued entries are leased; only the leased jobs' records are read.
  CONDUIT_ASSIGN_OR_RETURN(std::vector<LeaseRecord> leases, store_->LoadLeases(meta_.id));
  absl::flat_hash_map<uint64_t, LeaseRecord> leased;
  for (LeaseRecord& l : leases) leased.emplace(l.job_id, std::move(l));
  std::vector<uint64_t> leased_ids;
  CONDUIT_RETURN_IF_ERROR(store_->ScanIndex(meta_.id, [&](const JobIndexEntry& e) {
    *next_job_id = std::max(*next_job_id, e.job_id + 1);
    if (leased.contains(e.job_id)) {
      leased_ids.push_back(e.job_id);
    } else if (e.state == JobState::kDead) {
      index_.AddDead(e.job_id, e.died_at);
    } else {
      index_.AddQueued(e.job_id, e.tenant, e.priority, e.ready_at, now);
    }
    return absl::OkStatus();
  }));
  CONDUIT_ASSIGN_OR_RETURN(std::vector<std::optional<Job>> jobs,
                           store_->ReadJobs(meta_.id, leased_ids));
  for (std::optional<Job>& job : jobs) {
    if (!job) return absl::DataLossError("a leased job's record is missing");
    const LeaseRecord& lease = leased.at(job->id);
    job->state = JobState::kLeased;
    job->lease_token = lease.token;
    job->lease_deadline = lease.deadline;
    job->attempts.push_back(lease.attempt);
    index_.AddLeased(*std::move(job));
  }
  CONDUIT_ASSIGN_OR_RETURN(std::vector<QueueWrite::KeyEntry> keys, store_->LoadKeys(meta_.id));
  keys_.Load(std::move(keys));
  Observe(now);
  return absl::OkStatus();
}

void JobQueue::WakeWaiters() {
  // Retried from the timer thread: never call back into the domain under the lock.
  for (auto& [id, waiter] : waiters_) scope_->After(absl::ZeroDuration(), std::move(waiter));
  waiters_.clear();
}

void JobQueue::RunDue(absl::Time now, absl::BitGenRef rng, QueueWrite* write) {
  bool made_ready = index_.PromoteDue(now);
  while (std::optional<Job> job = index_.TakeExpiredLease(now)) {
    LeaseBook::EndByExpiry(*job);
    Count(QueueEvent::kExpired, 1);
    expiries_.Add(now, 1);
    const QueueConfig& config = meta_.config;
    if (job->expiries >= config.max_lease_expiries) {
      index_.Kill(
          *job, absl::StrCat("max lease expiries (", config.max_lease_expiries, ") reached"), now);
      Count(QueueEvent::kDead, 1);
    } else {
      index_.Requeue(*job, now + Backoff(config, job->expiries, rng), now);
      made_ready |= job->ready_at <= now;
    }
    write->lease_deletes.push_back(job->id);
    write->puts.push_back(*std::move(job));
  }
  if (made_ready) WakeWaiters();
  Observe(now);  // ages move with time even when nothing else does
}

void JobQueue::ExpireKeys(absl::Time now, QueueWrite* write) {
  keys_.Expire(now - meta_.config.idempotency_window, write);
}

QueueStats JobQueue::Stats(absl::Time now) const {
  // Delayed jobs whose time has come are ready, even before the scheduler moves them.
  QueueStats stats = StatsOfDepth(index_.At(now), now);
  stats.enqueue_rate = enqueues_.PerSecond(now);
  stats.ack_rate = acks_.PerSecond(now);
  stats.nack_rate = nacks_.PerSecond(now);
  stats.expiry_rate = expiries_.PerSecond(now);
  return stats;
}

void JobQueue::Observe(absl::Time now) const {
  // Constant time, so it can follow every change: delayed jobs that came due count as delayed
  // until the next scheduler pass (at most one tick), where Stats() counts them exactly.
  observer_->OnDepth(meta_.name, StatsOfDepth(index_.Indexed(), now));
}

void JobQueue::ObserveTenants() const {
  absl::flat_hash_map<std::string, QueueObserver::TenantDepth> by_tenant;
  index_.tenants().ForEachTenant([&](const std::string& tenant, int64_t ready) {
    auto& d = by_tenant[tenant];
    d.tenant = tenant;
    d.ready = ready;
  });
  for (const auto& [tenant, leased] : index_.tenants().leased()) {
    auto& d = by_tenant[tenant];
    d.tenant = tenant;
    d.leased = leased;
  }
  std::vector<QueueObserver::TenantDepth> all;
  for (auto& [tenant, d] : by_tenant) all.push_back(std::move(d));
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) {
    return std::tie(b.ready, b.leased, a.tenant) < std::tie(a.ready, a.leased, b.tenant);
  });
  if (all.size() > QueueObserver::kMaxTenantsObserved) {
    QueueObserver::TenantDepth other{QueueObserver::kOtherTenants, 0, 0};
    for (size_t i = QueueObserver::kMaxTenantsObserved; i < all.size(); ++i) {
      other.ready += all[i].ready;
      other.leased += all[i].leased;
    }
    all.resize(QueueObserver::kMaxTenantsObserved);
    all.push_back(std::move(other));
  }
  observer_->OnTenantDepth(meta_.name, all);
}

void JobQueue::Count(QueueEvent event, int64_t n) const {
  if (n > 0) observer_->OnEvents(meta_.name, event, n);
}

}  // namespace conduit::work_queue
