#include "services/log_broker/domain/offset_search.h"

namespace conduit::log_broker {

absl::StatusOr<int64_t> FirstOffsetAtOrAfter(LogStore* store, TopicId topic_id, int32_t partition,
                                             int64_t from, int64_t end, absl::Time at) {
  int64_t lo = from, hi = end;
  // Invariant: every record below lo is older than `at`; the first record at or after hi (if
  // any) is not.
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    auto probe = store->Read(topic_id, partition, mid, end, 1, 1);
    if (!probe.ok()) return probe.status();
    if (probe->empty() || probe->front().append_time >= at) {
      hi = mid;
    } else {
      lo = probe->front().offset + 1;
    }
  }
  if (lo >= end) return end;
  auto first = store->Read(topic_id, partition, lo, end, 1, 1);
  if (!first.ok()) return first.status();
  return first->empty() ? end : first->front().offset;
}

}  // namespace conduit::log_broker
