#include "services/work_queue/domain/job_index.h"

#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace conduit::work_queue {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1'000'000);

Job Queued(uint64_t id, absl::Time ready_at, std::string tenant = "t") {
  Job job;
  job.id = id;
  job.tenant = std::move(tenant);
  job.enqueued_at = kT0;
  job.ready_at = ready_at;
  return job;
}

// Takes every job the index would lease now and leases it for `visibility`.
std::vector<uint64_t> LeaseAll(JobIndex& index, absl::Time now, absl::Duration visibility,
                               std::mt19937_64& rng) {
  std::vector<uint64_t> ids;
  while (Job* job = index.TakeNextReady(QueueConfig{})) {
    LeaseBook::Grant(*job, "w", now, visibility, rng);
    index.Index(*job, now);
    ids.push_back(job->id);
  }
  return ids;
}

TEST(JobIndex, EachJobIsIndexedByItsState) {
  JobIndex index;
  index.Add(Queued(1, kT0), kT0);
  index.Add(Queued(2, kT0 + absl::Seconds(5)), kT0);
  Job leased = Queued(3, kT0);
  leased.state = JobState::kLeased;
  leased.lease_token = LeaseToken("tok");
  leased.lease_deadline = kT0 + absl::Seconds(30);
  index.Add(leased, kT0);
  Job dead = Queued(4, kT0);
  dead.state = JobState::kDead;
  dead.died_at = kT0 - absl::Seconds(7);
  index.Add(dead, kT0);
  EXPECT_TRUE(index.CheckInvariants().ok()) << index.CheckInvariants();
  const JobIndex::Depth d = index.Indexed();
  EXPECT_EQ(d.ready, 1);
  EXPECT_EQ(d.delayed, 1);
  EXPECT_EQ(d.leased, 1);
  EXPECT_EQ(d.dead, 1);
  EXPECT_EQ(d.oldest_ready, kT0);
  EXPECT_EQ(d.oldest_dead, kT0 - absl::Seconds(7));
  EXPECT_EQ(index.live(), 3);
  EXPECT_EQ(index.tenants().leased().at("t"), 1);
  EXPECT_NE(index.dead().Find(index.jobs(), 4), nullptr);
  EXPECT_EQ(index.Find(9), nullptr);
}

TEST(JobIndex, AnEmptyIndexHasNoOldestTimes) {
  JobIndex index;
  const JobIndex::Depth d = index.At(kT0);
  EXPECT_EQ(d.ready + d.delayed + d.leased + d.dead, 0);
  EXPECT_EQ(d.oldest_ready, absl::InfiniteFuture());
  EXPECT_EQ(d.oldest_dead, absl::InfiniteFuture());
  EXPECT_TRUE(index.CheckInvariants().ok());
}

TEST(JobIndex, DelayedJobsAreDueAtTheirTimeAndPromotedOnlyThen) {
  JobIndex index;
  index.Add(Queued(1, kT0 + absl::Seconds(10)), kT0);
  index.Add(Queued(2, kT0 + absl::Seconds(20)), kT0);
  // Before promotion, At(now) counts what is due as ready; Indexed() as the indexes stand.
  JobIndex::Depth at = index.At(kT0 + absl::Seconds(10));
  EXPECT_EQ(at.ready, 1);
  EXPECT_EQ(at.delayed, 1);
  EXPECT_EQ(at.oldest_ready, kT0 + absl::Seconds(10));
  EXPECT_EQ(index.Indexed().ready, 0);
  EXPECT_EQ(index.TakeNextReady(QueueConfig{}), nullptr) << "delayed jobs are not leasable";

  EXPECT_FALSE(index.PromoteDue(kT0 + absl::Seconds(9)));
  EXPECT_TRUE(index.PromoteDue(kT0 + absl::Seconds(10)));
  EXPECT_EQ(index.Indexed().ready, 1);
  EXPECT_EQ(index.Indexed().delayed, 1);
  EXPECT_TRUE(index.CheckInvariants().ok()) << index.CheckInvariants();
  Job* next = index.TakeNextReady(QueueConfig{});
  ASSERT_NE(next, nullptr);
  EXPECT_EQ(next->id, 1u);
  EXPECT_FALSE(index.CheckInvariants().ok()) << "a taken job is out of the indexes";
  index.Index(*next, kT0 + absl::Seconds(10));
  EXPECT_TRUE(index.CheckInvariants().ok()) << index.CheckInvariants();
}

