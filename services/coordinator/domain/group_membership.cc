#include "services/coordinator/domain/group_membership.h"

#include <algorithm>
#include <utility>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "services/coordinator/domain/assignor.h"

namespace conduit::coordinator {
namespace {

std::string NewMemberId() {
  static absl::Mutex mu(absl::kConstInit);
  static absl::BitGen* gen = new absl::BitGen();
  absl::MutexLock lock(&mu);
  return absl::StrFormat("m-%016x%08x", absl::Uniform<uint64_t>(*gen),
                         absl::Uniform<uint32_t>(*gen));
}

}  // namespace

GroupMembership::GroupMembership(const MembershipContext* context, std::string group_id,
                                 absl::Time created)
    : context_(context) {
  record_.group_id = std::move(group_id);
  record_.created = created;
}

void GroupMembership::RestoreMember(MemberRecord record, absl::Time now) {
  for (const auto& [tp, since] : record.owned) owner_[tp] = record.member_id;
  Member& m = members_[record.member_id];
  m.deadline = now + record.session_timeout;
  m.last_heartbeat = now;
  if (!record.revoking.empty()) m.revoke_deadline = m.deadline;
  m.record = std::move(record);
}

const Member* GroupMembership::Find(const std::string& member_id) const {
  auto it = members_.find(member_id);
  return it == members_.end() ? nullptr : &it->second;
}

GroupState GroupMembership::State() const {
  if (members_.empty()) return GroupState::kEmpty;
  for (const auto& [id, m] : members_) {
    if (m.record.epoch != ReconciledTo(record_.epoch) || !m.record.revoking.empty() ||
        !Pending(m).empty()) {
      return GroupState::kReconciling;
    }
  }
  return GroupState::kStable;
}

PartitionSet GroupMembership::Pending(const Member& m) const {
  PartitionSet pending;
  auto t = record_.target.find(m.record.member_id);
  if (t == record_.target.end()) return pending;
  for (const TopicPartition& tp : t->second) {
    if (!m.record.owned.contains(tp)) pending.insert(tp);
  }
  return pending;
}

absl::btree_set<std::string> GroupMembership::SubscribedTopics() const {
  absl::btree_set<std::string> topics;
  for (const auto& [id, m] : members_) {
    topics.insert(m.record.subscription.begin(), m.record.subscription.end());
  }
  return topics;
}

GroupListing GroupMembership::Listing() const {
  return GroupListing{record_.group_id, State(), record_.epoch, static_cast<int>(members_.size())};
}

void GroupMembership::Describe(GroupDescription* out) const {
  out->group_id = record_.group_id;
  out->state = State();
  out->epoch = record_.epoch;
  out->rebalances = record_.rebalances;
  for (const auto& [id, m] : members_) {
    out->members.push_back(MemberView{m.record, Pending(m), m.last_heartbeat});
  }
}

void GroupMembership::Expire(absl::Time now, GroupChange* change) {
  std::vector<std::string> expired;
  for (const auto& [id, m] : members_) {
    if (m.deadline <= now || (m.revoke_deadline && *m.revoke_deadline <= now)) {
      expired.push_back(id);
    }
  }
  for (const std::string& id : expired) Remove(id, change);
  if (!expired.empty()) Rebalance(change);
}

absl::StatusOr<HeartbeatOutput> GroupMembership::Heartbeat(const HeartbeatInput& in, absl::Time now,
                                                           GroupChange* change) {
  absl::StatusOr<Member*> found = FindOrJoin(in, change);
  if (!found.ok()) return found.status();
  Member& m = **found;
  UpdateFields(m, in, change);
  ApplyReleases(m, in, change);
  // Reset notices are done once the member heartbeats at the epoch that carried them.
  MemberRecord& r = m.record;
  if (!r.resets.empty() && Reached(in.member_epoch, r.resets_epoch)) {
    r.resets.clear();
    change->dirty_members.insert(r.member_id);
  }
  Reconcile(m, now, change);
  m.deadline = now + r.session_timeout;
  m.last_heartbeat = now;
  return Answer(m);
}

absl::StatusOr<Member*> GroupMembership::FindOrJoin(const HeartbeatInput& in, GroupChange* change) {
  auto found = in.member_id.empty() ? members_.end() : members_.find(in.member_id);
  if (found != members_.end()) {
    if (in.member_epoch > found->second.record.epoch) {
      return absl::FailedPreconditionError(
          absl::StrFormat("member_epoch %d is ahead of member '%s' (epoch %d); rejoin with "
                          "member_epoch 0",
                          in.member_epoch, in.member_id, found->second.record.epoch));
    }
    return &found->second;
  }
  if (in.member_epoch != kJoiningEpoch) {
    return absl::NotFoundError(absl::StrCat(
        "member '", in.member_id, "' is not in group '", in.group_id,
        "' (its session expired, it left, or its instance id was taken over); rejoin with "
        "member_epoch 0"));
  }
  // A join. A current member with the same instance id hands over its place (static
  // membership): same epoch, same partitions, no rebalance.
  const std::string id = in.member_id.empty() ? NewMemberId() : in.member_id;
  auto same_instance = in.instance_id.empty()
                           ? members_.end()
                           : std::find_if(members_.begin(), members_.end(), [&](auto& e) {
                               return e.second.record.instance_id == in.instance_id;
                             });
  Member* m;
  if (same_instance != members_.end()) {
    m = TakeOver(same_instance->first, id, change);
  } else {
    m = &members_[id];
    m->record.group_id = record_.group_id;
    m->record.member_id = id;
    m->record.instance_id = in.instance_id;
    m->record.session_timeout =
        in.session_timeout.value_or(context_->options->default_session_timeout);
    m->record.subscription = in.subscription;
    CountMembers();
    Rebalance(change);
  }
  if (in.session_timeout) m->record.session_timeout = *in.session_timeout;
  change->dirty_members.insert(id);
  return m;
}

// `old_id` by value: a btree's extract frees the slot a reference to the key would point into.
Member* GroupMembership::TakeOver(std::string old_id, const std::string& id, GroupChange* change) {
  auto node = members_.extract(old_id);
  Member moved = std::move(node.mapped());
  change->write.delete_members.emplace_back(record_.group_id, old_id);
  moved.record.member_id = id;
  for (const auto& [tp, since] : moved.record.owned) owner_[tp] = id;
  auto target = record_.target.extract(old_id);
  if (!target.empty()) {
    target.key() = id;
    record_.target.insert(std::move(target));
  }
  change->group_dirty = true;
  return &members_.emplace(id, std::move(moved)).first->second;
}

void GroupMembership::UpdateFields(Member& m, const HeartbeatInput& in, GroupChange* change) {
  MemberRecord& r = m.record;
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
    Rebalance(change);
  }
}

