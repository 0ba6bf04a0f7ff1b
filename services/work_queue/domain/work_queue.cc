#include "services/work_queue/domain/work_queue.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status/status_macros.h"
#include "services/work_queue/domain/queue_rules.h"

namespace conduit::work_queue {
namespace {

absl::Status NotFound(const std::string& what) { return absl::NotFoundError(what); }

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

WorkQueue::WorkQueue(QueueStore* store, runtime::Runtime* runtime, WorkQueueOptions options,
                     QueueObserver* observer)
    : store_(store),
      clock_(runtime->clock()),
      options_(options),
      observer_(observer ? observer : &default_observer_),
      log_(
          {.service = "queue", .space_check = [store] { return store->CheckSpace(); }}, clock_,
          [this, store](const std::vector<const QueueWrite*>& writes) {
            absl::Status s = store->Write(writes);
            if (s.ok() && std::none_of(writes.begin(), writes.end(),
                                       [](const QueueWrite* w) { return w->sync; })) {
              unsynced_.Mark();
            }
            return s;
          },
          &QueueWrite::ApproxBytes),
      scope_(runtime, runtime::Pool::kStorage) {}

WorkQueue::~WorkQueue() {
  shutting_down_.store(true);  // long-polls answer at once instead of waiting again
  scope_.StopEvery(scheduler_);
  absl::MutexLock lock(&sync_task_mu_);
  if (sync_task_ != 0) scope_.StopEvery(sync_task_);
}

void WorkQueue::RequestSyncFor(const QueueConfig& config) {
  if (config.durability != QueueDurability::kInterval) return;
  absl::MutexLock lock(&sync_task_mu_);
  if (config.flush_interval >= sync_every_) return;
  sync_every_ = config.flush_interval;
  if (sync_task_ != 0) scope_.StopEvery(sync_task_);
  sync_task_ = scope_.Every(sync_every_, [this] { unsynced_.SyncIfNeeded(); });
}

absl::Time WorkQueue::Now() const {
  return absl::FromUnixMicros(absl::ToUnixMicros(clock_->Now()));
}

absl::Status WorkQueue::Recover() {
  auto queues = store_->LoadQueues();
  if (!queues.ok()) return queues.status();
  auto next_id = store_->LoadNextJobId();
  if (!next_id.ok()) return next_id.status();
  const absl::Time now = Now();
  {
    absl::MutexLock lock(&mu_);
    next_job_id_ = std::max<uint64_t>(1, *next_id);
    for (const QueueMeta& meta : *queues) {
      auto q = std::make_unique<Queue>();
      q->meta = meta;
      CONDUIT_RETURN_IF_ERROR(RecoverJobs(*q, now));
      auto keys = store_->LoadKeys(meta.id);
      if (!keys.ok()) return keys.status();
      std::sort(keys->begin(), keys->end(),
                [](const auto& a, const auto& b) { return a.at < b.at; });
      for (const auto& k : *keys) {
        q->keys[k.key] = {k.job_id, k.at};
        q->key_order.emplace_back(k.at, k.key);
      }
      next_queue_id_ = std::max(next_queue_id_, meta.id.value() + 1);
      RequestSyncFor(meta.config);
      Observe(*q, now);
      AddQueue(std::move(q));
    }
  }
  if (options_.scheduler_interval > absl::ZeroDuration()) {
    scheduler_ = scope_.Every(options_.scheduler_interval, [this] { RunScheduler(); });
  }
  return absl::OkStatus();
}

absl::Status WorkQueue::RecoverJobs(Queue& q, absl::Time now) {
  // Leases first (few), so that the scan of index entries (every job, no payload) knows which
  // queued entries are leased; only the leased jobs' records are read.
  auto leases = store_->LoadLeases(q.meta.id);
  if (!leases.ok()) return leases.status();
  absl::flat_hash_map<uint64_t, LeaseRecord> leased;
  for (LeaseRecord& l : *leases) leased.emplace(l.job_id, std::move(l));
  std::vector<uint64_t> leased_ids;
  uint64_t next_id = next_job_id_;
  JobIndex& index = q.index;
  CONDUIT_RETURN_IF_ERROR(store_->ScanIndex(q.meta.id, [&](const JobIndexEntry& e) {
    next_id = std::max(next_id, e.job_id + 1);
    if (leased.contains(e.job_id)) {
      leased_ids.push_back(e.job_id);
    } else if (e.state == JobState::kDead) {
      index.AddDead(e.job_id, e.died_at);
    } else {
      index.AddQueued(e.job_id, e.tenant, e.priority, e.ready_at, now);
    }
    return absl::OkStatus();
  }));
  next_job_id_ = next_id;
  auto jobs = store_->ReadJobs(q.meta.id, leased_ids);
  if (!jobs.ok()) return jobs.status();
  for (std::optional<Job>& job : *jobs) {
    if (!job) return absl::DataLossError("a leased job's record is missing");
    const LeaseRecord& lease = leased.at(job->id);
    job->state = JobState::kLeased;
    job->lease_token = lease.token;
    job->lease_deadline = lease.deadline;
    job->attempts.push_back(lease.attempt);
    q.index.AddLeased(*std::move(job));
  }
  return absl::OkStatus();
}

absl::StatusOr<WorkQueue::Queue*> WorkQueue::Find(const std::string& name) const {
  auto it = queues_.find(name);
  if (it == queues_.end()) return NotFound(absl::StrCat("queue '", name, "' does not exist"));
  return it->second.get();
}

absl::StatusOr<WorkQueue::Queue*> WorkQueue::FindForChange(const std::string& name) {
  CONDUIT_RETURN_IF_ERROR(log_.health());
  return Find(name);
}

WorkQueue::Queue* WorkQueue::FindById(QueueId id) const {
  auto it = queues_by_id_.find(id);
  return it == queues_by_id_.end() ? nullptr : it->second;
}

void WorkQueue::AddQueue(std::unique_ptr<Queue> q) {
  Queue* added = q.get();
  const std::string name = q->meta.name;
  if (queues_.try_emplace(name, std::move(q)).second) queues_by_id_[added->meta.id] = added;
}

void WorkQueue::RemoveQueue(const std::string& name) {
  auto it = queues_.find(name);
  if (it == queues_.end()) return;
  queues_by_id_.erase(it->second->meta.id);
  queues_.erase(it);
}

void WorkQueue::Commit(QueueWrite write, std::function<void(absl::Status)> done) {
  Queue* q = FindById(write.queue_id);
  // A kInterval queue's changes are answered without an fsync of their own; its creation is.
  if (q != nullptr && !write.create_queue &&
      q->meta.config.durability == QueueDurability::kInterval) {
    write.sync = false;
  }
  // Records written or deleted stay readable from memory until the store has them.
  if (q == nullptr || (write.puts.empty() && write.deletes.empty())) {
    return log_.Submit(std::move(write), std::move(done));
  }
  const uint64_t seq = ++commit_seq_;
  std::vector<uint64_t> ids;
  for (const Job& job : write.puts) {
    q->pending[job.id] = Queue::Pending{seq, job};
    ids.push_back(job.id);
  }
  for (uint64_t id : write.deletes) {
    q->pending[id] = Queue::Pending{seq, std::nullopt};
    ids.push_back(id);
  }
  for (uint64_t id : ids) q->ahead.Written(id);
  log_.Submit(std::move(write), [this, queue_id = q->meta.id, seq, ids = std::move(ids),
                                 done = std::move(done)](absl::Status s) {
    if (s.ok()) {  // after a failure memory keeps what the store may not have
      absl::MutexLock lock(&mu_);
      if (Queue* q = FindById(queue_id)) {
        for (uint64_t id : ids) {
          auto it = q->pending.find(id);
          if (it != q->pending.end() && it->second.seq == seq) q->pending.erase(it);
        }
      }
    }
    done(std::move(s));
  });
}

// --- queues ----------------------------------------------------------------------------------

void WorkQueue::CreateQueue(const std::string& name, const QueueConfigPatch& patch,
                            Callback<QueueMeta> done) {
  if (auto s = ValidateQueueName(name); !s.ok()) return done(s);
  const QueueConfig config = patch.ApplyTo(QueueConfig{});
  if (auto s = ValidateConfig(config); !s.ok()) return done(s);
  absl::MutexLock lock(&mu_);
  if (auto s = log_.health(); !s.ok()) return ReplyAfterLog(std::move(done), s);
  if (queues_.contains(name)) {
    return ReplyAfterLog(std::move(done), absl::AlreadyExistsError(
                                              absl::StrCat("queue '", name, "' already exists")));
  }
  auto q = std::make_unique<Queue>();
  q->meta = QueueMeta{QueueId(next_queue_id_++), name, config, Now()};
  QueueWrite write;
  write.queue_id = q->meta.id;
  write.create_queue = q->meta;
  QueueMeta meta = q->meta;
  AddQueue(std::move(q));
  RequestSyncFor(config);
  Commit(std::move(write), [done, meta](absl::Status s) {
    if (!s.ok()) return done(s);
    done(meta);
  });
}

void WorkQueue::DeleteQueue(const std::string& name, Callback<bool> done) {
  absl::MutexLock lock(&mu_);
  auto q = FindForChange(name);
  if (!q.ok()) return ReplyAfterLog(std::move(done), q.status());
  QueueWrite write;
  write.queue_id = (*q)->meta.id;
  write.drop_queue = true;
  for (auto& [id, waiter] : (*q)->waiters) scope_.After(absl::ZeroDuration(), std::move(waiter));
  observer_->OnQueueDeleted(name);
  RemoveQueue(name);
  Commit(std::move(write), [done](absl::Status s) {
    if (!s.ok()) return done(s);
    done(true);
  });
}

std::vector<QueueMeta> WorkQueue::ListQueues() const {
  absl::MutexLock lock(&mu_);
  std::vector<QueueMeta> out;
  for (const auto& [name, q] : queues_) out.push_back(q->meta);
  return out;
}

absl::StatusOr<QueueStats> WorkQueue::Stats(const std::string& queue) const {
  absl::MutexLock lock(&mu_);
  auto found = Find(queue);
  if (!found.ok()) return found.status();
  return StatsOf(**found, Now());
}

QueueStats WorkQueue::StatsOf(const Queue& q, absl::Time now) const {
  // Delayed jobs whose time has come are ready, even before the scheduler moves them.
  QueueStats stats = StatsOfDepth(q.index.At(now), now);
  stats.enqueue_rate = q.enqueues.PerSecond(now);
  stats.ack_rate = q.acks.PerSecond(now);
  stats.nack_rate = q.nacks.PerSecond(now);
  stats.expiry_rate = q.expiries.PerSecond(now);
  return stats;
}

void WorkQueue::Observe(const Queue& q, absl::Time now) {
  // Constant time, so it can follow every change: delayed jobs that came due count as delayed
  // until the next scheduler pass (at most one tick), where Stats() counts them exactly.
  observer_->OnDepth(q.meta.name, StatsOfDepth(q.index.Indexed(), now));
}

void WorkQueue::ObserveTenants(const Queue& q) {
  absl::flat_hash_map<std::string, QueueObserver::TenantDepth> by_tenant;
  q.index.tenants().ForEachTenant([&](const std::string& tenant, int64_t ready) {
    auto& d = by_tenant[tenant];
    d.tenant = tenant;
    d.ready = ready;
  });
  for (const auto& [tenant, leased] : q.index.tenants().leased()) {
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
  observer_->OnTenantDepth(q.meta.name, all);
}

void WorkQueue::Count(const Queue& q, QueueEvent event, int64_t n) {
  if (n > 0) observer_->OnEvents(q.meta.name, event, n);
}

// --- scheduler -------------------------------------------------------------------------------

void WorkQueue::RunDue(Queue& q, absl::Time now, QueueWrite* write) {
  bool made_ready = q.index.PromoteDue(now);
  while (std::optional<Job> job = q.index.TakeExpiredLease(now)) {
    LeaseBook::EndByExpiry(*job);
    Count(q, QueueEvent::kExpired, 1);
    q.expiries.Add(now, 1);
    const QueueConfig& config = q.meta.config;
    if (job->expiries >= config.max_lease_expiries) {
      q.index.Kill(
          *job, absl::StrCat("max lease expiries (", config.max_lease_expiries, ") reached"), now);
      Count(q, QueueEvent::kDead, 1);
    } else {
      q.index.Requeue(*job, now + Backoff(config, job->expiries, rng_), now);
      made_ready |= job->ready_at <= now;
    }
    write->lease_deletes.push_back(job->id);
    write->puts.push_back(*std::move(job));
  }
  if (made_ready) WakeWaiters(q);
  Observe(q, now);  // ages move with time even when nothing else does
}

void WorkQueue::RunScheduler() {
  absl::MutexLock lock(&mu_);
  if (!log_.health().ok()) return;  // memory must not move on from what the disk has
  const absl::Time now = Now();
  for (auto& [name, q] : queues_) {
    QueueWrite write;
    write.queue_id = q->meta.id;
    RunDue(*q, now, &write);
    ExpireKeys(*q, now, &write);
    ObserveTenants(*q);
    if (!write.puts.empty() || !write.key_deletes.empty()) {
      Commit(std::move(write), [](absl::Status) {});
    }
  }
}

}  // namespace conduit::work_queue
