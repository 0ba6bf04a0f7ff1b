#pragma once

#include <map>
#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "services/work_queue/domain/job_queue.h"
#include "services/work_queue/domain/queue_store.h"

namespace conduit::work_queue {

// The queues, by name (in name order) and by id (each write names its queue by id). Not
// thread-safe: WorkQueue's lock guards it.
class QueueMap {
 public:
  JobQueue* Find(const std::string& name) const {
    auto it = by_name_.find(name);
    return it == by_name_.end() ? nullptr : it->second.get();
  }
  JobQueue* FindById(QueueId id) const {
    auto it = by_id_.find(id);
    return it == by_id_.end() ? nullptr : it->second;
  }
  // False (and `q` dropped) when the name is taken.
  bool Add(std::unique_ptr<JobQueue> q) {
    JobQueue* added = q.get();
    if (!by_name_.try_emplace(added->meta().name, std::move(q)).second) return false;
    by_id_[added->id()] = added;
    return true;
  }
  void Remove(const std::string& name) {
    auto it = by_name_.find(name);
    if (it == by_name_.end()) return;
    by_id_.erase(it->second->id());
    by_name_.erase(it);
  }
  auto begin() const { return by_name_.begin(); }
  auto end() const { return by_name_.end(); }

 private:
  std::map<std::string, std::unique_ptr<JobQueue>> by_name_;
  absl::flat_hash_map<QueueId, JobQueue*> by_id_;
};

}  // namespace conduit::work_queue
