// Membership: joins, heartbeats, leaves, session expiry, and incremental reconciliation of
// each member towards the target assignment (services/coordinator/README.md).
#include <algorithm>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status/status_macros.h"
#include "services/coordinator/domain/assignor.h"
#include "services/coordinator/domain/group_coordinator.h"
#include "services/coordinator/domain/validation.h"

namespace conduit::coordinator {
namespace {

std::string NewMemberId() {
  static absl::Mutex mu(absl::kConstInit);
  static absl::BitGen* gen = new absl::BitGen();
  absl::MutexLock lock(&mu);
  return absl::StrFormat("m-%016x%08x", absl::Uniform<uint64_t>(*gen),
                         absl::Uniform<uint32_t>(*gen));
}

absl::Status ValidateHeartbeat(const HeartbeatInput& in, const CoordinatorOptions& options) {
  CONDUIT_RETURN_IF_ERROR(ValidateId("group id", in.group_id));
  if (!in.member_id.empty()) {
    CONDUIT_RETURN_IF_ERROR(ValidateId("member id", in.member_id));
  }
  if (!in.instance_id.empty()) {
    CONDUIT_RETURN_IF_ERROR(ValidateId("instance id", in.instance_id));
  }
  if (in.member_epoch < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "member_epoch ", in.member_epoch, " is negative; use LeaveGroup to leave the group"));
  }
  if (in.member_epoch > 0 && in.member_id.empty()) {
    return absl::InvalidArgumentError(
        "member_epoch > 0 needs the member_id the coordinator returned at join");
  }
  if (in.client_id.size() > kMaxIdLength) {
    return absl::InvalidArgumentError(
        absl::StrCat("client_id is ", in.client_id.size(), " bytes; the limit is ", kMaxIdLength));
  }
  size_t subscription_bytes = 0;
  for (const std::string& topic : in.subscription) subscription_bytes += topic.size();
  CONDUIT_RETURN_IF_ERROR(
      ValidateHeartbeatSize(in.subscription.size(), subscription_bytes, in.owned.size()));
  if (in.member_epoch == 0 && in.subscription.empty()) {
    return absl::InvalidArgumentError("a join (member_epoch 0) needs subscribed_topics");
  }
  for (const std::string& topic : in.subscription) {
    CONDUIT_RETURN_IF_ERROR(ValidateId("subscribed topic", topic));
  }
  for (const TopicPartition& tp : in.owned) {
    CONDUIT_RETURN_IF_ERROR(ValidateId("owned topic", tp.topic));
    if (tp.partition < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("owned partition ", tp.partition, " of ", tp.topic, " is negative"));
    }
  }
  if (in.session_timeout && (*in.session_timeout < options.min_session_timeout ||
                             *in.session_timeout > options.max_session_timeout)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "session_timeout ", absl::FormatDuration(*in.session_timeout), " is outside [",
        absl::FormatDuration(options.min_session_timeout), ", ",
        absl::FormatDuration(options.max_session_timeout), "]"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<HeartbeatOutput> GroupCoordinator::Heartbeat(const HeartbeatInput& in) {
  return Await<absl::StatusOr<HeartbeatOutput>>(
      [&](auto done) { Heartbeat(in, std::move(done)); });
}

void GroupCoordinator::Heartbeat(const HeartbeatInput& in,
                                 std::function<void(absl::StatusOr<HeartbeatOutput>)> done) {
  std::shared_ptr<Waiter> waiter;
  absl::StatusOr<HeartbeatOutput> out = StartHeartbeat(in, &waiter);
  // A refusal, too, is answered after what it wrote (an expiry) is durable.
  Then(waiter, [this, out = std::move(out), done = std::move(done)](absl::Status s) mutable {
    if (!s.ok()) return done(s);
    if (out.ok()) observer_->OnHeartbeat();
    done(std::move(out));
  });
}

absl::StatusOr<HeartbeatOutput> GroupCoordinator::StartHeartbeat(
    const HeartbeatInput& in, std::shared_ptr<Waiter>* queued) {
  CONDUIT_RETURN_IF_ERROR(ValidateHeartbeat(in, options_));
  CONDUIT_RETURN_IF_ERROR(log_.health());
  // Partition counts for the assignor, asked outside any group mutex. An unknown topic has no
  // partitions (yet): the sweep notices when it appears.
  for (const std::string& topic : in.subscription) (void)topic_cache_.Get(topic);
  // Asking the broker may have taken long: a caller that gave up must not join or change.
  if (clock_->Now() >= in.deadline) return DeadlinePassed();
  GroupPtr g;
  if (in.member_epoch == 0) {
    g = FindOrCreateGroup(in.group_id);
  } else {
    g = FindGroup(in.group_id);
    if (!g) {
      return absl::NotFoundError(absl::StrCat("group '", in.group_id,
                                              "' does not exist; join with member_epoch 0"));
    }
  }
  absl::MutexLock lock(&g->mu);
  if (g->deleted) return DeletedMeanwhile();
  Change change;
  ExpireLocked(*g, clock_->Now(), &change);
  absl::StatusOr<HeartbeatOutput> out = HeartbeatLocked(*g, in, &change);
  *queued = SubmitLocked(*g, std::move(change));
  return out;
}

absl::StatusOr<HeartbeatOutput> GroupCoordinator::HeartbeatLocked(Group& g,
                                                                  const HeartbeatInput& in,
                                                                  Change* change) {
  const absl::Time now = clock_->Now();
  Member* m = nullptr;
  auto found = in.member_id.empty() ? g.members.end() : g.members.find(in.member_id);
  if (found != g.members.end()) {
    m = &found->second;
    if (in.member_epoch > m->record.epoch) {
      return absl::FailedPreconditionError(absl::StrCat(
          "member_epoch ", in.member_epoch, " is ahead of member '", in.member_id,
          "' (epoch ", m->record.epoch, "); rejoin with member_epoch 0"));
    }
  } else if (in.member_epoch != 0) {
    return absl::NotFoundError(absl::StrCat(
        "member '", in.member_id, "' is not in group '", in.group_id,
        "' (its session expired, it left, or its instance id was taken over); rejoin with "
        "member_epoch 0"));
  } else {
    // A join. A current member with the same instance id hands over its place (static
    // membership): same epoch, same partitions, no rebalance.
    std::string id = in.member_id.empty() ? NewMemberId() : in.member_id;
    auto same_instance = in.instance_id.empty()
                             ? g.members.end()
                             : std::find_if(g.members.begin(), g.members.end(), [&](auto& e) {
                                 return e.second.record.instance_id == in.instance_id;
                               });
    if (same_instance != g.members.end()) {
      Member moved = std::move(same_instance->second);
      const std::string old_id = same_instance->first;
      g.members.erase(same_instance);
      change->write.delete_members.emplace_back(g.record.group_id, old_id);
      moved.record.member_id = id;
      for (const auto& [tp, since] : moved.record.owned) g.owner[tp] = id;
      auto target = g.record.target.extract(old_id);
      if (!target.empty()) {
        target.key() = id;
        g.record.target.insert(std::move(target));
      }
      change->group_dirty = true;
      m = &g.members.emplace(id, std::move(moved)).first->second;
    } else {
      m = &g.members[id];
      m->record.group_id = g.record.group_id;
      m->record.member_id = id;
      m->record.instance_id = in.instance_id;
      m->record.session_timeout = in.session_timeout.value_or(options_.default_session_timeout);
      m->record.subscription = in.subscription;
      observer_->OnMembers(g.record.group_id, static_cast<int>(g.members.size()));
      RebalanceLocked(g, change);
    }
    if (in.session_timeout) m->record.session_timeout = *in.session_timeout;
    change->dirty_members.insert(id);
  }
  MemberRecord& r = m->record;
  if (!in.client_id.empty() && r.client_id != in.client_id) {
    r.client_id = in.client_id;
    change->dirty_members.insert(r.member_id);
  }
  if (!in.client_host.empty() && r.client_host != in.client_host) {
    r.client_host = in.client_host;
    change->dirty_members.insert(r.member_id);
  }
  if (!in.subscription.empty() && in.subscription != r.subscription) {
    r.subscription = in.subscription;
    change->dirty_members.insert(r.member_id);
    RebalanceLocked(g, change);
  }
  // Releases: a partition being revoked that the member no longer lists is free, unless the
  // heartbeat is older than the grant (a delayed retry must not release what came after it).
  for (auto it = r.revoking.begin(); it != r.revoking.end();) {
    if (in.owned.contains(*it) || in.member_epoch < r.owned.at(*it)) {
      ++it;
      continue;
    }
    r.owned.erase(*it);
    g.owner.erase(*it);
    it = r.revoking.erase(it);
    change->dirty_members.insert(r.member_id);
  }
  // The release deadline covers one round of revocations, not every later one.
  if (r.revoking.empty()) m->revoke_deadline.reset();
  // Reset notices are done once the member heartbeats at the epoch that carried them.
  if (!r.resets.empty() && in.member_epoch >= r.resets_epoch) {
    r.resets.clear();
    change->dirty_members.insert(r.member_id);
  }
  ReconcileLocked(g, *m, now, change);
  m->deadline = now + r.session_timeout;
  m->last_heartbeat = now;

  HeartbeatOutput out;
  out.member_id = r.member_id;
  out.member_epoch = r.epoch;
  out.group_epoch = g.record.epoch;
  out.heartbeat_interval = std::min(options_.heartbeat_interval, r.session_timeout / 3);
  for (const auto& [tp, since] : r.owned) {
    if (!r.revoking.contains(tp)) out.assignment.insert(tp);
  }
  out.pending = PendingLocked(g, *m);
  out.resets = r.resets;
  return out;
}

absl::Status GroupCoordinator::Leave(const std::string& group_id, const std::string& member_id) {
  CONDUIT_RETURN_IF_ERROR(ValidateId("member id", member_id));
  auto found = ExistingGroup(group_id);
  if (!found.ok()) return found.status();
  CONDUIT_RETURN_IF_ERROR(log_.health());
  Group& g = **found;
  std::shared_ptr<Waiter> waiter;
  {
    absl::MutexLock lock(&g.mu);
    Change change;
    ExpireLocked(g, clock_->Now(), &change);
    if (g.deleted || !g.members.contains(member_id)) {
      (void)SubmitLocked(g, std::move(change));
      return absl::NotFoundError(
          absl::StrCat("member '", member_id, "' is not in group '", group_id, "'"));
    }
    RemoveMemberLocked(g, member_id, &change);
    RebalanceLocked(g, &change);
    waiter = SubmitLocked(g, std::move(change));
  }
  return Wait(waiter);
}

void GroupCoordinator::ExpireLocked(Group& g, absl::Time now, Change* change) {
  std::vector<std::string> expired;
  for (const auto& [id, m] : g.members) {
    if (m.deadline <= now || (m.revoke_deadline && *m.revoke_deadline <= now)) {
      expired.push_back(id);
    }
  }
  for (const std::string& id : expired) RemoveMemberLocked(g, id, change);
  if (!expired.empty()) RebalanceLocked(g, change);
}

void GroupCoordinator::RemoveMemberLocked(Group& g, const std::string& member_id,
                                          Change* change) {
  auto it = g.members.find(member_id);
  if (it == g.members.end()) return;
  for (const auto& [tp, since] : it->second.record.owned) g.owner.erase(tp);
  g.members.erase(it);
  g.record.target.erase(member_id);
  change->dirty_members.erase(member_id);
  change->write.delete_members.emplace_back(g.record.group_id, member_id);
  change->group_dirty = true;
  observer_->OnMembers(g.record.group_id, static_cast<int>(g.members.size()));
}

void GroupCoordinator::RebalanceLocked(Group& g, Change* change) {
  ++g.record.epoch;
  change->group_dirty = true;
  std::vector<AssignorMember> members;
  for (const auto& [id, m] : g.members) members.push_back({id, m.record.subscription});
  g.record.partition_counts = CountsForLocked(g);
  Assignment target = ComputeAssignment(members, g.record.partition_counts, g.record.target);
  if (target != g.record.target) {
    ++g.record.rebalances;
    observer_->OnRebalance(g.record.group_id);
  }
  g.record.target = std::move(target);
}

void GroupCoordinator::ReconcileLocked(Group& g, Member& m, absl::Time now, Change* change) {
  static const PartitionSet kNone;
  auto t = g.record.target.find(m.record.member_id);
  const PartitionSet& target = t == g.record.target.end() ? kNone : t->second;
  MemberRecord& r = m.record;
  bool changed = false;
  for (const auto& [tp, since] : r.owned) {
    if (!target.contains(tp) && r.revoking.insert(tp).second) changed = true;
  }
  for (auto it = r.revoking.begin(); it != r.revoking.end();) {
    if (target.contains(*it)) {  // wanted back before it was released
      it = r.revoking.erase(it);
      changed = true;
    } else {
      ++it;
    }
  }
  if (r.revoking.empty()) {
    m.revoke_deadline.reset();
    if (r.epoch != g.record.epoch) {
      r.epoch = g.record.epoch;
      changed = true;
    }
    for (const TopicPartition& tp : target) {
      if (r.owned.contains(tp) || g.owner.contains(tp)) continue;
      r.owned[tp] = g.record.epoch;
      g.owner[tp] = r.member_id;
      changed = true;
    }
  } else if (!m.revoke_deadline) {
    // A member that keeps heartbeating but never releases is fenced like a silent one.
    m.revoke_deadline = now + r.session_timeout;
  }
  if (changed) change->dirty_members.insert(r.member_id);
}

PartitionSet GroupCoordinator::PendingLocked(Group& g, const Member& m) {
  PartitionSet pending;
  auto t = g.record.target.find(m.record.member_id);
  if (t == g.record.target.end()) return pending;
  for (const TopicPartition& tp : t->second) {
    if (!m.record.owned.contains(tp)) pending.insert(tp);
  }
  return pending;
}

GroupState GroupCoordinator::StateLocked(Group& g) {
  if (g.members.empty()) return GroupState::kEmpty;
  for (const auto& [id, m] : g.members) {
    if (m.record.epoch != g.record.epoch || !m.record.revoking.empty() ||
        !PendingLocked(g, m).empty()) {
      return GroupState::kReconciling;
    }
  }
  return GroupState::kStable;
}

}  // namespace conduit::coordinator
