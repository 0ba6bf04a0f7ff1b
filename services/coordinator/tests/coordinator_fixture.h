#pragma once

// A GroupCoordinator on the real RocksDB store in a temp dir, with a fake clock and a fake
// broker (FakeTopics: partitions with append times). Reopen() is a restart.

#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "common/testing/temp_dir.h"
#include "common/time/clock.h"
#include "services/coordinator/domain/group_coordinator.h"
#include "services/coordinator/storage/rocksdb_coordinator_store.h"

namespace conduit::coordinator {

// The broker's view, in memory: per partition the append time of every offset from 0.
class FakeTopics final : public TopicSource {
 public:
  void AddTopic(const std::string& topic, int partitions) {
    absl::MutexLock lock(&mu_);
    topics_[topic].resize(partitions);
  }
  void Append(const std::string& topic, int32_t partition, absl::Time at, int count = 1) {
    absl::MutexLock lock(&mu_);
    for (int i = 0; i < count; ++i) topics_[topic][partition].appended.push_back(at);
  }
  void RemoveTopic(const std::string& topic) {
    absl::MutexLock lock(&mu_);
    topics_.erase(topic);
  }
  // Runs at the start of every Describe, after the answer is decided and before it is returned
  // (to hold a question on its way, or to let time pass while it is).
  void OnDescribe(std::function<void()> hook) {
    absl::MutexLock lock(&mu_);
    on_describe_ = std::move(hook);
  }
  // Retention: everything below `offset` is gone.
  void Truncate(const std::string& topic, int32_t partition, int64_t offset) {
    absl::MutexLock lock(&mu_);
    topics_[topic][partition].log_start = offset;
  }

  // While set, the broker cannot be reached.
  void SetUnavailable(bool unavailable) {
    absl::MutexLock lock(&mu_);
    unavailable_ = unavailable;
  }

  // How many times the coordinator asked for a topic's marks.
  int describes() {
    absl::MutexLock lock(&mu_);
    return describes_;
  }

  absl::StatusOr<std::vector<PartitionMarks>> Describe(const std::string& topic) override {
    absl::StatusOr<std::vector<PartitionMarks>> answer = Answer(topic);
    std::function<void()> hook;
    {
      absl::MutexLock lock(&mu_);
      hook = on_describe_;
    }
    if (hook) hook();
    return answer;
  }
  absl::StatusOr<std::vector<PartitionMarks>> Answer(const std::string& topic) {
    absl::MutexLock lock(&mu_);
    ++describes_;
    if (unavailable_) return absl::UnavailableError("broker unreachable (test)");
    auto it = topics_.find(topic);
    if (it == topics_.end()) return absl::NotFoundError("topic '" + topic + "' does not exist");
    std::vector<PartitionMarks> out;
    for (size_t p = 0; p < it->second.size(); ++p) {
      const Part& part = it->second[p];
      PartitionMarks m{static_cast<int32_t>(p), part.log_start,
                       static_cast<int64_t>(part.appended.size()), std::nullopt};
      if (m.high_watermark > m.log_start) m.oldest_append_time = part.appended[m.log_start];
      out.push_back(m);
    }
    return out;
  }
  absl::StatusOr<int64_t> OffsetForTime(const std::string& topic, int32_t partition,
                                        absl::Time at) override {
    absl::MutexLock lock(&mu_);
    const Part& part = topics_.at(topic).at(partition);
    for (int64_t o = part.log_start; o < static_cast<int64_t>(part.appended.size()); ++o) {
      if (part.appended[o] >= at) return o;
    }
    return static_cast<int64_t>(part.appended.size());
  }
  absl::StatusOr<std::optional<absl::Time>> AppendTimeAt(const std::string& topic,
                                                         int32_t partition,
                                                         int64_t offset) override {
    absl::MutexLock lock(&mu_);
    const Part& part = topics_.at(topic).at(partition);
    offset = std::max(offset, part.log_start);
    if (offset >= static_cast<int64_t>(part.appended.size())) return std::optional<absl::Time>();
    return std::optional<absl::Time>(part.appended[offset]);
  }

