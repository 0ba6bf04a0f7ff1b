#include "services/work_queue/domain/lease_book.h"

#include <random>

#include <gtest/gtest.h>

namespace conduit::work_queue {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1'000'000);

Job LeasedAt(uint64_t id, absl::Time now, absl::Duration visibility, std::mt19937_64& rng) {
  Job job;
  job.id = id;
  LeaseBook::Grant(job, "w1", now, visibility, rng);
  return job;
}

TEST(LeaseBook, GrantGivesAFreshTokenADeadlineAndANewAttempt) {
  std::mt19937_64 rng(7);
  Job job = LeasedAt(42, kT0, absl::Seconds(30), rng);
  EXPECT_EQ(job.state, JobState::kLeased);
  EXPECT_EQ(job.lease_deadline, kT0 + absl::Seconds(30));
  EXPECT_EQ(job.lease_token.value().rfind("2a-1-", 0), 0u) << job.lease_token;  // job id, attempt, random
  ASSERT_EQ(job.attempts.size(), 1u);
  EXPECT_EQ(job.attempts[0].number, 1u);
  EXPECT_EQ(job.attempts[0].worker, "w1");
  EXPECT_EQ(job.attempts[0].leased_at, kT0);
  EXPECT_EQ(job.attempts[0].outcome, Outcome::kLeased);
}

TEST(LeaseBook, CheckAcceptsOnlyTheLiveTokenBeforeItsDeadline) {
  std::mt19937_64 rng(7);
  Job job = LeasedAt(1, kT0, absl::Seconds(30), rng);
  const LeaseToken token = job.lease_token;
  EXPECT_TRUE(LeaseBook::Check(job, token, kT0).ok());
  EXPECT_TRUE(LeaseBook::Check(job, token, kT0 + absl::Seconds(30) - absl::Microseconds(1)).ok());
  // At the deadline the lease is over: the scheduler may expire it, so the worker may not settle.
  EXPECT_EQ(LeaseBook::Check(job, token, kT0 + absl::Seconds(30)).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(LeaseBook::Check(job, token, kT0 + absl::Hours(1)).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(LeaseBook::Check(job, LeaseToken("1-1-0000000000000000"), kT0).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(LeaseBook::Check(job, LeaseToken(""), kT0).code(), absl::StatusCode::kFailedPrecondition);
}

TEST(LeaseBook, ARegrantMakesTheEarlierTokenStale) {
  std::mt19937_64 rng(7);
  Job job = LeasedAt(1, kT0, absl::Seconds(30), rng);
  const LeaseToken first = job.lease_token;
  LeaseBook::EndByExpiry(job);
  job.state = JobState::kQueued;
  LeaseBook::Grant(job, "w2", kT0 + absl::Minutes(1), absl::Seconds(30), rng);
  EXPECT_NE(job.lease_token, first);
  EXPECT_EQ(job.attempts.size(), 2u);
  EXPECT_EQ(job.attempts[1].number, 2u);
  const absl::Time now = kT0 + absl::Minutes(1);
  EXPECT_EQ(LeaseBook::Check(job, first, now).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(LeaseBook::Check(job, job.lease_token, now).ok());
}

TEST(LeaseBook, AnEndedLeaseSettlesNothingAndRecordsHowItEnded) {
  std::mt19937_64 rng(7);
  Job expired = LeasedAt(1, kT0, absl::Seconds(30), rng);
  const LeaseToken expired_token = expired.lease_token;
  LeaseBook::EndByExpiry(expired);
  EXPECT_EQ(expired.expiries, 1);
  EXPECT_EQ(expired.failures, 0);
  EXPECT_EQ(expired.attempts.back().outcome, Outcome::kExpired);
  EXPECT_EQ(expired.attempts.back().ended_at, kT0 + absl::Seconds(30));
  EXPECT_EQ(expired.attempts.back().reason, "lease expired");
  EXPECT_EQ(LeaseBook::Check(expired, expired_token, kT0).code(),
            absl::StatusCode::kFailedPrecondition);

  Job nacked = LeasedAt(2, kT0, absl::Seconds(30), rng);
  const LeaseToken nacked_token = nacked.lease_token;
  LeaseBook::EndByNack(nacked, "smtp 451", FailureClass::kPermanent, kT0 + absl::Seconds(5));
  EXPECT_EQ(nacked.failures, 1);
  EXPECT_EQ(nacked.expiries, 0);
  EXPECT_EQ(nacked.attempts.back().outcome, Outcome::kNacked);
  EXPECT_EQ(nacked.attempts.back().ended_at, kT0 + absl::Seconds(5));
  EXPECT_EQ(nacked.attempts.back().reason, "smtp 451");
  EXPECT_EQ(nacked.attempts.back().failure_class, FailureClass::kPermanent);
  EXPECT_EQ(LeaseBook::Check(nacked, nacked_token, kT0).code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(LeaseBook, FirstExpiredFollowsDeadlinesWithTheSameRuleAsCheck) {
  std::mt19937_64 rng(7);
  LeaseBook book;
  Job a = LeasedAt(1, kT0, absl::Seconds(30), rng);
  Job b = LeasedAt(2, kT0, absl::Seconds(10), rng);
  book.Add(a);
  book.Add(b);
  EXPECT_EQ(book.size(), 2u);
  EXPECT_EQ(book.FirstExpired(kT0 + absl::Seconds(9)), std::nullopt);
  // Expired exactly when Check refuses the token.
  EXPECT_FALSE(LeaseBook::Check(b, b.lease_token, kT0 + absl::Seconds(10)).ok());
  EXPECT_EQ(book.FirstExpired(kT0 + absl::Seconds(10)), 2u);
  EXPECT_TRUE(book.Remove(b));
  EXPECT_FALSE(book.Remove(b)) << "not in the book any more";
  EXPECT_EQ(book.FirstExpired(kT0 + absl::Seconds(29)), std::nullopt);
  EXPECT_EQ(book.FirstExpired(kT0 + absl::Seconds(30)), 1u);
}

TEST(LeaseBook, ExtendMovesTheDeadlineInTheBook) {
  std::mt19937_64 rng(7);
  LeaseBook book;
  Job job = LeasedAt(1, kT0, absl::Seconds(10), rng);
  book.Add(job);
  book.Extend(job, kT0 + absl::Minutes(5));
  EXPECT_EQ(job.lease_deadline, kT0 + absl::Minutes(5));
  EXPECT_EQ(book.size(), 1u);
  EXPECT_TRUE(book.Contains(job));
  EXPECT_EQ(book.FirstExpired(kT0 + absl::Seconds(10)), std::nullopt);
  EXPECT_TRUE(LeaseBook::Check(job, job.lease_token, kT0 + absl::Seconds(10)).ok());
  EXPECT_EQ(book.FirstExpired(kT0 + absl::Minutes(5)), 1u);
}

}  // namespace
}  // namespace conduit::work_queue
