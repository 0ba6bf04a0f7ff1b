// The Broker's replication (services/log_broker/README.md, "Replication"): the leader's side of
// a follower's fetch, the follower's side of applying it, acks-all waits and the leader's
// in-sync set changes.

#include <algorithm>
#include <utility>

#include "absl/strings/str_format.h"
#include "common/status/status_macros.h"
#include "services/log_broker/domain/broker.h"
#include "services/log_broker/domain/limits.h"

namespace conduit::log_broker {
namespace {

// The epoch of the last record below `end` in `epoch_starts`; -1 when none.
int32_t EpochBefore(const std::map<int32_t, int64_t>& epoch_starts, int64_t end) {
  int32_t epoch = -1;
  for (const auto& [e, start] : epoch_starts) {
    if (start < end) epoch = e;
  }
  return epoch;
}

// One acks-all produce waiting on the high watermark of every partition it wrote.
struct AckWait {
  runtime::Scope* scope = nullptr;
  ProduceCallback done;
  ProduceResult result;
  absl::Mutex mu;
  int remaining ABSL_GUARDED_BY(mu) = 0;
  bool finished ABSL_GUARDED_BY(mu) = false;
  std::vector<std::pair<Partition*, uint64_t>> waiting ABSL_GUARDED_BY(mu);
  std::atomic<runtime::Scope::TimerId> timer{0};

