// Lag: per partition, in records and in seconds, with a drain rate from recent samples.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status/status_macros.h"
#include "services/coordinator/domain/group_coordinator.h"

namespace conduit::coordinator {

absl::StatusOr<GroupDescription> GroupCoordinator::Describe(const std::string& group_id) {
  auto found = ExistingGroup(group_id);
  if (!found.ok()) return found.status();
  CONDUIT_RETURN_IF_ERROR(log_.failure());
  GroupDescription out;
  CONDUIT_RETURN_IF_ERROR(ComputeLag(**found, &out));
  if (out.group_id.empty()) {
    return absl::NotFoundError(absl::StrCat("group '", group_id, "' does not exist"));
  }
  return out;
}

// What ComputeLag reads of a group under its mutex, to ask the broker about outside it.
struct GroupCoordinator::LagSnapshot {
  absl::btree_set<std::string> topics;
  absl::btree_map<TopicPartition, std::string> owner;
  absl::btree_map<TopicPartition, OffsetRecord> offsets;
};

absl::Status GroupCoordinator::ComputeLag(Group& g, GroupDescription* out, MarksMemo* memo) {
  // 1. Snapshot the group.
  LagSnapshot snapshot;
  std::shared_ptr<Waiter> barrier;
  {
    absl::MutexLock lock(&g.mu);
    if (g.deleted) return absl::OkStatus();
    ExpireLocked(g);
    g.membership.Describe(out);
    snapshot.topics = g.membership.SubscribedTopics();
    for (const auto& [tp, record] : g.offsets.offsets()) snapshot.topics.insert(tp.topic);
    snapshot.owner = g.membership.owner();
    snapshot.offsets = g.offsets.offsets();
    barrier = BarrierLocked(g);
  }
  CONDUIT_RETURN_IF_ERROR(GroupLog::Wait(barrier));
  // 2. Ask the broker, outside the mutex.
  const absl::Time now = clock_->Now();
  for (const std::string& topic : snapshot.topics) TopicLag(topic, snapshot, now, memo, out);
  // 3. Record the samples and derive drain rates.
  {
    absl::MutexLock lock(&g.mu);
    if (g.deleted) return absl::OkStatus();  // deleted meanwhile: no series to bring back
    for (PartitionLagView& v : out->partitions) {
      const DrainEstimate drain = g.lag.Record(v.tp, now, v.lag_records);
      v.drain_rate = drain.drain_rate;
      v.catch_up_seconds = drain.catch_up_seconds;
    }
  }
  for (const PartitionLagView& v : out->partitions) {
    out->max_lag_records = std::max(out->max_lag_records, v.lag_records);
    out->max_lag_seconds = std::max(out->max_lag_seconds, v.lag_seconds);
    observer_->OnLag(out->group_id, v.tp, v.lag_records, v.lag_seconds);
  }
  return absl::OkStatus();
}

void GroupCoordinator::TopicLag(const std::string& topic, const LagSnapshot& snapshot,
                                absl::Time now, MarksMemo* memo, GroupDescription* out) {
  absl::StatusOr<std::vector<PartitionMarks>> own;
  const absl::StatusOr<std::vector<PartitionMarks>>* found = &own;
  if (memo == nullptr) {
    own = topic_cache_.Fresh(topic);
  } else {
    auto [it, first] = memo->try_emplace(topic);
    if (first) it->second = topic_cache_.Fresh(topic);
    found = &it->second;
  }
  const absl::StatusOr<std::vector<PartitionMarks>>& marks = *found;
  if (!marks.ok()) {
    // A deleted topic has no lag; when the broker cannot be asked the last figures stay (and
    // broker_error says why they are missing here).
    if (absl::IsNotFound(marks.status())) {
      observer_->OnLagGone(out->group_id, topic);
    } else {
      out->broker_error = std::string(marks.status().message());
    }
    return;
  }
  for (const PartitionMarks& pm : *marks) {
    PartitionLagView v;
    v.tp = {topic, pm.partition};
    if (auto o = snapshot.owner.find(v.tp); o != snapshot.owner.end()) v.owner = o->second;
    if (auto c = snapshot.offsets.find(v.tp); c != snapshot.offsets.end()) v.committed = c->second;
    v.log_start = pm.log_start;
    v.high_watermark = pm.high_watermark;
    const int64_t next = std::max(v.committed ? v.committed->offset : pm.log_start, pm.log_start);
    v.lag_records = std::max<int64_t>(0, pm.high_watermark - next);
    if (v.lag_records > 0) {
      auto appended = topics_->AppendTimeAt(topic, pm.partition, next);
      if (appended.ok() && *appended) {
        v.first_unprocessed_append_time = *appended;
        v.lag_seconds = std::max(0.0, absl::ToDoubleSeconds(now - **appended));
      } else if (!appended.ok()) {
        out->broker_error = std::string(appended.status().message());
      }
    }
    out->partitions.push_back(std::move(v));
  }
}

}  // namespace conduit::coordinator
