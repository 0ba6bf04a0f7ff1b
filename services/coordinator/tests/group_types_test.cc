// The three types a group is made of, each on its own: GroupMembership (the ownership
// invariants under joins, leaves, expiry and resets), OffsetBook (the commit fence, reset
// targets inside the log) and LagTracker (the sample window and the drain rate). Plain values,
// no store and no broker: times are passed in.
#include <limits>
#include <optional>
#include <random>
#include <string>

#include <gtest/gtest.h>

#include "absl/container/flat_hash_map.h"
#include "services/coordinator/domain/group_membership.h"
#include "services/coordinator/domain/lag_tracker.h"
#include "services/coordinator/domain/offset_book.h"

namespace conduit::coordinator {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1'700'000'000);

class GroupTypesTest : public ::testing::Test {
 protected:
  GroupTypesTest() {
    context_.options = &options_;
    context_.observer = &observer_;
    context_.cached_count = [this](const std::string& topic) -> std::optional<int32_t> {
      auto it = counts_.find(topic);
      if (it == counts_.end()) return std::nullopt;
      return it->second;
    };
  }

  HeartbeatInput JoinInput(const std::string& id, std::vector<std::string> topics) {
    HeartbeatInput in;
    in.group_id = "g";
    in.member_id = id;
    in.subscription = std::move(topics);
    return in;
  }
  // A heartbeat that reports exactly what the member was told it owns.
  HeartbeatOutput Beat(GroupMembership& m, const HeartbeatOutput& last, absl::Time now) {
    HeartbeatInput in;
    in.group_id = "g";
    in.member_id = last.member_id;
    in.member_epoch = last.member_epoch;
    in.owned = last.assignment;
    GroupChange change;
    auto out = m.Heartbeat(in, now, &change);
    EXPECT_TRUE(out.ok()) << out.status();
    return *out;
  }
  // Every partition has at most one owner, and owner() agrees with the members' own sets.
  static void ExpectOwnershipAgrees(const GroupMembership& m) {
    size_t owned = 0;
    for (const auto& [id, member] : m.members()) {
      for (const auto& [tp, since] : member.record.owned) {
        ++owned;
        auto o = m.owner().find(tp);
        ASSERT_NE(o, m.owner().end()) << tp.topic << "/" << tp.partition;
        EXPECT_EQ(o->second, id);
        EXPECT_LE(since, m.record().epoch);
      }
      EXPECT_TRUE(member.record.epoch <= ReconciledTo(m.record().epoch));
    }
    EXPECT_EQ(owned, m.owner().size());
  }

