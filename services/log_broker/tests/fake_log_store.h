#pragma once

#include <map>
#include <tuple>
#include <utility>

#include "absl/synchronization/mutex.h"
#include "services/log_broker/domain/log_store.h"

namespace conduit::log_broker::testing {

// In-memory LogStore for unit-testing the broker's rules. Thread-safe. Can be told to fail
// writes, and to hold writes until released (to observe group commit). Reopening a Broker on
// the same FakeLogStore is a restart.
class FakeLogStore final : public LogStore {
 public:
  absl::StatusOr<std::vector<TopicMeta>> LoadTopics() override {
    absl::MutexLock lock(&mu_);
    std::vector<TopicMeta> out;
    for (const auto& [id, meta] : topics_) out.push_back(meta);
    return out;
  }
  absl::StatusOr<PartitionRecovery> RecoverPartition(TopicId topic_id, int32_t partition) override {
    absl::MutexLock lock(&mu_);
    PartitionRecovery out;
    if (auto it = partitions_.find({topic_id, partition}); it != partitions_.end()) {
      out.meta = it->second;
    }
    auto lo = records_.lower_bound({topic_id, partition, 0});
    auto hi = records_.lower_bound({topic_id, partition + 1, 0});
    if (lo != hi) {
      out.first_offset = std::get<2>(lo->first);
      out.first_append_time = lo->second.append_time;
      out.end_offset = std::get<2>(std::prev(hi)->first) + 1;
      out.last_append_time = std::prev(hi)->second.append_time;
    }
    return out;
  }
  absl::StatusOr<std::vector<WriteSet::ProducerUpdate>> LoadProducerStates(
      TopicId topic_id) override {
    absl::MutexLock lock(&mu_);
    std::vector<WriteSet::ProducerUpdate> out;
    for (const auto& [key, state] : producer_states_) {
      if (std::get<0>(key) == topic_id) {
        out.push_back({topic_id, std::get<1>(key), std::get<2>(key), state});
      }
    }
    return out;
  }
  absl::StatusOr<std::vector<WriteSet::EpochStart>> LoadEpochStarts(TopicId topic_id) override {
    absl::MutexLock lock(&mu_);
    std::vector<WriteSet::EpochStart> out;
    for (const auto& [key, start] : epoch_starts_) {
      if (std::get<0>(key) == topic_id) {
        out.push_back({topic_id, std::get<1>(key), std::get<2>(key), start});
      }
    }
    return out;
  }
  absl::StatusOr<std::vector<WriteSet::DedupPut>> LoadDedupEntries(TopicId topic_id) override {
    absl::MutexLock lock(&mu_);
    std::vector<WriteSet::DedupPut> out;
    for (const auto& [key, entry] : dedup_) {
      if (std::get<0>(key) == topic_id) out.push_back({topic_id, std::get<2>(key), entry});
    }
    return out;
  }
  absl::Status CreateTopic(const TopicMeta& topic) override {
    absl::MutexLock lock(&mu_);
    topics_[topic.id] = topic;
    return absl::OkStatus();
  }
  absl::Status UpdateTopic(const TopicMeta& topic) override { return CreateTopic(topic); }
  absl::Status DeleteTopic(const TopicMeta& topic) override {
    absl::MutexLock lock(&mu_);
    topics_.erase(topic.id);
    records_.erase(records_.lower_bound({topic.id, 0, 0}), records_.lower_bound({TopicId(topic.id.value() + 1), 0, 0}));
    std::erase_if(partitions_, [&](const auto& kv) { return kv.first.first == topic.id; });
    std::erase_if(producer_states_, [&](const auto& kv) { return std::get<0>(kv.first) == topic.id; });
    std::erase_if(dedup_, [&](const auto& kv) { return std::get<0>(kv.first) == topic.id; });
    std::erase_if(epoch_starts_, [&](const auto& kv) { return std::get<0>(kv.first) == topic.id; });
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<ProducerInfo>> LoadProducers() override {
    absl::MutexLock lock(&mu_);
    std::vector<ProducerInfo> out;
    for (const auto& [id, info] : producers_) out.push_back(info);
    return out;
  }
  absl::Status SaveProducer(const ProducerInfo& producer) override {
    absl::MutexLock lock(&mu_);
    producers_[producer.id] = producer;
    return absl::OkStatus();
  }
  absl::Status Write(const WriteSet& w, bool sync) override {
    absl::MutexLock lock(&mu_);
    ++writes_entered_;
    mu_.Await(absl::Condition(&released_));
    write_calls_.push_back(static_cast<int>(w.records.size()));
    if (sync) {
      ++syncs_;
      ++sync_writes_;
    }
    if (fail_after_ == 0) fail_ = absl::UnavailableError("injected write failure");
    if (fail_after_ >= 0) --fail_after_;
    if (!fail_.ok()) return fail_;
    for (const auto& e : w.records) {
      if (!topics_.contains(e.topic_id)) return absl::NotFoundError("no such topic id");
    }
    for (const auto& d : w.range_deletes) {
      records_.erase(records_.lower_bound({d.topic_id, d.partition, d.from}),
                     records_.lower_bound({d.topic_id, d.partition, d.to}));
    }
    for (const auto& d : w.record_deletes) records_.erase({d.topic_id, d.partition, d.offset});
    for (const auto& e : w.records) {
      // This store has no encoded form (no ReadEncoded), so replicas come decoded, with data.
      if (e.data == nullptr) return absl::InternalError("a record without its data");
      records_[{e.topic_id, e.partition, e.offset}] =
          StoredRecord{e.partition, e.offset, e.append_time, e.leader_epoch, *e.data, e.producer};
    }
    for (const auto& p : w.partitions) partitions_[{p.topic_id, p.partition}] = p.meta;
    for (const auto& p : w.producers) {
      producer_states_[{p.topic_id, p.partition, p.producer_id}] = p.state;
    }
    for (const auto& t : w.epoch_truncates) {
      epoch_starts_.erase(epoch_starts_.lower_bound({t.topic_id, t.partition, t.from_epoch}),
                          epoch_starts_.lower_bound({t.topic_id, t.partition + 1, LeaderEpoch(0)}));
    }
    for (const auto& e : w.epoch_starts) {
      epoch_starts_[{e.topic_id, e.partition, e.epoch}] = e.start_offset;
    }
    for (const auto& d : w.dedup_deletes) dedup_.erase({d.topic_id, d.partition, d.event_id});
    for (const auto& d : w.dedup_puts) {
      dedup_[{d.topic_id, d.entry.position.partition, d.event_id}] = d.entry;
    }
    return absl::OkStatus();
  }
  absl::Status SyncWal() override {
    absl::MutexLock lock(&mu_);
    ++syncs_;
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<StoredRecord>> Read(TopicId topic_id, int32_t partition, int64_t from,
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

  void FailWrites(absl::Status s) {
    absl::MutexLock lock(&mu_);
    fail_ = std::move(s);
  }
  // The next `n` writes succeed; every one after fails UNAVAILABLE.
  void FailWritesAfter(int n) {
    absl::MutexLock lock(&mu_);
    fail_after_ = n;
  }
  void HoldWrites(bool hold) {
    absl::MutexLock lock(&mu_);
    released_ = !hold;
  }
  // Blocks until `n` Write calls have begun (held or not).
  void WaitForWritesEntered(int n) {
    absl::MutexLock lock(&mu_);
    auto reached = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return writes_entered_ >= n; };
    mu_.Await(absl::Condition(&reached));
  }
  // Records per Write call, in call order.
  std::vector<int> write_calls() {
    absl::MutexLock lock(&mu_);
    return write_calls_;
  }
  // Writes that asked for an fsync.
  int sync_writes() {
    absl::MutexLock lock(&mu_);
    return sync_writes_;
  }
  // Fsyncs of any kind: synced writes and SyncWal calls.
  int syncs() {
    absl::MutexLock lock(&mu_);
    return syncs_;
  }
  size_t record_count() {
    absl::MutexLock lock(&mu_);
    return records_.size();
  }
  size_t dedup_count() {
    absl::MutexLock lock(&mu_);
    return dedup_.size();
  }

 private:
  absl::Mutex mu_;
  std::map<TopicId, TopicMeta> topics_ ABSL_GUARDED_BY(mu_);
  std::map<std::tuple<TopicId, int32_t, int64_t>, StoredRecord> records_ ABSL_GUARDED_BY(mu_);
  std::map<std::pair<TopicId, int32_t>, PartitionMeta> partitions_ ABSL_GUARDED_BY(mu_);
  std::map<std::tuple<TopicId, int32_t, ProducerId>, ProducerPartitionState> producer_states_
      ABSL_GUARDED_BY(mu_);
  std::map<std::tuple<TopicId, int32_t, std::string>, DedupEntry> dedup_ ABSL_GUARDED_BY(mu_);
  std::map<std::tuple<TopicId, int32_t, LeaderEpoch>, int64_t> epoch_starts_ ABSL_GUARDED_BY(mu_);
  std::map<ProducerId, ProducerInfo> producers_ ABSL_GUARDED_BY(mu_);
  absl::Status fail_ ABSL_GUARDED_BY(mu_);
  int fail_after_ ABSL_GUARDED_BY(mu_) = -1;
  bool released_ ABSL_GUARDED_BY(mu_) = true;
  std::vector<int> write_calls_ ABSL_GUARDED_BY(mu_);
  int syncs_ ABSL_GUARDED_BY(mu_) = 0;
  int sync_writes_ ABSL_GUARDED_BY(mu_) = 0;
  int writes_entered_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace conduit::log_broker::testing
