#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "services/work_queue/domain/job.h"

namespace conduit::work_queue {

struct DeadLetterFilter {
  std::string reason_contains;
  std::optional<std::string> tenant;
  std::optional<absl::Time> died_after;
  std::optional<absl::Time> died_before;

  bool empty() const { return reason_contains.empty() && !tenant && !died_after && !died_before; }
};

struct DeadLetterPage {
  std::vector<Job> jobs;
  std::string next_page_token;
};

struct DeadLetterSelection {
  std::vector<uint64_t> ids;  // or, when empty, `filter`; never both (INVALID_ARGUMENT)
  DeadLetterFilter filter;
  bool dry_run = true;
  int32_t limit = 0;  // 0: no limit
};

// The dead letters of one queue in the order they died (died_at, then id), and the ways an
// operator picks them: a filtered page (ListDeadLetters), a selection for redrive or discard,
// one job by id.
// - Paging is stable: a page token names the last (died_at, id) returned, so a page continues
//   after it even when listed jobs have left the lane in between; nothing is skipped or repeated.
// - Everything it returns is in the lane: a page lists only dead letters, and Find and
//   FirstNotDead accept a job only when it is dead and indexed here.
//
// The lane holds (died_at, id); the jobs themselves stay in the queue's JobsById, passed in.
// Changed only through JobIndex, which keeps it in step with each job's state. Not thread-safe:
// the queue's mutex guards it.
class DeadLetterLane {
 public:
  // Where a page starts: after this (died_at, id).
  using Cursor = std::pair<absl::Time, uint64_t>;
  // "<died_at µs>:<job id>" of `job`, the last dead letter of a page.
  static std::string PageToken(const Job& job);
  // The cursor of a PageToken; nullopt for "" (the first page). INVALID_ARGUMENT when malformed.
  static absl::StatusOr<std::optional<Cursor>> ParsePageToken(const std::string& token);
  static bool Matches(const Job& job, const DeadLetterFilter& filter);

  // `job` is dead and not in the lane.
  void Add(const Job& job) { by_death_.emplace(job.died_at, job.id); }
  void Remove(const Job& job) { by_death_.erase({job.died_at, job.id}); }
  bool Contains(const Job& job) const { return by_death_.contains({job.died_at, job.id}); }
  size_t size() const { return by_death_.size(); }
  bool empty() const { return by_death_.empty(); }
  // When the longest-dead letter died; the lane must not be empty.
  absl::Time OldestDeath() const { return by_death_.begin()->first; }

  // Up to `page_size` (> 0) dead letters matching `filter`, after `after` (or from the first),
  // and the token of the next page when more match.
  DeadLetterPage Page(const JobsById& jobs, const DeadLetterFilter& filter, int32_t page_size,
                      const std::optional<Cursor>& after) const;
  // The ids a redrive or discard acts on, each once, at most `selection.limit` (0: all): the
  // listed ids as given (not checked: see FirstNotDead), or the dead letters matching the
  // filter in the order they died.
  std::vector<uint64_t> Select(const JobsById& jobs, const DeadLetterSelection& selection) const;
  // The job `id` if it is a dead letter in this lane, else null.
  const Job* Find(const JobsById& jobs, uint64_t id) const;
  // The first of `ids` that is not a dead letter in this lane.
  std::optional<uint64_t> FirstNotDead(const JobsById& jobs,
                                       const std::vector<uint64_t>& ids) const;

 private:
  std::set<Cursor> by_death_;
};

}  // namespace conduit::work_queue
