// WorkQueue: the dead-letter lane — listing with filters, inspection, redrive and discard.

#include "absl/strings/str_cat.h"
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

absl::StatusOr<std::vector<uint64_t>> WorkQueue::ChooseDead(
    const Queue& q, const DeadLetterSelection& selection) const {
  auto chosen = q.index.dead().Select(ReaderOf(q), selection);
  if (!chosen.ok()) return chosen.status();
  if (auto id = q.index.dead().FirstNotDead(*chosen)) return NotDead(q.meta.name, *id);
  return chosen;
}

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
  auto found = Find(queue);
  if (!found.ok()) return found.status();
  return (*found)->index.dead().Page(ReaderOf(**found), filter, page_size, *after);
}

absl::StatusOr<Job> WorkQueue::GetDeadLetter(const std::string& queue, uint64_t job_id) const {
  absl::MutexLock lock(&mu_);
  auto found = Find(queue);
  if (!found.ok()) return found.status();
  if (!(*found)->index.dead().Contains(job_id)) return NotDead(queue, job_id);
  return ReaderOf(**found)(job_id);
}

void WorkQueue::Redrive(const std::string& queue, const DeadLetterSelection& selection,
                        std::optional<std::string> replacement_payload, double rate,
                        Callback<RedriveResult> done) {
  if (auto s = ValidateRedrive(selection, replacement_payload, rate); !s.ok()) return done(s);
  absl::MutexLock lock(&mu_);
  auto found = FindForChange(queue);
  if (!found.ok()) return ReplyAfterLog(std::move(done), found.status());
  Queue& q = **found;
  const absl::Time now = Now();
  auto chosen = ChooseDead(q, selection);
  if (!chosen.ok()) return ReplyAfterLog(std::move(done), chosen.status());
  auto jobs = ReadJobs(q, *chosen);
  if (!jobs.ok()) return ReplyAfterLog(std::move(done), jobs.status());
  RedriveResult result;
  QueueWrite write;
  write.queue_id = q.meta.id;
  for (Job& job : *jobs) {
    const uint64_t id = job.id;
    if (job.redrives >= q.meta.config.max_redrives) {
      result.refused.push_back(id);  // a loop guard: it died again and again
      continue;
    }
    result.moved.push_back(id);
    if (selection.dry_run) continue;
    q.index.RemoveDead(id);
    ++job.redrives;
    job.failures = 0;
    job.expiries = 0;
    job.death_reason.clear();
    if (replacement_payload) job.payload = *replacement_payload;
    // Paced: the i-th moved job becomes ready i / rate seconds from now.
    const double delay = rate > 0 ? static_cast<double>(result.moved.size() - 1) / rate : 0.0;
    q.index.Requeue(job, now + absl::Seconds(delay), now);
    write.puts.push_back(std::move(job));
    write.audit.push_back({q.meta.id, now, absl::StrCat("redrove job ", id)});
  }
  if (!write.puts.empty()) WakeWaiters(q);
  Count(q, QueueEvent::kRedriven, static_cast<int64_t>(write.puts.size()));
  Observe(q, now);
  Commit(std::move(write), [done, result](absl::Status s) {
    if (!s.ok()) return done(s);
    done(result);
  });
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
  auto found = FindForChange(queue);
  if (!found.ok()) return ReplyAfterLog(std::move(done), found.status());
  Queue& q = **found;
  const absl::Time now = Now();
  auto found_chosen = ChooseDead(q, selection);
  if (!found_chosen.ok()) return ReplyAfterLog(std::move(done), found_chosen.status());
  const std::vector<uint64_t>& chosen = *found_chosen;
  QueueWrite write;
  write.queue_id = q.meta.id;
  if (!selection.dry_run) {
    for (uint64_t id : chosen) {
      q.index.RemoveDead(id);
      write.deletes.push_back(id);
      write.audit.push_back({q.meta.id, now, absl::StrCat("discarded job ", id, ": ", reason)});
    }
    Count(q, QueueEvent::kDiscarded, static_cast<int64_t>(chosen.size()));
    Observe(q, now);
  }
  Commit(std::move(write), [done, chosen](absl::Status s) {
    if (!s.ok()) return done(s);
    done(chosen);
  });
}

}  // namespace conduit::work_queue
