// Enqueue: the request's checks (WorkQueue) and the queue's rules (JobQueue): idempotency
// keys, backpressure, new jobs and dead letters added from elsewhere.

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status/status_macros.h"
#include "services/work_queue/domain/queue_rules.h"
#include "services/work_queue/domain/work_queue.h"

namespace conduit::work_queue {
namespace {

// INVALID_ARGUMENT when the request has no jobs or a job breaks a limit that needs no clock.
absl::Status ValidateJobs(const std::vector<NewJob>& jobs) {
  if (jobs.empty()) return absl::InvalidArgumentError("enqueue request has no jobs");
  for (size_t i = 0; i < jobs.size(); ++i) {
    const NewJob& j = jobs[i];
    if (j.payload.size() > kMaxPayloadBytes) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "job %d: payload is %d bytes; the limit is %d", i, j.payload.size(), kMaxPayloadBytes));
    }
    if (j.delay && j.not_before) {
      return absl::InvalidArgumentError(
          absl::StrFormat("job %d: set delay or not_before, not both", i));
    }
    if (j.delay && (*j.delay < absl::ZeroDuration() || *j.delay > kMaxDelay)) {
      return absl::InvalidArgumentError(
          absl::StrFormat("job %d: delay must be between 0 and %s, got %s", i,
                          absl::FormatDuration(kMaxDelay), absl::FormatDuration(*j.delay)));
    }
    if (j.tenant.size() > kMaxTenantBytes || j.idempotency_key.size() > kMaxTenantBytes) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "job %d: tenant and idempotency key are limited to %d bytes", i, kMaxTenantBytes));
    }
  }
  return absl::OkStatus();
}

// INVALID_ARGUMENT when a job's not_before is more than kMaxDelay after `now`.
absl::Status CheckNotBefore(const std::vector<NewJob>& jobs, absl::Time now) {
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (jobs[i].not_before && *jobs[i].not_before > now + kMaxDelay) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "job %d: not_before is more than %s from now", i, absl::FormatDuration(kMaxDelay)));
    }
  }
  return absl::OkStatus();
}

// RESOURCE_EXHAUSTED when `new_jobs` would take the queue beyond max_depth live jobs.
absl::Status CheckDepth(const std::string& queue, const QueueConfig& config, int64_t live,
                        int64_t new_jobs) {
  if (config.max_depth > 0 && new_jobs > 0 && live + new_jobs > config.max_depth) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "queue '%s' holds %d live jobs (max_depth %d); retry after 1s, once workers catch up",
        queue, live, config.max_depth));
  }
  return absl::OkStatus();
}

// RESOURCE_EXHAUSTED when the request adds jobs while the oldest ready one waits longer than
// max_ready_age.
absl::Status CheckReadyAge(const std::string& queue, const QueueConfig& config,
                           absl::Duration oldest_ready_age, int64_t new_jobs) {
  if (oldest_ready_age > config.max_ready_age && new_jobs > 0) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "queue '", queue, "': the oldest ready job waits ", absl::FormatDuration(oldest_ready_age),
        " (max_ready_age ", absl::FormatDuration(config.max_ready_age),
        "); retry after 1s, once workers catch up"));
  }
  return absl::OkStatus();
}

// The job `j` becomes, with id `id`; moves its payload, headers, tenant and source out.
Job MakeJob(NewJob& j, uint64_t id, absl::Time now) {
  Job job;
  job.id = id;
  job.payload = std::move(j.payload);
  job.headers = std::move(j.headers);
  job.tenant = std::move(j.tenant);
  job.priority = j.priority;
  job.idempotency_key = j.idempotency_key;
  job.source = std::move(j.source);
  job.enqueued_at = now;
  job.ready_at =
      j.not_before ? std::max(now, *j.not_before) : now + j.delay.value_or(absl::ZeroDuration());
  return job;
}

}  // namespace

absl::StatusOr<std::vector<EnqueuedJob>> JobQueue::Enqueue(std::vector<NewJob>& jobs,
                                                           absl::Time now, uint64_t* next_job_id,
                                                           QueueWrite* write) {
  CONDUIT_RETURN_IF_ERROR(CheckNotBefore(jobs, now));
  // Only new jobs count against the depth limit: a retried enqueue of accepted jobs must pass.
  const int64_t new_jobs = keys_.CountNew(jobs);
  CONDUIT_RETURN_IF_ERROR(CheckDepth(meta_.name, meta_.config, index_.live(), new_jobs));
  if (meta_.config.max_ready_age > absl::ZeroDuration()) {
    CONDUIT_RETURN_IF_ERROR(
        CheckReadyAge(meta_.name, meta_.config, Stats(now).oldest_ready_age, new_jobs));
  }
  ExpireKeys(now, write);
  std::vector<EnqueuedJob> out;
  bool made_ready = false;
  for (NewJob& j : jobs) {
    if (auto known = keys_.Known(j.idempotency_key)) {
      out.push_back(*known);
      continue;
    }
    Job job = MakeJob(j, (*next_job_id)++, now);
    made_ready |= job.ready_at <= now;
    keys_.Remember(job, now, write);
    out.push_back(EnqueuedJob{job.id, false});
    index_.AddQueued(job.id, job.tenant, job.priority, job.ready_at, now);
    write->puts.push_back(std::move(job));  // memory keeps the index entry, not the record
  }
  if (made_ready) WakeWaiters();
  write->next_job_id = *next_job_id;
  Count(QueueEvent::kEnqueued, static_cast<int64_t>(write->puts.size()));
  enqueues_.Add(now, static_cast<int64_t>(write->puts.size()));
  Observe(now);
  return out;
}

