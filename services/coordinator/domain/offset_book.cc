#include "services/coordinator/domain/offset_book.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace conduit::coordinator {
namespace {

std::string Name(const TopicPartition& tp) { return absl::StrCat(tp.topic, "/", tp.partition); }

// The fence for a member's commit: its epoch, and for each entry, ownership and the grant.
absl::Status CheckMemberFence(const CommitInput& in, const MemberRecord& r, std::string* reason) {
  if (in.member_epoch > r.epoch) {
    *reason = "stale_epoch";
    return absl::FailedPreconditionError(absl::StrFormat(
        "member_epoch %d is ahead of the member's epoch %d", in.member_epoch, r.epoch));
  }
  for (const CommitInput::Entry& e : in.entries) {
    auto owned = r.owned.find(e.tp);
    if (owned == r.owned.end()) {
      *reason = "not_owner";
      return absl::FailedPreconditionError(absl::StrCat("member '", in.member_id, "' does not own ",
                                                        Name(e.tp), " (epoch ", r.epoch.value(),
                                                        "); nothing was committed"));
    }
    if (!Reached(in.member_epoch, owned->second)) {
      *reason = "stale_epoch";
      return absl::FailedPreconditionError(absl::StrCat(
          "member_epoch ", in.member_epoch.value(), " is older than epoch ", owned->second.value(),
          " at which ", Name(e.tp),
          " was (re)assigned or reset; fetch offsets and commit with the current epoch; "
          "nothing was committed"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status OffsetBook::CheckFence(const CommitInput& in, const GroupMembership& membership,
                                    std::string* reason) {
  if (in.member_id.empty()) {
    if (membership.members().empty()) return absl::OkStatus();
    *reason = "not_member";
    return absl::FailedPreconditionError(absl::StrCat(
        "group '", in.group_id, "' has ", membership.members().size(),
        " active members: only a member may commit (give member_id and member_epoch)"));
  }
  const Member* m = membership.Find(in.member_id);
  if (m == nullptr) {
    *reason = "unknown_member";
    return absl::NotFoundError(absl::StrCat(
        "member '", in.member_id, "' is not in group '", in.group_id,
        "' (its session expired or it left); its partitions may belong to another member now"));
  }
  return CheckMemberFence(in, m->record, reason);
}

void OffsetBook::Commit(const CommitInput& in, absl::Time now, GroupChange* change) {
  for (const CommitInput::Entry& e : in.entries) {
    OffsetRecord record{in.group_id, e.tp,         e.offset,       e.metadata,
                        now,         in.member_id, in.member_epoch};
    change->write.put_offsets.push_back(record);
    offsets_[e.tp] = std::move(record);
  }
}

std::vector<OffsetRecord> OffsetBook::Fetch(const std::vector<std::string>& topics) const {
  std::vector<OffsetRecord> out;
  for (const auto& [tp, record] : offsets_) {
    if (topics.empty() || std::find(topics.begin(), topics.end(), tp.topic) != topics.end()) {
      out.push_back(record);
    }
  }
  return out;
}

int64_t ResetTarget(const ResetInput& in, const PartitionMarks& m, const OffsetRecord* committed,
                    int64_t at_time) {
  switch (in.kind) {
    case ResetInput::Kind::kEarliest:
      return m.log_start;
    case ResetInput::Kind::kLatest:
      return m.high_watermark;
    case ResetInput::Kind::kTimestamp:
      return at_time;
    case ResetInput::Kind::kOffset:
      return in.value;
    case ResetInput::Kind::kShift: {
      // Clamped to the log; computed without overflow for any shift.
      const int64_t base = committed ? committed->offset : m.log_start;
      const int64_t room_up = m.high_watermark - base, room_down = m.log_start - base;
      const int64_t after = base + std::clamp(in.value, std::min(room_down, int64_t{0}),
                                              std::max(room_up, int64_t{0}));
      return std::clamp(after, m.log_start, m.high_watermark);
    }
  }
  return m.log_start;
}

std::vector<PartitionReset> OffsetBook::PlanReset(
    const ResetInput& in, const std::vector<int32_t>& partitions,
    const std::vector<PartitionMarks>& marks, const absl::flat_hash_map<int32_t, int64_t>& at_time,
    const GroupMembership& membership) const {
  std::vector<PartitionReset> plan;
  for (int32_t p : partitions) {
    const TopicPartition tp{in.topic, p};
    PartitionReset r;
    r.partition = p;
    auto committed = offsets_.find(tp);
    r.had_offset = committed != offsets_.end();
    r.before = r.had_offset ? committed->second.offset : 0;
    auto t = at_time.find(p);
    r.after = ResetTarget(in, marks[p], r.had_offset ? &committed->second : nullptr,
                          t == at_time.end() ? 0 : t->second);
    if (auto o = membership.owner().find(tp); o != membership.owner().end()) {
      r.owner_member_id = o->second;
    }
    plan.push_back(std::move(r));
  }
  return plan;
}

void OffsetBook::ApplyReset(const ResetInput& in, const std::vector<PartitionReset>& plan,
                            GroupEpoch epoch, absl::Time now, GroupChange* change) {
  for (const PartitionReset& r : plan) {
    const TopicPartition tp{in.topic, r.partition};
    OffsetRecord record{in.group_id,        tp, r.after, "", now, "reset:" + in.actor,
                        ReconciledTo(epoch)};
    change->write.put_offsets.push_back(record);
    offsets_[tp] = std::move(record);
  }
}

}  // namespace conduit::coordinator
