#include "common/security/quota.h"

#include <gtest/gtest.h>

namespace conduit::security {
namespace {

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

}  // namespace
}  // namespace conduit::security
