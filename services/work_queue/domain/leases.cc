// WorkQueue: leases — taking ready jobs (weighted round-robin by tenant), long-poll, extend,
// ack and nack.

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "services/work_queue/domain/queue_rules.h"
#include "services/work_queue/domain/work_queue.h"

namespace conduit::work_queue {
namespace {

constexpr int32_t kMaxLeaseJobs = 1000;
constexpr absl::Duration kMaxLeaseWait = absl::Seconds(30);
constexpr absl::Duration kMaxLease = absl::Hours(12);

}  // namespace

// --- leases ----------------------------------------------------------------------------------

WorkQueue::TakenJobs WorkQueue::TakeReady(Queue& q, const LeaseArgs& args) {
  TakenJobs taken;
  std::vector<uint64_t> ids;
  while (static_cast<int32_t>(taken.entries.size()) < args.max_jobs) {
    auto next = q.index.TakeNextReady(q.meta.config);
    if (!next) break;
    ids.push_back(next->second.id);
    taken.entries.push_back(*std::move(next));
  }
  taken.read = PlanRead(q, std::move(ids));
  TakeReadAhead(q, &taken.read);
  return taken;
}

absl::StatusOr<std::vector<Job>> WorkQueue::FinishLease(Queue* q, const LeaseArgs& args,
                                                         const TakenJobs& taken,
                                                         absl::StatusOr<std::vector<Job>> jobs) {
  if (q == nullptr) {  // deleted while the records were read: the jobs went with it
    return absl::NotFoundError(absl::StrCat("queue '", args.queue, "' does not exist"));
  }
  const absl::Time now = Now();
  if (absl::Status health = log_.health(); !jobs.ok() || !health.ok()) {
    // Nothing was leased: the jobs stay ready, in the same order.
    for (const auto& [tenant, entry] : taken.entries) q->index.ReturnReady(tenant, entry, now);
    WakeWaiters(*q);  // a Lease that found none ready meanwhile may be waiting for them
    return jobs.ok() ? health : jobs.status();
  }
  const absl::Duration visibility =
      args.visibility_timeout.value_or(q->meta.config.visibility_timeout);
  QueueWrite write;
  write.queue_id = q->meta.id;
  for (Job& job : *jobs) {
    LeaseBook::Grant(job, args.worker, now, visibility, rng_);
    write.lease_puts.push_back(LeaseRecord::Of(job));
    q->index.StartLease(job);
  }
  Count(*q, QueueEvent::kLeased, static_cast<int64_t>(jobs->size()));
  Observe(*q, now);
  // A lease is answered without waiting for its fsync: losing it in a crash is the same as the
  // lease expiring (the job is ready again, the stale token's Ack is refused), which redelivery
  // already covers. An Ack waits for its own write, which the log makes durable after this one.
  // Nor does the write need an fsync of its own: the Ack's covers it. One fsync per lease+ack
  // cycle instead of two.
  write.sync = false;
  Commit(std::move(write), [](absl::Status) {});
  return jobs;
}

void WorkQueue::Lease(const LeaseArgs& args, Callback<std::vector<Job>> done) {
  if (args.worker.empty()) return done(absl::InvalidArgumentError("worker_id is required"));
  if (args.max_jobs < 1 || args.max_jobs > kMaxLeaseJobs) {
    return done(absl::InvalidArgumentError(absl::StrFormat(
        "max_jobs must be between 1 and %d, got %d", kMaxLeaseJobs, args.max_jobs)));
  }
  if (args.visibility_timeout &&
      (*args.visibility_timeout < absl::Seconds(1) || *args.visibility_timeout > kMaxLease)) {
    return done(absl::InvalidArgumentError("visibility_timeout must be between 1s and 12h"));
  }
  if (args.max_wait < absl::ZeroDuration() || args.max_wait > kMaxLeaseWait) {
    return done(absl::InvalidArgumentError("max_wait must be between 0 and 30s"));
  }
  LeaseUntil(args, clock_->Monotonic() + args.max_wait, std::move(done));
}

void WorkQueue::LeaseUntil(LeaseArgs args, absl::Duration deadline,
                           Callback<std::vector<Job>> done) {
  TakenJobs taken;
  {
    absl::MutexLock lock(&mu_);
    auto found = FindForChange(args.queue);
    if (!found.ok()) return ReplyAfterLog(std::move(done), found.status());
    Queue& q = **found;
    QueueWrite write;
    write.queue_id = q.meta.id;
    RunDue(q, Now(), &write);
    // What the pass changed is queued first, so that a job whose lease it expired, and which
    // this lease takes again, is read from `pending` as the pass left it (its history grown).
    if (!write.puts.empty()) Commit(std::move(write), [](absl::Status) {});
    taken = TakeReady(q, args);
    if (taken.entries.empty() && clock_->Monotonic() < deadline && !shutting_down_.load()) {
      // Long-poll: wait for a job to become ready, or the deadline. Whichever fires first
      // retries (the other finds the waiter gone).
      const uint64_t id = next_waiter_id_++;
      auto fired = std::make_shared<std::atomic<bool>>(false);
      auto retry = [this, args, deadline, done, fired]() {
        if (fired->exchange(true)) return;
        LeaseUntil(args, deadline, done);
      };
      q.waiters.emplace(id, retry);
      const std::string queue = args.queue;
      scope_.After(deadline - clock_->Monotonic(), [this, queue, id, retry]() mutable {
        {
          absl::MutexLock lock(&mu_);
          auto q = Find(queue);
          if (q.ok()) (*q)->waiters.erase(id);
        }
        retry();
      });
      return;
    }
    if (taken.entries.empty()) {
      Commit(QueueWrite{.queue_id = q.meta.id}, [done](absl::Status s) {
        if (!s.ok()) return done(s);
        done(std::vector<Job>{});
      });
      return;
    }
  }
  // The records are read without mu_: a read that goes to disk (a backlog beyond memory) holds
  // up no other call, of this queue or any other. The taken jobs are in no index meanwhile, so
  // nothing else writes them; a DeleteQueue may drop them, which FinishLease finds.
  const QueueId queue_id = taken.read.queue_id;
  absl::StatusOr<std::vector<Job>> jobs = FinishRead(std::move(taken.read));
  {
    absl::MutexLock lock(&mu_);
    // The same queue, not one created under its name since.
    auto found = Find(args.queue);
    Queue* q = found.ok() && (*found)->meta.id == queue_id ? *found : nullptr;
    jobs = FinishLease(q, args, taken, std::move(jobs));
    if (!jobs.ok()) return ReplyAfterLog(std::move(done), jobs.status());
    q->ahead.jobs = args.max_jobs >= kReadAheadMinJobs ? args.max_jobs : 0;
  }
  done(std::move(jobs));  // never reply under mu_
}

void WorkQueue::WakeWaiters(Queue& q) {
  // Retried from the timer thread: never call back into the domain under mu_.
  for (auto& [id, waiter] : q.waiters) scope_.After(absl::ZeroDuration(), std::move(waiter));
  q.waiters.clear();
}

absl::StatusOr<Job*> WorkQueue::LeasedJob(Queue& q, uint64_t job_id, const LeaseToken& token,
                                          absl::Time now) {
  Job* job = q.index.FindLeased(job_id);
  if (job == nullptr) {
    if (!Exists(q, job_id)) {
      return absl::NotFoundError(
          absl::StrCat("job ", job_id, " of queue '", q.meta.name, "' does not exist"));
    }
    return LeaseBook::Stale(job_id);
  }
  if (absl::Status s = LeaseBook::Check(*job, token, now); !s.ok()) return s;
  return job;
}

void WorkQueue::ExtendLease(const std::string& queue, uint64_t job_id, const LeaseToken& token,
                            absl::Duration extension, Callback<absl::Time> done) {
  if (extension <= absl::ZeroDuration() || extension > kMaxLease) {
    return done(absl::InvalidArgumentError("extension must be between 0 and 12h"));
  }
  absl::MutexLock lock(&mu_);
  auto q = FindForChange(queue);
  if (!q.ok()) return ReplyAfterLog(std::move(done), q.status());
  const absl::Time now = Now();
  auto job = LeasedJob(**q, job_id, token, now);
  if (!job.ok()) return ReplyAfterLog(std::move(done), job.status());
  (*q)->index.ExtendLease(**job, now + extension);
  QueueWrite write;
  write.queue_id = (*q)->meta.id;
  write.lease_puts.push_back(LeaseRecord::Of(**job));
  Commit(std::move(write), [done, deadline = (*job)->lease_deadline](absl::Status s) {
    if (!s.ok()) return done(s);
    done(deadline);
  });
}

absl::Status WorkQueue::AckLocked(Queue& q, uint64_t job_id, const LeaseToken& token,
                                  absl::Time now, QueueWrite* write) {
  auto job = LeasedJob(q, job_id, token, now);
  if (!job.ok()) return job.status();
  q.index.TakeLeased(job_id);
  write->deletes.push_back(job_id);
  return absl::OkStatus();
}

void WorkQueue::Ack(const std::string& queue, uint64_t job_id, const LeaseToken& token,
                    Callback<bool> done) {
  // A batch of one: the same checks, the same write, the job's own status as the answer.
  AckBatch(queue, {AckEntry{job_id, token}},
           [done = std::move(done)](absl::StatusOr<std::vector<absl::Status>> results) {
             if (!results.ok()) return done(results.status());
             if (!results->front().ok()) return done(results->front());
             done(true);
           });
}

void WorkQueue::AckBatch(const std::string& queue, const std::vector<AckEntry>& entries,
                         Callback<std::vector<absl::Status>> done) {
  if (entries.empty() || entries.size() > kMaxAckBatch) {
    return done(absl::InvalidArgumentError(
        absl::StrCat("an ack batch holds 1..", kMaxAckBatch, " jobs, not ", entries.size())));
  }
  absl::flat_hash_set<uint64_t> seen;
  for (const AckEntry& e : entries) {
    if (!seen.insert(e.job_id).second) {
      return done(absl::InvalidArgumentError(
          absl::StrCat("job ", e.job_id, " appears twice in the ack batch")));
    }
  }
  std::optional<ReadAheadPlan> read_ahead;
  {
    absl::MutexLock lock(&mu_);
    auto q = FindForChange(queue);
    if (!q.ok()) return ReplyAfterLog(std::move(done), q.status());
    const absl::Time now = Now();
    QueueWrite write;
    write.queue_id = (*q)->meta.id;
    std::vector<absl::Status> results;
    results.reserve(entries.size());
    for (const AckEntry& e : entries) {
      results.push_back(AckLocked(**q, e.job_id, e.lease_token, now, &write));
    }
    const int64_t acked = static_cast<int64_t>(write.deletes.size());
    if (acked > 0) {
      Count(**q, QueueEvent::kAcked, acked);
      (*q)->acks.Add(now, acked);
      Observe(**q, now);
    }
    // Replied after the log even when nothing was acked: a result that depends on state must
    // not outrun that state.
    Commit(std::move(write), [done, results = std::move(results)](absl::Status s) mutable {
      if (!s.ok()) return done(s);
      done(std::move(results));
    });
    if (acked >= kReadAheadMinJobs) read_ahead = PlanReadAhead(**q);
  }
  // On this thread, while the writer makes the ack durable and the worker waits for it: the
  // records its next batch Lease will take.
  if (read_ahead) ReadAhead(*read_ahead);
}

void WorkQueue::Nack(const std::string& queue, uint64_t job_id, const LeaseToken& token,
                     const NackArgs& args, Callback<NackResult> done) {
  if (args.retry_after &&
      (*args.retry_after < absl::ZeroDuration() || *args.retry_after > absl::Hours(24))) {
    return done(absl::InvalidArgumentError("retry_after must be between 0 and 24h"));
  }
  absl::MutexLock lock(&mu_);
  auto q = FindForChange(queue);
  if (!q.ok()) return ReplyAfterLog(std::move(done), q.status());
  const absl::Time now = Now();
  auto found = LeasedJob(**q, job_id, token, now);
  if (!found.ok()) return ReplyAfterLog(std::move(done), found.status());
  Job job = *(*q)->index.TakeLeased(job_id);
  LeaseBook::EndByNack(job, args.reason, args.failure_class, now);
  NackResult result;
  const QueueConfig& config = (*q)->meta.config;
  if (args.failure_class == FailureClass::kPermanent) {
    (*q)->index.Kill(job, absl::StrCat("permanent failure: ", args.reason), now);
    result.dead = true;
  } else if (job.failures >= config.max_attempts) {
    (*q)->index.Kill(job,
                     absl::StrCat("max attempts (", config.max_attempts,
                                  ") reached; last failure: ", args.reason),
                     now);
    result.dead = true;
  } else {
    (*q)->index.Requeue(
        job, now + (args.retry_after ? *args.retry_after : Backoff(config, job.failures, rng_)),
        now);
    result.retry_at = job.ready_at;
    if (job.ready_at <= now) WakeWaiters(**q);
  }
  Count(**q, QueueEvent::kNacked, 1);
  (*q)->nacks.Add(now, 1);
  if (result.dead) Count(**q, QueueEvent::kDead, 1);
  Observe(**q, now);
  QueueWrite write;
  write.queue_id = (*q)->meta.id;
  write.lease_deletes.push_back(job_id);
  write.puts.push_back(std::move(job));
  Commit(std::move(write), [done, result](absl::Status s) {
    if (!s.ok()) return done(s);
    done(result);
  });
}

}  // namespace conduit::work_queue
