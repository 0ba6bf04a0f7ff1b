// ReplicaManager: acks-all waits, replica roles from the view, the follower's side of a fetch,
// and the leader's in-sync set changes. The leader's side of a fetch is in
// replica_manager_fetch.cc.

#include "services/log_broker/domain/replica_manager.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_format.h"
#include "common/status/status_macros.h"
#include "services/log_broker/domain/limits.h"

namespace conduit::log_broker {
namespace {

// One acks-all produce waiting on the high watermark of every partition it wrote.
struct AckWait {
  runtime::Scope* scope = nullptr;
  ProduceCallback done;
  ProduceResult result;
  absl::Mutex mu;
  int remaining ABSL_GUARDED_BY(mu) = 0;
  bool finished ABSL_GUARDED_BY(mu) = false;
  std::vector<std::pair<PartitionLog*, uint64_t>> waiting ABSL_GUARDED_BY(mu);
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

ReplicaManager::ReplicaManager(TopicTable* topics, LogStore* store, AppendPipeline* pipeline,
                               runtime::Scope* scope, const time::Clock* clock,
                               BrokerObserver* observer, ReplicaManagerOptions options)
    : topics_(topics),
      store_(store),
      pipeline_(pipeline),
      scope_(scope),
      clock_(clock),
      observer_(observer),
      options_(options) {}

void ReplicaManager::Start() {
  if (options_.replica_lag_time > absl::ZeroDuration()) {
    isr_task_ = scope_->Every(options_.replica_lag_time / 4, [this] { MaintainInSyncReplicas(); });
  }
}

void ReplicaManager::Stop() { scope_->StopEvery(isr_task_); }

std::vector<PartitionReplication> ReplicaManager::ReplicationSnapshot() const {
  std::vector<PartitionReplication> out;
  const absl::Duration now = clock_->Monotonic();
  for (const auto& topic : topics_->Snapshot()) {
    const int32_t min_insync = topic->config().min_insync_replicas;
    for (int32_t p = 0; p < topic->partition_count; ++p) {
      if (auto led = topic->partitions[p].LedReplication(now)) {
        out.push_back(PartitionReplication{topic->name, p, min_insync, *std::move(led)});
      }
    }
  }
  return out;
}

ProduceCallback ReplicaManager::AwaitReplication(std::shared_ptr<TopicState> topic,
                                                 ProduceCallback done) {
  return [this, topic = std::move(topic),
          done = std::move(done)](absl::StatusOr<ProduceResult> result) mutable {
    if (!result.ok()) return done(std::move(result));
    absl::flat_hash_map<int32_t, int64_t> needed;  // partition → end the HW must reach
    for (const RecordPosition& p : result->positions) {
      needed[p.partition] = std::max(needed[p.partition], p.offset + 1);
    }
    auto wait = std::make_shared<AckWait>();
    bool moved = false;
    wait->scope = scope_;
    wait->done = std::move(done);
    wait->result = *std::move(result);
    {
      absl::MutexLock lock(&wait->mu);
      wait->remaining = static_cast<int>(needed.size()) + 1;  // +1: released below
      for (const auto& [partition, end] : needed) {
        PartitionLog& part = topic->partitions[partition];
        uint64_t id = 0;
        switch (part.AwaitAck(
            end, [wait](absl::Status s) { wait->Finish(s); }, &id)) {
          case PartitionLog::AckWait::kCovered:
            --wait->remaining;
            continue;
          case PartitionLog::AckWait::kNotLeader:
            wait->finished = true;
            moved = true;
            break;
          case PartitionLog::AckWait::kWaiting:
            wait->waiting.emplace_back(&part, id);
            continue;
        }
        break;  // not the leader any more
      }
    }
    bool waits;
    {
      absl::MutexLock lock(&wait->mu);
      waits = !wait->waiting.empty();
    }
    if (!moved && !waits) {  // covered already (a sole replica always is): no timer
      wait->Finish(absl::OkStatus());
      return;
    }
    if (moved) {  // leadership moved between the append and now
      wait->done(absl::UnavailableError(absl::StrFormat(
          "%s: leadership moved after the append, before the batch was replicated; the outcome "
          "is unknown (retry with the idempotent producer)",
          topic->name)));
      return;
    }
    const runtime::Scope::TimerId timer = scope_->After(options_.ack_timeout, [wait, topic] {
      std::vector<std::pair<PartitionLog*, uint64_t>> waiting;
      {
        absl::MutexLock lock(&wait->mu);
        waiting = wait->waiting;
      }
      for (auto& [part, id] : waiting) part->CancelAck(id);
      wait->Finish(absl::DeadlineExceededError(absl::StrFormat(
          "%s: appended, but not replicated to every in-sync replica in time; the outcome is "
          "unknown (retry with the idempotent producer)",
          topic->name)));
    });
    wait->timer.store(timer);
    if (wait->finished_now()) {  // answered before the timer was stored
      if (runtime::Scope::TimerId t = wait->timer.exchange(0); t != 0) scope_->Cancel(t);
    }
    wait->Finish(absl::OkStatus());
  };
}

absl::Status ReplicaManager::CheckInSync(const TopicState& topic, int32_t partition,
                                         bool* has_followers) const {
  const std::optional<int32_t> in_sync = topic.partitions[partition].LeaderInSyncCount();
  *has_followers = in_sync.has_value();
  const int32_t min_insync = topic.config().min_insync_replicas;
  if (in_sync && *in_sync < min_insync) {
    return absl::UnavailableError(absl::StrFormat(
        "%s/%d has %d in-sync replicas; min_insync_replicas is %d: nothing was appended (retry "
        "once replicas catch up, or produce with acks LEADER)",
        topic.name, partition, *in_sync, min_insync));
  }
  return absl::OkStatus();
}

void ReplicaManager::AssignRole(TopicState& topic, int32_t partition, const PartitionAssignment& a,
                                int64_t revision) {
  const int32_t self = topics_->cluster().self();
  using Role = ReplicaState::Role;
  // Not the leader (a follower, offline, or not a replica here): the log moves only by what
  // is fetched from the leader, if any.
  const Role role = a.leader != self        ? Role::kFollower
                    : a.replicas.size() > 1 ? Role::kLeader
                                            : Role::kSole;
  PartitionLog::Wake wake;
  std::vector<AckWaiters::Callback> failed =
      topic.partitions[partition].AssignRole(role, self, a, revision, clock_->Monotonic(), &wake);
  for (auto& done : failed) {
    done(absl::UnavailableError(absl::StrFormat(
        "%s/%d: leadership moved to broker %d at epoch %d before the batch was replicated; the "
        "outcome is unknown (retry with the idempotent producer)",
        topic.name, partition, a.leader, a.leader_epoch)));
  }
  for (auto& fn : wake) fn();
}

// ---- Follower side ---------------------------------------------------------------------------

std::vector<ReplicaFetchItem> ReplicaManager::FollowedPartitions(int32_t leader) const {
  std::vector<ReplicaFetchItem> out;
  const auto view = topics_->AppliedView();
  if (view == nullptr) return out;
  const int32_t self = topics_->cluster().self();
  for (const auto& [name, t] : view->topics) {
    auto topic = topics_->Find(name);
    if (!topic.ok() || (*topic)->id != t.meta.id) continue;
    for (int32_t p = 0; p < static_cast<int32_t>(t.partitions.size()); ++p) {
      const auto& a = t.partitions[p];
      if (!a || a->leader != leader || leader == self) continue;
      if (std::find(a->replicas.begin(), a->replicas.end(), self) == a->replicas.end()) continue;
      const PartitionLog::FollowerPosition at = (*topic)->partitions[p].follower_position();
      out.push_back(
          ReplicaFetchItem{name, t.meta.id, p, at.log_end, at.last_epoch, a->leader_epoch});
    }
  }
  return out;
}

absl::Status ReplicaManager::ApplyReplicaData(ReplicaFetchData data, LeaderEpoch leader_epoch,
                                              std::function<void(absl::Status)> done) {
  CONDUIT_ASSIGN_OR_RETURN(std::shared_ptr<TopicState> topic, topics_->Find(data.topic));
  if (topic->id != data.topic_id) return absl::NotFoundError("topic was replaced");
  CONDUIT_RETURN_IF_ERROR(TopicTable::CheckPartition(*topic, data.partition));
  PartitionLog::Wake wake;
  if (!topic->partitions[data.partition].TakeLeaderHighWatermark(leader_epoch, data.high_watermark,
                                                                 &wake)) {
    return absl::FailedPreconditionError(absl::StrFormat("%s/%d is no longer followed at epoch %d",
                                                         data.topic, data.partition, leader_epoch));
  }
  for (auto& fn : wake) fn();
  if (data.truncate_to) {
    observer_->OnTruncated(data.topic, data.partition, *data.truncate_to,
                           std::string(data.status.message()));
    return pipeline_->SubmitTruncate(topic, data.partition, *data.truncate_to, std::move(done));
  }
  std::unique_ptr<ReplicaRecords> records;
  if (data.records.empty() && !data.encoded.bytes.empty()) {
    CONDUIT_ASSIGN_OR_RETURN(records, store_->DecodeRecords(std::move(data.encoded.bytes)));
  } else {
    records = ReplicaRecords::FromDecoded(std::move(data.records));
  }
  if (records->records.empty()) {
    done(absl::OkStatus());
    return absl::OkStatus();
  }
  return pipeline_->SubmitReplicated(topic, data.partition, std::move(records), std::move(done));
}

// ---- In-sync set -----------------------------------------------------------------------------

void ReplicaManager::MaintainInSyncReplicas() {
  const auto view = topics_->AppliedView();
  if (!topics_->MayLeadUnder(view.get())) return;
  const absl::Duration now = clock_->Monotonic();
  for (const auto& topic : topics_->Snapshot()) {
    const TopicAssignment* t = view->FindTopic(topic->name);
    if (t == nullptr || t->meta.id != topic->id) continue;
    for (int32_t p = 0; p < topic->partition_count; ++p) {
      if (p >= static_cast<int32_t>(t->partitions.size()) || !t->partitions[p]) continue;
      PartitionLog& part = topic->partitions[p];
      PartitionAssignment next = *t->partitions[p];
      auto planned = part.PlanIsrChange(next.leader_epoch, options_.replica_lag_time, now);
      if (!planned) continue;
      next.isr = *std::move(planned);
      auto written =
          topics_->cluster().UpdatePartitionState(topic->id, p, t->partition_revisions[p], next);
      observer_->OnInSyncChange(
          topic->name, p, t->partitions[p]->isr, next.isr,
          !written.ok()  ? written.status()
          : *written > 0 ? absl::OkStatus()
                         : absl::AbortedError("the partition state moved since it was read"));
      PartitionLog::Wake wake;
      const int64_t revision = written.ok() ? *written : 0;
      part.EndIsrChange(revision, &wake);
      for (auto& fn : wake) fn();
      if (written.ok() && revision == 0) return;  // the metadata moved: wait for its next view
    }
  }
}

}  // namespace conduit::log_broker
