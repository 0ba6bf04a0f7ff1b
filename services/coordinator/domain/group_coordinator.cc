#include "services/coordinator/domain/group_coordinator.h"

#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/status/status_macros.h"
#include "services/coordinator/domain/validation.h"

namespace conduit::coordinator {

const char* GroupStateName(GroupState state) {
  switch (state) {
    case GroupState::kEmpty:
      return "EMPTY";
    case GroupState::kStable:
      return "STABLE";
    case GroupState::kReconciling:
      return "RECONCILING";
  }
  return "UNKNOWN";
}

GroupCoordinator::GroupCoordinator(CoordinatorStore* store, TopicSource* topics,
                                   const time::Clock* clock, CoordinatorOptions options,
                                   CoordinatorObserver* observer)
    : store_(store),
      topics_(topics),
      clock_(clock),
      options_(options),
      observer_(observer ? observer : &default_observer_),
      topic_cache_(topics, clock, options.topic_refresh),
      membership_context_{
          &options_, observer_,
          [this](const std::string& topic) { return topic_cache_.CachedCount(topic); }},
      log_(store, clock) {}

// Answers still on their way from the broker continue commits into the commit log: wait for
// them before the log drains and the rest goes.
GroupCoordinator::~GroupCoordinator() { topic_cache_.Quiesce(); }

absl::Status GroupCoordinator::Recover() {
  auto state = store_->Load();
  if (!state.ok()) return state.status();
  const absl::Time now = clock_->Now();
  absl::MutexLock lock(&mu_);
  for (GroupRecord& record : state->groups) {
    GroupPtr g = NewGroup(record.group_id);
    absl::MutexLock glock(&g->mu);
    g->persisted = true;
    g->membership.RestoreRecord(std::move(record));
    groups_[g->membership.record().group_id] = g;
  }
  for (MemberRecord& record : state->members) {
    auto it = groups_.find(record.group_id);
    if (it == groups_.end()) continue;  // cannot happen: a group is deleted with its members
    absl::MutexLock glock(&it->second->mu);
    it->second->membership.RestoreMember(std::move(record), now);
  }
  for (OffsetRecord& record : state->offsets) {
    auto it = groups_.find(record.group_id);
    if (it == groups_.end()) continue;
    absl::MutexLock glock(&it->second->mu);
    it->second->offsets.Restore(std::move(record));
  }
  for (auto& [id, g] : groups_) {
    absl::MutexLock glock(&g->mu);
    observer_->OnMembers(id, static_cast<int>(g->membership.members().size()));
  }
  return absl::OkStatus();
}

GroupCoordinator::GroupPtr GroupCoordinator::NewGroup(const std::string& group_id) const {
  return std::make_shared<Group>(&membership_context_, group_id, clock_->Now(),
                                 options_.lag_window);
}

GroupCoordinator::GroupPtr GroupCoordinator::FindGroup(const std::string& group_id) {
  absl::MutexLock lock(&mu_);
  auto it = groups_.find(group_id);
  return it == groups_.end() ? nullptr : it->second;
}

GroupCoordinator::GroupPtr GroupCoordinator::FindOrCreateGroup(const std::string& group_id) {
  absl::MutexLock lock(&mu_);
  GroupPtr& g = groups_[group_id];
  if (!g) g = NewGroup(group_id);
  return g;
}

absl::StatusOr<GroupCoordinator::GroupPtr> GroupCoordinator::ExistingGroup(
    const std::string& group_id) {
  CONDUIT_RETURN_IF_ERROR(ValidateId("group id", group_id));
  GroupPtr g = FindGroup(group_id);
  if (!g) return absl::NotFoundError(absl::StrCat("group '", group_id, "' does not exist"));
  return g;
}

std::shared_ptr<GroupCoordinator::Waiter> GroupCoordinator::SubmitLocked(Group& g,
                                                                         GroupChange change) {
  if (!g.persisted) {
    change.group_dirty = true;
    g.persisted = true;
  }
  if (change.group_dirty) change.write.put_groups.push_back(g.membership.record());
  for (const std::string& id : change.dirty_members) {
    if (const Member* m = g.membership.Find(id)) change.write.put_members.push_back(m->record);
  }
  if (change.write.empty()) return BarrierLocked(g);
  // The counter, owned by the group: the write keeps the group alive until it is durable.
  return log_.Submit(std::move(change.write),
                     std::shared_ptr<std::atomic<int>>(g.shared_from_this(), &g.inflight));
}

void GroupCoordinator::ExpireLocked(Group& g) {
  GroupChange change;
  g.membership.Expire(clock_->Now(), &change);
  (void)SubmitLocked(g, std::move(change));  // expiry is recovered anyway after a crash
}

std::shared_ptr<GroupCoordinator::Waiter> GroupCoordinator::BarrierLocked(Group& g) {
  if (g.inflight.load() == 0) return nullptr;
  return log_.Submit(CoordinatorWrite{});
}

std::vector<GroupListing> GroupCoordinator::List() {
  // (Listing shows group states, not offsets; it needs no barrier.)
  std::vector<GroupPtr> groups;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [id, g] : groups_) groups.push_back(g);
  }
  std::vector<GroupListing> out;
  for (GroupPtr& g : groups) {
    absl::MutexLock lock(&g->mu);
    if (g->deleted) continue;
    ExpireLocked(*g);
    out.push_back(g->membership.Listing());
  }
  return out;
}

