#include "services/work_queue/domain/dead_letter_lane.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace conduit::work_queue {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1'000'000);

// A lane, the job records it indexes (what the store holds), and the ids read through Reader().
struct Lane {
  JobsById jobs;
  DeadLetterLane lane;
  std::vector<uint64_t> reads;

  JobReader Reader() {
    return [this](uint64_t id) -> absl::StatusOr<Job> {
      reads.push_back(id);
      auto it = jobs.find(id);
      if (it == jobs.end()) return absl::NotFoundError(absl::StrCat("job ", id, " is not stored"));
      return it->second;
    };
  }

  void Kill(uint64_t id, int64_t died_s, std::string reason = "boom", std::string tenant = "") {
    Job job;
    job.id = id;
    job.state = JobState::kDead;
    job.died_at = kT0 + absl::Seconds(died_s);
    job.death_reason = std::move(reason);
    job.tenant = std::move(tenant);
    lane.Add(id, job.died_at);
    jobs.emplace(id, std::move(job));
  }
  void Redrive(uint64_t id) {
    EXPECT_TRUE(lane.Remove(id)) << id;
    jobs.at(id).state = JobState::kQueued;
  }
  DeadLetterPage Page(const DeadLetterFilter& filter, int32_t size, const std::string& token) {
    auto after = DeadLetterLane::ParsePageToken(token);
    EXPECT_TRUE(after.ok()) << after.status();
    const std::optional<DeadLetterLane::Cursor> cursor = after.ok() ? *after : std::nullopt;
    absl::StatusOr<DeadLetterPage> page = lane.Page(Reader(), filter, size, cursor);
    EXPECT_TRUE(page.ok()) << page.status();
    return page.value_or(DeadLetterPage{});
  }
  // Every id the pages list, walking from the first page to the last.
  std::vector<uint64_t> WalkPages(const DeadLetterFilter& filter, int32_t size) {
    std::vector<uint64_t> out;
    std::string token;
    int pages = 0;
    do {
      DeadLetterPage page = Page(filter, size, token);
      EXPECT_FALSE(page.jobs.empty()) << "no empty page";
      for (const Job& job : page.jobs) {
        EXPECT_EQ(job.state, JobState::kDead);
        out.push_back(job.id);
      }
      token = page.next_page_token;
    } while (!token.empty() && ++pages < 100);
    return out;
  }
  std::vector<uint64_t> Select(const DeadLetterSelection& selection) {
    absl::StatusOr<std::vector<uint64_t>> ids = lane.Select(Reader(), selection);
    EXPECT_TRUE(ids.ok()) << ids.status();
    return ids.value_or(std::vector<uint64_t>{});
  }
};

// A reader for calls that must not need a record.
absl::StatusOr<Job> MustNotRead(uint64_t id) {
  ADD_FAILURE() << "read job " << id;
  return absl::InternalError("must not read");
}

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
  EXPECT_EQ(l.WalkPages({}, 1), (std::vector<uint64_t>{7, 2, 9, 1, 5}));
  EXPECT_EQ(l.WalkPages({}, 2), (std::vector<uint64_t>{7, 2, 9, 1, 5}));
  EXPECT_EQ(l.WalkPages({}, 5), (std::vector<uint64_t>{7, 2, 9, 1, 5}));
  EXPECT_EQ(l.Page({}, 5, "").next_page_token, "") << "no empty last page";
  EXPECT_EQ(l.Page({}, 2, "").next_page_token, DeadLetterLane::PageToken(l.jobs.at(2)));
  EXPECT_TRUE(l.Page({}, 2, "").jobs == l.Page({}, 2, "").jobs) << "the same page twice";
  EXPECT_TRUE(l.Page({}, 10, DeadLetterLane::PageToken(l.jobs.at(5))).jobs.empty())
      << "nothing after the last letter";
}

TEST(DeadLetterLane, AnEmptyLaneHasAnEmptyFirstPage) {
  Lane l;
  DeadLetterPage page = l.Page({}, 10, "");
  EXPECT_TRUE(page.jobs.empty());
  EXPECT_EQ(page.next_page_token, "");
  EXPECT_TRUE(l.Select({}).empty());
}

TEST(DeadLetterLane, APageContinuesAfterItsTokenWhenListedJobsLeaveTheLane) {
  Lane l;
  for (uint64_t id = 1; id <= 6; ++id) l.Kill(id, static_cast<int64_t>(id));
  DeadLetterPage first = l.Page({}, 2, "");
  ASSERT_EQ(Ids(first), (std::vector<uint64_t>{1, 2}));
  l.Redrive(2);  // the token's own job is gone
  l.Redrive(1);
  EXPECT_EQ(Ids(l.Page({}, 2, first.next_page_token)), (std::vector<uint64_t>{3, 4}));
  l.Redrive(3);  // gone from the next page before it is read: the page starts at the next one
  EXPECT_EQ(Ids(l.Page({}, 2, first.next_page_token)), (std::vector<uint64_t>{4, 5}));
  l.Kill(7, 0);  // died before the cursor (a clock step back): not on a later page
  EXPECT_EQ(Ids(l.Page({}, 10, first.next_page_token)), (std::vector<uint64_t>{4, 5, 6}));
  EXPECT_TRUE(l.lane.Check().ok()) << l.lane.Check();
}

