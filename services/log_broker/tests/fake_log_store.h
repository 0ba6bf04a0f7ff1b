#pragma once

#include <map>
#include <tuple>
#include <utility>

#include "absl/synchronization/mutex.h"
#include "services/log_broker/domain/log_store.h"

namespace conduit::log_broker::testing {

// In-memory LogStore for unit-testing the broker's rules. Thread-safe. Can be told to fail
// appends, and to hold appends until released (to observe group commit).
class FakeLogStore final : public LogStore {
 public:
  absl::StatusOr<std::vector<TopicMeta>> LoadTopics() override {
    absl::MutexLock lock(&mu_);
    std::vector<TopicMeta> out;
    for (const auto& [id, meta] : topics_) out.push_back(meta);
    return out;
  }
  absl::StatusOr<PartitionExtent> RecoverPartition(uint64_t topic_id, int32_t partition) override {
    absl::MutexLock lock(&mu_);
    PartitionExtent extent;
    auto lo = records_.lower_bound({topic_id, partition, 0});
    auto hi = records_.lower_bound({topic_id, partition + 1, 0});
    if (lo != hi) {
      extent.log_start_offset = std::get<2>(lo->first);
      extent.next_offset = std::get<2>(std::prev(hi)->first) + 1;
      extent.last_append_time = std::prev(hi)->second.append_time;
    }
    return extent;
  }
  absl::Status CreateTopic(const TopicMeta& topic) override {
    absl::MutexLock lock(&mu_);
    topics_[topic.id] = topic;
    return absl::OkStatus();
  }
  absl::Status DeleteTopic(const TopicMeta& topic) override {
    absl::MutexLock lock(&mu_);
    topics_.erase(topic.id);
    records_.erase(records_.lower_bound({topic.id, 0, 0}), records_.lower_bound({topic.id + 1, 0, 0}));
    return absl::OkStatus();
  }
  absl::Status Append(const std::vector<AppendEntry>& entries, bool sync) override {
    absl::MutexLock lock(&mu_);
    ++appends_entered_;
    mu_.Await(absl::Condition(&released_));
    append_calls_.push_back(static_cast<int>(entries.size()));
    if (sync) ++syncs_;
    if (!fail_.ok()) return fail_;
    for (const auto& e : entries) {
      if (!topics_.contains(e.topic_id)) return absl::NotFoundError("no such topic id");
      records_[{e.topic_id, e.partition, e.offset}] =
          StoredRecord{e.partition, e.offset, e.append_time, *e.data};
    }
    return absl::OkStatus();
  }
  absl::Status SyncWal() override {
    absl::MutexLock lock(&mu_);
    ++syncs_;
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<StoredRecord>> Read(uint64_t topic_id, int32_t partition, int64_t from,
                                                 int64_t end, int32_t max_records,
                                                 int64_t max_bytes) override {
    absl::MutexLock lock(&mu_);
    if (!topics_.contains(topic_id)) return absl::NotFoundError("no such topic id");
    std::vector<StoredRecord> out;
    int64_t bytes = 0;
    for (auto it = records_.lower_bound({topic_id, partition, from});
         it != records_.end() && it->first < std::make_tuple(topic_id, partition, end) &&
         static_cast<int32_t>(out.size()) < max_records;
         ++it) {
      int64_t size = static_cast<int64_t>(it->second.data.PayloadBytes());
      if (!out.empty() && bytes + size > max_bytes) break;
      bytes += size;
      out.push_back(it->second);
    }
    return out;
  }

  void FailAppends(absl::Status s) {
    absl::MutexLock lock(&mu_);
    fail_ = std::move(s);
  }
  void HoldAppends(bool hold) {
    absl::MutexLock lock(&mu_);
    released_ = !hold;
  }
  // Blocks until `n` Append calls have begun (held or not).
  void WaitForAppendsEntered(int n) {
    absl::MutexLock lock(&mu_);
    auto reached = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return appends_entered_ >= n; };
    mu_.Await(absl::Condition(&reached));
  }
  std::vector<int> append_calls() {
    absl::MutexLock lock(&mu_);
    return append_calls_;
  }
  int syncs() {
    absl::MutexLock lock(&mu_);
    return syncs_;
  }
  size_t record_count() {
    absl::MutexLock lock(&mu_);
    return records_.size();
  }

 private:
  absl::Mutex mu_;
  std::map<uint64_t, TopicMeta> topics_ ABSL_GUARDED_BY(mu_);
  std::map<std::tuple<uint64_t, int32_t, int64_t>, StoredRecord> records_ ABSL_GUARDED_BY(mu_);
  absl::Status fail_ ABSL_GUARDED_BY(mu_);
  bool released_ ABSL_GUARDED_BY(mu_) = true;
  std::vector<int> append_calls_ ABSL_GUARDED_BY(mu_);
  int syncs_ ABSL_GUARDED_BY(mu_) = 0;
  int appends_entered_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace conduit::log_broker::testing
