// The replication rules (domain/replica_state.h) on their own: no threads, no I/O, and time is
// the monotonic "now" each call is given.

#include "services/log_broker/domain/replica_state.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace conduit::log_broker {
namespace {

using ::testing::ElementsAre;
using Role = ReplicaState::Role;

constexpr LeaderEpoch kEpoch{5};
const absl::Duration kLag = absl::Seconds(10);

absl::Duration At(double seconds) { return absl::Seconds(seconds); }

// Broker 1 leading a partition on brokers 1, 2 and 3 with `isr` in sync, assigned at time 0.
ReplicaState Leader(std::vector<int32_t> isr) {
  ReplicaState s;
  s.Assign(Role::kLeader, 1, 1, kEpoch, {1, 2, 3}, std::move(isr), /*revision=*/1, At(0));
  return s;
}

TEST(ReplicaState, LeaderHighWatermarkIsTheLeastDurableEndOverTheInSyncSet) {
  ReplicaState s = Leader({1, 2, 3});
  EXPECT_LE(s.HighWatermark(100), 0) << "no follower has fetched at this epoch yet";
  s.RecordFetch(2, 40, 100, At(1));
  EXPECT_LE(s.HighWatermark(100), 0) << "follower 3 (end -1) still holds it";
  s.RecordFetch(3, 70, 100, At(1));
  EXPECT_EQ(s.HighWatermark(100), 40);
  s.RecordFetch(2, 90, 100, At(2));
  EXPECT_EQ(s.HighWatermark(100), 70);
  s.RecordFetch(3, 100, 100, At(2));
  EXPECT_EQ(s.HighWatermark(100), 90);
  EXPECT_EQ(s.HighWatermark(60), 60) << "the leader's own durable end counts too";
}

TEST(ReplicaState, AFollowerOutsideTheInSyncSetDoesNotHoldTheHighWatermark) {
  ReplicaState s = Leader({1, 2});
  s.RecordFetch(2, 50, 100, At(1));
  EXPECT_EQ(s.HighWatermark(100), 50) << "follower 3 has not fetched but is not in sync";
  s.RecordFetch(3, 10, 100, At(1));
  EXPECT_EQ(s.HighWatermark(100), 50) << "follower 3 is far behind but is not in sync";
  EXPECT_FALSE(s.InSync(3));
}

TEST(ReplicaState, AFollowerBeingAddedCountsFromBeginUntilTheOutcome) {
  for (const bool applied : {true, false}) {
    SCOPED_TRACE(applied ? "applied" : "not applied");
    ReplicaState s = Leader({1, 2});
    s.RecordFetch(2, 80, 100, At(1));
    s.RecordFetch(3, 80, 100, At(1));
    auto plan = s.PlanIsr(s.HighWatermark(100), 0, kLag, At(1));
    ASSERT_TRUE(plan.has_value());
    EXPECT_THAT(*plan, ElementsAre(1, 2, 3));
    s.BeginIsrChange(*plan);
    s.RecordFetch(2, 100, 100, At(2));
    EXPECT_EQ(s.HighWatermark(100), 80) << "3 counts from the moment the leader adds it";
    EXPECT_THAT(s.view_isr, ElementsAre(1, 2)) << "the metadata's set is not changed yet";
    s.EndIsrChange(applied ? 10 : 0);
    if (applied) {
      EXPECT_EQ(s.HighWatermark(100), 80) << "written at revision 10: 3 counts";
      // A view applied late, from before the write, must not undo it.
      s.Assign(Role::kLeader, 1, 1, kEpoch, {1, 2, 3}, {1, 2}, /*revision=*/9, At(3));
      EXPECT_EQ(s.HighWatermark(100), 80) << "a view older than the write: 3 still counts";
      s.Assign(Role::kLeader, 1, 1, kEpoch, {1, 2, 3}, {1, 2, 3}, /*revision=*/10, At(3));
      EXPECT_FALSE(s.pending_isr.has_value()) << "the view of the write ends the change";
      EXPECT_THAT(s.isr, ElementsAre(1, 2, 3));
    } else {
      EXPECT_THAT(s.view_isr, ElementsAre(1, 2)) << "the metadata's set is restored";
      EXPECT_FALSE(s.InSync(3));
      EXPECT_EQ(s.HighWatermark(100), 100) << "3 no longer counts";
    }
  }
}

TEST(ReplicaState, AFollowerBeingRemovedCountsUntilAViewShowsTheRemoval) {
  for (const bool applied : {true, false}) {
    SCOPED_TRACE(applied ? "applied" : "not applied");
    ReplicaState s = Leader({1, 2, 3});
    s.RecordFetch(2, 100, 100, At(1));
    s.RecordFetch(3, 20, 100, At(1));
    s.BeginIsrChange({1, 2});
    EXPECT_EQ(s.HighWatermark(100), 20) << "3 still counts while its removal is written";
    EXPECT_TRUE(s.InSync(3));
    s.EndIsrChange(applied ? 10 : 0);
    EXPECT_TRUE(s.InSync(3)) << "until a view shows the removal, 3 counts (the safe side)";
    EXPECT_EQ(s.HighWatermark(100), 20);
    if (applied) {
      s.Assign(Role::kLeader, 1, 1, kEpoch, {1, 2, 3}, {1, 2}, /*revision=*/10, At(2));
      EXPECT_THAT(s.view_isr, ElementsAre(1, 2));
      EXPECT_FALSE(s.InSync(3));
      EXPECT_EQ(s.HighWatermark(100), 100);
    } else {
      EXPECT_THAT(s.view_isr, ElementsAre(1, 2, 3));
      EXPECT_FALSE(s.pending_isr.has_value());
    }
  }
}

TEST(ReplicaState, AViewThatPredatesAPendingChangeKeepsItCountingOneThatShowsItEndsIt) {
  ReplicaState s = Leader({1, 2});
  s.RecordFetch(2, 100, 100, At(1));
  s.RecordFetch(3, 60, 100, At(1));
  s.BeginIsrChange({1, 2, 3});
  // A view of the same epoch still without 3 (it was published before the write).
  s.Assign(Role::kLeader, 1, 1, kEpoch, {1, 2, 3}, {1, 2}, /*revision=*/3, At(2));
  EXPECT_TRUE(s.pending_isr.has_value());
  EXPECT_TRUE(s.InSync(3));
  EXPECT_EQ(s.HighWatermark(100), 60) << "3 still counts: the view predates its addition";
  EXPECT_FALSE(s.PlanIsr(60, 0, kLag, At(100)).has_value()) << "the change is still pending";
  // The view that shows the change ends it.
  s.Assign(Role::kLeader, 1, 1, kEpoch, {1, 2, 3}, {1, 2, 3}, /*revision=*/4, At(3));
  EXPECT_FALSE(s.pending_isr.has_value());
  EXPECT_THAT(s.isr, ElementsAre(1, 2, 3));
  EXPECT_EQ(s.HighWatermark(100), 60) << "same epoch: the followers' progress is kept";

  // The same for a removal: the view that shows 3 gone ends its counting.
  s.BeginIsrChange({1, 2});
  s.Assign(Role::kLeader, 1, 1, kEpoch, {1, 2, 3}, {1, 2, 3}, /*revision=*/5, At(4));
  EXPECT_EQ(s.HighWatermark(100), 60) << "a view that predates the removal: 3 still counts";
  s.Assign(Role::kLeader, 1, 1, kEpoch, {1, 2, 3}, {1, 2}, /*revision=*/6, At(5));
  EXPECT_FALSE(s.pending_isr.has_value());
  EXPECT_FALSE(s.InSync(3));
  EXPECT_EQ(s.HighWatermark(100), 100);
}

TEST(ReplicaState, ANewEpochDropsAPendingChangeAndRestartsProgress) {
  ReplicaState s = Leader({1, 2});
  s.RecordFetch(2, 100, 100, At(1));
  s.RecordFetch(3, 60, 100, At(1));
  s.BeginIsrChange({1, 2, 3});
  s.Assign(Role::kLeader, 1, 1, NextEpoch(kEpoch), {1, 2, 3}, {1, 2}, /*revision=*/3, At(2));
  EXPECT_FALSE(s.pending_isr.has_value());
  EXPECT_FALSE(s.InSync(3));
  EXPECT_LE(s.HighWatermark(100), 0) << "2 has not fetched at the new epoch yet";
  s.RecordFetch(2, 100, 100, At(3));
  EXPECT_EQ(s.HighWatermark(100), 100) << "3's pending addition no longer counts";
}

TEST(ReplicaState, AFollowerNotCaughtUpForLongerThanTheLagTimeLeaves) {
  ReplicaState s = Leader({1, 2, 3});
  // An idle leader ending at 100: 2 fetches at the end, 3 stays at 50 (never at or past the
  // leader's end as of its previous fetch).
  for (int t = 1; t <= 10; ++t) {
    s.RecordFetch(2, 100, 100, At(t));
    s.RecordFetch(3, 50, 100, At(t));
  }
  EXPECT_FALSE(s.PlanIsr(50, 0, kLag, At(10)).has_value())
      << "exactly the lag time since 3 was last caught up (its assignment at time 0)";
  auto plan = s.PlanIsr(50, 0, kLag, At(10) + absl::Milliseconds(1));
  ASSERT_TRUE(plan.has_value());
  EXPECT_THAT(*plan, ElementsAre(1, 2)) << "3 leaves; 2, always at the end, stays";
}

TEST(ReplicaState, AFollowerThatNeverFetchesLeavesAfterTheLagTime) {
  ReplicaState s = Leader({1, 2, 3});
  s.RecordFetch(2, 0, 0, At(9));
  EXPECT_FALSE(s.PlanIsr(0, 0, kLag, At(9)).has_value()) << "a new leader gives a lag time";
  s.RecordFetch(2, 0, 0, At(11));
  auto plan = s.PlanIsr(0, 0, kLag, At(11));
  ASSERT_TRUE(plan.has_value());
  EXPECT_THAT(*plan, ElementsAre(1, 2));
}

TEST(ReplicaState, ASteadyFollowerOfABusyLeaderIsNotRemovedALaggingOneIs) {
  ReplicaState s = Leader({1, 2, 3});
  // The leader's log grows by 100 a second. Each second 2 asks for the leader's end as of its
  // previous fetch (never at the current end); 3 asks for half of it, falling behind.
  int64_t end = 0;
  int64_t end_before = 0;
  std::optional<std::vector<int32_t>> plan;
  int t = 1;
  for (; t <= 60 && !plan; ++t) {
    end += 100;
    s.RecordFetch(2, end_before, end, At(t));
    s.RecordFetch(3, end_before / 2, end, At(t));
    end_before = end;
    plan = s.PlanIsr(s.HighWatermark(end), 0, kLag, At(t));
  }
  ASSERT_TRUE(plan.has_value()) << "the lagging follower 3 must leave";
  EXPECT_THAT(*plan, ElementsAre(1, 2)) << "at second " << t - 1;
  EXPECT_GT(t - 1, 10) << "not before the lag time";

  // 2 alone keeps up for a minute more: never planned out.
  s.BeginIsrChange(*plan);
  s.EndIsrChange(100);  // written
  s.Assign(Role::kLeader, 1, 1, kEpoch, {1, 2, 3}, *plan, /*revision=*/100, At(t));
  ASSERT_FALSE(s.pending_isr.has_value());
  for (int u = t; u <= t + 60; ++u) {
    end += 100;
    s.RecordFetch(2, end_before, end, At(u));
    end_before = end;
    EXPECT_FALSE(s.PlanIsr(s.HighWatermark(end), 0, kLag, At(u)).has_value()) << "second " << u;
  }
}

TEST(ReplicaState, AnOutOfSetFollowerJoinsOnceItReachesTheHighWatermarkAndTheEpochStart) {
  ReplicaState s = Leader({1, 2});
  s.RecordFetch(2, 100, 100, At(1));
  s.RecordFetch(3, 40, 100, At(1));
  EXPECT_FALSE(s.PlanIsr(50, 0, kLag, At(1)).has_value()) << "3 is below the high watermark";
  s.RecordFetch(3, 50, 100, At(2));
  EXPECT_FALSE(s.PlanIsr(50, 60, kLag, At(2)).has_value())
      << "3 reached the high watermark but not the start of the current epoch";
  auto plan = s.PlanIsr(50, 50, kLag, At(2));
  ASSERT_TRUE(plan.has_value()) << "at both the high watermark and the epoch start";
  EXPECT_THAT(*plan, ElementsAre(1, 2, 3));
}

// A follower that stops fetching while at the log end (nothing appended since) sits at the high
// watermark: once it has left, it must not join again until it fetches, or the set flaps
// (found by tests/cluster/replication_observe_test.cc: 17 shrinks and 15 expands in 20 s).
TEST(ReplicaState, AStoppedFollowerThatLeftDoesNotRejoinUntilItFetchesAgain) {
  ReplicaState s = Leader({1, 2, 3});
  s.RecordFetch(2, 100, 100, At(1));
  s.RecordFetch(3, 100, 100, At(1));  // 3 stops here, caught up
  s.RecordFetch(2, 100, 100, At(12));
  auto shrink = s.PlanIsr(100, 0, kLag, At(12));
  ASSERT_TRUE(shrink.has_value());
  EXPECT_THAT(*shrink, ElementsAre(1, 2));
  s.BeginIsrChange(*shrink);
  s.EndIsrChange(10);
  s.Assign(Role::kLeader, 1, 1, kEpoch, {1, 2, 3}, *shrink, /*revision=*/10, At(12));
  EXPECT_FALSE(s.PlanIsr(100, 0, kLag, At(13)).has_value())
      << "3 is at the high watermark but has not been caught up for 12 s";
  s.RecordFetch(3, 100, 100, At(14));  // it comes back
  auto expand = s.PlanIsr(100, 0, kLag, At(14));
  ASSERT_TRUE(expand.has_value());
  EXPECT_THAT(*expand, ElementsAre(1, 2, 3));
}

TEST(ReplicaState, NothingIsPlannedWhileAChangeIsPending) {
  ReplicaState s = Leader({1, 2});
  s.RecordFetch(3, 100, 100, At(1));  // 3 may join; 2 never fetches: out after the lag time
  auto join = s.PlanIsr(0, 0, kLag, At(1));
  ASSERT_TRUE(join.has_value());
  s.BeginIsrChange(*join);
  EXPECT_FALSE(s.PlanIsr(0, 0, kLag, At(30)).has_value()) << "2 is behind, but 3's join is pending";
  s.EndIsrChange(0);  // not written
  auto plan = s.PlanIsr(0, 0, kLag, At(30));
  ASSERT_TRUE(plan.has_value()) << "planned again once the outcome is known";
  EXPECT_THAT(*plan, ElementsAre(1)) << "2 leaves (a removal is planned before any join)";
}

TEST(ReplicaState, FollowersJoinOneAtATime) {
  ReplicaState s = Leader({1});
  s.RecordFetch(2, 100, 100, At(1));
  s.RecordFetch(3, 100, 100, At(1));
  auto first = s.PlanIsr(100, 0, kLag, At(1));
  ASSERT_TRUE(first.has_value());
  ASSERT_EQ(first->size(), 2u) << "one join per guarded write";
  EXPECT_EQ(first->front(), 1);
  const int32_t joined = first->back();
  EXPECT_TRUE(joined == 2 || joined == 3);
  s.BeginIsrChange(*first);
  s.EndIsrChange(100);  // written
  EXPECT_FALSE(s.PlanIsr(100, 0, kLag, At(2)).has_value()) << "until a view shows the join";
  s.Assign(Role::kLeader, 1, 1, kEpoch, {1, 2, 3}, *first, /*revision=*/100, At(2));
  auto second = s.PlanIsr(100, 0, kLag, At(2));
  ASSERT_TRUE(second.has_value());
  EXPECT_THAT(*second, ElementsAre(1, 2, 3));
}

TEST(ReplicaState, OnlyALeaderPlans) {
  ReplicaState s;
  s.Assign(Role::kFollower, 2, 1, kEpoch, {1, 2, 3}, {1, 2, 3}, /*revision=*/1, At(0));
  EXPECT_FALSE(s.PlanIsr(0, 0, kLag, At(100)).has_value());
  s.Assign(Role::kSole, 1, 1, kEpoch, {1}, {1}, /*revision=*/1, At(0));
  EXPECT_FALSE(s.PlanIsr(0, 0, kLag, At(100)).has_value());
}

TEST(ReplicaState, FollowerHighWatermarkIsTheLeadersCappedByTheLocalDurableEnd) {
  ReplicaState s;
  s.Assign(Role::kFollower, 2, 1, kEpoch, {1, 2, 3}, {1, 2, 3}, /*revision=*/1, At(0));
  s.leader_high_watermark = 70;
  EXPECT_EQ(s.HighWatermark(50), 50) << "not past what this replica holds durably";
  EXPECT_EQ(s.HighWatermark(90), 70) << "not past what the leader acknowledged";
  EXPECT_TRUE(s.followers.empty()) << "a follower tracks no followers";
}

TEST(ReplicaState, LeaderStepsDownToFollowerDropsItsPendingChangeAndProgress) {
  ReplicaState s = Leader({1, 2});
  s.RecordFetch(2, 100, 100, At(1));
  s.BeginIsrChange({1, 2, 3});
  s.Assign(Role::kFollower, 1, 2, NextEpoch(kEpoch), {1, 2, 3}, {2}, /*revision=*/3, At(2));
  EXPECT_FALSE(s.pending_isr.has_value());
  EXPECT_TRUE(s.followers.empty());
  s.leader_high_watermark = 30;
  EXPECT_EQ(s.HighWatermark(100), 30);
}

TEST(ReplicaState, SoleReplicaHighWatermarkIsTheDurableEnd) {
  ReplicaState s;
  s.Assign(Role::kSole, 1, 1, LeaderEpoch(1), {1}, {1}, /*revision=*/1, At(0));
  EXPECT_EQ(s.HighWatermark(42), 42);
}

// Each callback appends its name to `released` when run.
struct Released {
  std::vector<std::string> names;
  AckWaiters::Callback Named(std::string name) {
    return [this, name](absl::Status) { names.push_back(name); };
  }
  void Run(std::vector<AckWaiters::Callback> callbacks) {
    for (auto& done : callbacks) done(absl::OkStatus());
  }
};

TEST(ReplicaAckWaiters, ReleaseTakesExactlyThoseTheHighWatermarkCoversInOrder) {
  AckWaiters w;
  Released r;
  w.Add(30, r.Named("a30"));
  w.Add(10, r.Named("b10"));
  w.Add(20, r.Named("c20"));
  w.Add(20, r.Named("d20"));
  w.Add(40, r.Named("e40"));
  r.Run(w.Release(9));
  EXPECT_TRUE(r.names.empty());
  r.Run(w.Release(19));
  EXPECT_THAT(r.names, ElementsAre("b10"));
  r.Run(w.Release(20));
  EXPECT_THAT(r.names, ElementsAre("b10", "c20", "d20")) << "a needed end equal to hw is covered";
  r.Run(w.Release(35));
  EXPECT_THAT(r.names, ElementsAre("b10", "c20", "d20", "a30"));
  EXPECT_FALSE(w.empty());
  r.Run(w.Release(20));
  EXPECT_EQ(r.names.size(), 4u) << "nothing is released twice";
}

TEST(ReplicaAckWaiters, RemoveTakesOnlyThatWaiterAndNotAReleasedOne) {
  AckWaiters w;
  Released r;
  const uint64_t first = w.Add(20, r.Named("first"));
  const uint64_t second = w.Add(20, r.Named("second"));
  const uint64_t third = w.Add(30, r.Named("third"));
  auto removed = w.Remove(second);
  ASSERT_TRUE(removed.has_value());
  (*removed)(absl::OkStatus());
  EXPECT_THAT(r.names, ElementsAre("second")) << "the callback of that id, not its neighbour's";
  EXPECT_FALSE(w.Remove(second).has_value()) << "removed already";
  r.Run(w.Release(20));
  EXPECT_THAT(r.names, ElementsAre("second", "first"));
  EXPECT_FALSE(w.Remove(first).has_value()) << "released already";
  EXPECT_TRUE(w.Remove(third).has_value());
  EXPECT_TRUE(w.empty());
}

TEST(ReplicaAckWaiters, TakeAllTakesEveryWaiter) {
  AckWaiters w;
  Released r;
  const uint64_t id = w.Add(5, r.Named("5"));
  w.Add(INT64_MAX, r.Named("max"));
  w.Add(1000, r.Named("1000"));
  r.Run(w.TakeAll());
  EXPECT_THAT(r.names, ElementsAre("5", "1000", "max"));
  EXPECT_TRUE(w.empty());
  EXPECT_FALSE(w.Remove(id).has_value());
  EXPECT_TRUE(w.TakeAll().empty());
}

}  // namespace
}  // namespace conduit::log_broker