  CoordinatorOptions options_;
  CoordinatorObserver observer_;
  absl::flat_hash_map<std::string, int32_t> counts_{{"orders", 4}};
  MembershipContext context_;
};

TEST_F(GroupTypesTest, MembershipHandsAPartitionOverOnlyOnceItsOwnerReleasedIt) {
  GroupMembership m(&context_, "g", kT0);
  GroupChange change;
  auto a = *m.Heartbeat(JoinInput("a", {"orders"}), kT0, &change);
  EXPECT_EQ(a.assignment.size(), 4u);
  auto b = *m.Heartbeat(JoinInput("b", {"orders"}), kT0, &change);
  EXPECT_TRUE(b.assignment.empty()) << "a still owns everything";
  EXPECT_EQ(b.pending.size(), 2u);
  ExpectOwnershipAgrees(m);
  // a's next heartbeat learns what to give up; until it reports them gone, b gets nothing.
  a = Beat(m, a, kT0);
  EXPECT_EQ(a.assignment.size(), 2u);
  b = Beat(m, b, kT0);
  EXPECT_TRUE(b.assignment.empty());
  ExpectOwnershipAgrees(m);
  a = Beat(m, a, kT0);  // now reports only its two
  b = Beat(m, b, kT0);
  EXPECT_EQ(b.assignment.size(), 2u);
  EXPECT_EQ(m.State(), GroupState::kStable);
  ExpectOwnershipAgrees(m);
}

TEST_F(GroupTypesTest, MembershipExpiryFreesTheSilentMembersPartitions) {
  GroupMembership m(&context_, "g", kT0);
  GroupChange change;
  auto a = *m.Heartbeat(JoinInput("a", {"orders"}), kT0, &change);
  (void)*m.Heartbeat(JoinInput("b", {"orders"}), kT0, &change);
  const absl::Duration timeout = options_.default_session_timeout;
  a = Beat(m, a, kT0 + timeout / 2);
  GroupChange expiry;
  m.Expire(kT0 + timeout, &expiry);  // b never beat again
  EXPECT_EQ(m.members().size(), 1u);
  ASSERT_EQ(expiry.write.delete_members.size(), 1u);
  EXPECT_EQ(expiry.write.delete_members[0].second, "b");
  a = Beat(m, a, kT0 + timeout);
  EXPECT_EQ(a.assignment.size(), 4u);
  ExpectOwnershipAgrees(m);
}

// Random joins, leaves, expiries and heartbeats (some reporting stale sets) keep every
// ownership invariant after each step.
TEST_F(GroupTypesTest, MembershipInvariantsHoldUnderRandomSteps) {
  GroupMembership m(&context_, "g", kT0);
  std::mt19937 rng(7);
  absl::flat_hash_map<std::string, HeartbeatOutput> last;
  absl::Time now = kT0;
  for (int step = 0; step < 400; ++step) {
    now += absl::Seconds(1);
    const std::string id = "m" + std::to_string(rng() % 5);
    GroupChange change;
    const int action = static_cast<int>(rng() % 10);
    if (!last.contains(id)) {
      auto out = m.Heartbeat(JoinInput(id, {"orders"}), now, &change);
      ASSERT_TRUE(out.ok()) << out.status();
      last[id] = *out;
    } else if (action == 0) {
      (void)m.Leave(id, &change);
      last.erase(id);
    } else if (action == 1) {
      m.Expire(now + options_.default_session_timeout, &change);  // everyone expires
      last.clear();
      now += options_.default_session_timeout;
    } else {
      HeartbeatInput in;
      in.group_id = "g";
      in.member_id = id;
      in.member_epoch = last[id].member_epoch;
      in.owned = action == 2 ? PartitionSet{} : last[id].assignment;  // a stale, empty report
      auto out = m.Heartbeat(in, now, &change);
      ASSERT_TRUE(out.ok()) << out.status();
      last[id] = *out;
    }
    ExpectOwnershipAgrees(m);
    if (HasFatalFailure()) return;
  }
}

TEST_F(GroupTypesTest, AResetFencesTheOwnersCommitsFromBeforeIt) {
  GroupMembership m(&context_, "g", kT0);
  GroupChange change;
  auto a = *m.Heartbeat(JoinInput("a", {"orders"}), kT0, &change);
  OffsetBook book;
  CommitInput commit{"g", "a", a.member_epoch, {{{"orders", 0}, 5, ""}}};
  std::string reason;
  ASSERT_TRUE(OffsetBook::CheckFence(commit, m, &reason).ok());
  book.Commit(commit, kT0, &change);

  const GroupEpoch epoch = m.FenceForReset({{"orders", 0}}, &change);
  EXPECT_FALSE(Reached(a.member_epoch, epoch));
  EXPECT_EQ(m.Find("a")->record.resets.size(), 1u);
  EXPECT_EQ(OffsetBook::CheckFence(commit, m, &reason).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(reason, "stale_epoch");
  commit.member_epoch = ReconciledTo(epoch);  // the owner caught up with the reset's epoch
  EXPECT_TRUE(OffsetBook::CheckFence(commit, m, &reason).ok());
  ExpectOwnershipAgrees(m);
}

TEST_F(GroupTypesTest, TheFenceRefusesNonOwnersUnknownMembersAndMemberlessCommitsToALiveGroup) {
  GroupMembership m(&context_, "g", kT0);
  std::string reason;
  CommitInput tool{"g", "", kJoiningEpoch, {{{"orders", 0}, 1, ""}}};
  EXPECT_TRUE(OffsetBook::CheckFence(tool, m, &reason).ok()) << "no members: a tool may commit";
  GroupChange change;
  counts_["orders"] = 1;
  auto a = *m.Heartbeat(JoinInput("a", {"orders"}), kT0, &change);
  EXPECT_FALSE(OffsetBook::CheckFence(tool, m, &reason).ok());
  EXPECT_EQ(reason, "not_member");
  CommitInput stranger{"g", "zed", MemberEpoch(1), {{{"orders", 0}, 1, ""}}};
  EXPECT_EQ(OffsetBook::CheckFence(stranger, m, &reason).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(reason, "unknown_member");
  CommitInput not_owned{"g", "a", a.member_epoch, {{{"orders", 3}, 1, ""}}};
  EXPECT_FALSE(OffsetBook::CheckFence(not_owned, m, &reason).ok());
  EXPECT_EQ(reason, "not_owner");
  CommitInput ahead{"g", "a", MemberEpoch(a.member_epoch.value() + 1), {{{"orders", 0}, 1, ""}}};
  EXPECT_FALSE(OffsetBook::CheckFence(ahead, m, &reason).ok());
  EXPECT_EQ(reason, "stale_epoch");
}

// Every kind of reset lands inside [log start, high watermark], whatever the shift.
TEST(OffsetBookTest, ResetTargetsStayInsideTheLog) {
  const PartitionMarks marks{0, 100, 200, std::nullopt};
  const OffsetRecord committed{"g", {"t", 0}, 150};
  ResetInput in;
  in.kind = ResetInput::Kind::kEarliest;
  EXPECT_EQ(ResetTarget(in, marks, &committed, 0), 100);
  in.kind = ResetInput::Kind::kLatest;
  EXPECT_EQ(ResetTarget(in, marks, &committed, 0), 200);
  in.kind = ResetInput::Kind::kTimestamp;
  EXPECT_EQ(ResetTarget(in, marks, &committed, 123), 123);
  in.kind = ResetInput::Kind::kShift;
  for (int64_t shift : {int64_t{-10}, int64_t{10}, int64_t{-1'000}, int64_t{1'000},
                        std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()}) {
    in.value = shift;
    const int64_t after = ResetTarget(in, marks, &committed, 0);
    EXPECT_GE(after, 100) << shift;
    EXPECT_LE(after, 200) << shift;
  }
  in.value = -10;
  EXPECT_EQ(ResetTarget(in, marks, &committed, 0), 140);
  EXPECT_EQ(ResetTarget(in, marks, nullptr, 0), 100) << "no offset: shifts from the log start";
}

TEST(LagTrackerTest, TheDrainRateSpansTheWindowAndOldSamplesGo) {
  LagTracker lag(absl::Minutes(5));
  const TopicPartition tp{"t", 0};
  DrainEstimate first = lag.Record(tp, kT0, 1000);
  EXPECT_EQ(first.drain_rate, 0) << "one sample shows no rate";
  EXPECT_FALSE(first.catch_up_seconds);
  DrainEstimate later = lag.Record(tp, kT0 + absl::Seconds(10), 900);
  EXPECT_DOUBLE_EQ(later.drain_rate, 10.0);
  ASSERT_TRUE(later.catch_up_seconds);
  EXPECT_DOUBLE_EQ(*later.catch_up_seconds, 90.0);
  // Growing lag: a negative rate and no catch-up time.
  DrainEstimate growing = lag.Record(tp, kT0 + absl::Seconds(20), 1100);
  EXPECT_LT(growing.drain_rate, 0);
  EXPECT_FALSE(growing.catch_up_seconds);
  // Ten minutes on, the old samples are outside the window: the rate is from the last one.
  DrainEstimate fresh = lag.Record(tp, kT0 + absl::Minutes(10), 1000);
  EXPECT_EQ(lag.samples(tp), 1u);
  EXPECT_EQ(fresh.drain_rate, 0);
  lag.Forget(tp);
  EXPECT_EQ(lag.samples(tp), 0u);
}

TEST(LagTrackerTest, SamplesAreBounded) {
  LagTracker lag(absl::Hours(24));
  const TopicPartition tp{"t", 0};
  for (int i = 0; i < 2000; ++i) lag.Record(tp, kT0 + absl::Seconds(i), 5000 - i);
  EXPECT_EQ(lag.samples(tp), LagTracker::kMaxSamples);
}

}  // namespace
}  // namespace conduit::coordinator
