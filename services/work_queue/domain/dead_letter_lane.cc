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

DeadLetterPage DeadLetterLane::Page(const JobsById& jobs, const DeadLetterFilter& filter,
                                    int32_t page_size, const std::optional<Cursor>& after) const {
  DeadLetterPage page;
  auto it = after ? by_death_.upper_bound(*after) : by_death_.begin();
  // Time bounds narrow the walk; the other filters are checked per dead letter.
  if (filter.died_after && !after) it = by_death_.lower_bound({*filter.died_after, 0});
  for (; it != by_death_.end(); ++it) {
    if (filter.died_before && it->first >= *filter.died_before) break;
    const Job& job = jobs.at(it->second);
    if (!Matches(job, filter)) continue;
    if (static_cast<int32_t>(page.jobs.size()) == page_size) {
      page.next_page_token = PageToken(page.jobs.back());
      break;
    }
    page.jobs.push_back(job);
  }
  return page;
}

std::vector<uint64_t> DeadLetterLane::Select(const JobsById& jobs,
                                             const DeadLetterSelection& selection) const {
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
    if (Matches(jobs.at(id), selection.filter)) out.push_back(id);
  }
  return out;
}

const Job* DeadLetterLane::Find(const JobsById& jobs, uint64_t id) const {
  auto it = jobs.find(id);
  if (it == jobs.end() || it->second.state != JobState::kDead || !Contains(it->second)) {
    return nullptr;
  }
  return &it->second;
}

std::optional<uint64_t> DeadLetterLane::FirstNotDead(const JobsById& jobs,
                                                     const std::vector<uint64_t>& ids) const {
  for (uint64_t id : ids) {
    if (Find(jobs, id) == nullptr) return id;
  }
  return std::nullopt;
}

}  // namespace conduit::work_queue