  // Answers once: the first error, or success when every partition is covered.
  void Finish(const absl::Status& status) {
    {
      absl::MutexLock lock(&mu);
      if (finished) return;
      if (status.ok() && --remaining > 0) return;
      finished = true;
    }
    if (runtime::Scope::TimerId t = timer.exchange(0); t != 0) scope->Cancel(t);
    if (status.ok()) {
      done(std::move(result));
    } else {
      done(status);
    }
  }
  bool finished_now() {
    absl::MutexLock lock(&mu);
    return finished;
  }
};

}  // namespace

ProduceCallback Broker::AwaitReplication(std::shared_ptr<TopicState> topic, ProduceCallback done) {
  return [this, topic = std::move(topic), done = std::move(done)](
             absl::StatusOr<ProduceResult> result) mutable {
    if (!result.ok()) return done(std::move(result));
    absl::flat_hash_map<int32_t, int64_t> needed;  // partition → end the HW must reach
    for (const RecordPosition& p : result->positions) {
      needed[p.partition] = std::max(needed[p.partition], p.offset + 1);
    }
    auto wait = std::make_shared<AckWait>();
    bool moved = false;
    wait->scope = &scope_;
    wait->done = std::move(done);
    wait->result = *std::move(result);
    {
      absl::MutexLock lock(&wait->mu);
      wait->remaining = static_cast<int>(needed.size()) + 1;  // +1: released below
      for (const auto& [partition, end] : needed) {
        Partition& part = topic->partitions[partition];
        absl::MutexLock plock(&part.mu);
        if (part.high_watermark >= end) {
          --wait->remaining;
          continue;
        }
        if (part.replica.role != ReplicaState::Role::kLeader) {
          wait->finished = true;
          moved = true;
          break;
        }
        const uint64_t id =
            part.acks.Add(end, [wait](absl::Status s) { wait->Finish(s); });
        wait->waiting.emplace_back(&part, id);
      }
    }
    if (moved) {  // leadership moved between the append and now
      wait->done(absl::UnavailableError(absl::StrFormat(
          "%s: leadership moved after the append, before the batch was replicated; the outcome "
          "is unknown (retry with the idempotent producer)",
          topic->name)));
      return;
    }
    const runtime::Scope::TimerId timer = scope_.After(options_.ack_timeout, [wait, topic] {
      std::vector<std::pair<Partition*, uint64_t>> waiting;
      {
        absl::MutexLock lock(&wait->mu);
        waiting = wait->waiting;
      }
      for (auto& [part, id] : waiting) {
        absl::MutexLock plock(&part->mu);
        (void)part->acks.Remove(id);
      }
      wait->Finish(absl::DeadlineExceededError(absl::StrFormat(
          "%s: appended, but not replicated to every in-sync replica in time; the outcome is "
          "unknown (retry with the idempotent producer)",
          topic->name)));
    });
    wait->timer.store(timer);
    if (wait->finished_now()) {  // answered before the timer was stored
      if (runtime::Scope::TimerId t = wait->timer.exchange(0); t != 0) scope_.Cancel(t);
    }
    wait->Finish(absl::OkStatus());
  };
}

absl::Status Broker::CheckInSync(const TopicState& topic, int32_t partition) const {
  const Partition& part = topic.partitions[partition];
  const int32_t min_insync = topic.config().min_insync_replicas;
  absl::MutexLock lock(&part.mu);
  if (part.replica.role != ReplicaState::Role::kLeader) return absl::OkStatus();
  const int32_t in_sync = static_cast<int32_t>(part.replica.view_isr.size());
  if (in_sync < min_insync) {
    return absl::UnavailableError(absl::StrFormat(
        "%s/%d has %d in-sync replicas; min_insync_replicas is %d: nothing was appended (retry "
        "once replicas catch up, or produce with acks LEADER)",
        topic.name, partition, in_sync, min_insync));
  }
  return absl::OkStatus();
}

void Broker::AssignReplicaRole(TopicState& topic, int32_t partition, const PartitionAssignment& a,
                               int64_t revision) {
  const int32_t self = cluster_->self();
  using Role = ReplicaState::Role;
  // Not the leader (a follower, offline, or not a replica here): the log moves only by what
  // is fetched from the leader, if any.
  const Role role = a.leader != self           ? Role::kFollower
                    : a.replicas.size() > 1 ? Role::kLeader
                                              : Role::kSole;
  Partition& part = topic.partitions[partition];
  std::vector<AckWaiters::Callback> failed;
  std::vector<std::function<void()>> wake;
  {
    absl::MutexLock lock(&part.mu);
    const bool was_leading = part.replica.role != Role::kFollower;
    part.replica.Assign(role, self, a.leader, a.leader_epoch, a.replicas, a.isr, revision,
                        clock_->Monotonic());
    part.replica.throttle_bytes_per_second = a.throttle_bytes_per_second;
    if (was_leading && (role == Role::kFollower || part.leader_epoch != a.leader_epoch)) {
      failed = part.acks.TakeAll();
    }
    part.AdvanceHighWatermark(&wake);
  }
  for (auto& done : failed) {
    done(absl::UnavailableError(absl::StrFormat(
        "%s/%d: leadership moved to broker %d at epoch %d before the batch was replicated; the "
        "outcome is unknown (retry with the idempotent producer)",
        topic.name, partition, a.leader, a.leader_epoch)));
  }
  for (auto& fn : wake) fn();
}

// ---- Leader side -----------------------------------------------------------------------------

// A follower's fetch waiting for records in any of its partitions (or its deadline).
class ReplicaFetchWait : public std::enable_shared_from_this<ReplicaFetchWait> {
 public:
  Broker* broker = nullptr;
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
    broker->scope_.Cancel(timer.load());
    for (size_t i = 0; i < items.size(); ++i) {
      if (!topics[i]) continue;
      Partition& part = topics[i]->partitions[items[i].partition];
      absl::MutexLock lock(&part.mu);
      part.replica_waiters.erase(waiter_id);
    }
    auto self = shared_from_this();
    if (!broker->scope_.Submit([self] { self->Read(); })) {
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
      Partition& part = topics[i]->partitions[items[i].partition];
      int64_t allowed;
      {
        absl::MutexLock lock(&part.mu);
        a.high_watermark = part.high_watermark;
        a.log_start_offset = part.meta.log_start_offset;
        a.log_end_offset = part.meta.next_offset;
        allowed = std::min(budget, part.replica.ThrottleBudget(follower, broker->clock_->Monotonic()));
      }
      if (allowed <= 0 || items[i].fetch_offset >= a.log_end_offset) continue;
      auto records = broker->store_->Read(topics[i]->id, items[i].partition, items[i].fetch_offset,
                                          a.log_end_offset, kMaxFetchRecords, allowed);
      if (!records.ok()) {
        a.status = records.status();
        continue;
      }
      int64_t read = 0;  // payload bytes, as max_bytes counts them
      for (const auto& r : *records) read += static_cast<int64_t>(r.data.PayloadBytes());
      budget -= read;
      {
        absl::MutexLock lock(&part.mu);
        part.replica.ChargeThrottle(follower, read);
      }
      a.records = *std::move(records);
    }
    done(std::move(answers));
  }
};

