// WorkQueue: reading job records back (a lease needs the payload; listing, redriving): from
// `pending` while their write is queued, from the records read ahead for batch leases, else
// from the store. The README's Threading section says why each is never stale.

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "services/work_queue/domain/work_queue.h"

namespace conduit::work_queue {

absl::StatusOr<std::vector<Job>> WorkQueue::ReadJobs(const Queue& q,
                                                     const std::vector<uint64_t>& ids) const {
  return FinishRead(PlanRead(q, ids));
}

WorkQueue::PlannedRead WorkQueue::PlanRead(const Queue& q, std::vector<uint64_t> ids) const {
  // The latest version of a record whose write is still in the commit log is in `pending` (empty
  // for a delete); the store has every other one.
  PlannedRead plan{q.meta.id, q.meta.name, std::move(ids), {}, {}};
  plan.records.resize(plan.ids.size());
  for (size_t i = 0; i < plan.ids.size(); ++i) {
    if (auto pending = q.pending.find(plan.ids[i]); pending != q.pending.end()) {
      plan.records[i] = pending->second.job;  // its write is still queued: copied, not taken
    } else {
      plan.from_store.push_back(i);
    }
  }
  return plan;
}

absl::StatusOr<std::vector<Job>> WorkQueue::FinishRead(PlannedRead plan) const {
  if (!plan.from_store.empty()) {
    std::vector<uint64_t> stored_ids;
    stored_ids.reserve(plan.from_store.size());
    for (size_t i : plan.from_store) stored_ids.push_back(plan.ids[i]);
    auto read = store_->ReadJobs(plan.queue_id, stored_ids);
    if (!read.ok()) return read.status();
    for (size_t k = 0; k < plan.from_store.size(); ++k) {
      plan.records[plan.from_store[k]] = std::move((*read)[k]);
    }
  }
  std::vector<Job> out;
  out.reserve(plan.ids.size());
  for (size_t i = 0; i < plan.ids.size(); ++i) {
    if (!plan.records[i]) {
      return absl::InternalError(absl::StrCat("job ", plan.ids[i], " of queue '", plan.queue_name,
                                              "' is indexed but its record is missing"));
    }
    out.push_back(*std::move(plan.records[i]));
  }
  return out;
}

JobReader WorkQueue::ReaderOf(const Queue& q) const {
  // Called by the lane within the caller's critical section only.
  return [this, &q](uint64_t id) ABSL_NO_THREAD_SAFETY_ANALYSIS -> absl::StatusOr<Job> {
    auto jobs = ReadJobs(q, {id});
    if (!jobs.ok()) return jobs.status();
    return std::move(jobs->front());
  };
}

bool WorkQueue::Exists(const Queue& q, uint64_t id) const {
  if (auto pending = q.pending.find(id); pending != q.pending.end()) {
    return pending->second.job.has_value();
  }
  if (q.index.dead().Contains(id)) return true;
  auto read = store_->ReadJobs(q.meta.id, {id});
  return read.ok() && read->front().has_value();
}

void WorkQueue::TakeReadAhead(Queue& q, PlannedRead* plan) {
  if (q.ahead.records.empty()) return;
  std::vector<size_t> still;
  for (size_t i : plan->from_store) {
    auto node = q.ahead.records.extract(plan->ids[i]);
    if (node) {
      q.ahead.bytes -= static_cast<int64_t>(node.mapped().payload.size());
      plan->records[i] = std::move(node.mapped());
    } else {
      still.push_back(i);
    }
  }
  const auto served = static_cast<int64_t>(plan->from_store.size() - still.size());
  if (served > 0) observer_->OnReadAhead(q.meta.name, ReadAheadOutcome::kServed, served);
  plan->from_store = std::move(still);
}

std::optional<WorkQueue::ReadAheadPlan> WorkQueue::PlanReadAhead(Queue& q) {
  Queue::ReadAhead& ahead = q.ahead;
  if (ahead.jobs == 0 || ahead.reading) return std::nullopt;
  ReadAheadPlan plan{q.meta.id, {}};
  for (uint64_t id : q.index.tenants().PeekNext(static_cast<size_t>(ahead.jobs))) {
    // Those in `pending` are read from there, those in `ahead` are read already.
    if (!q.pending.contains(id) && !ahead.records.contains(id)) plan.ids.push_back(id);
  }
  if (static_cast<int32_t>(plan.ids.size()) <= ahead.jobs / 2) return std::nullopt;
  ahead.reading = true;
  ahead.written.clear();
  return plan;
}

void WorkQueue::ReadAhead(const ReadAheadPlan& plan) {
  // In slices, so that large payloads stop the read at the byte cap, not after it.
  constexpr size_t kSlice = 128;
  std::vector<std::pair<uint64_t, Job>> read;
  int64_t bytes = 0;  // of the payloads in `read`
  bool full = false;
  size_t failed = 0;  // records not read because the store's read failed
  for (size_t at = 0; at < plan.ids.size() && !full; at += kSlice) {
    const std::vector<uint64_t> ids(plan.ids.begin() + at,
                                    plan.ids.begin() + std::min(plan.ids.size(), at + kSlice));
    auto slice = store_->ReadJobs(plan.queue_id, ids);
    if (!slice.ok()) {  // the Lease reads them itself, and meets the error there
      failed = plan.ids.size() - at;
      break;
    }
    for (size_t i = 0; i < ids.size() && !full; ++i) {
      std::optional<Job>& job = (*slice)[i];
      if (!job) continue;
      const auto size = static_cast<int64_t>(job->payload.size());
      full = bytes + size > kReadAheadMaxBytes;
      if (full) break;
      bytes += size;
      read.emplace_back(ids[i], *std::move(job));
    }
  }
  absl::MutexLock lock(&mu_);
  Queue* q = FindById(plan.queue_id);
  if (q == nullptr) return;  // deleted meanwhile
  Queue::ReadAhead& ahead = q->ahead;
  ahead.reading = false;
  if (failed > 0) {
    observer_->OnReadAhead(q->meta.name, ReadAheadOutcome::kFailed, static_cast<int64_t>(failed));
  }
  // Guesses no lease took (other tenants went first, say) make room: at most two batches and
  // the byte cap in all.
  if (ahead.records.size() + read.size() > 2 * static_cast<size_t>(std::max(ahead.jobs, 1)) ||
      ahead.bytes + bytes > kReadAheadMaxBytes) {
    ahead.records.clear();
    ahead.bytes = 0;
  }
  int64_t kept = 0;
  for (auto& [id, job] : read) {
    // Written since the read started (the store may have had the version before), or leased
    // meanwhile by a Lease that read it itself.
    if (ahead.written.contains(id) || q->pending.contains(id) || q->index.FindLeased(id)) {
      continue;
    }
    ahead.bytes += static_cast<int64_t>(job.payload.size());
    ahead.records.emplace(id, std::move(job));
    ++kept;
  }
  ahead.written.clear();
  if (kept > 0) observer_->OnReadAhead(q->meta.name, ReadAheadOutcome::kKept, kept);
}

}  // namespace conduit::work_queue
