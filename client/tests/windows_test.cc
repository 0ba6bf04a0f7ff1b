// Event-time windows fed by hand: event times are chosen by the test (no clock is read), records
// arrive out of order, and every expectation names the exact results.
#include "client/windows.h"

#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

namespace conduit::client {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

absl::Time T(int64_t seconds) { return absl::FromUnixSeconds(seconds); }

// A record of `key` with event time `seconds`; its append time is far later, so a window that
// used the append time would show it.
ConsumedRecord Rec(std::string key, int64_t seconds, int32_t partition = 0, int64_t offset = 0,
                   std::string value = "1") {
  ConsumedRecord r;
  r.topic = "orders";
  r.partition = partition;
  r.offset = offset;
  r.key = std::move(key);
  r.value = std::move(value);
  r.append_time = T(1'000'000);
  r.event_time = T(seconds);
  return r;
}

// A result as a comparable string: "key [start,end)=value" with " correction" when marked.
std::string Str(const WindowResult<int64_t>& r) {
  return absl::StrCat(r.key.value_or("-"), " [", absl::ToUnixSeconds(r.window.start), ",",
                      absl::ToUnixSeconds(r.window.end), ")=", r.value,
                      r.correction ? " correction" : "");
}

std::vector<std::string> Strs(const WindowOutput<int64_t>& out) {
  std::vector<std::string> s;
  for (const auto& r : out.results) s.push_back(Str(r));
  return s;
}

WindowOperator<int64_t> Counter(WindowOptions options) {
  auto op = WindowOperator<int64_t>::Create(std::move(options), CountAggregate());
  EXPECT_TRUE(op.ok()) << op.status();
  return *std::move(op);
}

TEST(FixedWindows, CountPerKeyAndFireOnceTheWatermarkPassesTheEnd) {
  auto op =
      Counter({.spec = WindowSpec::Fixed(absl::Seconds(10)), .allowed_lateness = absl::Seconds(5)});
  EXPECT_THAT(Strs(op.Add(Rec("a", 7))), IsEmpty());
  EXPECT_THAT(Strs(op.Add(Rec("a", 1))), IsEmpty());  // out of order, within lateness
  EXPECT_THAT(Strs(op.Add(Rec("b", 3))), IsEmpty());
  EXPECT_THAT(Strs(op.Add(Rec("a", 12))), IsEmpty());
  EXPECT_EQ(op.watermark(), T(7));
  // Behind the watermark (4 < 7) but its window has not fired: simply added.
  EXPECT_THAT(Strs(op.Add(Rec("a", 4))), IsEmpty());
  EXPECT_THAT(Strs(op.Add(Rec("b", 14))), IsEmpty());  // watermark 9: [0,10) still open
  EXPECT_THAT(Strs(op.Add(Rec("a", 16))), ElementsAre("a [0,10)=3", "b [0,10)=1"));
  EXPECT_THAT(Strs(op.Add(Rec("a", 40))), ElementsAre("a [10,20)=2", "b [10,20)=1"));
  // Fired windows stay for late records (drop_after is infinite), and a's [40,50) waits.
  EXPECT_EQ(op.windows_held(), 5u);
}

TEST(FixedWindows, FallBackToTheAppendTime) {
  auto op = Counter({.spec = WindowSpec::Fixed(absl::Seconds(10))});
  ConsumedRecord no_event_time = Rec("a", 0);
  no_event_time.event_time.reset();
  no_event_time.append_time = T(25);
  EXPECT_EQ(EventTimeOf(no_event_time), T(25));
  EXPECT_THAT(Strs(op.Add(no_event_time)), IsEmpty());
  EXPECT_THAT(Strs(op.Add(Rec("a", 31))), ElementsAre("a [20,30)=1"));
}

TEST(SlidingWindows, EachRecordCountsInEveryWindowThatHoldsIt) {
  EXPECT_THAT(WindowSpec::Sliding(absl::Seconds(10), absl::Seconds(5)).WindowsOf(T(7)),
              ElementsAre(Window{T(0), T(10)}, Window{T(5), T(15)}));
  auto op = WindowOperator<int64_t>::Create(
      {.spec = WindowSpec::Sliding(absl::Seconds(10), absl::Seconds(5)),
       .allowed_lateness = absl::Seconds(10)},
      SumAggregate([](const ConsumedRecord& r) { return std::stoll(r.value.value_or("0")); }));
  ASSERT_TRUE(op.ok()) << op.status();
  EXPECT_THAT(Strs(op->Add(Rec("a", 7, 0, 0, "100"))), IsEmpty());
  EXPECT_THAT(Strs(op->Add(Rec("a", 12, 0, 1, "20"))), IsEmpty());
  EXPECT_THAT(Strs(op->Add(Rec("a", 3, 0, 2, "3"))), IsEmpty());  // out of order
  EXPECT_THAT(Strs(op->Add(Rec("a", 30, 0, 3, "4000"))),
              ElementsAre("a [-5,5)=3", "a [0,10)=103", "a [5,15)=120", "a [10,20)=20"));
  EXPECT_THAT(Strs(op->Add(Rec("a", 50, 0, 4, "1"))),
              ElementsAre("a [25,35)=4000", "a [30,40)=4000"));
}

TEST(SessionWindows, RecordsWithinTheGapJoinAndABridgingRecordMergesTwoSessions) {
  auto op = Counter(
      {.spec = WindowSpec::Session(absl::Seconds(10)), .allowed_lateness = absl::Seconds(100)});
  EXPECT_THAT(Strs(op.Add(Rec("a", 0))), IsEmpty());   // a: [0,10)
  EXPECT_THAT(Strs(op.Add(Rec("a", 18))), IsEmpty());  // a: [0,10) [18,28)
  EXPECT_THAT(Strs(op.Add(Rec("b", 2))), IsEmpty());   // b: [2,12)
  EXPECT_THAT(Strs(op.Add(Rec("b", 6))), IsEmpty());   // b: [2,16), within the gap
  EXPECT_EQ(op.windows_held(), 3u);
  EXPECT_THAT(Strs(op.Add(Rec("a", 9))), IsEmpty());  // [9,19) touches both: a: [0,28)
  EXPECT_EQ(op.windows_held(), 2u);
  EXPECT_THAT(Strs(op.Add(Rec("c", 127))), ElementsAre("b [2,16)=2"));  // watermark 27
  EXPECT_THAT(Strs(op.Add(Rec("c", 128))), ElementsAre("a [0,28)=3"));
}

TEST(SessionWindows, ALateRecordTouchingAFiredSessionIsACorrectionOfTheMergedSession) {
  auto op = Counter({.spec = WindowSpec::Session(absl::Seconds(10))});
  EXPECT_THAT(Strs(op.Add(Rec("a", 0))), IsEmpty());
  EXPECT_THAT(Strs(op.Add(Rec("a", 5))), IsEmpty());
  EXPECT_THAT(Strs(op.Add(Rec("b", 20))), ElementsAre("a [0,15)=2"));
  // [12,22) touches the fired [0,15): the merged [0,22) is not over yet (watermark 20).
  EXPECT_THAT(Strs(op.Add(Rec("a", 12))), IsEmpty());
  EXPECT_THAT(Strs(op.Add(Rec("b", 25))), ElementsAre("a [0,22)=3 correction"));
}

TEST(LatePolicy, CorrectEmitsTheUpdatedResultMarkedAsACorrection) {
  auto op =
      Counter({.spec = WindowSpec::Fixed(absl::Seconds(10)), .late_policy = LatePolicy::kCorrect});
  op.Add(Rec("a", 1));
  op.Add(Rec("a", 2));
  EXPECT_THAT(Strs(op.Add(Rec("a", 15))), ElementsAre("a [0,10)=2"));
  EXPECT_THAT(Strs(op.Add(Rec("a", 3))), ElementsAre("a [0,10)=3 correction"));
  EXPECT_THAT(Strs(op.Add(Rec("a", 4))), ElementsAre("a [0,10)=4 correction"));
  // A key with nothing in that window yet: its first result, not a correction.
  EXPECT_THAT(Strs(op.Add(Rec("b", 5))), ElementsAre("b [0,10)=1"));
  EXPECT_EQ(op.dropped(), 0);
}

TEST(LatePolicy, SideOutputGetsTheRecordAndTheWindowStaysAsItFired) {
  auto op = Counter(
      {.spec = WindowSpec::Fixed(absl::Seconds(10)), .late_policy = LatePolicy::kSideOutput});
  op.Add(Rec("a", 1, 0, 0));
  EXPECT_THAT(Strs(op.Add(Rec("a", 15, 0, 1))), ElementsAre("a [0,10)=1"));
  WindowOutput<int64_t> out = op.Add(Rec("a", 3, 0, 2));
  EXPECT_THAT(Strs(out), IsEmpty());
  ASSERT_EQ(out.side_output.size(), 1u);
  EXPECT_EQ(out.side_output[0].offset, 2);
  EXPECT_EQ(out.side_output[0].event_time, T(3));
  // The late record is in no window: [10,20) fires with the one record it got.
  EXPECT_THAT(Strs(op.Add(Rec("a", 20, 0, 3))), ElementsAre("a [10,20)=1"));
  EXPECT_EQ(op.dropped(), 0);
}

TEST(LatePolicy, RecordsLaterThanTheThresholdBeyondTheWindowEndAreDroppedAndCounted) {
  auto op = Counter({.spec = WindowSpec::Fixed(absl::Seconds(10)),
                     .late_policy = LatePolicy::kCorrect,
                     .drop_after = absl::Seconds(5)});
  op.Add(Rec("a", 1));
  EXPECT_THAT(Strs(op.Add(Rec("a", 12))), ElementsAre("a [0,10)=1"));
  // Watermark 12, 2 s past the end: within the threshold.
  EXPECT_THAT(Strs(op.Add(Rec("a", 2))), ElementsAre("a [0,10)=2 correction"));
  EXPECT_THAT(Strs(op.Add(Rec("a", 20))), ElementsAre("a [10,20)=1"));
  EXPECT_EQ(op.windows_held(), 2u);  // [0,10) freed at watermark 15; [10,20) and [20,30) held
  // Watermark 20, 10 s past [0,10)'s end: dropped and counted; [10,20) still takes corrections.
  WindowOutput<int64_t> out = op.Add(Rec("a", 3));
  EXPECT_THAT(Strs(out), IsEmpty());
  EXPECT_THAT(out.side_output, IsEmpty());
  EXPECT_EQ(op.dropped(), 1);
  EXPECT_THAT(Strs(op.Add(Rec("a", 14))), ElementsAre("a [10,20)=2 correction"));
  op.Add(Rec("b", 9));
  EXPECT_EQ(op.dropped(), 2);
}

TEST(Watermark, ASlowPartitionHoldsItBack) {
  auto op = Counter({.spec = WindowSpec::Fixed(absl::Seconds(10))});
  EXPECT_THAT(Strs(op.Add(Rec("a", 1, /*partition=*/0))), IsEmpty());
  EXPECT_THAT(Strs(op.Add(Rec("a", 2, /*partition=*/1))), IsEmpty());
  EXPECT_THAT(Strs(op.Add(Rec("a", 15, 0))), IsEmpty());
  EXPECT_THAT(Strs(op.Add(Rec("a", 30, 0))), IsEmpty());
  EXPECT_EQ(op.watermark(), T(2));  // partition 1 has reached 2 only
  EXPECT_THAT(Strs(op.Add(Rec("a", 9, 1))), IsEmpty());
  EXPECT_EQ(op.watermark(), T(9));
  EXPECT_THAT(Strs(op.Add(Rec("a", 11, 1))), ElementsAre("a [0,10)=3"));
  EXPECT_EQ(op.watermark(), T(11));
  // A partition seen for the first time, behind the watermark, does not move it back (its
  // record is late: a first result for b under the default kCorrect).
  EXPECT_THAT(Strs(op.Add(Rec("b", 5, 2))), ElementsAre("b [0,10)=1"));
  EXPECT_EQ(op.watermark(), T(11));
  EXPECT_THAT(Strs(op.Add(Rec("a", 25, 2))), IsEmpty());  // partition 1 still at 11
  EXPECT_EQ(op.watermark(), T(11));
  EXPECT_THAT(Strs(op.Add(Rec("a", 22, 1))), ElementsAre("a [10,20)=2"));
  EXPECT_EQ(op.watermark(), T(22));
}

TEST(Watermark, AllowedLatenessIsSubtractedPerPartition) {
  Watermark wm(absl::Seconds(3));
  EXPECT_EQ(wm.current(), absl::InfinitePast());
  wm.Observe({"t", 0}, T(10), std::nullopt);
  EXPECT_EQ(wm.current(), T(7));
  wm.Observe({"t", 1}, T(20), std::nullopt);
  EXPECT_EQ(wm.current(), T(7));
  wm.Observe({"t", 0}, T(5), std::nullopt);  // out of order: the partition's max stays 10
  EXPECT_EQ(wm.current(), T(7));
  wm.Observe({"t", 0}, T(30), std::nullopt);
  EXPECT_EQ(wm.current(), T(17));
}

TEST(Watermark, AnIdlePartitionStopsHoldingItBackUntilItsNextRecord) {
  auto op =
      Counter({.spec = WindowSpec::Fixed(absl::Seconds(10)), .idle_timeout = absl::Seconds(60)});
  op.Add(Rec("a", 1, 0), T(1000));
  op.Add(Rec("a", 2, 1), T(1000));
  EXPECT_THAT(Strs(op.Add(Rec("a", 15, 0), T(1030))), IsEmpty());
  EXPECT_EQ(op.watermark(), T(2));
  EXPECT_THAT(Strs(op.AdvanceIdle(T(1059))), IsEmpty());  // partition 1 quiet for 59 s
  EXPECT_THAT(Strs(op.AdvanceIdle(T(1060))), ElementsAre("a [0,10)=2"));
  EXPECT_EQ(op.watermark(), T(15));
  op.Add(Rec("a", 16, 1), T(1061));  // partition 1 is back and holds it at 16
  op.Add(Rec("a", 40, 0), T(1062));
  EXPECT_EQ(op.watermark(), T(16));
}

TEST(WindowOperator, CreateRefusesBadOptions) {
  auto code = [](WindowOptions o, Aggregate<int64_t> a = CountAggregate()) {
    return WindowOperator<int64_t>::Create(std::move(o), std::move(a)).status().code();
  };
  EXPECT_EQ(code({.spec = WindowSpec::Fixed(absl::ZeroDuration())}),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code({.spec = WindowSpec::Sliding(absl::Seconds(5), absl::Seconds(10))}),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code({.spec = WindowSpec::Session(-absl::Seconds(1))}),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code({.allowed_lateness = -absl::Seconds(1)}), absl::StatusCode::kInvalidArgument);
  Aggregate<int64_t> no_merge = CountAggregate();
  no_merge.merge = nullptr;
  EXPECT_EQ(code({.spec = WindowSpec::Session(absl::Seconds(1))}, no_merge),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code({.spec = WindowSpec::Fixed(absl::Seconds(1))}, no_merge), absl::StatusCode::kOk);
}

}  // namespace
}  // namespace conduit::client
