// ReplicaManager, leader side: a follower's fetch (ReplicaFetch) — each item
// validated against this log (epochs, divergence), the follower's progress recorded (which may
// move the high watermark), records read up to the log end within the throttle, long-polled.

#include <algorithm>
#include <memory>
#include <utility>

#include "absl/strings/str_format.h"
#include "services/log_broker/domain/limits.h"
#include "services/log_broker/domain/replica_manager.h"

namespace conduit::log_broker {

// A follower's fetch waiting for records in any of its partitions (or its deadline).
class ReplicaFetchWait : public std::enable_shared_from_this<ReplicaFetchWait> {
 public:
  ReplicaManager* manager = nullptr;
  int32_t follower = 0;
  std::vector<std::shared_ptr<TopicState>> topics;  // per item; null: the item failed
  std::vector<ReplicaFetchData> answers;
  std::vector<ReplicaFetchItem> items;
  int64_t max_bytes = 0;
  ReplicaFetchCallback done;
  std::atomic<runtime::Scope::TimerId> timer{0};
  std::atomic<bool> fired{false};
  uint64_t waiter_id = 0;

  void Fire() {
    if (fired.exchange(true)) return;
    manager->scope_->Cancel(timer.load());
    for (size_t i = 0; i < items.size(); ++i) {
      if (!topics[i]) continue;
      topics[i]->partitions[items[i].partition].ForgetReplicaWaiter(waiter_id);
    }
    auto self = shared_from_this();
    if (!manager->scope_->Submit([self] { self->Read(); })) {
      for (auto& a : answers) {
        if (a.status.ok()) a.status = absl::ResourceExhaustedError("storage read queue is full");
      }
      done(std::move(answers));
    }
  }

  // Storage pool: the records of every valid item, up to its log end, within max_bytes.
  void Read() {
    int64_t budget = max_bytes;
    for (size_t i = 0; i < items.size(); ++i) {
      ReplicaFetchData& a = answers[i];
      if (!topics[i] || !a.status.ok()) continue;
      if (topics[i]->deleted.load()) {
        a.status = absl::NotFoundError("topic was deleted");
        continue;
      }
      PartitionLog& part = topics[i]->partitions[items[i].partition];
      const PartitionLog::Extent extent = part.extent();
      a.high_watermark = extent.high_watermark;
      a.log_start_offset = extent.log_start;
      a.log_end_offset = extent.log_end;
      const int64_t allowed =
          std::min(budget, part.ThrottleBudget(follower, manager->clock_->Monotonic()));
      if (allowed <= 0 || items[i].fetch_offset >= a.log_end_offset) continue;
      absl::StatusOr<int64_t> read = ReadRecords(i, allowed);
      if (!read.ok()) {
        a.status = read.status();
        continue;
      }
      budget -= *read;
      part.ChargeThrottle(follower, *read);
    }
    done(std::move(answers));
  }

  // Item i's records from its fetch offset to its log end, at most `max_bytes`, into its answer:
  // as the store encodes them when it can (no decoding here, no encoding at the follower), else
  // decoded. Returns the bytes read: stored bytes, or payload bytes when decoded.
  absl::StatusOr<int64_t> ReadRecords(size_t i, int64_t max_bytes) {
    ReplicaFetchData& a = answers[i];
    const ReplicaFetchItem& item = items[i];
    auto encoded = manager->store_->ReadEncoded(topics[i]->id, item.partition, item.fetch_offset,
                                                a.log_end_offset, kMaxFetchRecords, max_bytes);
    if (encoded.ok()) {
      a.encoded = *std::move(encoded);
      return a.encoded.stored_bytes;
    }
    if (!absl::IsUnimplemented(encoded.status())) return encoded.status();
    auto records = manager->store_->Read(topics[i]->id, item.partition, item.fetch_offset,
                                         a.log_end_offset, kMaxFetchRecords, max_bytes);
    if (!records.ok()) return records.status();
    int64_t read = 0;  // payload bytes, as max_bytes counts them
    for (const auto& r : *records) read += static_cast<int64_t>(r.data.PayloadBytes());
    a.records = *std::move(records);
    return read;
  }
};

absl::Status ReplicaManager::ReplicaFetch(int32_t follower, std::vector<ReplicaFetchItem> items,
                                          int64_t max_bytes, absl::Duration max_wait,
                                          ReplicaFetchCallback done) {
  auto wait = std::make_shared<ReplicaFetchWait>();
  wait->manager = this;
  wait->follower = follower;
  wait->max_bytes = std::clamp<int64_t>(max_bytes, 1, kMaxFetchBytes);
  wait->done = std::move(done);
  wait->waiter_id = next_waiter_id_.fetch_add(1);
  wait->topics.resize(items.size());
  wait->answers.resize(items.size());
  bool ready = max_wait <= absl::ZeroDuration();
  const bool may_lead = topics_->MayLeadUnder(topics_->AppliedView().get());
  for (size_t i = 0; i < items.size(); ++i) {
    const ReplicaFetchItem& item = items[i];
    ReplicaFetchData& a = wait->answers[i];
    a.topic = item.topic;
    a.topic_id = item.topic_id;
    a.partition = item.partition;
    auto topic = topics_->Find(item.topic);
    if (topic.ok() && (*topic)->id != item.topic_id)
      topic = absl::NotFoundError("another topic id");
    if (topic.ok()) a.status = TopicTable::CheckPartition(**topic, item.partition);
    if (!topic.ok() || !a.status.ok()) {
      if (a.status.ok()) a.status = topic.status();
      ready = true;
      continue;
    }
    PartitionLog::Wake wake;
    a.status = (*topic)->partitions[item.partition].ValidateFollowerFetch(
        (*topic)->name, follower, item, may_lead, clock_->Monotonic(), &a, &wake);
    for (auto& fn : wake) fn();
    if (!a.status.ok()) {
      ready = true;
      continue;
    }
    wait->topics[i] = *topic;
    if (a.log_end_offset > item.fetch_offset) {
      // Records to send, unless a throttle holds them back: then wait out max_wait.
      ready |=
          (*topic)->partitions[item.partition].ThrottleBudget(follower, clock_->Monotonic()) > 0;
    }
  }
  wait->items = std::move(items);
  if (ready) {
    wait->Fire();
    return absl::OkStatus();
  }
  wait->timer.store(scope_->After(max_wait, [wait] { wait->Fire(); }));
  bool appended = false;
  for (size_t i = 0; i < wait->items.size(); ++i) {
    PartitionLog& part = wait->topics[i]->partitions[wait->items[i].partition];
    appended |= part.AwaitLogEndPast(
        wait->items[i].fetch_offset, wait->waiter_id, [&] { return wait->fired.load(); },
        [wait] { wait->Fire(); });
  }
  if (appended) wait->Fire();
  return absl::OkStatus();
}

}  // namespace conduit::log_broker
