// Leases: the request's checks, long-poll and reads without the lock (WorkQueue), and the
// queue's rules (JobQueue): taking ready jobs (weighted round-robin by tenant), granting,
// extending, acking and nacking.

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

// --- JobQueue ---------------------------------------------------------------------------------

JobQueue::TakenJobs JobQueue::TakeReady(int32_t max_jobs) {
  TakenJobs taken;
  std::vector<uint64_t> ids;
  while (static_cast<int32_t>(taken.entries.size()) < max_jobs) {
    auto next = index_.TakeNextReady(meta_.config);
    if (!next) break;
    ids.push_back(next->second.id);
    taken.entries.push_back(*std::move(next));
  }
  taken.read = records_.Plan(std::move(ids));
  records_.TakeReadAhead(&taken.read);
  return taken;
}

void JobQueue::ReturnReady(const TakenJobs& taken, absl::Time now) {
  for (const auto& [tenant, entry] : taken.entries) index_.ReturnReady(tenant, entry, now);
  WakeWaiters();  // a Lease that found none ready meanwhile may be waiting for them
}

void JobQueue::GrantLeases(std::vector<Job>& jobs, const LeaseArgs& args, absl::Time now,
                           absl::BitGenRef rng, QueueWrite* write) {
  const absl::Duration visibility =
      args.visibility_timeout.value_or(meta_.config.visibility_timeout);
  for (Job& job : jobs) {
    LeaseBook::Grant(job, args.worker, now, visibility, rng);
    write->lease_puts.push_back(LeaseRecord::Of(job));
    index_.StartLease(job);
  }
  Count(QueueEvent::kLeased, static_cast<int64_t>(jobs.size()));
  Observe(now);
}

absl::StatusOr<Job*> JobQueue::LeasedJob(uint64_t job_id, const LeaseToken& token, absl::Time now) {
  Job* job = index_.FindLeased(job_id);
  if (job == nullptr) {
    if (!records_.Exists(job_id, index_.dead())) {
      return absl::NotFoundError(
          absl::StrCat("job ", job_id, " of queue '", meta_.name, "' does not exist"));
    }
    return LeaseBook::Stale(job_id);
  }
  if (absl::Status s = LeaseBook::Check(*job, token, now); !s.ok()) return s;
  return job;
}

absl::StatusOr<absl::Time> JobQueue::ExtendLease(uint64_t job_id, const LeaseToken& token,
                                                 absl::Duration extension, absl::Time now,
                                                 QueueWrite* write) {
  auto job = LeasedJob(job_id, token, now);
  if (!job.ok()) return job.status();
  index_.ExtendLease(**job, now + extension);
  write->lease_puts.push_back(LeaseRecord::Of(**job));
  return (*job)->lease_deadline;
}

int64_t JobQueue::AckBatch(const std::vector<AckEntry>& entries, absl::Time now, QueueWrite* write,
                           std::vector<absl::Status>* results) {
  results->reserve(entries.size());
  for (const AckEntry& e : entries) {
    auto job = LeasedJob(e.job_id, e.lease_token, now);
    if (job.ok()) {
      index_.TakeLeased(e.job_id);
      write->deletes.push_back(e.job_id);
    }
    results->push_back(job.status());
  }
  const auto acked = static_cast<int64_t>(write->deletes.size());
  if (acked > 0) {
    Count(QueueEvent::kAcked, acked);
    acks_.Add(now, acked);
    Observe(now);
  }
  return acked;
}

absl::StatusOr<NackResult> JobQueue::Nack(uint64_t job_id, const LeaseToken& token,
                                          const NackArgs& args, absl::Time now, absl::BitGenRef rng,
                                          QueueWrite* write) {
  auto found = LeasedJob(job_id, token, now);
  if (!found.ok()) return found.status();
  Job job = *index_.TakeLeased(job_id);
  LeaseBook::EndByNack(job, args.reason, args.failure_class, now);
  NackResult result;
  const QueueConfig& config = meta_.config;
  if (args.failure_class == FailureClass::kPermanent) {
    index_.Kill(job, absl::StrCat("permanent failure: ", args.reason), now);
    result.dead = true;
  } else if (job.failures >= config.max_attempts) {
    index_.Kill(job,
                absl::StrCat("max attempts (", config.max_attempts,
                             ") reached; last failure: ", args.reason),
                now);
    result.dead = true;
  } else {
    index_.Requeue(
        job, now + (args.retry_after ? *args.retry_after : Backoff(config, job.failures, rng)),
        now);
    result.retry_at = job.ready_at;
    if (job.ready_at <= now) WakeWaiters();
  }
  Count(QueueEvent::kNacked, 1);
  nacks_.Add(now, 1);
  if (result.dead) Count(QueueEvent::kDead, 1);
  Observe(now);
  write->lease_deletes.push_back(job_id);
  write->puts.push_back(std::move(job));
  return result;
}

// --- WorkQueue --------------------------------------------------------------------------------

