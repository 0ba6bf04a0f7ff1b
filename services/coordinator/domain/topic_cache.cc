#include "services/coordinator/domain/topic_cache.h"

#include "absl/strings/str_cat.h"

namespace conduit::coordinator {

TopicCache::TopicCache(TopicSource* source, const time::Clock* clock, absl::Duration refresh)
    : source_(source), clock_(clock), refresh_(refresh) {}

absl::StatusOr<std::vector<PartitionMarks>> TopicCache::Get(const std::string& topic) {
  std::optional<Entry> cached;
  {
    absl::MutexLock lock(&mu_);
    if (auto it = entries_.find(topic); it != entries_.end()) cached = it->second;
  }
  if (cached && clock_->Now() - cached->fetched < refresh_) {
    if (!cached->partitions) {
      return absl::NotFoundError(absl::StrCat("topic '", topic, "' does not exist"));
    }
    return *cached->partitions;
  }
  auto marks = Fresh(topic);
  if (!marks.ok() && !absl::IsNotFound(marks.status()) && cached && cached->partitions) {
    return *cached->partitions;  // the broker is away: its last answer stands
  }
  return marks;
}

absl::StatusOr<std::vector<PartitionMarks>> TopicCache::Fresh(const std::string& topic) {
  absl::MutexLock lock(&mu_);
  std::shared_ptr<Flight> mine;
  {
    Flights& f = flights_[topic];
    if (!f.next) f.next = std::make_shared<Flight>();
    mine = f.next;
  }
  // Woken when `mine` landed, or when no question is on its way (then `mine` is the next one,
  // and this caller asks it).
  struct Wake {
    TopicCache* cache;
    const std::string* topic;
    const Flight* mine;
    static bool Ready(Wake* w) ABSL_NO_THREAD_SAFETY_ANALYSIS {
      if (w->mine->done) return true;
      auto it = w->cache->flights_.find(*w->topic);
      return it == w->cache->flights_.end() || !it->second.running;
    }
  } wake{this, &topic, mine.get()};
  mu_.Await(absl::Condition(&Wake::Ready, &wake));
  if (mine->done) return mine->result;

  flights_[topic].running = std::move(flights_[topic].next);
  const absl::Time at = clock_->Now();
  mu_.Unlock();
  absl::StatusOr<std::vector<PartitionMarks>> result = source_->Describe(topic);
  mu_.Lock();
  StoreLocked(topic, result, at);
  mine->result = result;
  mine->done = true;
  Flights& f = flights_[topic];
  f.running = nullptr;
  if (!f.next) flights_.erase(topic);
  return result;
}

void TopicCache::StoreLocked(const std::string& topic,
                             const absl::StatusOr<std::vector<PartitionMarks>>& result,
                             absl::Time at) {
  if (result.ok()) {
    entries_[topic] = Entry{*result, at};
  } else if (absl::IsNotFound(result.status())) {
    entries_[topic] = Entry{std::nullopt, at};
  }
}

std::optional<int32_t> TopicCache::CachedCount(const std::string& topic) {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(topic);
  if (it == entries_.end()) return std::nullopt;
  return it->second.partitions ? static_cast<int32_t>(it->second.partitions->size()) : 0;
}

void TopicCache::Evict(const absl::btree_set<std::string>& keep) {
  const absl::Time now = clock_->Now();
  absl::MutexLock lock(&mu_);
  absl::erase_if(entries_, [&](const auto& entry) {
    return now - entry.second.fetched >= refresh_ && !keep.contains(entry.first);
  });
}

size_t TopicCache::size() {
  absl::MutexLock lock(&mu_);
  return entries_.size();
}

}  // namespace conduit::coordinator
