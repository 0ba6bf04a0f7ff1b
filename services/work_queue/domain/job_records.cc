// JobRecords: reading job records back from `pending` while their write is queued, from the
// records read ahead for batch leases, else from the store.

#include "services/work_queue/domain/job_records.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "services/work_queue/domain/queue_requests.h"

namespace conduit::work_queue {

absl::StatusOr<std::vector<Job>> JobRecords::Read(const std::vector<uint64_t>& ids) const {
  return Finish(*store_, Plan(ids));
}

JobRecords::PlannedRead JobRecords::Plan(std::vector<uint64_t> ids) const {
  // The latest version of a record whose write is still in the commit log is in `pending` (empty
  // for a delete); the store has every other one.
  PlannedRead plan{queue_id_, queue_name_, std::move(ids), {}, {}};
  plan.records.resize(plan.ids.size());
  for (size_t i = 0; i < plan.ids.size(); ++i) {
    if (auto pending = pending_.find(plan.ids[i]); pending != pending_.end()) {
      plan.records[i] = pending->second.job;  // its write is still queued: copied, not taken
    } else {
      plan.from_store.push_back(i);
    }
  }
  return plan;
}

absl::StatusOr<std::vector<Job>> JobRecords::Finish(QueueStore& store, PlannedRead plan) {
  if (!plan.from_store.empty()) {
    std::vector<uint64_t> stored_ids;
    stored_ids.reserve(plan.from_store.size());
    for (size_t i : plan.from_store) stored_ids.push_back(plan.ids[i]);
    auto read = store.ReadJobs(plan.queue_id, stored_ids);
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

JobReader JobRecords::Reader() const {
  // Called by the lane within the caller's critical section only.
  return [this](uint64_t id) -> absl::StatusOr<Job> {
    auto jobs = Read({id});
    if (!jobs.ok()) return jobs.status();
    return std::move(jobs->front());
  };
}

bool JobRecords::Exists(uint64_t id, const DeadLetterLane& dead) const {
  if (auto pending = pending_.find(id); pending != pending_.end()) {
    return pending->second.job.has_value();
  }
  if (dead.Contains(id)) return true;
  auto read = store_->ReadJobs(queue_id_, {id});
  return read.ok() && read->front().has_value();
}

std::vector<uint64_t> JobRecords::NotePending(uint64_t seq, const std::vector<Job>& puts,
                                              const std::vector<uint64_t>& deletes) {
  std::vector<uint64_t> ids;
  ids.reserve(puts.size() + deletes.size());
  for (const Job& job : puts) {
    pending_[job.id] = Pending{seq, job};
    ids.push_back(job.id);
  }
  for (uint64_t id : deletes) {
    pending_[id] = Pending{seq, std::nullopt};
    ids.push_back(id);
  }
  for (uint64_t id : ids) ahead_.Written(id);
  return ids;
}

void JobRecords::ClearPending(uint64_t seq, const std::vector<uint64_t>& ids) {
  for (uint64_t id : ids) {
    auto it = pending_.find(id);
    if (it != pending_.end() && it->second.seq == seq) pending_.erase(it);
  }
}

void JobRecords::TakeReadAhead(PlannedRead* plan) {
  if (ahead_.records.empty()) return;
  std::vector<size_t> still;
  for (size_t i : plan->from_store) {
    auto node = ahead_.records.extract(plan->ids[i]);
    if (node) {
      ahead_.bytes -= static_cast<int64_t>(node.mapped().payload.size());
      plan->records[i] = std::move(node.mapped());
    } else {
      still.push_back(i);
    }
  }
  const auto served = static_cast<int64_t>(plan->from_store.size() - still.size());
  if (served > 0) observer_->OnReadAhead(queue_name_, ReadAheadOutcome::kServed, served);
  plan->from_store = std::move(still);
}

std::optional<std::vector<uint64_t>> JobRecords::PlanReadAhead(const JobIndex& index) {
  if (ahead_.jobs == 0 || ahead_.reading) return std::nullopt;
  std::vector<uint64_t> ids;
  for (uint64_t id : index.tenants().PeekNext(static_cast<size_t>(ahead_.jobs))) {
    // Those in `pending` are read from there, those in `ahead` are read already.
    if (!pending_.contains(id) && !ahead_.records.contains(id)) ids.push_back(id);
  }
  if (static_cast<int32_t>(ids.size()) <= ahead_.jobs / 2) return std::nullopt;
  ahead_.reading = true;
  ahead_.written.clear();
  return ids;
}

JobRecords::ReadAheadResult JobRecords::ReadAhead(QueueStore& store, QueueId queue_id,
                                                  const std::vector<uint64_t>& all) {
  // In slices, so that large payloads stop the read at the byte cap, not after it.
  constexpr size_t kSlice = 128;
  ReadAheadResult out;
  bool full = false;
  for (size_t at = 0; at < all.size() && !full; at += kSlice) {
    const std::vector<uint64_t> ids(all.begin() + at,
                                    all.begin() + std::min(all.size(), at + kSlice));
    auto slice = store.ReadJobs(queue_id, ids);
    if (!slice.ok()) {  // the Lease reads them itself, and meets the error there
      out.failed = all.size() - at;
      break;
    }
    for (size_t i = 0; i < ids.size() && !full; ++i) {
      std::optional<Job>& job = (*slice)[i];
      if (!job) continue;
      const auto size = static_cast<int64_t>(job->payload.size());
      full = out.bytes + size > kReadAheadMaxBytes;
      if (full) break;
      out.bytes += size;
      out.read.emplace_back(ids[i], *std::move(job));
    }
  }
  return out;
}

void JobRecords::FinishReadAhead(ReadAheadResult result, const JobIndex& index) {
  ahead_.reading = false;
  if (result.failed > 0) {
    observer_->OnReadAhead(queue_name_, ReadAheadOutcome::kFailed,
                           static_cast<int64_t>(result.failed));
  }
  // Guesses no lease took (other tenants went first, say) make room: at most two batches and
  // the byte cap in all.
  if (ahead_.records.size() + result.read.size() >
          2 * static_cast<size_t>(std::max(ahead_.jobs, 1)) ||
      ahead_.bytes + result.bytes > kReadAheadMaxBytes) {
    ahead_.records.clear();
    ahead_.bytes = 0;
  }
  int64_t kept = 0;
  for (auto& [id, job] : result.read) {
    // Written since the read started (the store may have had the version before), or leased
    // meanwhile by a Lease that read it itself.
    if (ahead_.written.contains(id) || pending_.contains(id) || index.IsLeased(id)) continue;
    ahead_.bytes += static_cast<int64_t>(job.payload.size());
    ahead_.records.emplace(id, std::move(job));
    ++kept;
  }
  ahead_.written.clear();
  if (kept > 0) observer_->OnReadAhead(queue_name_, ReadAheadOutcome::kKept, kept);
}

}  // namespace conduit::work_queue