TEST(DeadLetterLane, FiltersNarrowPagesAndSelections) {
  Lane l;
  l.Kill(1, 1, "smtp 451", "acme");
  l.Kill(2, 2, "smtp 550", "acme");
  l.Kill(3, 3, "smtp 451", "zeta");
  l.Kill(4, 4, "timeout", "acme");
  l.Kill(5, 5, "timeout", "zeta");
  const DeadLetterFilter by_reason{.reason_contains = "451"};
  EXPECT_EQ(l.WalkPages(by_reason, 1), (std::vector<uint64_t>{1, 3}));
  EXPECT_EQ(l.Page(by_reason, 2, "").next_page_token, "") << "no more match: no next page";
  const DeadLetterFilter by_tenant{.tenant = "acme"};
  EXPECT_EQ(l.WalkPages(by_tenant, 2), (std::vector<uint64_t>{1, 2, 4}));
  const DeadLetterFilter by_time{.died_after = kT0 + absl::Seconds(2),
                                 .died_before = kT0 + absl::Seconds(4)};
  EXPECT_EQ(l.WalkPages(by_time, 1), (std::vector<uint64_t>{2, 3}));
  EXPECT_EQ(l.WalkPages(by_time, 5), (std::vector<uint64_t>{2, 3}));
  const DeadLetterFilter all_of{
      .reason_contains = "smtp", .tenant = "acme", .died_after = kT0 + absl::Seconds(2)};
  EXPECT_EQ(l.WalkPages(all_of, 1), (std::vector<uint64_t>{2}));
  EXPECT_TRUE(l.Page(DeadLetterFilter{.tenant = "nobody"}, 3, "").jobs.empty());

  DeadLetterSelection selection{.filter = by_tenant};
  EXPECT_EQ(l.Select(selection), (std::vector<uint64_t>{1, 2, 4}));
  selection.limit = 2;
  EXPECT_EQ(l.Select(selection), (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(l.Select({.filter = by_reason}), (std::vector<uint64_t>{1, 3}));
  EXPECT_EQ(l.Select({.filter = by_time}), (std::vector<uint64_t>{2, 3}));
  EXPECT_EQ(l.Select({}), (std::vector<uint64_t>{1, 2, 3, 4, 5})) << "no filter: all";
}

TEST(DeadLetterLane, ATimeOnlyFilterOrSelectionNeedsNoRecord) {
  Lane l;
  for (uint64_t id = 1; id <= 8; ++id) l.Kill(id, static_cast<int64_t>(id));
  const DeadLetterFilter by_time{.died_after = kT0 + absl::Seconds(3),
                                 .died_before = kT0 + absl::Seconds(7)};
  absl::StatusOr<std::vector<uint64_t>> selected =
      l.lane.Select(MustNotRead, DeadLetterSelection{.filter = by_time, .limit = 3});
  ASSERT_TRUE(selected.ok()) << selected.status();
  EXPECT_EQ(*selected, (std::vector<uint64_t>{3, 4, 5}));
  selected = l.lane.Select(MustNotRead, DeadLetterSelection{.filter = by_time});
  ASSERT_TRUE(selected.ok()) << selected.status();
  EXPECT_EQ(*selected, (std::vector<uint64_t>{3, 4, 5, 6}));
  selected = l.lane.Select(MustNotRead, DeadLetterSelection{.ids = {8, 42}});
  ASSERT_TRUE(selected.ok()) << selected.status();
  EXPECT_EQ(*selected, (std::vector<uint64_t>{8, 42}));
  selected = l.lane.Select(MustNotRead, DeadLetterSelection{});
  ASSERT_TRUE(selected.ok()) << selected.status();
  EXPECT_EQ(selected->size(), 8u);

  // A page reads the records it lists, and none of those the time bounds leave out or that
  // come after the page.
  DeadLetterPage page = l.Page(by_time, 2, "");
  EXPECT_EQ(Ids(page), (std::vector<uint64_t>{3, 4}));
  EXPECT_EQ(l.reads, (std::vector<uint64_t>{3, 4}));
  l.reads.clear();
  page = l.Page(by_time, 2, page.next_page_token);
  EXPECT_EQ(Ids(page), (std::vector<uint64_t>{5, 6}));
  EXPECT_EQ(page.next_page_token, "");
  EXPECT_EQ(l.reads, (std::vector<uint64_t>{5, 6}));
  l.reads.clear();
  page = l.Page({}, 3, "");
  EXPECT_EQ(l.reads, (std::vector<uint64_t>{1, 2, 3}));
}

TEST(DeadLetterLane, AReaderErrorIsReturnedByPageAndSelect) {
  Lane l;
  l.Kill(1, 1, "boom", "acme");
  l.Kill(2, 2, "boom", "acme");
  l.Kill(3, 3, "boom", "acme");
  const absl::Status unreadable = absl::UnavailableError("job 2 could not be read");
  const JobReader failing = [&](uint64_t id) -> absl::StatusOr<Job> {
    if (id == 2) return unreadable;
    return l.jobs.at(id);
  };
  EXPECT_EQ(l.lane.Page(failing, {}, 10, std::nullopt).status(), unreadable);
  // A filter that needs records reads one past a full page, to know whether another matches.
  EXPECT_EQ(l.lane.Page(failing, {.tenant = "acme"}, 1, std::nullopt).status(), unreadable);
  EXPECT_EQ(
      l.lane.Page(failing, {.tenant = "acme"}, 1, DeadLetterLane::Cursor(kT0 + absl::Seconds(2), 2))
          .status()
          .code(),
      absl::StatusCode::kOk)
      << "a page after the unreadable job";
  EXPECT_EQ(l.lane.Select(failing, {.filter = {.reason_contains = "boom"}}).status(), unreadable);
  EXPECT_EQ(l.lane.Select(failing, {.filter = {.tenant = "acme"}, .limit = 1}).status().code(),
            absl::StatusCode::kOk)
      << "the limit is reached before job 2 is needed";
  // A record missing from the store fails the same way.
  l.jobs.erase(3);
  EXPECT_EQ(l.lane.Page(l.Reader(), {}, 10, std::nullopt).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(DeadLetterLane, SelectedIdsComeOnceEachAndUpToTheLimit) {
  Lane l;
  l.Kill(1, 1);
  DeadLetterSelection selection{.ids = {3, 1, 3, 2, 1}};
  EXPECT_EQ(l.Select(selection), (std::vector<uint64_t>{3, 1, 2})) << "as given, unchecked";
  selection.limit = 2;
  EXPECT_EQ(l.Select(selection), (std::vector<uint64_t>{3, 1}));
  selection.limit = 1;
  EXPECT_EQ(l.Select(selection), (std::vector<uint64_t>{3}));
  EXPECT_TRUE(l.reads.empty());
}

TEST(DeadLetterLane, OnlyLettersInTheLaneAreDead) {
  Lane l;
  l.Kill(1, 1);
  l.Kill(2, 2);
  l.Redrive(2);
  EXPECT_TRUE(l.lane.Contains(1));
  EXPECT_FALSE(l.lane.Contains(2)) << "redriven";
  EXPECT_FALSE(l.lane.Contains(3)) << "never dead";
  EXPECT_FALSE(l.lane.Remove(2)) << "already gone";
  EXPECT_FALSE(l.lane.Remove(3));
  EXPECT_EQ(l.lane.FirstNotDead({1}), std::nullopt);
  EXPECT_EQ(l.lane.FirstNotDead({1, 3, 2}), 3u);
  EXPECT_EQ(l.lane.FirstNotDead({2, 1}), 2u);
  EXPECT_EQ(l.lane.FirstNotDead({}), std::nullopt);
  EXPECT_EQ(l.WalkPages({}, 10), (std::vector<uint64_t>{1}));
  EXPECT_TRUE(l.lane.Check().ok()) << l.lane.Check();
}

TEST(DeadLetterLane, OldestDeathAndSize) {
  Lane l;
  EXPECT_TRUE(l.lane.empty());
  EXPECT_EQ(l.lane.size(), 0u);
  l.Kill(1, 5);
  l.Kill(2, 3);
  l.Kill(3, 3);
  EXPECT_FALSE(l.lane.empty());
  EXPECT_EQ(l.lane.size(), 3u);
  EXPECT_EQ(l.lane.OldestDeath(), kT0 + absl::Seconds(3));
  l.Redrive(2);
  EXPECT_EQ(l.lane.OldestDeath(), kT0 + absl::Seconds(3)) << "job 3 died at the same time";
  l.Redrive(3);
  EXPECT_EQ(l.lane.OldestDeath(), kT0 + absl::Seconds(5));
  EXPECT_EQ(l.lane.size(), 1u);
  l.Redrive(1);
  EXPECT_TRUE(l.lane.empty());
  EXPECT_TRUE(l.lane.Check().ok()) << l.lane.Check();
}

TEST(DeadLetterLane, PageTokensRoundTripAndMalformedOnesAreRefused) {
  Job job;
  job.id = 17;
  job.died_at = kT0 + absl::Microseconds(3);
  const std::string token = DeadLetterLane::PageToken(job);
  auto cursor = DeadLetterLane::ParsePageToken(token);
  ASSERT_TRUE(cursor.ok()) << cursor.status();
  EXPECT_EQ(*cursor, DeadLetterLane::Cursor(job.died_at, 17));
  auto first = DeadLetterLane::ParsePageToken("");
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(*first, std::nullopt);
  for (const std::string bad : {"x", "1:", ":1", "1:2:3", "a:1", "1:-1", "1:x", " "}) {
    EXPECT_EQ(DeadLetterLane::ParsePageToken(bad).status().code(),
              absl::StatusCode::kInvalidArgument)
        << bad;
  }
}

}  // namespace
}  // namespace conduit::work_queue
