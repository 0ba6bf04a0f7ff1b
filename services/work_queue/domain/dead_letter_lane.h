#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/btree_set.h"
#include "absl/container/flat_hash_map.h"
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

// Reads a job's stored record (payload, history): the lane keeps none of it in memory.
using JobReader = std::function<absl::StatusOr<Job>(uint64_t id)>;

// The dead letters of one queue in the order they died (died_at, then id), and the ways an
// operator picks them: a filtered page (ListDeadLetters), a selection for redrive or discard,
// membership by id.
// - Paging is stable: a page token names the last (died_at, id) returned, so a page continues
//   after it even when listed jobs have left the lane in between; nothing is skipped or repeated.
// - Everything it returns is in the lane: a page lists only dead letters, and FirstNotDead
//   accepts a job only when it is indexed here.
//
// The lane holds (died_at, id) per letter; the records are read through a JobReader where a
// filter or a page needs them. Changed only through JobIndex, which keeps it in step with each
// job's state. Not thread-safe: the queue's mutex guards it.
class DeadLetterLane {
 public:
  // Where a page starts: after this (died_at, id).
  using Cursor = std::pair<absl::Time, uint64_t>;
  // "<died_at µs>:<job id>" of `job`, the last dead letter of a page.
  static std::string PageToken(const Job& job);
  // The cursor of a PageToken; nullopt for "" (the first page). INVALID_ARGUMENT when malformed.
  static absl::StatusOr<std::optional<Cursor>> ParsePageToken(const std::string& token);
  static bool Matches(const Job& job, const DeadLetterFilter& filter);

  // Job `id` died at `died_at` and is not in the lane.
  void Add(uint64_t id, absl::Time died_at);
  // False when `id` was not in the lane.
  bool Remove(uint64_t id);
  bool Contains(uint64_t id) const { return died_.contains(id); }
  size_t size() const { return died_.size(); }
  bool empty() const { return died_.empty(); }
  // When the longest-dead letter died; the lane must not be empty.
  absl::Time OldestDeath() const { return by_death_.begin()->first; }

  // Up to `page_size` (> 0) dead letters matching `filter`, after `after` (or from the first),
  // and the token of the next page when more match. Fails with what `read` fails with.
  absl::StatusOr<DeadLetterPage> Page(const JobReader& read, const DeadLetterFilter& filter,
                                      int32_t page_size, const std::optional<Cursor>& after) const;
  // The ids a redrive or discard acts on, each once, at most `selection.limit` (0: all): the
  // listed ids as given (not checked: see FirstNotDead), or the dead letters matching the
  // filter in the order they died.
  absl::StatusOr<std::vector<uint64_t>> Select(const JobReader& read,
                                               const DeadLetterSelection& selection) const;
  // The first of `ids` that is not a dead letter in this lane.
  std::optional<uint64_t> FirstNotDead(const std::vector<uint64_t>& ids) const;

  // OK when both orders hold the same letters. Linear: for tests.
  absl::Status Check() const;

 private:
  // Whether Matches needs the record, or the death time alone decides.
  static bool NeedsRecord(const DeadLetterFilter& filter) {
    return !filter.reason_contains.empty() || filter.tenant.has_value();
  }
  static bool InTimeRange(absl::Time died_at, const DeadLetterFilter& filter) {
    return (!filter.died_after || died_at >= *filter.died_after) &&
           (!filter.died_before || died_at < *filter.died_before);
  }

  absl::btree_set<Cursor> by_death_;
  absl::flat_hash_map<uint64_t, absl::Time> died_;
};

}  // namespace conduit::work_queue
