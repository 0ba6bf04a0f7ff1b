// Joins, heartbeats, incremental reconciliation, session expiry, leaves and static membership,
// on a fake clock.
#include <random>

#include "absl/strings/str_cat.h"
#include "services/coordinator/tests/coordinator_fixture.h"

namespace conduit::coordinator {
namespace {

class MembershipTest : public CoordinatorTest {
 protected:
  void SetUp() override {
    CoordinatorTest::SetUp();
    topics_.AddTopic("orders", 4);
  }
  GroupDescription Describe(const std::string& group) {
    auto d = coordinator_->Describe(group);
    EXPECT_TRUE(d.ok()) << d.status();
    return d.ok() ? *d : GroupDescription{};
  }
  void RunRandomProtocol(const std::string& group, uint32_t seed);
  // Two members sharing "orders" 2 and 2, both at the group epoch.
  std::pair<HeartbeatOutput, HeartbeatOutput> StableTwo(const std::string& instance_a = "") {
    HeartbeatOutput a = Join("g", {"orders"}, instance_a);
    HeartbeatOutput b = Join("g", {"orders"});
    for (int round = 0; round < 3; ++round) {
      a = Beat("g", a);
      b = Beat("g", b);
    }
    EXPECT_EQ(a.assignment.size(), 2u);
    EXPECT_EQ(b.assignment.size(), 2u);
    EXPECT_EQ(Describe("g").state, GroupState::kStable);
    return {a, b};
  }
};

TEST_F(MembershipTest, FirstMemberGetsEveryPartitionAndTheHeartbeatInterval) {
  HeartbeatOutput a = Join("g", {"orders"});
  EXPECT_FALSE(a.member_id.empty());
  EXPECT_EQ(a.member_epoch, MemberEpoch(1));
  EXPECT_EQ(a.group_epoch, GroupEpoch(1));
  EXPECT_EQ(a.assignment, Partitions("orders", {0, 1, 2, 3}));
  EXPECT_TRUE(a.pending.empty());
  EXPECT_EQ(a.heartbeat_interval, absl::Seconds(3));  // min(3 s, session 10 s / 3)
  EXPECT_EQ(Describe("g").state, GroupState::kStable);
}

TEST_F(MembershipTest, APartitionMovesOnlyAfterItsOwnerReleasesIt) {
  HeartbeatOutput a = Join("g", {"orders"});
  HeartbeatOutput b = Join("g", {"orders"});
  EXPECT_TRUE(b.assignment.empty()) << "A still owns everything";
  EXPECT_EQ(b.pending.size(), 2u);
  EXPECT_EQ(Describe("g").state, GroupState::kReconciling);

  // A is told to keep two; its epoch stays until it has released the others.
  auto a2 = Beat("g", a, a.assignment);
  ASSERT_TRUE(a2.ok());
  EXPECT_EQ(a2->assignment.size(), 2u);
  EXPECT_EQ(a2->member_epoch, a.member_epoch);
  // B still waits: A has not confirmed.
  b = Beat("g", b);
  EXPECT_TRUE(b.assignment.empty());
  // A releases (reports only what it may keep) and moves to the group epoch.
  auto a3 = Beat("g", *a2, a2->assignment);
  ASSERT_TRUE(a3.ok());
  EXPECT_EQ(a3->member_epoch, ReconciledTo(a3->group_epoch));
  b = Beat("g", b);
  EXPECT_EQ(b.assignment.size(), 2u);
  for (const TopicPartition& tp : b.assignment) EXPECT_FALSE(a3->assignment.contains(tp));
  EXPECT_EQ(Describe("g").state, GroupState::kStable);
  EXPECT_EQ(Describe("g").rebalances, 2);
}

TEST_F(MembershipTest, SilentMemberIsEvictedAfterItsSessionTimeout) {
  auto [a, b] = StableTwo();
  clock_.Advance(absl::Seconds(6));
  b = Beat("g", b);
  clock_.Advance(absl::Seconds(5));  // A silent for 11 s > 10 s
  b = Beat("g", b);
  EXPECT_EQ(b.assignment, Partitions("orders", {0, 1, 2, 3}));
  GroupDescription d = Describe("g");
  ASSERT_EQ(d.members.size(), 1u);
  EXPECT_EQ(d.members[0].record.member_id, b.member_id);
  auto late = Beat("g", a, a.assignment);
  EXPECT_TRUE(absl::IsNotFound(late.status())) << late.status();
}

TEST_F(MembershipTest, ExpiryNeedsNoCallToTheGroupWhenTheSweepRuns) {
  auto [a, b] = StableTwo();
  clock_.Advance(absl::Seconds(11));
  coordinator_->Sweep();
  EXPECT_EQ(Describe("g").state, GroupState::kEmpty);
}

TEST_F(MembershipTest, LeaveIsImmediate) {
  auto [a, b] = StableTwo();
  ASSERT_TRUE(coordinator_->Leave("g", a.member_id).ok());
  b = Beat("g", b);
  EXPECT_EQ(b.assignment.size(), 4u);
  EXPECT_TRUE(absl::IsNotFound(coordinator_->Leave("g", a.member_id)));
  EXPECT_TRUE(absl::IsNotFound(coordinator_->Leave("nope", a.member_id)));
}

TEST_F(MembershipTest, StaticMemberRestartingWithinItsSessionKeepsItsPartitions) {
  auto [a, b] = StableTwo(/*instance_a=*/"pod-a");
  const int64_t rebalances = Describe("g").rebalances;
  clock_.Advance(absl::Seconds(5));
  // A restarts: a fresh join with the same instance id, owning nothing yet.
  HeartbeatOutput a2 = Join("g", {"orders"}, "pod-a");
  EXPECT_NE(a2.member_id, a.member_id);
  EXPECT_EQ(a2.assignment, a.assignment);
  EXPECT_EQ(a2.member_epoch, a.member_epoch);
  EXPECT_EQ(Describe("g").rebalances, rebalances);
  HeartbeatOutput b2 = Beat("g", b);
  EXPECT_EQ(b2.assignment, b.assignment) << "the other member is not disturbed";
  EXPECT_EQ(b2.member_epoch, b.member_epoch);
  // The old incarnation is fenced.
  EXPECT_TRUE(absl::IsNotFound(Beat("g", a, a.assignment).status()));
  EXPECT_TRUE(absl::IsNotFound(
      CommitAs("g", a, "orders", a.assignment.begin()->partition, 0)));
  EXPECT_TRUE(CommitAs("g", a2, "orders", a2.assignment.begin()->partition, 0).ok());
}

TEST_F(MembershipTest, AMemberThatNeverReleasesIsFenced) {
  HeartbeatOutput a = Join("g", {"orders"});
  HeartbeatOutput b = Join("g", {"orders"});
  const PartitionSet everything = a.assignment;
  for (int i = 0; i < 6; ++i) {  // A keeps heartbeating but keeps reporting all four
    clock_.Advance(absl::Seconds(3));
    auto out = Beat("g", a, everything);
    if (!out.ok()) {
      EXPECT_TRUE(absl::IsNotFound(out.status())) << out.status();
      break;
    }
    a = *out;
    b = Beat("g", b);
  }
  b = Beat("g", b);
  EXPECT_EQ(b.assignment.size(), 4u);
}

TEST_F(MembershipTest, ATopicThatGrowsIsRebalancedByTheSweep) {
  auto [a, b] = StableTwo();
  topics_.AddTopic("orders", 8);  // 4 more partitions
  Describe("g");  // asks the broker afresh (so would the sweep, once the cache is 30 s old)
  coordinator_->Sweep();
  for (int round = 0; round < 3; ++round) {
    a = Beat("g", a);
    b = Beat("g", b);
  }
  EXPECT_EQ(a.assignment.size(), 4u);
  EXPECT_EQ(b.assignment.size(), 4u);
  EXPECT_EQ(Describe("g").state, GroupState::kStable);
}

TEST_F(MembershipTest, WithTheBrokerAwayARebalanceKeepsTheKnownPartitions) {
  auto [a, b] = StableTwo();
  Reopen();  // the topic cache is empty after a restart...
  topics_.SetUnavailable(true);  // ...and the broker cannot be asked
  ASSERT_TRUE(coordinator_->Leave("g", b.member_id).ok());
  a = Beat("g", a);
  EXPECT_EQ(a.assignment.size(), 4u) << "counts of the last target stand in for the broker's";
}

TEST_F(MembershipTest, ADelayedHeartbeatDoesNotReleaseWhatWasGrantedAfterIt) {
  HeartbeatInput join;
  join.group_id = "g";
  join.subscription = {"later"};  // does not exist yet
  join.session_timeout = absl::Seconds(10);
  auto a = coordinator_->Heartbeat(join);
  ASSERT_TRUE(a.ok());
  EXPECT_TRUE(a->assignment.empty());
  HeartbeatInput delayed;  // sent now, processed much later
  delayed.group_id = "g";
  delayed.member_id = a->member_id;
  delayed.member_epoch = a->member_epoch;

  topics_.AddTopic("later", 4);
  Describe("g");
  coordinator_->Sweep();
  HeartbeatOutput a2 = Beat("g", *a);  // granted all four at the new epoch
  ASSERT_EQ(a2.assignment.size(), 4u);
  HeartbeatOutput b = Join("g", {"later"});
  a2 = Beat("g", a2);  // told to give two up: they are being revoked
  ASSERT_EQ(a2.assignment.size(), 2u);
  ASSERT_TRUE(coordinator_->Heartbeat(delayed).ok());  // owns nothing, says the old heartbeat
  b = Beat("g", b);
  EXPECT_TRUE(b.assignment.empty()) << "A has not released them yet";
  a2 = Beat("g", a2);  // the real release
  b = Beat("g", b);
  EXPECT_EQ(b.assignment.size(), 2u);
}

TEST_F(MembershipTest, BadHeartbeatsAreRejectedAndChangeNothing) {
  HeartbeatInput in;
  in.subscription = {"orders"};
  EXPECT_TRUE(absl::IsInvalidArgument(coordinator_->Heartbeat(in).status())) << "no group id";
  in.group_id = "g";
  in.subscription.clear();
  EXPECT_TRUE(absl::IsInvalidArgument(coordinator_->Heartbeat(in).status())) << "no topics";
  in.subscription = {"orders"};
  in.session_timeout = absl::Milliseconds(10);
  EXPECT_TRUE(absl::IsInvalidArgument(coordinator_->Heartbeat(in).status()));
  in.session_timeout.reset();
  in.member_epoch = kLeavingEpoch;
  EXPECT_TRUE(absl::IsInvalidArgument(coordinator_->Heartbeat(in).status()));
  in.group_id = std::string("bad\0id", 6);
  in.member_epoch = kJoiningEpoch;
  EXPECT_TRUE(absl::IsInvalidArgument(coordinator_->Heartbeat(in).status()));
  in.group_id = "g";
  in.member_epoch = MemberEpoch(3);  // an epoch without a member id
  EXPECT_TRUE(absl::IsInvalidArgument(coordinator_->Heartbeat(in).status()));
  EXPECT_TRUE(coordinator_->List().empty());

  HeartbeatOutput a = Join("g", {"orders"});
  HeartbeatOutput ahead = a;
  ahead.member_epoch = MemberEpoch(ahead.member_epoch.value() + 5);
  EXPECT_TRUE(absl::IsFailedPrecondition(Beat("g", ahead, a.assignment).status()));
  HeartbeatOutput stranger = a;
  stranger.member_id = "m-unknown";
  EXPECT_TRUE(absl::IsNotFound(Beat("g", stranger, {}).status()));
  EXPECT_TRUE(absl::IsNotFound(Beat("other-group", a, {}).status()));
  EXPECT_EQ(Describe("g").members.size(), 1u);
}

TEST_F(MembershipTest, MembershipSurvivesARestart) {
  auto [a, b] = StableTwo();
  Reopen();
  GroupDescription d = Describe("g");
  EXPECT_EQ(d.members.size(), 2u);
  EXPECT_EQ(d.state, GroupState::kStable);
  HeartbeatOutput a2 = Beat("g", a);
  EXPECT_EQ(a2.assignment, a.assignment);
  EXPECT_EQ(a2.member_epoch, a.member_epoch);
}

// Simulated members join, heartbeat in random order, leave or go silent. A member's view is
// the assignment of its last response; no partition may be in two live members' views, and
// once everyone heartbeats the group settles: stable, everything owned, balanced.
TEST_F(MembershipTest, RandomizedProtocolNeverGivesAPartitionToTwoLiveMembers) {
  topics_.AddTopic("events", 7);
  for (uint32_t seed = 1; seed <= 25; ++seed) {
    RunRandomProtocol(absl::StrCat("g", seed), seed);
    if (HasFailure()) return;
  }
}

void MembershipTest::RunRandomProtocol(const std::string& group, uint32_t seed) {
  std::mt19937 rng(seed);
  int next_id = 0;
  // Client-chosen member ids keep the run deterministic for a seed.
  auto join = [&] {
    HeartbeatInput in;
    in.group_id = group;
    in.member_id = absl::StrCat("m", next_id++);
    in.subscription = {"events", "orders"};
    in.session_timeout = absl::Seconds(10);
    auto out = coordinator_->Heartbeat(in);
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() ? *out : HeartbeatOutput{};
  };
  struct Sim {
    HeartbeatOutput last;
    bool silent = false;
    absl::Time last_beat;
  };
  std::map<std::string, Sim> live;
  auto check_views = [&] {
    absl::btree_map<TopicPartition, std::string> seen;
    for (const auto& [id, sim] : live) {
      // A member silent for its whole session is a zombie: its view may be stale.
      if (sim.silent || clock_.Now() - sim.last_beat >= absl::Seconds(10)) continue;
      for (const TopicPartition& tp : sim.last.assignment) {
        auto [it, fresh] = seen.emplace(tp, id);
        if (!fresh) {
          std::string dump;
          for (const auto& [mid, msim] : live) {
            absl::StrAppend(&dump, mid, " silent=", msim.silent,
                            " age=", absl::FormatDuration(clock_.Now() - msim.last_beat),
                            " epoch=", msim.last.member_epoch.value(), " view:");
            for (const auto& p : msim.last.assignment) absl::StrAppend(&dump, " ", p.topic, p.partition);
            absl::StrAppend(&dump, "\n");
          }
          auto d = coordinator_->Describe(group);
          for (const auto& m : d->members) {
            absl::StrAppend(&dump, "coord ", m.record.member_id, " epoch=", m.record.epoch.value(),
                            " owned:");
            for (const auto& [p, e] : m.record.owned)
              absl::StrAppend(&dump, " ", p.topic, p.partition, "@", e.value());
            absl::StrAppend(&dump, " revoking:", m.record.revoking.size(), "\n");
          }
          FAIL() << "seed " << seed << ": " << tp.topic << "/" << tp.partition << " held by " << it->second << " and " << id
                 << "\n" << dump;
        }
      }
    }
  };
  for (int step = 0; step < 400; ++step) {
    const int action = static_cast<int>(rng() % 10);
    if (action == 0 || live.empty()) {
      HeartbeatOutput out = join();
      live[out.member_id] = Sim{out, false, clock_.Now()};
    } else if (action == 1 && live.size() > 1) {
      auto it = std::next(live.begin(), rng() % live.size());
      if (!it->second.silent) {
        absl::Status left = coordinator_->Leave(group, it->first);
        // A member that did not heartbeat for its whole session is already gone.
        if (clock_.Now() - it->second.last_beat < absl::Seconds(10)) {
          ASSERT_TRUE(left.ok()) << left;
        }
      }
      live.erase(it);
    } else if (action == 2 && live.size() > 1) {
      auto it = std::next(live.begin(), rng() % live.size());
      it->second.silent = true;  // stops heartbeating: its session will expire
    } else {
      clock_.Advance(absl::Milliseconds(500 + rng() % 1500));
      auto it = std::next(live.begin(), rng() % live.size());
      if (it->second.silent) continue;
      auto out = Beat(group, it->second.last, it->second.last.assignment);
      if (absl::IsNotFound(out.status())) {  // it was silent too long between turns
        live.erase(it);
        continue;
      }
      ASSERT_TRUE(out.ok()) << out.status();
      it->second.last = *out;
      it->second.last_beat = clock_.Now();
    }
    check_views();
  }
  // Settle: the silent ones expire, the rest heartbeat a few rounds.
  clock_.Advance(absl::Seconds(11));
  for (auto it = live.begin(); it != live.end();) {
    it = it->second.silent ? live.erase(it) : std::next(it);
  }
  for (int i = 0; i < 2; ++i) {
    HeartbeatOutput out = join();
    live[out.member_id] = Sim{out, false, clock_.Now()};
  }
  for (int round = 0; round < 4; ++round) {
    for (auto& [id, sim] : live) {
      auto out = Beat(group, sim.last, sim.last.assignment);
      if (absl::IsNotFound(out.status())) {  // expired during the long pause above: rejoin
        out = join();
      }
      ASSERT_TRUE(out.ok()) << out.status();
      sim.last = *out;
    }
  }
  GroupDescription d = Describe(group);
  EXPECT_EQ(d.state, GroupState::kStable);
  EXPECT_EQ(d.members.size(), live.size());
  size_t owned = 0, lo = SIZE_MAX, hi = 0;
  for (const MemberView& m : d.members) {
    owned += m.record.owned.size();
    lo = std::min(lo, m.record.owned.size());
    hi = std::max(hi, m.record.owned.size());
  }
  EXPECT_EQ(owned, 11u);
  EXPECT_LE(hi - lo, 1u);
}

}  // namespace
}  // namespace conduit::coordinator