absl::Status Broker::ReplicaFetch(int32_t follower, std::vector<ReplicaFetchItem> items,
                                  int64_t max_bytes, absl::Duration max_wait,
                                  ReplicaFetchCallback done) {
  auto wait = std::make_shared<ReplicaFetchWait>();
  wait->broker = this;
  wait->follower = follower;
  wait->max_bytes = std::clamp<int64_t>(max_bytes, 1, kMaxFetchBytes);
  wait->done = std::move(done);
  wait->waiter_id = next_waiter_id_.fetch_add(1);
  wait->topics.resize(items.size());
  wait->answers.resize(items.size());
  bool ready = max_wait <= absl::ZeroDuration();
  const bool lease_valid = cluster_ == nullptr || cluster_->LeaseValid();
  for (size_t i = 0; i < items.size(); ++i) {
    const ReplicaFetchItem& item = items[i];
    ReplicaFetchData& a = wait->answers[i];
    a.topic = item.topic;
    a.topic_id = item.topic_id;
    a.partition = item.partition;
    auto topic = FindTopic(item.topic);
    if (topic.ok() && (*topic)->id != item.topic_id) topic = absl::NotFoundError("another topic id");
    if (topic.ok()) a.status = CheckPartition(**topic, item.partition);
    if (!topic.ok() || !a.status.ok()) {
      if (a.status.ok()) a.status = topic.status();
      ready = true;
      continue;
    }
    std::vector<std::function<void()>> wake;
    a.status = ValidateReplicaFetch(**topic, follower, item, lease_valid, &a, &wake);
    for (auto& fn : wake) fn();
    if (!a.status.ok()) {
      ready = true;
      continue;
    }
    wait->topics[i] = *topic;
    if (a.log_end_offset > item.fetch_offset) {
      // Records to send, unless a throttle holds them back: then wait out max_wait.
      Partition& part = (*topic)->partitions[item.partition];
      absl::MutexLock lock(&part.mu);
      ready |= part.replica.ThrottleBudget(follower, clock_->Monotonic()) > 0;
    }
  }
  wait->items = std::move(items);
  if (ready) {
    wait->Fire();
    return absl::OkStatus();
  }
  wait->timer.store(scope_.After(max_wait, [wait] { wait->Fire(); }));
  bool appended = false;
  for (size_t i = 0; i < wait->items.size(); ++i) {
    Partition& part = wait->topics[i]->partitions[wait->items[i].partition];
    absl::MutexLock lock(&part.mu);
    if (part.meta.next_offset > wait->items[i].fetch_offset) appended = true;
    if (!wait->fired.load()) {
      part.replica_waiters.emplace(wait->waiter_id, [wait] { wait->Fire(); });
    }
  }
  if (appended) wait->Fire();
  return absl::OkStatus();
}