absl::StatusOr<std::vector<Job>> WorkQueue::FinishLease(JobQueue* q, const LeaseArgs& args,
                                                        const JobQueue::TakenJobs& taken,
                                                        absl::StatusOr<std::vector<Job>> jobs) {
  if (q == nullptr) {  // deleted while the records were read: the jobs went with it
    return absl::NotFoundError(absl::StrCat("queue '", args.queue, "' does not exist"));
  }
  const absl::Time now = Now();
  if (absl::Status health = log_.health(); !jobs.ok() || !health.ok()) {
    q->ReturnReady(taken, now);  // nothing was leased
    return jobs.ok() ? health : jobs.status();
  }
  QueueWrite write{.queue_id = q->id()};
  q->GrantLeases(*jobs, args, now, rng_, &write);
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
  JobQueue::TakenJobs taken;
  {
    absl::MutexLock lock(&mu_);
    auto found = FindForChange(args.queue);
    if (!found.ok()) return ReplyAfterLog(std::move(done), found.status());
    JobQueue& q = **found;
    QueueWrite write{.queue_id = q.id()};
    q.RunDue(Now(), rng_, &write);
    // What the pass changed is queued first, so that a job whose lease it expired, and which
    // this lease takes again, is read from `pending` as the pass left it (its history grown).
    if (!write.puts.empty()) Commit(std::move(write), [](absl::Status) {});
    taken = q.TakeReady(args.max_jobs);
    if (taken.entries.empty() && clock_->Monotonic() < deadline && !shutting_down_.load()) {
      // Long-poll: wait for a job to become ready, or the deadline. Whichever fires first
      // retries (the other finds the waiter gone).
      const uint64_t id = next_waiter_id_++;
      auto fired = std::make_shared<std::atomic<bool>>(false);
      auto retry = [this, args, deadline, done, fired]() {
        if (fired->exchange(true)) return;
        LeaseUntil(args, deadline, done);
      };
      q.AddWaiter(id, retry);
      const std::string queue = args.queue;
      scope_.After(deadline - clock_->Monotonic(), [this, queue, id, retry]() mutable {
        {
          absl::MutexLock lock(&mu_);
          auto q = Find(queue);
          if (q.ok()) (*q)->RemoveWaiter(id);
        }
        retry();
      });
      return;
    }
    if (taken.entries.empty()) {
      Commit(QueueWrite{.queue_id = q.id()}, [done](absl::Status s) {
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
  absl::StatusOr<std::vector<Job>> jobs = JobRecords::Finish(*store_, std::move(taken.read));
  {
    absl::MutexLock lock(&mu_);
    // The same queue, not one created under its name since.
    auto found = Find(args.queue);
    JobQueue* q = found.ok() && (*found)->id() == queue_id ? *found : nullptr;
    jobs = FinishLease(q, args, taken, std::move(jobs));
    if (!jobs.ok()) return ReplyAfterLog(std::move(done), jobs.status());
    q->records().SetReadAheadJobs(args.max_jobs >= JobRecords::kReadAheadMinJobs ? args.max_jobs
                                                                                 : 0);
  }
  done(std::move(jobs));  // never reply under mu_
}

void WorkQueue::ExtendLease(const std::string& queue, uint64_t job_id, const LeaseToken& token,
                            absl::Duration extension, Callback<absl::Time> done) {
  if (extension <= absl::ZeroDuration() || extension > kMaxLease) {
    return done(absl::InvalidArgumentError("extension must be between 0 and 12h"));
  }
  absl::MutexLock lock(&mu_);
  auto q = FindForChange(queue);
  if (!q.ok()) return ReplyAfterLog(std::move(done), q.status());
  QueueWrite write{.queue_id = (*q)->id()};
  CommitAndReply(&write, std::move(done),
                 (*q)->ExtendLease(job_id, token, extension, Now(), &write));
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
  std::optional<std::vector<uint64_t>> read_ahead;
  QueueId queue_id;
  {
    absl::MutexLock lock(&mu_);
    auto q = FindForChange(queue);
    if (!q.ok()) return ReplyAfterLog(std::move(done), q.status());
    queue_id = (*q)->id();
    QueueWrite write{.queue_id = queue_id};
    std::vector<absl::Status> results;
    const int64_t acked = (*q)->AckBatch(entries, Now(), &write, &results);
    // Replied after the log even when nothing was acked: a result that depends on state must
    // not outrun that state.
    CommitAndReply(&write, std::move(done), std::move(results));
    if (acked >= JobRecords::kReadAheadMinJobs) {
      read_ahead = (*q)->PlanReadAhead();
    }
  }
  // On this thread, while the writer makes the ack durable and the worker waits for it: the
  // records its next batch Lease will take.
  if (read_ahead) ReadAhead(queue_id, *read_ahead);
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
  QueueWrite write{.queue_id = (*q)->id()};
  CommitAndReply(&write, std::move(done), (*q)->Nack(job_id, token, args, Now(), rng_, &write));
}

void WorkQueue::ReadAhead(QueueId queue_id, const std::vector<uint64_t>& ids) {
  JobRecords::ReadAheadResult read = JobRecords::ReadAhead(*store_, queue_id, ids);
  absl::MutexLock lock(&mu_);
  JobQueue* q = queues_.FindById(queue_id);
  if (q == nullptr) return;  // deleted meanwhile
  q->FinishReadAhead(std::move(read));
}

}  // namespace conduit::work_queue
