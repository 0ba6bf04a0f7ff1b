// WorkQueue: the dead-letter lane — listing with filters, inspection, redrive and discard.

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "services/work_queue/domain/queue_rules.h"
#include "services/work_queue/domain/work_queue.h"

namespace conduit::work_queue {
namespace {

bool Matches(const Job& job, const DeadLetterFilter& f) {
  if (!f.reason_contains.empty() && !absl::StrContains(job.death_reason, f.reason_contains)) {
    return false;
  }
  if (f.tenant && job.tenant != *f.tenant) return false;
  if (f.died_after && job.died_at < *f.died_after) return false;
  if (f.died_before && job.died_at >= *f.died_before) return false;
  return true;
}

// Page tokens are "<died_at µs>:<job id>" of the last dead letter returned.
std::string PageToken(const Job& job) {
  return absl::StrCat(absl::ToUnixMicros(job.died_at), ":", job.id);
}

}  // namespace

absl::StatusOr<DeadLetterPage> WorkQueue::ListDeadLetters(const std::string& queue,
                                                          const DeadLetterFilter& filter,
                                                          int32_t page_size,
                                                          const std::string& page_token) const {
  if (page_size < 0 || page_size > 1000) {
    return absl::InvalidArgumentError("page_size must be between 1 and 1000 (0: 100)");
  }
  if (page_size == 0) page_size = 100;
  std::pair<absl::Time, uint64_t> after{absl::InfinitePast(), 0};
  if (!page_token.empty()) {
    std::vector<std::string> parts = absl::StrSplit(page_token, ':');
    int64_t micros = 0;
    uint64_t id = 0;
    if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &micros) ||
        !absl::SimpleAtoi(parts[1], &id)) {
      return absl::InvalidArgumentError(absl::StrCat("page_token '", page_token, "' is malformed"));
    }
    after = {absl::FromUnixMicros(micros), id};
  }
  absl::MutexLock lock(&mu_);
  auto found = Find(queue);
  if (!found.ok()) return found.status();
  const Queue& q = **found;
  DeadLetterPage page;
  auto it = page_token.empty() ? q.dead.begin() : q.dead.upper_bound(after);
  // Time bounds narrow the walk; the other filters are checked per dead letter.
  if (filter.died_after && page_token.empty()) it = q.dead.lower_bound({*filter.died_after, 0});
  for (; it != q.dead.end(); ++it) {
    if (filter.died_before && it->first >= *filter.died_before) break;
    const Job& job = q.jobs.at(it->second);
    if (!Matches(job, filter)) continue;
    if (static_cast<int32_t>(page.jobs.size()) == page_size) {
      page.next_page_token = PageToken(page.jobs.back());
      break;
    }
    page.jobs.push_back(job);
  }
  return page;
}

absl::StatusOr<Job> WorkQueue::GetDeadLetter(const std::string& queue, uint64_t job_id) const {
  absl::MutexLock lock(&mu_);
  auto found = Find(queue);
  if (!found.ok()) return found.status();
  auto it = (*found)->jobs.find(job_id);
  if (it == (*found)->jobs.end() || it->second.state != JobState::kDead) {
    return absl::NotFoundError(
        absl::StrCat("job ", job_id, " is not in the dead-letter lane of queue '", queue, "'"));
  }
  return it->second;
}

std::vector<uint64_t> WorkQueue::Select(const Queue& q, const DeadLetterSelection& selection) const {
  std::vector<uint64_t> out;
  const size_t limit = selection.limit > 0 ? static_cast<size_t>(selection.limit) : SIZE_MAX;
  if (!selection.ids.empty()) {
    absl::flat_hash_map<uint64_t, bool> seen;
    for (uint64_t id : selection.ids) {
      if (out.size() >= limit) break;
      if (seen.emplace(id, true).second) out.push_back(id);  // each job once
    }
    return out;
  }
  for (const auto& [died_at, id] : q.dead) {
    if (out.size() >= limit) break;
    if (Matches(q.jobs.at(id), selection.filter)) out.push_back(id);
  }
  return out;
}

absl::Status WorkQueue::AllDead(const Queue& q, const std::vector<uint64_t>& ids) const {
  for (uint64_t id : ids) {
    auto it = q.jobs.find(id);
    if (it == q.jobs.end() || it->second.state != JobState::kDead) {
      return absl::NotFoundError(absl::StrCat("job ", id, " is not in the dead-letter lane of queue '",
                                              q.meta.name, "'"));
    }
  }
  return absl::OkStatus();
}

void WorkQueue::Redrive(const std::string& queue, const DeadLetterSelection& selection,
                        std::optional<std::string> replacement_payload, double rate,
                        Callback<RedriveResult> done) {
  if (auto s = ValidateSelection(selection.ids, !selection.filter.empty(), selection.limit);
      !s.ok()) {
    return done(s);
  }
  if (auto s = ValidateRedriveRate(rate); !s.ok()) return done(s);
  if (replacement_payload && replacement_payload->size() > kMaxPayloadBytes) {
    return done(absl::InvalidArgumentError("replacement payload is over 1 MiB"));
  }
  if (replacement_payload && selection.ids.empty()) {
    return done(absl::InvalidArgumentError(
        "a replacement payload needs explicit job ids (repair the jobs you looked at)"));
  }
  absl::MutexLock lock(&mu_);
  auto found = FindForChange(queue);
  if (!found.ok()) return ReplyAfterLog(std::move(done), found.status());
  Queue& q = **found;
  const absl::Time now = Now();
  std::vector<uint64_t> chosen = Select(q, selection);
  if (auto s = AllDead(q, chosen); !s.ok()) return ReplyAfterLog(std::move(done), s);
  RedriveResult result;
  QueueWrite write;
  write.queue_id = q.meta.id;
  for (uint64_t id : chosen) {
    Job& job = q.jobs.at(id);
    if (job.redrives >= q.meta.config.max_redrives) {
      result.refused.push_back(id);  // a loop guard: it died again and again
      continue;
    }
    result.moved.push_back(id);
    if (selection.dry_run) continue;
    Unindex(q, job);
    ++job.redrives;
    job.failures = 0;
    job.expiries = 0;
    job.state = JobState::kQueued;
    // Paced: the i-th moved job becomes ready i / rate seconds from now.
    const double delay = rate > 0 ? static_cast<double>(result.moved.size() - 1) / rate : 0.0;
    job.ready_at = now + absl::Seconds(delay);
    job.death_reason.clear();
    if (replacement_payload) job.payload = *replacement_payload;
    Index(q, job, now);
    write.puts.push_back(job);
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
  std::vector<uint64_t> chosen = Select(q, selection);
  if (auto s = AllDead(q, chosen); !s.ok()) return ReplyAfterLog(std::move(done), s);
  QueueWrite write;
  write.queue_id = q.meta.id;
  if (!selection.dry_run) {
    for (uint64_t id : chosen) {
      Unindex(q, q.jobs.at(id));
      q.jobs.erase(id);
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
