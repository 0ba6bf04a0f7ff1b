// Fenced commits, fetches, resets with their audit trail, lag, deletion and restarts.
#include "absl/strings/str_cat.h"
#include "services/coordinator/tests/coordinator_fixture.h"

namespace conduit::coordinator {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1'700'000'000);

class OffsetsTest : public CoordinatorTest {
 protected:
  void SetUp() override {
    CoordinatorTest::SetUp();
    topics_.AddTopic("orders", 2);
    // 10 records per partition, appended one second apart from kT0.
    for (int i = 0; i < 10; ++i) {
      topics_.Append("orders", 0, kT0 + absl::Seconds(i));
      topics_.Append("orders", 1, kT0 + absl::Seconds(i));
    }
    clock_.Set(kT0 + absl::Seconds(100));
  }
  GroupDescription Describe(const std::string& group) {
    auto d = coordinator_->Describe(group);
    EXPECT_TRUE(d.ok()) << d.status();
    return d.ok() ? *d : GroupDescription{};
  }
  const PartitionLagView* Lag(const GroupDescription& d, int32_t partition) {
    for (const PartitionLagView& v : d.partitions) {
      if (v.tp.partition == partition) return &v;
    }
    return nullptr;
  }
  absl::StatusOr<ResetOutput> Reset(ResetInput::Kind kind, int64_t value, bool execute,
                                    std::vector<int32_t> partitions = {}) {
    ResetInput in;
    in.group_id = "g";
    in.topic = "orders";
    in.kind = kind;
    in.value = value;
    in.execute = execute;
    in.actor = "alice";
    in.reason = "replay after bug fix";
    in.partitions = std::move(partitions);
    return coordinator_->ResetOffsets(in);
  }
};

TEST_F(OffsetsTest, OwnerCommitsAndOthersAreRejectedWithNothingChanged) {
  HeartbeatOutput a = Join("g", {"orders"});
  ASSERT_TRUE(CommitAs("g", a, "orders", 0, 4).ok());
  EXPECT_EQ(Committed("g", "orders", 0), 4);

  HeartbeatOutput b = Join("g", {"orders"});
  a = Beat("g", a);  // told to give one up
  a = Beat("g", a);  // released it
  b = Beat("g", b);  // and B has it
  ASSERT_EQ(b.assignment.size(), 1u);
  const int32_t moved = b.assignment.begin()->partition;
  absl::Status s = CommitAs("g", a, "orders", moved, 9);
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_NE(Committed("g", "orders", moved), 9);

  // All or nothing: one partition not owned spoils the request.
  CommitInput both{"g", b.member_id, b.member_epoch, {}};
  both.entries.push_back({{"orders", moved}, 7, ""});
  both.entries.push_back({{"orders", 1 - moved}, 7, ""});
  EXPECT_TRUE(absl::IsFailedPrecondition(coordinator_->Commit(both)));
  EXPECT_NE(Committed("g", "orders", moved), 7);
}

TEST_F(OffsetsTest, AnEvictedMembersCommitIsRejected) {
  HeartbeatOutput zombie = Join("g", {"orders"});
  clock_.Advance(absl::Seconds(11));
  HeartbeatOutput successor = Join("g", {"orders"});
  EXPECT_EQ(successor.assignment.size(), 2u);
  ASSERT_TRUE(CommitAs("g", successor, "orders", 0, 6).ok());
  absl::Status s = CommitAs("g", zombie, "orders", 0, 2);
  EXPECT_TRUE(absl::IsNotFound(s)) << s;
  EXPECT_EQ(Committed("g", "orders", 0), 6);
}

TEST_F(OffsetsTest, GroupWithoutMembersCommitsFreelyAndMembersMustUseTheirEpoch) {
  CommitInput manual{"manual", "", kLeavingEpoch, {{{"orders", 1}, 3, "by hand"}}};
  ASSERT_TRUE(coordinator_->Commit(manual).ok());
  EXPECT_EQ(Committed("manual", "orders", 1), 3);
  Join("manual", {"orders"});
  EXPECT_TRUE(absl::IsFailedPrecondition(coordinator_->Commit(manual)));
}

TEST_F(OffsetsTest, BadCommitsGetClearStatuses) {
  HeartbeatOutput a = Join("g", {"orders"});
  EXPECT_TRUE(absl::IsOutOfRange(CommitAs("g", a, "orders", 0, 11))) << "beyond the hwm";
  EXPECT_TRUE(absl::IsInvalidArgument(CommitAs("g", a, "orders", 0, -1)));
  EXPECT_TRUE(absl::IsInvalidArgument(CommitAs("g", a, "orders", 5, 0))) << "no partition 5";
  EXPECT_TRUE(absl::IsNotFound(CommitAs("g", a, "missing", 0, 0)));
  HeartbeatOutput ahead = a;
  ahead.member_epoch = MemberEpoch(ahead.member_epoch.value() + 1);
  EXPECT_TRUE(absl::IsFailedPrecondition(CommitAs("g", ahead, "orders", 0, 1)));
  EXPECT_TRUE(absl::IsNotFound(CommitAs("nope", a, "orders", 0, 1)));
  EXPECT_EQ(Committed("g", "orders", 0), std::nullopt);
  // The high watermark grows: a commit up to the new one is fine (the cache is refreshed).
  topics_.Append("orders", 0, clock_.Now(), 5);
  EXPECT_TRUE(CommitAs("g", a, "orders", 0, 15).ok());
}

TEST_F(OffsetsTest, LagInRecordsAndSecondsWithDrainRate) {
  HeartbeatOutput a = Join("g", {"orders"});
  ASSERT_TRUE(CommitAs("g", a, "orders", 0, 4).ok());
  ASSERT_TRUE(CommitAs("g", a, "orders", 1, 10).ok());
  GroupDescription d = Describe("g");
  const PartitionLagView* p0 = Lag(d, 0);
  const PartitionLagView* p1 = Lag(d, 1);
  ASSERT_TRUE(p0 && p1);
  EXPECT_EQ(p0->lag_records, 6);
  // The first unprocessed record (offset 4) was appended at kT0 + 4 s; now is kT0 + 100 s.
  EXPECT_DOUBLE_EQ(p0->lag_seconds, 96.0);
  EXPECT_EQ(p0->first_unprocessed_append_time, kT0 + absl::Seconds(4));
  EXPECT_EQ(p1->lag_records, 0);
  EXPECT_DOUBLE_EQ(p1->lag_seconds, 0.0);
  EXPECT_EQ(p0->owner, a.member_id);
  EXPECT_EQ(d.max_lag_records, 6);
  EXPECT_DOUBLE_EQ(d.max_lag_seconds, 96.0);

  // 10 s later the group has consumed 4 more: drains at 0.4 records/s, 2 left → 5 s.
  clock_.Advance(absl::Seconds(5));
  a = Beat("g", a);  // (its session is 10 s)
  clock_.Advance(absl::Seconds(5));
  ASSERT_TRUE(CommitAs("g", a, "orders", 0, 8).ok());
  d = Describe("g");
  p0 = Lag(d, 0);
  EXPECT_EQ(p0->lag_records, 2);
  EXPECT_DOUBLE_EQ(p0->lag_seconds, 110.0 - 8.0);
  EXPECT_DOUBLE_EQ(p0->drain_rate, 0.4);
  ASSERT_TRUE(p0->catch_up_seconds.has_value());
  EXPECT_DOUBLE_EQ(*p0->catch_up_seconds, 5.0);

  // Without a committed offset the lag counts from the log start.
  Join("fresh", {"orders"});
  EXPECT_EQ(Lag(Describe("fresh"), 0)->lag_records, 10);
}

TEST_F(OffsetsTest, ALagSamplingPassAsksTheBrokerOncePerTopic) {
  for (const char* group : {"a", "b", "c"}) Join(group, {"orders"});
  const int before = topics_.describes();
  coordinator_->SampleLag();
  EXPECT_EQ(topics_.describes() - before, 1) << "three groups read one topic";
  // Describing one group still asks afresh.
  Describe("a");
  EXPECT_EQ(topics_.describes() - before, 2);
}

TEST_F(OffsetsTest, ResetDryRunShowsBeforeAndAfterAndChangesNothing) {
  HeartbeatOutput a = Join("g", {"orders"});
  ASSERT_TRUE(CommitAs("g", a, "orders", 0, 8).ok());
  auto dry = Reset(ResetInput::Kind::kEarliest, 0, /*execute=*/false);
  ASSERT_TRUE(dry.ok()) << dry.status();
  EXPECT_FALSE(dry->executed);
  ASSERT_EQ(dry->partitions.size(), 2u);
  EXPECT_TRUE(dry->partitions[0].had_offset);
  EXPECT_EQ(dry->partitions[0].before, 8);
  EXPECT_EQ(dry->partitions[0].after, 0);
  EXPECT_EQ(dry->partitions[0].owner_member_id, a.member_id);
  EXPECT_FALSE(dry->partitions[1].had_offset);
  EXPECT_EQ(Committed("g", "orders", 0), 8);
  EXPECT_TRUE(CommitAs("g", a, "orders", 0, 9).ok()) << "the owner is not fenced by a dry run";
  auto audit = coordinator_->ListAudit("g", 0, 10);
  ASSERT_TRUE(audit.ok());
  EXPECT_TRUE(audit->empty());
}

TEST_F(OffsetsTest, ResetOnALiveGroupFencesTheOwnersOlderPosition) {
  HeartbeatOutput a = Join("g", {"orders"});
  ASSERT_TRUE(CommitAs("g", a, "orders", 0, 8).ok());
  auto applied = Reset(ResetInput::Kind::kOffset, 2, /*execute=*/true, {0});
  ASSERT_TRUE(applied.ok()) << applied.status();
  EXPECT_TRUE(applied->executed);
  EXPECT_EQ(Committed("g", "orders", 0), 2);

  // The owner's commit from before the reset (its old epoch) is rejected...
  absl::Status stale = CommitAs("g", a, "orders", 0, 9);
  EXPECT_TRUE(absl::IsFailedPrecondition(stale)) << stale;
  EXPECT_EQ(Committed("g", "orders", 0), 2);
  // ...but its other partition, not reset, still takes commits at the old epoch.
  EXPECT_TRUE(CommitAs("g", a, "orders", 1, 5).ok());
  // The next heartbeat says which partitions to seek, with the new epoch.
  HeartbeatOutput a2 = Beat("g", a);
  EXPECT_EQ(a2.resets, Partitions("orders", {0}));
  EXPECT_GT(a2.member_epoch, a.member_epoch);
  EXPECT_TRUE(CommitAs("g", a2, "orders", 0, 3).ok());
  EXPECT_EQ(Committed("g", "orders", 0), 3);
  // Once the member heartbeats at that epoch the notice is done.
  EXPECT_TRUE(Beat("g", a2).resets.empty());

  auto audit = coordinator_->ListAudit("g", 0, 10);
  ASSERT_TRUE(audit.ok());
  ASSERT_EQ(audit->size(), 1u);
  const AuditRecord& entry = (*audit)[0];
  EXPECT_EQ(entry.actor, "alice");
  EXPECT_EQ(entry.reason, "replay after bug fix");
  EXPECT_EQ(entry.spec, "to_offset 2");
  EXPECT_EQ(entry.time, clock_.Now());
  ASSERT_EQ(entry.partitions.size(), 1u);
  EXPECT_EQ(entry.partitions[0].before, 8);
  EXPECT_EQ(entry.partitions[0].after, 2);
}

TEST_F(OffsetsTest, ResetTargets) {
  HeartbeatOutput a = Join("g", {"orders"});
  ASSERT_TRUE(CommitAs("g", a, "orders", 0, 5).ok());
  auto after = [&](ResetInput::Kind kind, int64_t value) -> int64_t {
    auto out = Reset(kind, value, false, {0});
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() ? out->partitions[0].after : -1;
  };
  EXPECT_EQ(after(ResetInput::Kind::kEarliest, 0), 0);
  EXPECT_EQ(after(ResetInput::Kind::kLatest, 0), 10);
  EXPECT_EQ(after(ResetInput::Kind::kShift, -2), 3);
  EXPECT_EQ(after(ResetInput::Kind::kShift, -50), 0) << "clamped to the log start";
  EXPECT_EQ(after(ResetInput::Kind::kShift, 50), 10) << "clamped to the high watermark";
  EXPECT_EQ(after(ResetInput::Kind::kShift, INT64_MAX), 10) << "no overflow";
  EXPECT_EQ(after(ResetInput::Kind::kShift, INT64_MIN), 0) << "no overflow";
  ResetInput at_time{"g", "orders", {0}, ResetInput::Kind::kTimestamp, kT0 + absl::Milliseconds(6500)};
  auto by_time = coordinator_->ResetOffsets(at_time);
  ASSERT_TRUE(by_time.ok()) << by_time.status();
  EXPECT_EQ(by_time->partitions[0].after, 7) << "first record appended at or after the time";
}

TEST_F(OffsetsTest, BadResetsChangeNothing) {
  HeartbeatOutput a = Join("g", {"orders"});
  ASSERT_TRUE(CommitAs("g", a, "orders", 0, 5).ok());
  EXPECT_TRUE(absl::IsOutOfRange(Reset(ResetInput::Kind::kOffset, 11, true).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(Reset(ResetInput::Kind::kEarliest, 0, true, {7}).status()));
  ResetInput unknown{"g", "missing", {}, ResetInput::Kind::kEarliest};
  EXPECT_TRUE(absl::IsNotFound(coordinator_->ResetOffsets(unknown).status()));
  ResetInput anonymous{"g", "orders", {}, ResetInput::Kind::kEarliest};
  anonymous.execute = true;
  EXPECT_TRUE(absl::IsInvalidArgument(coordinator_->ResetOffsets(anonymous).status()));
  // Retention removed offsets 0..3 (appended kT0 .. kT0+3 s): kT0+1 s is gone.
  topics_.Truncate("orders", 0, 4);
  ResetInput too_old{"g", "orders", {0}, ResetInput::Kind::kTimestamp, kT0 + absl::Seconds(1)};
  too_old.execute = true;
  too_old.actor = "bob";
  absl::Status s = coordinator_->ResetOffsets(too_old).status();
  EXPECT_TRUE(absl::IsOutOfRange(s)) << s;
  EXPECT_EQ(Committed("g", "orders", 0), 5);
  EXPECT_TRUE(CommitAs("g", a, "orders", 0, 6).ok()) << "the owner was not fenced";
  EXPECT_TRUE(coordinator_->ListAudit("g", 0, 10)->empty());
}

TEST_F(OffsetsTest, AuditPagesNewestFirst) {
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(Reset(ResetInput::Kind::kOffset, i, true).ok());
  auto first = coordinator_->ListAudit("g", 0, 2);
  ASSERT_TRUE(first.ok());
  ASSERT_EQ(first->size(), 2u);
  EXPECT_EQ((*first)[0].spec, "to_offset 4");
  EXPECT_EQ((*first)[1].spec, "to_offset 3");
  auto rest = coordinator_->ListAudit("g", (*first)[1].id, 10);
  ASSERT_TRUE(rest.ok());
  ASSERT_EQ(rest->size(), 3u);
  EXPECT_EQ((*rest)[2].spec, "to_offset 0");
  EXPECT_TRUE(absl::IsNotFound(coordinator_->ListAudit("nope", 0, 10).status()));
}

TEST_F(OffsetsTest, OffsetsAndAuditSurviveARestart) {
  HeartbeatOutput a = Join("g", {"orders"});
  ASSERT_TRUE(CommitAs("g", a, "orders", 0, 7).ok());
  ASSERT_TRUE(Reset(ResetInput::Kind::kOffset, 3, true, {1}).ok());
  Reopen();
  EXPECT_EQ(Committed("g", "orders", 0), 7);
  EXPECT_EQ(Committed("g", "orders", 1), 3);
  EXPECT_EQ(coordinator_->ListAudit("g", 0, 10)->size(), 1u);
  // The member continues where it was, fenced as before on the reset partition.
  EXPECT_TRUE(absl::IsFailedPrecondition(CommitAs("g", a, "orders", 1, 4)));
  EXPECT_TRUE(CommitAs("g", a, "orders", 0, 8).ok());
  ASSERT_TRUE(Reset(ResetInput::Kind::kOffset, 1, true, {1}).ok());
  EXPECT_EQ(coordinator_->ListAudit("g", 0, 10)->front().spec, "to_offset 1")
      << "audit ids continue after a restart";
}

TEST_F(OffsetsTest, AfterAStorageFailureEverythingIsRefusedUntilRestart) {
  HeartbeatOutput a = Join("g", {"orders"});
  ASSERT_TRUE(CommitAs("g", a, "orders", 0, 4).ok());
  flaky_->fail = true;
  EXPECT_TRUE(absl::IsUnavailable(CommitAs("g", a, "orders", 0, 6)));
  flaky_->fail = false;
  // Memory may now hold what the disk does not: nothing is changed or shown until a restart.
  EXPECT_TRUE(absl::IsUnavailable(CommitAs("g", a, "orders", 0, 7)));
  EXPECT_TRUE(absl::IsUnavailable(coordinator_->FetchOffsets("g", {}).status()));
  EXPECT_TRUE(absl::IsUnavailable(coordinator_->Describe("g").status()));
  EXPECT_TRUE(absl::IsUnavailable(Beat("g", a, a.assignment).status()));
  Reopen();
  EXPECT_EQ(Committed("g", "orders", 0), 4) << "the failed commit is not there after a restart";
}

TEST_F(OffsetsTest, DeleteGroupNeedsNoMembersAndRemovesEverything) {
  HeartbeatOutput a = Join("g", {"orders"});
  ASSERT_TRUE(CommitAs("g", a, "orders", 0, 7).ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(coordinator_->DeleteGroup("g")));
  ASSERT_TRUE(coordinator_->Leave("g", a.member_id).ok());
  ASSERT_TRUE(coordinator_->DeleteGroup("g").ok());
  EXPECT_TRUE(absl::IsNotFound(coordinator_->FetchOffsets("g", {}).status()));
  EXPECT_TRUE(absl::IsNotFound(coordinator_->DeleteGroup("g")));
  Reopen();
  EXPECT_TRUE(absl::IsNotFound(coordinator_->FetchOffsets("g", {}).status()));
  EXPECT_TRUE(coordinator_->List().empty());
}

}  // namespace
}  // namespace conduit::coordinator
