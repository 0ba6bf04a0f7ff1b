#include "services/work_queue/domain/dead_letter_lane.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace conduit::work_queue {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1'000'000);

// A lane and the jobs it indexes.
struct Lane {
  JobsById jobs;
  DeadLetterLane lane;

  void Kill(uint64_t id, int64_t died_s, std::string reason = "boom", std::string tenant = "") {
    Job job;
    job.id = id;
    job.state = JobState::kDead;
    job.died_at = kT0 + absl::Seconds(died_s);
    job.death_reason = std::move(reason);
    job.tenant = std::move(tenant);
    lane.Add(job);
    jobs.emplace(id, std::move(job));
  }
  void Redrive(uint64_t id) {
    Job& job = jobs.at(id);
    lane.Remove(job);
    job.state = JobState::kQueued;
  }
  DeadLetterPage Page(const DeadLetterFilter& filter, int32_t size, const std::string& token) {
    auto after = DeadLetterLane::ParsePageToken(token);
    EXPECT_TRUE(after.ok()) << after.status();
    return lane.Page(jobs, filter, size, *after);
  }
  // Every id the pages list, walking from the first page to the last.
  std::vector<uint64_t> WalkPages(const DeadLetterFilter& filter, int32_t size) {
    std::vector<uint64_t> out;
    std::string token;
    do {
      DeadLetterPage page = Page(filter, size, token);
      for (const Job& job : page.jobs) {
        EXPECT_EQ(job.state, JobState::kDead);
        out.push_back(job.id);
      }
      token = page.next_page_token;
    } while (!token.empty());
    return out;
  }
};

std::vector<uint64_t> Ids(const DeadLetterPage& page) {
  std::vector<uint64_t> ids;
  for (const Job& job : page.jobs) ids.push_back(job.id);
  return ids;
}

TEST(DeadLetterLane, PagesListEveryDeadLetterOnceInTheOrderTheyDied) {
  Lane l;
  l.Kill(5, 3);
  l.Kill(2, 1);
  l.Kill(9, 1);  // same death time: by id
  l.Kill(1, 2);
  l.Kill(7, 0);
  EXPECT_EQ(l.WalkPages({}, 2), (std::vector<uint64_t>{7, 2, 9, 1, 5}));
  EXPECT_EQ(l.WalkPages({}, 5), (std::vector<uint64_t>{7, 2, 9, 1, 5}));
  EXPECT_EQ(l.Page({}, 5, "").next_page_token, "") << "no empty last page";
}

TEST(DeadLetterLane, APageContinuesAfterItsTokenWhenListedJobsLeaveTheLane) {
  Lane l;
  for (uint64_t id = 1; id <= 6; ++id) l.Kill(id, static_cast<int64_t>(id));
  DeadLetterPage first = l.Page({}, 2, "");
  ASSERT_EQ(Ids(first), (std::vector<uint64_t>{1, 2}));
  l.Redrive(2);  // the token's own job is gone
  l.Redrive(1);
  EXPECT_EQ(Ids(l.Page({}, 2, first.next_page_token)), (std::vector<uint64_t>{3, 4}));
  l.Kill(7, 0);  // died before the cursor (a clock step back): not on a later page
  EXPECT_EQ(Ids(l.Page({}, 10, first.next_page_token)), (std::vector<uint64_t>{3, 4, 5, 6}));
}

TEST(DeadLetterLane, FiltersNarrowPagesAndSelections) {
  Lane l;
  l.Kill(1, 1, "smtp 451", "acme");
  l.Kill(2, 2, "smtp 550", "acme");
  l.Kill(3, 3, "smtp 451", "zeta");
  l.Kill(4, 4, "timeout", "acme");
  DeadLetterFilter by_reason{.reason_contains = "451"};
  EXPECT_EQ(l.WalkPages(by_reason, 1), (std::vector<uint64_t>{1, 3}));
  DeadLetterFilter by_tenant{.tenant = "acme"};
  EXPECT_EQ(l.WalkPages(by_tenant, 2), (std::vector<uint64_t>{1, 2, 4}));
  DeadLetterFilter by_time{.died_after = kT0 + absl::Seconds(2),
                           .died_before = kT0 + absl::Seconds(4)};
  EXPECT_EQ(l.WalkPages(by_time, 1), (std::vector<uint64_t>{2, 3}));
  DeadLetterSelection selection{.filter = by_tenant};
  EXPECT_EQ(l.lane.Select(l.jobs, selection), (std::vector<uint64_t>{1, 2, 4}));
  selection.limit = 2;
  EXPECT_EQ(l.lane.Select(l.jobs, selection), (std::vector<uint64_t>{1, 2}));
}

TEST(DeadLetterLane, SelectedIdsComeOnceEachAndUpToTheLimit) {
  Lane l;
  l.Kill(1, 1);
  DeadLetterSelection selection{.ids = {3, 1, 3, 2, 1}};
  EXPECT_EQ(l.lane.Select(l.jobs, selection), (std::vector<uint64_t>{3, 1, 2}));
  selection.limit = 2;
  EXPECT_EQ(l.lane.Select(l.jobs, selection), (std::vector<uint64_t>{3, 1}));
}

TEST(DeadLetterLane, OnlyDeadLettersInTheLaneAreFound) {
  Lane l;
  l.Kill(1, 1);
  l.Kill(2, 2);
  Job ready;
  ready.id = 3;
  l.jobs.emplace(3, ready);
  l.Redrive(2);
  ASSERT_NE(l.lane.Find(l.jobs, 1), nullptr);
  EXPECT_EQ(l.lane.Find(l.jobs, 1)->id, 1u);
  EXPECT_EQ(l.lane.Find(l.jobs, 2), nullptr) << "redriven";
  EXPECT_EQ(l.lane.Find(l.jobs, 3), nullptr) << "never dead";
  EXPECT_EQ(l.lane.Find(l.jobs, 4), nullptr) << "unknown";
  EXPECT_EQ(l.lane.FirstNotDead(l.jobs, {1}), std::nullopt);
  EXPECT_EQ(l.lane.FirstNotDead(l.jobs, {1, 3, 2}), 3u);
  EXPECT_EQ(l.lane.FirstNotDead(l.jobs, {}), std::nullopt);
}

TEST(DeadLetterLane, OldestDeathAndSize) {
  Lane l;
  EXPECT_TRUE(l.lane.empty());
  l.Kill(1, 5);
  l.Kill(2, 3);
  EXPECT_EQ(l.lane.size(), 2u);
  EXPECT_EQ(l.lane.OldestDeath(), kT0 + absl::Seconds(3));
  l.Redrive(2);
  EXPECT_EQ(l.lane.OldestDeath(), kT0 + absl::Seconds(5));
}

TEST(DeadLetterLane, PageTokensRoundTripAndMalformedOnesAreRefused) {
  Job job;
  job.id = 17;
  job.died_at = kT0 + absl::Microseconds(3);
  const std::string token = DeadLetterLane::PageToken(job);
  auto cursor = DeadLetterLane::ParsePageToken(token);
  ASSERT_TRUE(cursor.ok());
  EXPECT_EQ(*cursor, DeadLetterLane::Cursor(job.died_at, 17));
  EXPECT_EQ(*DeadLetterLane::ParsePageToken(""), std::nullopt);
  for (const std::string bad : {"x", "1:", ":1", "1:2:3", "a:1", "1:-1"}) {
    EXPECT_EQ(DeadLetterLane::ParsePageToken(bad).status().code(),
              absl::StatusCode::kInvalidArgument)
        << bad;
  }
}

}  // namespace
}  // namespace conduit::work_queue
