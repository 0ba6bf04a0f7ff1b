#include "services/log_broker/domain/partition_log.h"

#include <algorithm>
#include <iterator>
#include <utility>

#include "absl/strings/str_format.h"

namespace conduit::log_broker {

void PartitionLog::Recover(const PartitionMeta& meta, absl::Time first_append,
                           absl::Time last_append, std::map<LeaderEpoch, int64_t> epoch_starts) {
  next_offset = meta.next_offset;
  absl::MutexLock lock(&mu_);
  meta_ = meta;
  high_watermark_ = meta.next_offset;  // one replica: everything durable here
  leader_epoch_ = meta.leader_epoch;
  oldest_append_time_ = first_append;
  last_append_time_ = last_append;
  epoch_starts_ = std::move(epoch_starts);
  // Records written before the epoch cache existed were appended at epoch 0.
  const int64_t first = epoch_starts_.empty() ? meta_.next_offset : epoch_starts_.begin()->second;
  if (first > meta_.log_start_offset && !epoch_starts_.contains(LeaderEpoch(0))) {
    epoch_starts_[LeaderEpoch(0)] = meta_.log_start_offset;
  }
}

PartitionLog::Extent PartitionLog::extent() const {
  absl::MutexLock lock(&mu_);
  return Extent{meta_.log_start_offset, high_watermark_, meta_.next_offset, meta_.bytes};
}

LeaderEpoch PartitionLog::leader_epoch() const {
  absl::MutexLock lock(&mu_);
  return leader_epoch_;
}

PartitionLog::EpochEnd PartitionLog::EndOfEpoch(LeaderEpoch epoch) const {
  absl::MutexLock lock(&mu_);
  auto after = epoch_starts_.upper_bound(epoch);  // the first epoch above `epoch`
  if (after == epoch_starts_.begin()) return EpochEnd{};
  const LeaderEpoch found = std::prev(after)->first;
  return EpochEnd{found, after == epoch_starts_.end() ? meta_.next_offset : after->second};
}

LeaderEpoch PartitionLog::EpochBefore(int64_t end) const {
  absl::MutexLock lock(&mu_);
  return EpochBeforeLocked(end);
}

LeaderEpoch PartitionLog::EpochBeforeLocked(int64_t end) const {
  LeaderEpoch epoch = kNoLeaderEpoch;
  for (const auto& [e, start] : epoch_starts_) {
    if (start < end) epoch = e;
  }
  return epoch;
}

PartitionDescription PartitionLog::Describe(int32_t partition, int32_t leader,
                                            absl::Duration now) const {
  absl::MutexLock lock(&mu_);
  return PartitionDescription{partition,
                              meta_,
                              high_watermark_,
                              leader_epoch_,
                              leader,
                              oldest_append_time_,
                              last_append_time_,
                              replica_.Describe(meta_.log_start_offset, meta_.next_offset, now)};
}

std::optional<ReplicationDescription> PartitionLog::LedReplication(absl::Duration now) const {
  absl::MutexLock lock(&mu_);
  // Followed here, or not placed yet (a recovered topic before the first view names it).
  if (replica_.role == ReplicaState::Role::kFollower || replica_.replicas.empty()) {
    return std::nullopt;
  }
  return replica_.Describe(meta_.log_start_offset, meta_.next_offset, now);
}

// ---- Long-polls -------------------------------------------------------------------------------

bool PartitionLog::AwaitHighWatermarkPast(int64_t offset, uint64_t id,
                                          const std::function<bool()>& ready,
                                          std::function<void()> wake) {
  absl::MutexLock lock(&mu_);
  if (high_watermark_ > offset || ready()) return true;
  waiters_.emplace(id, std::move(wake));
  return false;
}

void PartitionLog::ForgetWaiter(uint64_t id) {
  absl::MutexLock lock(&mu_);
  waiters_.erase(id);
}

void PartitionLog::TakeWaiters(Wake* wake) {
  for (auto& [id, fn] : waiters_) wake->push_back(std::move(fn));
  waiters_.clear();
}

void PartitionLog::WakeWaiters() {
  Wake wake;
  {
    absl::MutexLock lock(&mu_);
    TakeWaiters(&wake);
  }
  for (auto& fn : wake) fn();
}

bool PartitionLog::AwaitLogEndPast(int64_t offset, uint64_t id, const std::function<bool()>& skip,
                                   std::function<void()> wake) {
  absl::MutexLock lock(&mu_);
  if (!skip()) replica_waiters_.emplace(id, std::move(wake));
  return meta_.next_offset > offset;
}

void PartitionLog::ForgetReplicaWaiter(uint64_t id) {
  absl::MutexLock lock(&mu_);
  replica_waiters_.erase(id);
}

void PartitionLog::AdvanceHighWatermark(Wake* wake) {
  const int64_t target = replica_.HighWatermark(std::min(meta_.next_offset, durable_end_));
  if (target <= high_watermark_) return;
  high_watermark_ = target;
  TakeWaiters(wake);
  for (auto& done : acks_.Release(high_watermark_)) {
    wake->push_back([done = std::move(done)] { done(absl::OkStatus()); });
  }
}

// ---- Appends ----------------------------------------------------------------------------------

PartitionLog::AppendBase PartitionLog::BeginAppend() const {
  absl::MutexLock lock(&mu_);
  return AppendBase{meta_, leader_epoch_,
                    epoch_starts_.empty() ? kNoLeaderEpoch : epoch_starts_.rbegin()->first,
                    oldest_append_time_, last_append_time_};
}

bool PartitionLog::IsFollower() const {
  absl::MutexLock lock(&mu_);
  return replica_.role == ReplicaState::Role::kFollower;
}

bool PartitionLog::HasFollowers() const {
  absl::MutexLock lock(&mu_);
  return replica_.role == ReplicaState::Role::kLeader && replica_.replicas.size() > 1;
}

void PartitionLog::HoldDurableEnd() {
  absl::MutexLock lock(&mu_);
  durable_end_ = std::min(durable_end_, meta_.next_offset);
}

int64_t PartitionLog::ReleaseDurableEnd(Wake* wake) {
  absl::MutexLock lock(&mu_);
  durable_end_ = std::numeric_limits<int64_t>::max();
  AdvanceHighWatermark(wake);
  return high_watermark_;
}

int64_t PartitionLog::Publish(const Published& batch, Wake* wake) {
  absl::MutexLock lock(&mu_);
  meta_ = batch.meta;
  oldest_append_time_ = batch.oldest_append_time;
  if (batch.restarted) {
    epoch_starts_.clear();
    high_watermark_ = batch.meta.next_offset;  // the new, empty log's start
  } else if (batch.truncated_to) {
    // A follower cut its divergent suffix: the high watermark cannot stay above the log.
    const int64_t cut = *batch.truncated_to;
    high_watermark_ = std::min(high_watermark_, cut);
    std::erase_if(epoch_starts_, [cut](const auto& e) { return e.second >= cut; });
  }
  for (const auto& [epoch, start] : batch.epoch_starts) epoch_starts_[epoch] = start;
  if (batch.appended_at) {
    last_append_time_ = *batch.appended_at;
    for (auto& [id, fn] : replica_waiters_) wake->push_back(std::move(fn));
    replica_waiters_.clear();
  }
  AdvanceHighWatermark(wake);
  return high_watermark_;
}

// ---- Leadership -------------------------------------------------------------------------------

LeaderEpoch PartitionLog::RaiseLeaderEpoch(LeaderEpoch epoch) {
  absl::MutexLock lock(&mu_);
  const LeaderEpoch before = leader_epoch_;
  if (epoch >= before) leader_epoch_ = epoch;
  return before;
}

PartitionLog::Serving PartitionLog::serving() const {
  absl::MutexLock lock(&mu_);
  const bool follower = replica_.role == ReplicaState::Role::kFollower;
  return Serving{leader_epoch_, follower,
                 !follower && !replica_.replicas.empty() && replica_.leader_epoch == leader_epoch_};
}

std::vector<AckWaiters::Callback> PartitionLog::AssignRole(ReplicaState::Role role, int32_t self,
                                                           const PartitionAssignment& a,
                                                           int64_t revision, absl::Duration now,
                                                           Wake* wake) {
  std::vector<AckWaiters::Callback> failed;
  absl::MutexLock lock(&mu_);
  const bool was_leading = replica_.role != ReplicaState::Role::kFollower;
  replica_.Assign(role, self, a.leader, a.leader_epoch, a.replicas, a.isr, revision, now);
  replica_.throttle_bytes_per_second = a.throttle_bytes_per_second;
  // A leader that stays leader (at a new epoch too: its log, the waiting records in it, is what
  // the new epoch's followers copy) keeps its waiting produces; one that follows now fails them.
  if (was_leading && role == ReplicaState::Role::kFollower) failed = acks_.TakeAll();
  AdvanceHighWatermark(wake);
  return failed;
}

// ---- Replication, leader side -----------------------------------------------------------------

PartitionLog::AckWait PartitionLog::AwaitAck(int64_t end, AckWaiters::Callback done, uint64_t* id) {
  absl::MutexLock lock(&mu_);
  if (high_watermark_ >= end) return AckWait::kCovered;
  if (replica_.role != ReplicaState::Role::kLeader) return AckWait::kNotLeader;
  *id = acks_.Add(end, std::move(done));
  return AckWait::kWaiting;
}

void PartitionLog::CancelAck(uint64_t id) {
  absl::MutexLock lock(&mu_);
  (void)acks_.Remove(id);
}

std::optional<int32_t> PartitionLog::LeaderInSyncCount() const {
  absl::MutexLock lock(&mu_);
  if (replica_.role != ReplicaState::Role::kLeader) return std::nullopt;
  return static_cast<int32_t>(replica_.view_isr.size());
}

absl::Status PartitionLog::ValidateFollowerFetch(const std::string& topic, int32_t follower,
                                                 const ReplicaFetchItem& item, bool may_lead,
                                                 absl::Duration now, ReplicaFetchData* answer,
                                                 Wake* wake) {
  absl::MutexLock lock(&mu_);
  answer->high_watermark = high_watermark_;
  answer->log_start_offset = meta_.log_start_offset;
  answer->log_end_offset = meta_.next_offset;
  const ReplicaState& r = replica_;
  if (r.role != ReplicaState::Role::kLeader || r.leader_epoch != leader_epoch_) {
    return absl::FailedPreconditionError(
        absl::StrFormat("broker %d does not lead %s/%d (its epoch %d)", r.self, topic,
                        item.partition, r.leader_epoch));
  }
  if (item.current_leader_epoch < r.leader_epoch) {
    return absl::FailedPreconditionError(
        absl::StrFormat("fenced: leader epoch %d of %s/%d is stale; the current one is %d",
                        item.current_leader_epoch, topic, item.partition, r.leader_epoch));
  }
  if (item.current_leader_epoch > r.leader_epoch) {
    return absl::UnavailableError(
        absl::StrFormat("broker %d has not reached leader epoch %d of %s/%d yet (at %d)", r.self,
                        item.current_leader_epoch, topic, item.partition, r.leader_epoch));
  }
  if (std::find(r.replicas.begin(), r.replicas.end(), follower) == r.replicas.end() ||
      follower == r.self) {
    return absl::FailedPreconditionError(
        absl::StrFormat("broker %d is not a follower of %s/%d", follower, topic, item.partition));
  }
  // Does the follower's log agree with this one up to its fetch offset? The end of its last
  // epoch here tells (KIP-101/279; KIP-320 answers it within the fetch).
  if (item.fetch_offset < meta_.log_start_offset && item.last_fetched_epoch < LeaderEpoch(0)) {
    answer->truncate_to = meta_.log_start_offset;  // start over at the log start
    return absl::OutOfRangeError("the follower's log starts before the leader's");
  }
  if (item.last_fetched_epoch >= LeaderEpoch(0)) {
    auto after = epoch_starts_.upper_bound(item.last_fetched_epoch);
    const LeaderEpoch shared =
        after == epoch_starts_.begin() ? kNoLeaderEpoch : std::prev(after)->first;
    const int64_t end = after == epoch_starts_.end() ? meta_.next_offset : after->second;
    if (shared != item.last_fetched_epoch || end < item.fetch_offset) {
      answer->truncate_to =
          shared < LeaderEpoch(0) ? meta_.log_start_offset : std::min(end, item.fetch_offset);
      return absl::OutOfRangeError(
          absl::StrFormat("the follower's log diverges from the leader's: epoch %d ends at %d here",
                          item.last_fetched_epoch, *answer->truncate_to));
    }
  } else if (item.fetch_offset != meta_.log_start_offset) {
    answer->truncate_to = meta_.log_start_offset;
    return absl::OutOfRangeError("the follower's log has no epoch but is not empty");
  }
  replica_.RecordFetch(follower, item.fetch_offset, meta_.next_offset, now);
  // A leader that cannot confirm its lease, or registered again and has not applied a view
  // since, may already be deposed: it acknowledges nothing.
  if (may_lead) AdvanceHighWatermark(wake);
  answer->high_watermark = high_watermark_;
  return absl::OkStatus();
}

int64_t PartitionLog::ThrottleBudget(int32_t follower, absl::Duration now) {
  absl::MutexLock lock(&mu_);
  return replica_.ThrottleBudget(follower, now);
}

void PartitionLog::ChargeThrottle(int32_t follower, int64_t bytes) {
  absl::MutexLock lock(&mu_);
  replica_.ChargeThrottle(follower, bytes);
}

std::optional<std::vector<int32_t>> PartitionLog::PlanIsrChange(LeaderEpoch leader_epoch,
                                                                absl::Duration replica_lag_time,
                                                                absl::Duration now) {
  absl::MutexLock lock(&mu_);
  if (replica_.role != ReplicaState::Role::kLeader || replica_.leader_epoch != leader_epoch) {
    return std::nullopt;
  }
  auto epoch_start = epoch_starts_.find(leader_epoch_);
  const int64_t start =
      epoch_start == epoch_starts_.end() ? meta_.next_offset : epoch_start->second;
  auto planned = replica_.PlanIsr(high_watermark_, start, replica_lag_time, now);
  if (planned) replica_.BeginIsrChange(*planned);
  return planned;
}

void PartitionLog::EndIsrChange(int64_t revision, Wake* wake) {
  absl::MutexLock lock(&mu_);
  replica_.EndIsrChange(revision);
  AdvanceHighWatermark(wake);
}

// ---- Replication, follower side ---------------------------------------------------------------

PartitionLog::FollowerPosition PartitionLog::follower_position() const {
  absl::MutexLock lock(&mu_);
  const int64_t end = meta_.next_offset;
  return FollowerPosition{end,
                          end > meta_.log_start_offset ? EpochBeforeLocked(end) : kNoLeaderEpoch};
}

bool PartitionLog::TakeLeaderHighWatermark(LeaderEpoch leader_epoch, int64_t leader_high_watermark,
                                           Wake* wake) {
  absl::MutexLock lock(&mu_);
  if (replica_.role != ReplicaState::Role::kFollower || replica_.leader_epoch != leader_epoch) {
    return false;
  }
  replica_.leader_high_watermark = std::max(replica_.leader_high_watermark, leader_high_watermark);
  AdvanceHighWatermark(wake);
  return true;
}

}  // namespace conduit::log_broker
