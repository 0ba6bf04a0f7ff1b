#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/btree_set.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/time/clock.h"
#include "services/coordinator/domain/topic_source.h"

namespace conduit::coordinator {

// The coordinator's view of the broker's topics: partition counts and marks, cached for the
// assignor, asked afresh for anything that must be current (commits, resets, lag).
//
// Fresh questions about one topic are shared: callers that arrive while a question is on its way
// wait for the next one, which starts after all of them arrived, so each sees an answer given
// after its call began (a topic deleted before a commit is seen deleted) while 32 concurrent
// commits cost one broker call, not 32.
//
// The cache holds what was asked about; Evict drops the entries nobody subscribes to once they
// are older than the refresh interval, so a client naming unknown topics cannot grow it for good.
//
// Thread-safe. Calls to the TopicSource are made without the mutex held.
class TopicCache {
 public:
  TopicCache(TopicSource* source, const time::Clock* clock, absl::Duration refresh);

  // The marks of `topic`: the cached ones when younger than the refresh interval, else the
  // broker's (and, when the broker cannot be asked, its last answer if there was one).
  // NOT_FOUND for a topic that does not exist; the broker's status when it cannot answer.
  absl::StatusOr<std::vector<PartitionMarks>> Get(const std::string& topic);
  // The broker's marks of `topic`, from a question that started after this call did.
  absl::StatusOr<std::vector<PartitionMarks>> Fresh(const std::string& topic);
  // The same without blocking: `done` runs with the answer (on the thread the broker's answer
  // arrives on, or inline).
  void FreshAsync(const std::string& topic, TopicSource::MarksCallback done);
  // The partition count the cache knows (0: the topic does not exist); unset when not cached.
  std::optional<int32_t> CachedCount(const std::string& topic);
  // Waits until no question is on its way and no answer is being handed out (call before
  // destroying what the callbacks use).
  void Quiesce();
  // Drops entries not in `keep` that are older than the refresh interval.
  void Evict(const absl::btree_set<std::string>& keep);
  size_t size();

 private:
  struct Entry {
    std::optional<std::vector<PartitionMarks>> partitions;  // unset: the topic does not exist
    absl::Time fetched;
  };
  // One broker question and the callers waiting for its answer.
  struct Flight {
    std::vector<TopicSource::MarksCallback> waiters;
    absl::Time asked;
  };
  struct Flights {
    bool running = false;          // a question is on its way to the broker
    std::shared_ptr<Flight> next;  // gathering callers; asked when the running one lands
  };

  // Takes the gathering flight of `topic` as the running one. The caller asks it (Ask) after
  // releasing the mutex.
  std::shared_ptr<Flight> LaunchLocked(const std::string& topic) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Ask(const std::string& topic, std::shared_ptr<Flight> flight) ABSL_LOCKS_EXCLUDED(mu_);
  void StoreLocked(const std::string& topic, const absl::StatusOr<std::vector<PartitionMarks>>& r,
                   absl::Time at) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  TopicSource* const source_;
  const time::Clock* const clock_;
  const absl::Duration refresh_;
  absl::Mutex mu_;  // a leaf: taken under a group's mutex
  absl::flat_hash_map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, Flights> flights_ ABSL_GUARDED_BY(mu_);
  int asking_ ABSL_GUARDED_BY(mu_) = 0;  // Ask calls whose answer has not been handed out
};

}  // namespace conduit::coordinator
