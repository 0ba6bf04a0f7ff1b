// Membership calls: validation, then the group's GroupMembership (group_membership.h) under its
// mutex, then the durable write.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status/status_macros.h"
#include "services/coordinator/domain/group_coordinator.h"
#include "services/coordinator/domain/validation.h"

namespace conduit::coordinator {
namespace {

absl::Status ValidateHeartbeat(const HeartbeatInput& in, const CoordinatorOptions& options) {
  CONDUIT_RETURN_IF_ERROR(ValidateId("group id", in.group_id));
  if (!in.member_id.empty()) {
    CONDUIT_RETURN_IF_ERROR(ValidateId("member id", in.member_id));
  }
  if (!in.instance_id.empty()) {
    CONDUIT_RETURN_IF_ERROR(ValidateId("instance id", in.instance_id));
  }
  if (in.member_epoch < kJoiningEpoch) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "member_epoch %d is negative; use LeaveGroup to leave the group", in.member_epoch));
  }
  if (in.member_epoch > kJoiningEpoch && in.member_id.empty()) {
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
  if (in.member_epoch == kJoiningEpoch && in.subscription.empty()) {
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
  GroupLog::Then(waiter,
                 [this, out = std::move(out), done = std::move(done)](absl::Status s) mutable {
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
  if (in.member_epoch == kJoiningEpoch) {
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
  const absl::Time now = clock_->Now();
  GroupChange change;
  g->membership.Expire(now, &change);
  absl::StatusOr<HeartbeatOutput> out = g->membership.Heartbeat(in, now, &change);
  *queued = SubmitLocked(*g, std::move(change));
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
    GroupChange change;
    g.membership.Expire(clock_->Now(), &change);
    absl::Status left = g.deleted
                            ? absl::NotFoundError(absl::StrCat(
                                  "member '", member_id, "' is not in group '", group_id, "'"))
                            : g.membership.Leave(member_id, &change);
    if (!left.ok()) {
      (void)SubmitLocked(g, std::move(change));
      return left;
    }
    waiter = SubmitLocked(g, std::move(change));
  }
  return GroupLog::Wait(waiter);
}

}  // namespace conduit::coordinator