TEST(JobIndex, LeasesExpireInDeadlineOrderAndOnlyWhenDue) {
  std::mt19937_64 rng(3);
  JobIndex index;
  index.Add(Queued(1, kT0), kT0);
  ASSERT_EQ(LeaseAll(index, kT0, absl::Seconds(30), rng), (std::vector<uint64_t>{1}));
  index.Add(Queued(2, kT0), kT0);
  ASSERT_EQ(LeaseAll(index, kT0, absl::Seconds(10), rng), (std::vector<uint64_t>{2}));
  EXPECT_TRUE(index.CheckInvariants().ok()) << index.CheckInvariants();
  EXPECT_EQ(index.Indexed().leased, 2);
  EXPECT_EQ(index.tenants().leased().at("t"), 2);

  EXPECT_EQ(index.TakeExpiredLease(kT0 + absl::Seconds(9)), nullptr);
  Job* expired = index.TakeExpiredLease(kT0 + absl::Seconds(30));
  ASSERT_NE(expired, nullptr);
  EXPECT_EQ(expired->id, 2u) << "the earlier deadline first";
  LeaseBook::EndByExpiry(*expired);
  index.Requeue(*expired, kT0 + absl::Seconds(31), kT0 + absl::Seconds(30));
  EXPECT_EQ(index.tenants().leased().at("t"), 1);
  EXPECT_EQ(index.Indexed().delayed, 1);
  EXPECT_TRUE(index.CheckInvariants().ok()) << index.CheckInvariants();

  Job& one = *index.Find(1);
  index.ExtendLease(one, kT0 + absl::Minutes(5));
  EXPECT_EQ(index.TakeExpiredLease(kT0 + absl::Seconds(30)), nullptr) << "extended";
  EXPECT_TRUE(index.CheckInvariants().ok()) << index.CheckInvariants();
}

TEST(JobIndex, KillMovesAJobToTheLaneAndEraseForgetsIt) {
  std::mt19937_64 rng(3);
  JobIndex index;
  index.Add(Queued(1, kT0), kT0);
  index.Add(Queued(2, kT0), kT0);
  LeaseAll(index, kT0, absl::Seconds(30), rng);
  Job& job = *index.Find(1);
  index.Unindex(job);
  LeaseBook::EndByNack(job, "bad input", FailureClass::kPermanent, kT0 + absl::Seconds(1));
  index.Kill(job, "permanent failure: bad input", kT0 + absl::Seconds(1));
  EXPECT_EQ(job.state, JobState::kDead);
  EXPECT_TRUE(job.lease_token.value().empty());
  EXPECT_EQ(index.Indexed().dead, 1);
  EXPECT_EQ(index.Indexed().oldest_dead, kT0 + absl::Seconds(1));
  EXPECT_EQ(index.live(), 1);
  EXPECT_TRUE(index.CheckInvariants().ok()) << index.CheckInvariants();

  index.Erase(1);  // discarded
  index.Erase(2);  // acked
  EXPECT_TRUE(index.jobs().empty());
  const JobIndex::Depth d = index.Indexed();
  EXPECT_EQ(d.ready + d.delayed + d.leased + d.dead, 0);
  EXPECT_TRUE(index.tenants().leased().empty());
  EXPECT_TRUE(index.CheckInvariants().ok()) << index.CheckInvariants();
}

TEST(JobIndex, ChangingAnIndexedJobInPlaceIsCaught) {
  JobIndex index;
  index.Add(Queued(1, kT0), kT0);
  Job& job = *index.Find(1);
  job.state = JobState::kDead;  // without Unindex / Kill
  EXPECT_EQ(index.CheckInvariants().code(), absl::StatusCode::kInternal);
}

}  // namespace
}  // namespace conduit::work_queue