void GroupMembership::ApplyReleases(Member& m, const HeartbeatInput& in, GroupChange* change) {
  // A partition being revoked that the member no longer lists is free, unless the heartbeat is
  // older than the grant (a delayed retry must not release what came after it).
  MemberRecord& r = m.record;
  for (auto it = r.revoking.begin(); it != r.revoking.end();) {
    if (in.owned.contains(*it) || !Reached(in.member_epoch, r.owned.at(*it))) {
      ++it;
      continue;
    }
    r.owned.erase(*it);
    owner_.erase(*it);
    it = r.revoking.erase(it);
    change->dirty_members.insert(r.member_id);
  }
  // The release deadline covers one round of revocations, not every later one.
  if (r.revoking.empty()) m.revoke_deadline.reset();
}

HeartbeatOutput GroupMembership::Answer(const Member& m) const {
  const MemberRecord& r = m.record;
  HeartbeatOutput out;
  out.member_id = r.member_id;
  out.member_epoch = r.epoch;
  out.group_epoch = record_.epoch;
  out.heartbeat_interval = std::min(context_->options->heartbeat_interval, r.session_timeout / 3);
  for (const auto& [tp, since] : r.owned) {
    if (!r.revoking.contains(tp)) out.assignment.insert(tp);
  }
  out.pending = Pending(m);
  out.resets = r.resets;
  return out;
}