absl::Status Broker::ValidateReplicaFetch(TopicState& topic, int32_t follower,
                                          const ReplicaFetchItem& item, bool lease_valid,
                                          ReplicaFetchData* answer,
                                          std::vector<std::function<void()>>* wake) {
  Partition& part = topic.partitions[item.partition];
  absl::MutexLock lock(&part.mu);
  answer->high_watermark = part.high_watermark;
  answer->log_start_offset = part.meta.log_start_offset;
  answer->log_end_offset = part.meta.next_offset;
  if (part.replica.role != ReplicaState::Role::kLeader || part.replica.leader_epoch != part.leader_epoch) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "broker %d does not lead %s/%d (its epoch %d)", part.replica.self, topic.name, item.partition,
        part.replica.leader_epoch));
  }
  if (item.current_leader_epoch < part.replica.leader_epoch) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "fenced: leader epoch %d of %s/%d is stale; the current one is %d",
        item.current_leader_epoch, topic.name, item.partition, part.replica.leader_epoch));
  }
  if (item.current_leader_epoch > part.replica.leader_epoch) {
    return absl::UnavailableError(absl::StrFormat(
        "broker %d has not reached leader epoch %d of %s/%d yet (at %d)", part.replica.self,
        item.current_leader_epoch, topic.name, item.partition, part.replica.leader_epoch));
  }
  if (std::find(part.replica.replicas.begin(), part.replica.replicas.end(), follower) == part.replica.replicas.end() ||
      follower == part.replica.self) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "broker %d is not a follower of %s/%d", follower, topic.name, item.partition));
  }
  // Does the follower's log agree with this one up to its fetch offset? The end of its last
  // epoch here tells (KIP-101/279; KIP-320 answers it within the fetch).
  if (item.fetch_offset < part.meta.log_start_offset && item.last_fetched_epoch < 0) {
    answer->truncate_to = part.meta.log_start_offset;  // start over at the log start
    return absl::OutOfRangeError("the follower's log starts before the leader's");
  }
  if (item.last_fetched_epoch >= 0) {
    auto after = part.epoch_starts.upper_bound(item.last_fetched_epoch);
    const int32_t shared = after == part.epoch_starts.begin() ? -1 : std::prev(after)->first;
    const int64_t end = after == part.epoch_starts.end() ? part.meta.next_offset : after->second;
    if (shared != item.last_fetched_epoch || end < item.fetch_offset) {
      answer->truncate_to =
          shared < 0 ? part.meta.log_start_offset : std::min(end, item.fetch_offset);
      return absl::OutOfRangeError(absl::StrFormat(
          "the follower's log diverges from the leader's: epoch %d ends at %d here",
          item.last_fetched_epoch, *answer->truncate_to));
    }
  } else if (item.fetch_offset != part.meta.log_start_offset) {
    answer->truncate_to = part.meta.log_start_offset;
    return absl::OutOfRangeError("the follower's log has no epoch but is not empty");
  }
  part.replica.RecordFetch(follower, item.fetch_offset, part.meta.next_offset,
                           clock_->Monotonic());
  // A leader that cannot confirm its lease may already be deposed: it acknowledges nothing.
  if (lease_valid) part.AdvanceHighWatermark(wake);
  answer->high_watermark = part.high_watermark;
  return absl::OkStatus();
}

// ---- Follower side ---------------------------------------------------------------------------

std::vector<ReplicaFetchItem> Broker::FollowedPartitions(int32_t leader) const {
  std::vector<ReplicaFetchItem> out;
  const auto view = AppliedView();
  if (view == nullptr || cluster_ == nullptr) return out;
  const int32_t self = cluster_->self();
  for (const auto& [name, t] : view->topics) {
    auto topic = FindTopic(name);
    if (!topic.ok() || (*topic)->id != t.meta.id) continue;
    for (int32_t p = 0; p < static_cast<int32_t>(t.partitions.size()); ++p) {
      const auto& a = t.partitions[p];
      if (!a || a->leader != leader || leader == self) continue;
      if (std::find(a->replicas.begin(), a->replicas.end(), self) == a->replicas.end()) continue;
      const Partition& part = (*topic)->partitions[p];
      absl::MutexLock lock(&part.mu);
      const int64_t end = part.meta.next_offset;
      out.push_back(ReplicaFetchItem{name, t.meta.id, p, end,
                                     end > part.meta.log_start_offset
                                         ? EpochBefore(part.epoch_starts, end)
                                         : -1,
                                     a->leader_epoch});
    }
  }
  return out;
}

