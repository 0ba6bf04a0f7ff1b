// Offsets: fenced commits, fetches, and resets with their audit trail.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/status/status_macros.h"
#include "services/coordinator/domain/group_coordinator.h"
#include "services/coordinator/domain/validation.h"

namespace conduit::coordinator {
namespace {

absl::Status ValidateCommit(const CommitInput& in) {
  CONDUIT_RETURN_IF_ERROR(ValidateId("group id", in.group_id));
  if (!in.member_id.empty()) {
    CONDUIT_RETURN_IF_ERROR(ValidateId("member id", in.member_id));
  } else {
    CONDUIT_RETURN_IF_ERROR(ValidateMemberlessEpoch(in.member_epoch));
  }
  if (in.entries.empty()) return absl::InvalidArgumentError("no offsets to commit");
  if (in.entries.size() > kMaxPartitionsPerRequest) {
    return absl::InvalidArgumentError(
        absl::StrCat(in.entries.size(), " offsets; the limit is ", kMaxPartitionsPerRequest));
  }
  PartitionSet seen;
  for (const CommitInput::Entry& e : in.entries) {
    CONDUIT_RETURN_IF_ERROR(ValidateId("topic", e.tp.topic));
    if (e.tp.partition < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("partition ", e.tp.partition, " of ", e.tp.topic, " is negative"));
    }
    if (e.offset < 0) {
      return absl::InvalidArgumentError(absl::StrCat("offset ", e.offset, " of ", e.tp.topic, "/",
                                                     e.tp.partition, " is negative"));
    }
    if (e.metadata.size() > kMaxMetadataBytes) {
      return absl::InvalidArgumentError(absl::StrCat("metadata of ", e.tp.topic, "/",
                                                     e.tp.partition, " is ", e.metadata.size(),
                                                     " bytes; the limit is ", kMaxMetadataBytes));
    }
    if (!seen.insert(e.tp).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(e.tp.topic, "/", e.tp.partition, " appears twice"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status GroupCoordinator::Commit(const CommitInput& in) {
  return Await<absl::Status>([&](auto done) { Commit(in, std::move(done)); });
}

void GroupCoordinator::Commit(const CommitInput& in, std::function<void(absl::Status)> done) {
  if (auto s = ValidateCommit(in); !s.ok()) return done(s);
  if (auto s = log_.health(); !s.ok()) return done(s);
  // The high watermark only grows, so checking it before taking the group's mutex is sound.
  CheckWithinLog(in.entries, [this, in, done = std::move(done)](absl::Status checked) {
    if (!checked.ok()) return done(checked);
    // Asking the broker may have taken long: a caller that gave up must not find it applied.
    if (clock_->Now() >= in.deadline) return done(DeadlinePassed());
    std::shared_ptr<Waiter> waiter;
    if (auto s = StartCommit(in, &waiter); !s.ok()) return done(s);
    GroupLog::Then(waiter, [this, group = in.group_id, done](absl::Status s) {
      if (s.ok()) observer_->OnCommit(group);
      done(s);
    });
  });
}

absl::Status GroupCoordinator::StartCommit(const CommitInput& in,
                                           std::shared_ptr<Waiter>* queued) {
  GroupPtr g = in.member_id.empty() ? FindOrCreateGroup(in.group_id) : FindGroup(in.group_id);
  if (!g) {  // (not counted per group: the label would take any id a caller sends)
    return absl::NotFoundError(absl::StrCat("group '", in.group_id, "' does not exist"));
  }
  std::string rejected;  // the reason label, when rejected
  absl::Status result;
  {
    absl::MutexLock lock(&g->mu);
    if (g->deleted) return DeletedMeanwhile();
    const absl::Time now = clock_->Now();
    GroupChange change;
    g->membership.Expire(now, &change);
    result = OffsetBook::CheckFence(in, g->membership, &rejected);
    if (result.ok()) g->offsets.Commit(in, now, &change);
    *queued = SubmitLocked(*g, std::move(change));
  }
  if (!rejected.empty()) observer_->OnCommitRejected(in.group_id, rejected);
  return result;
}

absl::StatusOr<std::vector<OffsetRecord>> GroupCoordinator::FetchOffsets(
    const std::string& group_id, const std::vector<std::string>& topics) {
  auto found = ExistingGroup(group_id);
  if (!found.ok()) return found.status();
  // After a failed write memory may hold what the disk does not: show nothing.
  CONDUIT_RETURN_IF_ERROR(log_.failure());
  std::vector<OffsetRecord> out;
  std::shared_ptr<Waiter> barrier;
  {
    absl::MutexLock lock(&(*found)->mu);
    out = (*found)->offsets.Fetch(topics);
    barrier = BarrierLocked(**found);
  }
  CONDUIT_RETURN_IF_ERROR(GroupLog::Wait(barrier));
  return out;
}

namespace {

std::string SpecText(const ResetInput& in) {
  switch (in.kind) {
    case ResetInput::Kind::kEarliest:
      return "to_earliest";
    case ResetInput::Kind::kLatest:
      return "to_latest";
    case ResetInput::Kind::kTimestamp:
      return absl::StrCat("to_timestamp ", absl::FormatTime(absl::RFC3339_full, in.timestamp,
                                                            absl::UTCTimeZone()));
    case ResetInput::Kind::kOffset:
      return absl::StrCat("to_offset ", in.value);
    case ResetInput::Kind::kShift:
      return absl::StrCat("shift_by ", in.value);
  }
  return "";
}

absl::Status ValidateReset(const ResetInput& in) {
  CONDUIT_RETURN_IF_ERROR(ValidateId("group id", in.group_id));
  CONDUIT_RETURN_IF_ERROR(ValidateId("topic", in.topic));
  if (in.execute && in.actor.empty()) {
    return absl::InvalidArgumentError("an executed reset needs an actor (who asks), for the audit");
  }
  if (in.actor.size() > kMaxIdLength || in.reason.size() > kMaxMetadataBytes) {
    return absl::InvalidArgumentError(absl::StrCat("actor is limited to ", kMaxIdLength,
                                                   " bytes and reason to ", kMaxMetadataBytes));
  }
  return absl::OkStatus();
}

// A timestamp before what retention kept cannot be replayed: refused rather than silently
// moved to the log start.
absl::Status CheckRetained(const ResetInput& in, int32_t p, const PartitionMarks& m) {
  if (m.log_start > 0 && m.oldest_append_time && in.timestamp < *m.oldest_append_time) {
    return absl::OutOfRangeError(absl::StrCat(
        in.topic, "/", p, " no longer has records from ",
        absl::FormatTime(absl::RFC3339_full, in.timestamp, absl::UTCTimeZone()),
        ": retention removed everything before offset ", m.log_start, " (appended ",
        absl::FormatTime(absl::RFC3339_full, *m.oldest_append_time, absl::UTCTimeZone()),
        "); reset to_earliest to replay what is left; nothing was changed"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<int32_t>> GroupCoordinator::ResetPartitions(
    const ResetInput& in, const std::vector<PartitionMarks>& marks,
    absl::flat_hash_map<int32_t, int64_t>* at_time) {
  std::vector<int32_t> partitions = in.partitions;
  if (partitions.empty()) {
    for (const PartitionMarks& p : marks) partitions.push_back(p.partition);
  }
  std::sort(partitions.begin(), partitions.end());
  if (std::adjacent_find(partitions.begin(), partitions.end()) != partitions.end()) {
    return absl::InvalidArgumentError("a partition appears twice");
  }
  for (int32_t p : partitions) {
    if (p < 0 || p >= static_cast<int32_t>(marks.size())) {
      return absl::InvalidArgumentError(absl::StrCat("topic '", in.topic, "' has ", marks.size(),
                                                     " partitions; there is no partition ", p));
    }
    const PartitionMarks& m = marks[p];
    if (in.kind == ResetInput::Kind::kOffset &&
        (in.value < m.log_start || in.value > m.high_watermark)) {
      return absl::OutOfRangeError(absl::StrCat("offset ", in.value, " is outside ", in.topic, "/",
                                                p, " [", m.log_start, ", ", m.high_watermark,
                                                "]; nothing was changed"));
    }
    if (in.kind == ResetInput::Kind::kTimestamp) {
      CONDUIT_RETURN_IF_ERROR(CheckRetained(in, p, m));
      CONDUIT_ASSIGN_OR_RETURN((*at_time)[p], topics_->OffsetForTime(in.topic, p, in.timestamp));
    }
  }
  return partitions;
}

absl::StatusOr<ResetOutput> GroupCoordinator::ResetOffsets(const ResetInput& in) {
  CONDUIT_RETURN_IF_ERROR(ValidateReset(in));
  CONDUIT_RETURN_IF_ERROR(log_.health());
  // Ask the broker first (outside any mutex): the log's bounds, and offsets for a time.
  CONDUIT_ASSIGN_OR_RETURN(std::vector<PartitionMarks> marks, topic_cache_.Fresh(in.topic));
  if (in.execute && clock_->Now() >= in.deadline) return DeadlinePassed();
  absl::flat_hash_map<int32_t, int64_t> at_time;
  CONDUIT_ASSIGN_OR_RETURN(std::vector<int32_t> partitions, ResetPartitions(in, marks, &at_time));
  GroupPtr g = in.execute ? FindOrCreateGroup(in.group_id) : FindGroup(in.group_id);
  const bool ephemeral = !g;
  if (ephemeral) g = NewGroup(in.group_id);  // a dry run on a group that does not exist
  ResetOutput out;
  std::shared_ptr<Waiter> waiter;
  {
    absl::MutexLock lock(&g->mu);
    if (g->deleted) return DeletedMeanwhile();
    const absl::Time now = clock_->Now();
    GroupChange change;
    g->membership.Expire(now, &change);
    out.partitions = g->offsets.PlanReset(in, partitions, marks, at_time, g->membership);
    if (in.execute) {
      std::vector<TopicPartition> reset;
      for (const PartitionReset& r : out.partitions) reset.push_back({in.topic, r.partition});
      const GroupEpoch epoch = g->membership.FenceForReset(reset, &change);
      AuditRecord audit{in.group_id, g->membership.TakeAuditId(&change),
                        now,         "reset_offsets",
                        in.actor,    in.peer,
                        in.reason,   SpecText(in),
                        in.topic,    out.partitions,
                        epoch};
      g->offsets.ApplyReset(in, out.partitions, epoch, now, &change);
      for (const TopicPartition& tp : reset) g->lag.Forget(tp);  // rates from before mean nothing
      change.write.put_audit.push_back(audit);
      out.executed = true;
      out.audit_id = audit.id;
    }
    out.group_epoch = g->membership.record().epoch;
    if (!ephemeral) waiter = SubmitLocked(*g, std::move(change));
  }
  CONDUIT_RETURN_IF_ERROR(GroupLog::Wait(waiter));
  return out;
}

}  // namespace conduit::coordinator