absl::Status GroupMembership::Leave(const std::string& member_id, GroupChange* change) {
  if (!members_.contains(member_id)) {
    return absl::NotFoundError(
        absl::StrCat("member '", member_id, "' is not in group '", record_.group_id, "'"));
  }
  Remove(member_id, change);
  Rebalance(change);
  return absl::OkStatus();
}

void GroupMembership::RebalanceIfCountsChanged(GroupChange* change) {
  if (!members_.empty() && Counts() != record_.partition_counts) Rebalance(change);
}

GroupEpoch GroupMembership::FenceForReset(const std::vector<TopicPartition>& reset,
                                          GroupChange* change) {
  const GroupEpoch epoch = record_.epoch = NextGroupEpoch(record_.epoch);
  change->group_dirty = true;
  for (const TopicPartition& tp : reset) {
    auto o = owner_.find(tp);
    if (o == owner_.end()) continue;
    MemberRecord& owner = members_.at(o->second).record;
    owner.owned[tp] = epoch;
    owner.epoch = ReconciledTo(epoch);
    owner.resets.insert(tp);
    owner.resets_epoch = epoch;
    change->dirty_members.insert(owner.member_id);
  }
  return epoch;
}

uint64_t GroupMembership::TakeAuditId(GroupChange* change) {
  change->group_dirty = true;
  return record_.next_audit_id++;
}

void GroupMembership::Remove(const std::string& member_id, GroupChange* change) {
  auto it = members_.find(member_id);
  if (it == members_.end()) return;
  for (const auto& [tp, since] : it->second.record.owned) owner_.erase(tp);
  members_.erase(it);
  record_.target.erase(member_id);
  change->dirty_members.erase(member_id);
  change->write.delete_members.emplace_back(record_.group_id, member_id);
  change->group_dirty = true;
  CountMembers();
}

void GroupMembership::Rebalance(GroupChange* change) {
  record_.epoch = NextGroupEpoch(record_.epoch);
  change->group_dirty = true;
  std::vector<AssignorMember> members;
  for (const auto& [id, m] : members_) members.push_back({id, m.record.subscription});
  record_.partition_counts = Counts();
  Assignment target = ComputeAssignment(members, record_.partition_counts, record_.target);
  if (target != record_.target) {
    ++record_.rebalances;
    context_->observer->OnRebalance(record_.group_id);
  }
  record_.target = std::move(target);
}

void GroupMembership::Reconcile(Member& m, absl::Time now, GroupChange* change) {
  static const PartitionSet kNone;
  auto t = record_.target.find(m.record.member_id);
  const PartitionSet& target = t == record_.target.end() ? kNone : t->second;
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
    if (r.epoch != ReconciledTo(record_.epoch)) {
      r.epoch = ReconciledTo(record_.epoch);
      changed = true;
    }
    for (const TopicPartition& tp : target) {
      if (r.owned.contains(tp) || owner_.contains(tp)) continue;
      r.owned[tp] = record_.epoch;
      owner_[tp] = r.member_id;
      changed = true;
    }
  } else if (!m.revoke_deadline) {
    // A member that keeps heartbeating but never releases is fenced like a silent one.
    m.revoke_deadline = now + r.session_timeout;
  }
  if (changed) change->dirty_members.insert(r.member_id);
}

absl::btree_map<std::string, int32_t> GroupMembership::Counts() const {
  absl::btree_map<std::string, int32_t> out;
  for (const std::string& topic : SubscribedTopics()) {
    if (auto count = context_->cached_count(topic)) {
      out[topic] = *count;
    } else if (auto old = record_.partition_counts.find(topic);
               old != record_.partition_counts.end()) {
      out[topic] = old->second;
    }
  }
  return out;
}

void GroupMembership::CountMembers() const {
  context_->observer->OnMembers(record_.group_id, static_cast<int>(members_.size()));
}

}  // namespace conduit::coordinator