absl::Status Broker::ApplyReplicaData(ReplicaFetchData data, int32_t leader_epoch,
                                      std::function<void(absl::Status)> done) {
  CONDUIT_ASSIGN_OR_RETURN(std::shared_ptr<TopicState> topic, FindTopic(data.topic));
  if (topic->id != data.topic_id) return absl::NotFoundError("topic was replaced");
  CONDUIT_RETURN_IF_ERROR(CheckPartition(*topic, data.partition));
  Partition& part = topic->partitions[data.partition];
  std::vector<std::function<void()>> wake;
  {
    absl::MutexLock lock(&part.mu);
    if (part.replica.role != ReplicaState::Role::kFollower ||
        part.replica.leader_epoch != leader_epoch) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "%s/%d is no longer followed at epoch %d", data.topic, data.partition, leader_epoch));
    }
    part.replica.leader_high_watermark =
        std::max(part.replica.leader_high_watermark, data.high_watermark);
    part.AdvanceHighWatermark(&wake);
  }
  for (auto& fn : wake) fn();
  if (data.truncate_to) {
    observer_->OnTruncated(data.topic, data.partition, *data.truncate_to,
                           std::string(data.status.message()));
    return pipeline_.SubmitTruncate(topic, data.partition, *data.truncate_to, std::move(done));
  }
  if (data.records.empty()) {
    done(absl::OkStatus());
    return absl::OkStatus();
  }
  return pipeline_.SubmitReplicated(topic, data.partition, std::move(data.records),
                                    std::move(done));
}

// ---- In-sync set -----------------------------------------------------------------------------

void Broker::MaintainInSyncReplicas() {
  if (cluster_ == nullptr) return;
  const auto view = AppliedView();
  if (view == nullptr || !cluster_->LeaseValid()) return;
  const absl::Duration now = clock_->Monotonic();
  for (const auto& topic : TopicsSnapshot()) {
    const TopicAssignment* t = view->FindTopic(topic->name);
    if (t == nullptr || t->meta.id != topic->id) continue;
    for (int32_t p = 0; p < topic->partition_count; ++p) {
      if (p >= static_cast<int32_t>(t->partitions.size()) || !t->partitions[p]) continue;
      Partition& part = topic->partitions[p];
      PartitionAssignment next = *t->partitions[p];
      {
        absl::MutexLock lock(&part.mu);
        if (part.replica.role != ReplicaState::Role::kLeader ||
            part.replica.leader_epoch != next.leader_epoch) {
          continue;
        }
        auto epoch_start = part.epoch_starts.find(part.leader_epoch);
        const int64_t start =
            epoch_start == part.epoch_starts.end() ? part.meta.next_offset : epoch_start->second;
        auto planned =
            part.replica.PlanIsr(part.high_watermark, start, options_.replica_lag_time, now);
        if (!planned) continue;
        next.isr = *planned;
        part.replica.BeginIsrChange(next.isr);
      }
      auto written =
          cluster_->UpdatePartitionState(topic->id, p, t->partition_revisions[p], next);
      observer_->OnInSyncChange(
          topic->name, p, t->partitions[p]->isr, next.isr,
          !written.ok()  ? written.status()
          : *written > 0 ? absl::OkStatus()
                         : absl::AbortedError("the partition state moved since it was read"));
      std::vector<std::function<void()>> wake;
      const int64_t revision = written.ok() ? *written : 0;
      {
        absl::MutexLock lock(&part.mu);
        part.replica.EndIsrChange(revision);
        part.AdvanceHighWatermark(&wake);
      }
      for (auto& fn : wake) fn();
      if (written.ok() && revision == 0) return;  // the metadata moved: wait for its next view
    }
  }
}

}  // namespace conduit::log_broker
