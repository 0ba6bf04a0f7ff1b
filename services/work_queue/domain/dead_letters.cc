// The dead-letter lane: listing with filters, inspection, redrive and discard — the request's
// checks (WorkQueue) and the queue's rules (JobQueue).

#include "absl/strings/str_cat.h"
#include "common/status/status_macros.h"
#include "services/work_queue/domain/queue_rules.h"
#include "services/work_queue/domain/work_queue.h"

namespace conduit::work_queue {
namespace {

absl::Status NotDead(const std::string& queue, uint64_t job_id) {
  return absl::NotFoundError(
      absl::StrCat("job ", job_id, " is not in the dead-letter lane of queue '", queue, "'"));
}

// INVALID_ARGUMENT for a redrive's selection, rate or replacement payload, in that order.
absl::Status ValidateRedrive(const DeadLetterSelection& selection,
                             const std::optional<std::string>& replacement_payload, double rate) {
  if (auto s = ValidateSelection(selection.ids, !selection.filter.empty(), selection.limit);
      !s.ok()) {
    return s;
  }
  if (auto s = ValidateRedriveRate(rate); !s.ok()) return s;
  if (replacement_payload && replacement_payload->size() > kMaxPayloadBytes) {
    return absl::InvalidArgumentError("replacement payload is over 1 MiB");
  }
  if (replacement_payload && selection.ids.empty()) {
    return absl::InvalidArgumentError(
        "a replacement payload needs explicit job ids (repair the jobs you looked at)");
  }
  return absl::OkStatus();
}

}  // namespace

// --- JobQueue ---------------------------------------------------------------------------------

absl::StatusOr<std::vector<uint64_t>> JobQueue::ChooseDead(
    const DeadLetterSelection& selection) const {
  auto chosen = index_.dead().Select(records_.Reader(), selection);
  if (!chosen.ok()) return chosen.status();
  if (auto id = index_.dead().FirstNotDead(*chosen)) return NotDead(meta_.name, *id);
  return chosen;
}

absl::StatusOr<DeadLetterPage> JobQueue::ListDeadLetters(
    const DeadLetterFilter& filter, int32_t page_size,
    std::optional<DeadLetterLane::Cursor> after) const {
  return index_.dead().Page(records_.Reader(), filter, page_size, after);
}

absl::StatusOr<Job> JobQueue::GetDeadLetter(uint64_t job_id) const {
  if (!index_.dead().Contains(job_id)) return NotDead(meta_.name, job_id);
  return records_.Reader()(job_id);
}

absl::StatusOr<std::vector<Job>> JobQueue::ReadDeadLetters(
    const DeadLetterSelection& selection) const {
  CONDUIT_ASSIGN_OR_RETURN(std::vector<uint64_t> chosen, ChooseDead(selection));
  return records_.Read(chosen);
}

absl::StatusOr<RedriveResult> JobQueue::Redrive(
    const DeadLetterSelection& selection, const std::optional<std::string>& replacement_payload,
    double rate, absl::Time now, QueueWrite* write) {
  CONDUIT_ASSIGN_OR_RETURN(std::vector<Job> jobs, ReadDeadLetters(selection));
  RedriveResult result;
  for (Job& job : jobs) {
    const uint64_t id = job.id;
    if (job.redrives >= meta_.config.max_redrives) {
      result.refused.push_back(id);  // a loop guard: it died again and again
      continue;
    }
    result.moved.push_back(id);
    if (selection.dry_run) continue;
    index_.RemoveDead(id);
    ++job.redrives;
    job.failures = 0;
    job.expiries = 0;
    job.death_reason.clear();
    if (replacement_payload) job.payload = *replacement_payload;
    // Paced: the i-th moved job becomes ready i / rate seconds from now.
    const double delay = rate > 0 ? static_cast<double>(result.moved.size() - 1) / rate : 0.0;
    index_.Requeue(job, now + absl::Seconds(delay), now);
    write->puts.push_back(std::move(job));
    write->audit.push_back({meta_.id, now, absl::StrCat("redrove job ", id)});
  }
  if (!write->puts.empty()) WakeWaiters();
  Count(QueueEvent::kRedriven, static_cast<int64_t>(write->puts.size()));
  Observe(now);
  return result;
}

absl::StatusOr<std::vector<uint64_t>> JobQueue::Discard(const DeadLetterSelection& selection,
                                                        const std::string& reason, absl::Time now,
                                                        QueueWrite* write) {
  CONDUIT_ASSIGN_OR_RETURN(std::vector<uint64_t> chosen, ChooseDead(selection));
  if (selection.dry_run) return chosen;
  for (uint64_t id : chosen) {
    index_.RemoveDead(id);
    write->deletes.push_back(id);
    write->audit.push_back({meta_.id, now, absl::StrCat("discarded job ", id, ": ", reason)});
  }
  Count(QueueEvent::kDiscarded, static_cast<int64_t>(chosen.size()));
  Observe(now);
  return chosen;
}

void JobQueue::RemoveRedriven(const std::vector<uint64_t>& moved, const std::string& topic,
                              absl::Time now, QueueWrite* write) {
  for (uint64_t id : moved) {
    if (!index_.RemoveDead(id)) continue;  // discarded meanwhile
    write->deletes.push_back(id);
    write->audit.push_back(
        {meta_.id, now,
         absl::StrCat("redrove job ", id, " to topic ", topic.empty() ? "(its source)" : topic)});
  }
  Count(QueueEvent::kRedriven, static_cast<int64_t>(write->deletes.size()));
  Observe(now);
}

// --- WorkQueue --------------------------------------------------------------------------------

absl::StatusOr<DeadLetterPage> WorkQueue::ListDeadLetters(const std::string& queue,
                                                          const DeadLetterFilter& filter,
                                                          int32_t page_size,
                                                          const std::string& page_token) const {
  if (page_size < 0 || page_size > 1000) {
    return absl::InvalidArgumentError("page_size must be between 1 and 1000 (0: 100)");
  }
  if (page_size == 0) page_size = 100;
  auto after = DeadLetterLane::ParsePageToken(page_token);
  if (!after.ok()) return after.status();
  absl::MutexLock lock(&mu_);
  CONDUIT_ASSIGN_OR_RETURN(const JobQueue* q, Find(queue));
  return q->ListDeadLetters(filter, page_size, *after);
}

absl::StatusOr<Job> WorkQueue::GetDeadLetter(const std::string& queue, uint64_t job_id) const {
  absl::MutexLock lock(&mu_);
  CONDUIT_ASSIGN_OR_RETURN(const JobQueue* q, Find(queue));
  return q->GetDeadLetter(job_id);
}

void WorkQueue::Redrive(const std::string& queue, const DeadLetterSelection& selection,
                        std::optional<std::string> replacement_payload, double rate,
                        Callback<RedriveResult> done) {
  if (auto s = ValidateRedrive(selection, replacement_payload, rate); !s.ok()) return done(s);
  absl::MutexLock lock(&mu_);
  auto q = FindForChange(queue);
  if (!q.ok()) return ReplyAfterLog(std::move(done), q.status());
  QueueWrite write{.queue_id = (*q)->id()};
  CommitAndReply(&write, std::move(done),
                 (*q)->Redrive(selection, replacement_payload, rate, Now(), &write));
}

void WorkQueue::Discard(const std::string& queue, const DeadLetterSelection& selection,
                        const std::string& reason, Callback<std::vector<uint64_t>> done) {
  if (reason.empty()) {
    return done(absl::InvalidArgumentError("discarding dead letters needs a reason (audited)"));
  }
  if (auto s = ValidateSelection(selection.ids, !selection.filter.empty(), selection.limit);
      !s.ok()) {
    return done(s);
  }
  absl::MutexLock lock(&mu_);
  auto q = FindForChange(queue);
  if (!q.ok()) return ReplyAfterLog(std::move(done), q.status());
  QueueWrite write{.queue_id = (*q)->id()};
  CommitAndReply(&write, std::move(done), (*q)->Discard(selection, reason, Now(), &write));
}

}  // namespace conduit::work_queue
