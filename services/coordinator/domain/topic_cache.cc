#include "services/coordinator/domain/topic_cache.h"

#include "absl/strings/str_cat.h"
#include "services/coordinator/domain/await.h"

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
  return Await<absl::StatusOr<std::vector<PartitionMarks>>>(
      [&](auto done) { FreshAsync(topic, std::move(done)); });
}

void TopicCache::FreshAsync(const std::string& topic, TopicSource::MarksCallback done) {
  std::shared_ptr<Flight> launch;
  {
    absl::MutexLock lock(&mu_);
    Flights& f = flights_[topic];
    if (!f.next) f.next = std::make_shared<Flight>();
    f.next->waiters.push_back(std::move(done));
    // With a question on its way, this caller waits for the next one: the running one may
    // have been answered before this call began.
    if (f.running) return;
    launch = LaunchLocked(topic);
  }
  Ask(topic, std::move(launch));
}

std::shared_ptr<TopicCache::Flight> TopicCache::LaunchLocked(const std::string& topic) {
  Flights& f = flights_[topic];
  f.running = true;
  ++asking_;  // counted from here, so Quiesce never sees a launched question as none
  std::shared_ptr<Flight> flight = std::move(f.next);
  flight->asked = clock_->Now();
  return flight;
}

void TopicCache::Quiesce() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](int* asking) { return *asking == 0; }, &asking_));
}

void TopicCache::Ask(const std::string& topic, std::shared_ptr<Flight> flight) {
  source_->DescribeAsync(topic, [this, topic, flight](auto result) {
    std::shared_ptr<Flight> next;
    {
      absl::MutexLock lock(&mu_);
      StoreLocked(topic, result, flight->asked);
      Flights& f = flights_[topic];
      f.running = false;
      if (f.next) {
        next = LaunchLocked(topic);  // callers that came while this one was on its way
      } else {
        flights_.erase(topic);
      }
    }
    for (auto& waiter : flight->waiters) waiter(result);
    if (next) Ask(topic, std::move(next));
    absl::MutexLock lock(&mu_);
    --asking_;
  });
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