 private:
  struct Part {
    int64_t log_start = 0;
    std::vector<absl::Time> appended;
  };
  absl::Mutex mu_;
  bool unavailable_ ABSL_GUARDED_BY(mu_) = false;
  std::map<std::string, std::vector<Part>> topics_ ABSL_GUARDED_BY(mu_);
  int describes_ ABSL_GUARDED_BY(mu_) = 0;
  std::function<void()> on_describe_ ABSL_GUARDED_BY(mu_);
};

// Passes everything to the real store, except that writes fail UNAVAILABLE while `fail` is set.
class FlakyStore final : public CoordinatorStore {
 public:
  explicit FlakyStore(CoordinatorStore* real) : real_(real) {}
  absl::StatusOr<StoredState> Load() override { return real_->Load(); }
  absl::Status Write(const std::vector<const CoordinatorWrite*>& writes) override {
    if (fail.load()) return absl::UnavailableError("injected write failure");
    return real_->Write(writes);
  }
  absl::StatusOr<std::vector<AuditRecord>> ListAudit(const std::string& group_id,
                                                     uint64_t before_id, int limit) override {
    return real_->ListAudit(group_id, before_id, limit);
  }
  std::atomic<bool> fail{false};

 private:
  CoordinatorStore* const real_;
};

class CoordinatorTest : public ::testing::Test {
 protected:
  void SetUp() override { Reopen(); }

  void Reopen() {
    coordinator_.reset();
    flaky_.reset();
    store_.reset();
    auto store = RocksDbCoordinatorStore::Open(dir_.Sub("coordinator"));
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    flaky_ = std::make_unique<FlakyStore>(store_.get());
    coordinator_ = std::make_unique<GroupCoordinator>(flaky_.get(), &topics_, &clock_, options_);
    ASSERT_TRUE(coordinator_->Recover().ok());
  }

  HeartbeatOutput Join(const std::string& group, std::vector<std::string> topics,
                       const std::string& instance_id = "") {
    HeartbeatInput in;
    in.group_id = group;
    in.subscription = std::move(topics);
    in.instance_id = instance_id;
    in.session_timeout = absl::Seconds(10);
    auto out = coordinator_->Heartbeat(in);
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() ? *out : HeartbeatOutput{};
  }
  // A heartbeat from `last`'s member that reports owning `owned`.
  absl::StatusOr<HeartbeatOutput> Beat(const std::string& group, const HeartbeatOutput& last,
                                       const PartitionSet& owned) {
    HeartbeatInput in;
    in.group_id = group;
    in.member_id = last.member_id;
    in.member_epoch = last.member_epoch;
    in.owned = owned;
    return coordinator_->Heartbeat(in);
  }
  // A heartbeat that reports owning what `last` assigned (a well-behaved member).
  HeartbeatOutput Beat(const std::string& group, const HeartbeatOutput& last) {
    auto out = Beat(group, last, last.assignment);
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() ? *out : HeartbeatOutput{};
  }
  absl::Status CommitAs(const std::string& group, const HeartbeatOutput& member,
                        const std::string& topic, int32_t partition, int64_t offset) {
    CommitInput in;
    in.group_id = group;
    in.member_id = member.member_id;
    in.member_epoch = member.member_epoch;
    in.entries.push_back({{topic, partition}, offset, ""});
    return coordinator_->Commit(in);
  }
  std::optional<int64_t> Committed(const std::string& group, const std::string& topic,
                                   int32_t partition) {
    auto offsets = coordinator_->FetchOffsets(group, {});
    EXPECT_TRUE(offsets.ok()) << offsets.status();
    if (!offsets.ok()) return std::nullopt;
    for (const OffsetRecord& o : *offsets) {
      if (o.tp == TopicPartition{topic, partition}) return o.offset;
    }
    return std::nullopt;
  }

  static PartitionSet Partitions(const std::string& topic, std::vector<int32_t> ps) {
    PartitionSet out;
    for (int32_t p : ps) out.insert({topic, p});
    return out;
  }

  conduit::testing::TempDir dir_;
  time::FakeClock clock_;
  FakeTopics topics_;
  CoordinatorOptions options_;
  std::unique_ptr<RocksDbCoordinatorStore> store_;
  std::unique_ptr<FlakyStore> flaky_;  // what the coordinator writes through
  std::unique_ptr<GroupCoordinator> coordinator_;
};

}  // namespace conduit::coordinator
