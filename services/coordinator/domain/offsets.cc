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

std::string Name(const TopicPartition& tp) { return absl::StrCat(tp.topic, "/", tp.partition); }

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
    Then(waiter, [this, group = in.group_id, done](absl::Status s) {
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
  std::shared_ptr<Waiter>& waiter = *queued;
  {
    absl::MutexLock lock(&g->mu);
    if (g->deleted) return DeletedMeanwhile();
    const absl::Time now = clock_->Now();
    Change change;
    ExpireLocked(*g, now, &change);
    if (in.member_id.empty()) {
      if (!g->members.empty()) {
        rejected = "not_member";
        result = absl::FailedPreconditionError(absl::StrCat(
            "group '", in.group_id, "' has ", g->members.size(),
            " active members: only a member may commit (give member_id and member_epoch)"));
      }
    } else if (auto it = g->members.find(in.member_id); it == g->members.end()) {
      rejected = "unknown_member";
      result = absl::NotFoundError(absl::StrCat(
          "member '", in.member_id, "' is not in group '", in.group_id,
          "' (its session expired or it left); its partitions may belong to another member now"));
    } else {
      const MemberRecord& r = it->second.record;
      if (in.member_epoch > r.epoch) {
        rejected = "stale_epoch";
        result = absl::FailedPreconditionError(absl::StrCat(
            "member_epoch ", in.member_epoch, " is ahead of the member's epoch ", r.epoch));
      }
      for (const CommitInput::Entry& e : in.entries) {
        if (!result.ok()) break;
        auto owned = r.owned.find(e.tp);
        if (owned == r.owned.end()) {
          rejected = "not_owner";
          result = absl::FailedPreconditionError(absl::StrCat(
              "member '", in.member_id, "' does not own ", Name(e.tp), " (epoch ", r.epoch,
              "); nothing was committed"));
        } else if (in.member_epoch < owned->second) {
          rejected = "stale_epoch";
          result = absl::FailedPreconditionError(absl::StrCat(
              "member_epoch ", in.member_epoch, " is older than epoch ", owned->second,
              " at which ", Name(e.tp),
              " was (re)assigned or reset; fetch offsets and commit with the current epoch; "
              "nothing was committed"));
        }
      }
    }
    if (result.ok()) {
      for (const CommitInput::Entry& e : in.entries) {
        OffsetRecord record{in.group_id, e.tp,         e.offset,       e.metadata,
                            now,         in.member_id, in.member_epoch};
        change.write.put_offsets.push_back(record);
        g->offsets[e.tp] = std::move(record);
      }
    }
    waiter = SubmitLocked(*g, std::move(change));
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
    for (const auto& [tp, record] : (*found)->offsets) {
      if (topics.empty() || std::find(topics.begin(), topics.end(), tp.topic) != topics.end()) {
        out.push_back(record);
      }
    }
    barrier = BarrierLocked(**found);
  }
  CONDUIT_RETURN_IF_ERROR(Wait(barrier));
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

}  // namespace

absl::StatusOr<ResetOutput> GroupCoordinator::ResetOffsets(const ResetInput& in) {
  CONDUIT_RETURN_IF_ERROR(ValidateId("group id", in.group_id));
  CONDUIT_RETURN_IF_ERROR(ValidateId("topic", in.topic));
  if (in.execute && in.actor.empty()) {
    return absl::InvalidArgumentError("an executed reset needs an actor (who asks), for the audit");
  }
  if (in.actor.size() > kMaxIdLength || in.reason.size() > kMaxMetadataBytes) {
    return absl::InvalidArgumentError(absl::StrCat("actor is limited to ", kMaxIdLength,
                                                   " bytes and reason to ", kMaxMetadataBytes));
  }
  CONDUIT_RETURN_IF_ERROR(log_.health());
  // Ask the broker first (outside any mutex): the log's bounds, and offsets for a time.
  auto marks = topic_cache_.Fresh(in.topic);
  if (!marks.ok()) return marks.status();
  if (in.execute && clock_->Now() >= in.deadline) return DeadlinePassed();
  std::vector<int32_t> partitions = in.partitions;
  if (partitions.empty()) {
    for (const PartitionMarks& p : *marks) partitions.push_back(p.partition);
  }
  std::sort(partitions.begin(), partitions.end());
  if (std::adjacent_find(partitions.begin(), partitions.end()) != partitions.end()) {
    return absl::InvalidArgumentError("a partition appears twice");
  }
  absl::flat_hash_map<int32_t, int64_t> at_time;
  for (int32_t p : partitions) {
    if (p < 0 || p >= static_cast<int32_t>(marks->size())) {
      return absl::InvalidArgumentError(absl::StrCat("topic '", in.topic, "' has ", marks->size(),
                                                     " partitions; there is no partition ", p));
    }
    const PartitionMarks& m = (*marks)[p];
    if (in.kind == ResetInput::Kind::kOffset &&
        (in.value < m.log_start || in.value > m.high_watermark)) {
      return absl::OutOfRangeError(absl::StrCat("offset ", in.value, " is outside ", in.topic, "/",
                                                p, " [", m.log_start, ", ", m.high_watermark,
                                                "]; nothing was changed"));
    }
    if (in.kind == ResetInput::Kind::kTimestamp) {
      if (m.log_start > 0 && m.oldest_append_time && in.timestamp < *m.oldest_append_time) {
        return absl::OutOfRangeError(absl::StrCat(
            in.topic, "/", p, " no longer has records from ",
            absl::FormatTime(absl::RFC3339_full, in.timestamp, absl::UTCTimeZone()),
            ": retention removed everything before offset ", m.log_start, " (appended ",
            absl::FormatTime(absl::RFC3339_full, *m.oldest_append_time, absl::UTCTimeZone()),
            "); reset to_earliest to replay what is left; nothing was changed"));
      }
      auto offset = topics_->OffsetForTime(in.topic, p, in.timestamp);
      if (!offset.ok()) return offset.status();
      at_time[p] = *offset;
    }
  }
  GroupPtr g = in.execute ? FindOrCreateGroup(in.group_id) : FindGroup(in.group_id);
  const bool ephemeral = !g;
  if (ephemeral) {
    g = std::make_shared<Group>();  // a dry run on a group that does not exist: no offsets
    absl::MutexLock lock(&g->mu);
    g->record.group_id = in.group_id;
  }
  ResetOutput out;
  std::shared_ptr<Waiter> waiter;
  {
    absl::MutexLock lock(&g->mu);
    if (g->deleted) return DeletedMeanwhile();
    const absl::Time now = clock_->Now();
    Change change;
    ExpireLocked(*g, now, &change);
    for (int32_t p : partitions) {
      const PartitionMarks& m = (*marks)[p];
      const TopicPartition tp{in.topic, p};
      PartitionReset r;
      r.partition = p;
      auto committed = g->offsets.find(tp);
      r.had_offset = committed != g->offsets.end();
      r.before = r.had_offset ? committed->second.offset : 0;
      switch (in.kind) {
        case ResetInput::Kind::kEarliest:
          r.after = m.log_start;
          break;
        case ResetInput::Kind::kLatest:
          r.after = m.high_watermark;
          break;
        case ResetInput::Kind::kTimestamp:
          r.after = at_time[p];
          break;
        case ResetInput::Kind::kOffset:
          r.after = in.value;
          break;
        case ResetInput::Kind::kShift: {
          // Clamped to the log; computed without overflow for any shift.
          const int64_t base = r.had_offset ? r.before : m.log_start;
          const int64_t room_up = m.high_watermark - base, room_down = m.log_start - base;
          r.after = base + std::clamp(in.value, std::min(room_down, int64_t{0}),
                                      std::max(room_up, int64_t{0}));
          r.after = std::clamp(r.after, m.log_start, m.high_watermark);
          break;
        }
      }
      if (auto o = g->owner.find(tp); o != g->owner.end()) r.owner_member_id = o->second;
      out.partitions.push_back(std::move(r));
    }
    if (in.execute) {
      // A new epoch fences the owners' commits from before the reset.
      const int32_t epoch = ++g->record.epoch;
      change.group_dirty = true;
      AuditRecord audit{in.group_id, g->record.next_audit_id++, now, "reset_offsets", in.actor,
                        in.peer,     in.reason,                SpecText(in), in.topic,
                        out.partitions, epoch};
      for (const PartitionReset& r : out.partitions) {
        const TopicPartition tp{in.topic, r.partition};
        OffsetRecord record{in.group_id, tp, r.after, "", now, "reset:" + in.actor, epoch};
        change.write.put_offsets.push_back(record);
        g->offsets[tp] = std::move(record);
        g->lag_history.erase(tp);  // the lag jumped: rates from before mean nothing now
        if (r.owner_member_id.empty()) continue;
        MemberRecord& owner = g->members[r.owner_member_id].record;
        owner.owned[tp] = epoch;
        owner.epoch = epoch;
        owner.resets.insert(tp);
        owner.resets_epoch = epoch;
        change.dirty_members.insert(owner.member_id);
      }
      change.write.put_audit.push_back(audit);
      out.executed = true;
      out.audit_id = audit.id;
    }
    out.group_epoch = g->record.epoch;
    if (!ephemeral) waiter = SubmitLocked(*g, std::move(change));
  }
  CONDUIT_RETURN_IF_ERROR(Wait(waiter));
  return out;
}

}  // namespace conduit::coordinator