std::vector<EnqueuedJob> JobQueue::AddDeadLetters(std::vector<NewDeadLetter>& letters,
                                                  absl::Time now, uint64_t* next_job_id,
                                                  QueueWrite* write) {
  ExpireKeys(now, write);
  std::vector<EnqueuedJob> out;
  for (NewDeadLetter& d : letters) {
    if (auto known = keys_.Known(d.job.idempotency_key)) {
      out.push_back(*known);
      continue;
    }
    Job job = MakeJob(d.job, (*next_job_id)++, now);
    job.state = JobState::kDead;
    job.died_at = now;
    job.death_reason = std::move(d.reason);
    job.failures = static_cast<int32_t>(d.attempts.size());
    job.attempts = std::move(d.attempts);
    keys_.Remember(job, now, write);
    out.push_back(EnqueuedJob{job.id, false});
    index_.AddDead(job.id, job.died_at);
    write->puts.push_back(std::move(job));
  }
  write->next_job_id = *next_job_id;
  Count(QueueEvent::kDead, static_cast<int64_t>(write->puts.size()));
  Observe(now);
  return out;
}

void WorkQueue::Enqueue(const std::string& queue, std::vector<NewJob> jobs,
                        Callback<std::vector<EnqueuedJob>> done) {
  if (absl::Status invalid = ValidateJobs(jobs); !invalid.ok()) return done(invalid);
  absl::MutexLock lock(&mu_);
  auto q = FindForChange(queue);
  if (!q.ok()) return ReplyAfterLog(std::move(done), q.status());
  QueueWrite write{.queue_id = (*q)->id()};
  // Duplicates are answered through the log too, so never before their original is durable.
  CommitAndReply(&write, std::move(done), (*q)->Enqueue(jobs, Now(), &next_job_id_, &write));
}

void WorkQueue::AddDeadLetters(const std::string& queue, std::vector<NewDeadLetter> letters,
                               Callback<std::vector<EnqueuedJob>> done) {
  if (letters.empty() || letters.size() > kMaxDeadLettersPerAdd) {
    return done(absl::InvalidArgumentError(absl::StrFormat(
        "add 1..%d dead letters per call, got %d", kMaxDeadLettersPerAdd, letters.size())));
  }
  std::vector<NewJob> jobs;
  for (size_t i = 0; i < letters.size(); ++i) {
    const NewDeadLetter& d = letters[i];
    if (d.reason.empty() || d.reason.size() > kMaxReasonBytes) {
      return done(absl::InvalidArgumentError(absl::StrFormat(
          "dead letter %d: a reason of 1..%d bytes is required", i, kMaxReasonBytes)));
    }
    if (d.attempts.size() > kMaxDeadLetterAttempts) {
      return done(absl::InvalidArgumentError(
          absl::StrFormat("dead letter %d: at most %d attempts", i, kMaxDeadLetterAttempts)));
    }
    for (const Attempt& a : d.attempts) {
      if (a.worker.size() > kMaxTenantBytes || a.reason.size() > kMaxReasonBytes) {
        return done(absl::InvalidArgumentError(absl::StrFormat(
            "dead letter %d: an attempt's worker is limited to %d bytes and its reason to %d", i,
            kMaxTenantBytes, kMaxReasonBytes)));
      }
    }
    if (d.job.delay || d.job.not_before) {
      return done(absl::InvalidArgumentError(
          absl::StrFormat("dead letter %d: delay and not_before do not apply", i)));
    }
    jobs.push_back(d.job);
  }
  if (absl::Status invalid = ValidateJobs(jobs); !invalid.ok()) return done(invalid);
  absl::MutexLock lock(&mu_);
  auto q = FindForChange(queue);
  if (!q.ok()) return ReplyAfterLog(std::move(done), q.status());
  QueueWrite write{.queue_id = (*q)->id()};
  std::vector<EnqueuedJob> out = (*q)->AddDeadLetters(letters, Now(), &next_job_id_, &write);
  CommitAndReply(&write, std::move(done), std::move(out));
}

}  // namespace conduit::work_queue
