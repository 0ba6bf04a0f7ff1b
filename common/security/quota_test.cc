#include "common/security/quota.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace conduit::security {
namespace {

// Writes down what the book tells it, one line per call.
class RecordingObserver final : public QuotaObserver {
 public:
  void OnUsed(absl::string_view principal, QuotaKind kind, double amount) override {
    absl::MutexLock lock(&mu_);
    events_.push_back(absl::StrCat("used ", principal, " ", QuotaKindName(kind), " ", amount));
  }
  void OnThrottled(absl::string_view principal, QuotaKind kind,
                   absl::Duration retry_after) override {
    absl::MutexLock lock(&mu_);
    events_.push_back(absl::StrCat("throttled ", principal, " ", QuotaKindName(kind), " ",
                                   absl::FormatDuration(retry_after)));
  }
  std::vector<std::string> events() {
    absl::MutexLock lock(&mu_);
    return events_;
  }

 private:
  absl::Mutex mu_;
  std::vector<std::string> events_ ABSL_GUARDED_BY(mu_);
};

TEST(QuotaBook, ABurstOfOneSecondThenTheRateAndAWaitThatIsEnough) {
  time::FakeClock clock;
  QuotaBook book(QuotaRates{.produce_bytes = 1000}, &clock);
  EXPECT_TRUE(book.Charge("User:a", QuotaKind::kProduceBytes, 600).allowed);
  EXPECT_TRUE(book.Charge("User:a", QuotaKind::kProduceBytes, 400).allowed);
  const QuotaBook::Verdict over = book.Charge("User:a", QuotaKind::kProduceBytes, 500);
  ASSERT_FALSE(over.allowed);
  EXPECT_EQ(over.retry_after, absl::Milliseconds(500));  // 500 bytes at 1000/s
  clock.Advance(absl::Milliseconds(499));
  EXPECT_FALSE(book.Charge("User:a", QuotaKind::kProduceBytes, 500).allowed);
  clock.Advance(absl::Milliseconds(1));
  EXPECT_TRUE(book.Charge("User:a", QuotaKind::kProduceBytes, 500).allowed)
      << "waiting as told is enough";
  const absl::Status refusal = book.Refusal("User:a", QuotaKind::kProduceBytes,
                                            book.Charge("User:a", QuotaKind::kProduceBytes, 1));
  EXPECT_EQ(refusal.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(refusal.message().find("produce_bytes"), std::string::npos) << refusal.message();
}

TEST(QuotaBook, PrincipalsAndKindsHaveTheirOwnBuckets) {
  time::FakeClock clock;
  QuotaBook book(QuotaRates{.produce_bytes = 100, .requests = 2}, &clock);
  EXPECT_TRUE(book.Charge("User:a", QuotaKind::kProduceBytes, 100).allowed);
  EXPECT_FALSE(book.Charge("User:a", QuotaKind::kProduceBytes, 1).allowed);
  EXPECT_TRUE(book.Charge("User:b", QuotaKind::kProduceBytes, 100).allowed) << "another principal";
  EXPECT_TRUE(book.Charge("User:a", QuotaKind::kRequests, 1).allowed) << "another kind";
  EXPECT_TRUE(book.Charge("User:a", QuotaKind::kFetchBytes, 1e9).allowed) << "no limit set";
}

TEST(QuotaBook, ARequestLargerThanTheBucketPassesOnceItIsFullAndIsPaidBack) {
  time::FakeClock clock;
  QuotaBook book(QuotaRates{.fetch_bytes = 100}, &clock);
  EXPECT_TRUE(book.Charge("User:a", QuotaKind::kFetchBytes, 300).allowed);
  const QuotaBook::Verdict next = book.Charge("User:a", QuotaKind::kFetchBytes, 1);
  ASSERT_FALSE(next.allowed);
  EXPECT_EQ(next.retry_after, absl::Milliseconds(2010)) << "200 owed plus 1 at 100/s";
}

TEST(QuotaBook, UseMeasuredAfterTheFactIsPaidBackBeforeTheNextCharge) {
  time::FakeClock clock;
  QuotaBook book(QuotaRates{.fetch_bytes = 1000}, &clock);
  ASSERT_TRUE(book.Charge("User:a", QuotaKind::kFetchBytes, 1).allowed);
  book.Debit("User:a", QuotaKind::kFetchBytes, 2999);  // a 3000-byte answer
  const QuotaBook::Verdict next = book.Charge("User:a", QuotaKind::kFetchBytes, 1);
  ASSERT_FALSE(next.allowed);
  EXPECT_EQ(next.retry_after, absl::Milliseconds(2001));
  clock.Advance(absl::Milliseconds(2001));
  EXPECT_TRUE(book.Charge("User:a", QuotaKind::kFetchBytes, 1).allowed);
}

TEST(QuotaBook, TheObserverIsToldWhatEachPrincipalUsedAndHowLongItWasToldToWait) {
  time::FakeClock clock;
  QuotaBook book(QuotaRates{.fetch_bytes = 1000, .requests = 1}, &clock);
  auto observer = std::make_shared<RecordingObserver>();
  book.SetObserver(observer);
  ASSERT_TRUE(book.Charge("User:a", QuotaKind::kFetchBytes, 1).allowed);
  book.Debit("User:a", QuotaKind::kFetchBytes, 2999);
  ASSERT_FALSE(book.Charge("User:a", QuotaKind::kFetchBytes, 1).allowed);
  ASSERT_TRUE(book.Charge("User:b", QuotaKind::kFetchBytes, 1).allowed);
  ASSERT_TRUE(book.Charge("User:a", QuotaKind::kRequests, 1).allowed);
  ASSERT_FALSE(book.Charge("User:a", QuotaKind::kRequests, 1).allowed);
  ASSERT_TRUE(book.Charge("User:a", QuotaKind::kProduceBytes, 500).allowed);  // no limit set
  EXPECT_EQ(
      observer->events(),
      (std::vector<std::string>{"used User:a fetch_bytes 1", "used User:a fetch_bytes 2999",
                                "throttled User:a fetch_bytes 2.001s", "used User:b fetch_bytes 1",
                                "used User:a requests 1", "throttled User:a requests 1s"}))
      << "a kind without a rate is neither limited nor observed";

  book.SetObserver(nullptr);
  ASSERT_FALSE(book.Charge("User:a", QuotaKind::kRequests, 1).allowed);
  EXPECT_EQ(observer->events().size(), 6u) << "removed observers hear nothing more";
}

// A flood of distinct principals does not grow the book without bound: buckets that refilled to
// full are forgotten (a full bucket decides exactly as no bucket does), while a principal in
// debt keeps its bucket and stays refused until the debt is paid.
TEST(QuotaBook, FullBucketsAreForgottenAndDebtsAreNot) {
  time::FakeClock clock;
  QuotaBook book(QuotaRates{.fetch_bytes = 1000}, &clock);
  book.Debit("User:debtor", QuotaKind::kFetchBytes, 5000);  // 4 s of debt past the burst
  for (int i = 0; i < 100000; ++i) {
    ASSERT_TRUE(book.Charge(absl::StrCat("User:jwt-", i), QuotaKind::kFetchBytes, 10).allowed);
    if (i % 1000 == 999) clock.Advance(absl::Milliseconds(100));
  }
  // 10 s passed in steps; only about the last second's principals are not full yet.
  EXPECT_LE(book.buckets(), 2 * 1024u + 2000u);
  EXPECT_LT(clock.Monotonic(), absl::Seconds(11));
  const QuotaBook::Verdict debtor = book.Charge("User:debtor", QuotaKind::kFetchBytes, 1);
  EXPECT_TRUE(debtor.allowed) << "the 4 s debt is paid by now";

  // A debt older than the flood is still owed afterwards.
  book.Debit("User:late", QuotaKind::kFetchBytes, 100000);
  for (int i = 0; i < 5000; ++i) {
    book.Charge(absl::StrCat("User:other-", i), QuotaKind::kFetchBytes, 10);
  }
  clock.Advance(absl::Seconds(2));
  for (int i = 0; i < 5000; ++i) {
    book.Charge(absl::StrCat("User:later-", i), QuotaKind::kFetchBytes, 10);
  }
  const QuotaBook::Verdict late = book.Charge("User:late", QuotaKind::kFetchBytes, 1);
  EXPECT_FALSE(late.allowed) << "its bucket was not forgotten";
  EXPECT_GE(late.retry_after, absl::Seconds(90));
}

}  // namespace
}  // namespace conduit::security
