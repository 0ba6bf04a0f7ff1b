#include "services/work_queue/domain/dead_letter_lane.h"

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace conduit::work_queue {

std::string DeadLetterLane::PageToken(const Job& job) {
  return absl::StrCat(absl::ToUnixMicros(job.died_at), ":", job.id);
}

absl::StatusOr<std::optional<DeadLetterLane::Cursor>> DeadLetterLane::ParsePageToken(
    const std::string& token) {
  if (token.empty()) return std::nullopt;
  std::vector<std::string> parts = absl::StrSplit(token, ':');
  int64_t micros = 0;
  uint64_t id = 0;
  if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &micros) ||
      !absl::SimpleAtoi(parts[1], &id)) {
    return absl::InvalidArgumentError(absl::StrCat("page_token '", token, "' is malformed"));
  }
  return Cursor{absl::FromUnixMicros(micros), id};
}

bool DeadLetterLane::Matches(const Job& job, const DeadLetterFilter& f) {
  if (!f.reason_contains.empty() && !absl::StrContains(job.death_reason, f.reason_contains)) {
    return false;
  }
  if (f.tenant && job.tenant != *f.tenant) return false;
  if (f.died_after && job.died_at < *f.died_after) return false;
  if (f.died_before && job.died_at >= *f.died_before) return false;
  return true;
}

void DeadLetterLane::Add(uint64_t id, absl::Time died_at) {
  died_at = absl::FromUnixMicros(absl::ToUnixMicros(died_at));  // as page tokens and the store
  if (died_.emplace(id, died_at).second) by_death_.emplace(died_at, id);
}

bool DeadLetterLane::Remove(uint64_t id) {
  auto it = died_.find(id);
  if (it == died_.end()) return false;
  by_death_.erase({it->second, id});
  died_.erase(it);
  return true;
}

absl::StatusOr<DeadLetterPage> DeadLetterLane::Page(const JobReader& read,
                                                    const DeadLetterFilter& filter,
                                                    int32_t page_size,
                                                    const std::optional<Cursor>& after) const {
  DeadLetterPage page;
  auto it = after ? by_death_.upper_bound(*after) : by_death_.begin();
  // Time bounds narrow the walk; the other filters are checked per dead letter.
  if (filter.died_after && !after) it = by_death_.lower_bound({*filter.died_after, 0});
  for (; it != by_death_.end(); ++it) {
    if (filter.died_before && it->first >= *filter.died_before) break;
    if (!InTimeRange(it->first, filter)) continue;
    if (static_cast<int32_t>(page.jobs.size()) == page_size && !NeedsRecord(filter)) {
      page.next_page_token = PageToken(page.jobs.back());
      break;
    }
    absl::StatusOr<Job> job = read(it->second);
    if (!job.ok()) return job.status();
    if (!Matches(*job, filter)) continue;
    if (static_cast<int32_t>(page.jobs.size()) == page_size) {
      page.next_page_token = PageToken(page.jobs.back());
      break;
    }
    page.jobs.push_back(*std::move(job));
  }
  return page;
}

absl::StatusOr<std::vector<uint64_t>> DeadLetterLane::Select(
    const JobReader& read, const DeadLetterSelection& selection) const {
  std::vector<uint64_t> out;
  const size_t limit = selection.limit > 0 ? static_cast<size_t>(selection.limit) : SIZE_MAX;
  if (!selection.ids.empty()) {
    absl::flat_hash_set<uint64_t> seen;
    for (uint64_t id : selection.ids) {
      if (out.size() >= limit) break;
      if (seen.insert(id).second) out.push_back(id);  // each job once
    }
    return out;
  }
  for (const auto& [died_at, id] : by_death_) {
    if (out.size() >= limit) break;
    if (!InTimeRange(died_at, selection.filter)) continue;
    if (NeedsRecord(selection.filter)) {
      absl::StatusOr<Job> job = read(id);
      if (!job.ok()) return job.status();
      if (!Matches(*job, selection.filter)) continue;
    }
    out.push_back(id);
  }
  return out;
}

std::optional<uint64_t> DeadLetterLane::FirstNotDead(const std::vector<uint64_t>& ids) const {
  for (uint64_t id : ids) {
    if (!Contains(id)) return id;
  }
  return std::nullopt;
}

absl::Status DeadLetterLane::Check() const {
  if (by_death_.size() != died_.size()) {
    return absl::InternalError(
        absl::StrCat(by_death_.size(), " letters by death time, ", died_.size(), " by id"));
  }
  for (const auto& [id, died_at] : died_) {
    if (!by_death_.contains({died_at, id})) {
      return absl::InternalError(absl::StrCat("dead letter ", id, " is not in death order"));
    }
  }
  return absl::OkStatus();
}

}  // namespace conduit::work_queue