absl::Status GroupCoordinator::DeleteGroup(const std::string& group_id) {
  auto found = ExistingGroup(group_id);
  if (!found.ok()) return found.status();
  GroupPtr g = *found;
  std::shared_ptr<Waiter> waiter;
  {
    CONDUIT_RETURN_IF_ERROR(log_.health());
    absl::MutexLock lock(&mu_);  // nobody may find the group while it goes
    absl::MutexLock glock(&g->mu);
    if (g->deleted) return absl::NotFoundError(absl::StrCat("group '", group_id, "' does not exist"));
    GroupChange change;
    g->membership.Expire(clock_->Now(), &change);
    if (const size_t members = g->membership.members().size(); members > 0) {
      (void)SubmitLocked(*g, std::move(change));
      return absl::FailedPreconditionError(absl::StrCat(
          "group '", group_id, "' has ", members,
          " active members; stop them (or wait for their sessions to expire) before deleting it"));
    }
    change.write.delete_groups.push_back(group_id);
    g->deleted = true;
    groups_.erase(group_id);
    waiter = log_.Submit(std::move(change.write));
  }
  observer_->OnGroupDeleted(group_id);
  return GroupLog::Wait(waiter);
}

absl::StatusOr<std::vector<AuditRecord>> GroupCoordinator::ListAudit(const std::string& group_id,
                                                                     uint64_t before_id,
                                                                     int limit) {
  auto found = ExistingGroup(group_id);
  if (!found.ok()) return found.status();
  std::shared_ptr<Waiter> barrier;
  {
    absl::MutexLock lock(&(*found)->mu);
    barrier = BarrierLocked(**found);
  }
  CONDUIT_RETURN_IF_ERROR(GroupLog::Wait(barrier));
  return store_->ListAudit(group_id, before_id, limit);
}

namespace {

absl::Status WithinMarks(const CommitInput::Entry& e, const std::vector<PartitionMarks>& marks) {
  if (e.tp.partition >= static_cast<int32_t>(marks.size())) {
    return absl::InvalidArgumentError(absl::StrCat("topic '", e.tp.topic, "' has ", marks.size(),
                                                   " partitions; there is no partition ",
                                                   e.tp.partition));
  }
  const int64_t hwm = marks[e.tp.partition].high_watermark;
  if (e.offset > hwm) {
    return absl::OutOfRangeError(absl::StrCat("offset ", e.offset, " of ", e.tp.topic, "/",
                                              e.tp.partition, " is beyond the high watermark ",
                                              hwm));
  }
  return absl::OkStatus();
}

}  // namespace

void GroupCoordinator::CheckWithinLog(const std::vector<CommitInput::Entry>& entries,
                                      std::function<void(absl::Status)> done) {
  // One question per distinct topic; the last answer to arrive judges every entry.
  struct Pending {
    absl::Mutex mu;
    size_t left ABSL_GUARDED_BY(mu) = 0;
    absl::Status failed ABSL_GUARDED_BY(mu);
    absl::flat_hash_map<std::string, std::vector<PartitionMarks>> marks ABSL_GUARDED_BY(mu);
  };
  auto pending = std::make_shared<Pending>();
  absl::btree_set<std::string> topics;
  for (const CommitInput::Entry& e : entries) topics.insert(e.tp.topic);
  if (topics.empty()) return done(absl::OkStatus());
  {
    absl::MutexLock lock(&pending->mu);
    pending->left = topics.size();
  }
  auto judge = [entries, done = std::move(done)](Pending& p) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    if (!p.failed.ok()) return done(p.failed);
    for (const CommitInput::Entry& e : entries) {
      if (auto s = WithinMarks(e, p.marks.at(e.tp.topic)); !s.ok()) return done(s);
    }
    done(absl::OkStatus());
  };
  for (const std::string& topic : topics) {
    topic_cache_.FreshAsync(topic, [pending, topic, judge](auto marks) {
      {
        absl::MutexLock lock(&pending->mu);
        if (!marks.ok()) {
          if (pending->failed.ok()) pending->failed = marks.status();
        } else {
          pending->marks[topic] = *std::move(marks);
        }
        if (--pending->left > 0) return;
      }
      judge(*pending);  // every answer is in: nobody else touches `pending` now
    });
  }
}

std::vector<GroupCoordinator::GroupPtr> GroupCoordinator::AllGroups() {
  std::vector<GroupPtr> groups;
  absl::MutexLock lock(&mu_);
  for (auto& [id, g] : groups_) groups.push_back(g);
  return groups;
}

void GroupCoordinator::Sweep() {
  std::vector<GroupPtr> groups = AllGroups();
  // Refresh the partition counts of subscribed topics; a group whose target was computed with
  // other counts (a topic grew, appeared or went) rebalances.
  absl::btree_set<std::string> subscribed;
  for (GroupPtr& g : groups) {
    absl::MutexLock lock(&g->mu);
    subscribed.merge(g->membership.SubscribedTopics());
  }
  for (const std::string& topic : subscribed) (void)topic_cache_.Get(topic);
  topic_cache_.Evict(subscribed);
  for (GroupPtr& g : groups) {
    absl::MutexLock lock(&g->mu);
    if (g->deleted) continue;
    GroupChange change;
    g->membership.Expire(clock_->Now(), &change);
    g->membership.RebalanceIfCountsChanged(&change);
    (void)SubmitLocked(*g, std::move(change));
  }
}

void GroupCoordinator::SampleLag() {
  MarksMemo memo;  // one broker question per topic per pass, however many groups read it
  for (GroupPtr& g : AllGroups()) {
    GroupDescription unused;
    (void)ComputeLag(*g, &unused, &memo);  // a failed group's figures are simply not refreshed
  }
}

}  // namespace conduit::coordinator
