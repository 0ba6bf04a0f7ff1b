// AddDeadLetters: letters from a log consumer go straight to the dead-letter lane with their
// attempts, survive a restart, are idempotent by key (a consumer that crashed after adding and
// before committing adds nothing twice), and ignore the depth limit (they are not live work).

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "services/work_queue/domain/queue_rules.h"
#include "services/work_queue/tests/queue_fixture.h"

namespace conduit::work_queue {
namespace {

class AddDeadLettersTest : public WorkQueueTest {
 protected:
  absl::StatusOr<std::vector<EnqueuedJob>> Add(std::vector<NewDeadLetter> letters) {
    return Wait<std::vector<EnqueuedJob>>(
        [&](auto cb) { queue_->AddDeadLetters("q", std::move(letters), cb); });
  }
  static NewDeadLetter Letter(std::string payload, std::string key) {
    NewDeadLetter d{JobFor(std::move(payload)), "price without a currency", {}};
    d.job.idempotency_key = std::move(key);
    d.job.source = JobSource{"prices", 0, 7};
    d.attempts = {Attempt{1, "indexer", absl::FromUnixSeconds(10), absl::FromUnixSeconds(11),
                          Outcome::kNacked, "boom", FailureClass::kPermanent}};
    return d;
  }
};

TEST_F(AddDeadLettersTest, LettersLandDeadWithTheirEvidenceOnceAndSurviveARestart) {
  QueueConfigPatch full;
  full.max_depth = 1;
  Create("q", full);
  ASSERT_TRUE(Enqueue("q", {JobFor("live")}).ok());  // the queue is at its depth limit
  auto added = Add({Letter("p", "dlq/g/prices/0/7")});
  ASSERT_TRUE(added.ok()) << added.status() << " (dead letters are not live: no depth limit)";
  auto again = Add({Letter("p", "dlq/g/prices/0/7")});
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE((*again)[0].duplicate);
  EXPECT_EQ((*again)[0].id, (*added)[0].id);
  EXPECT_EQ(Stats().dead, 1);
  EXPECT_EQ(Stats().ready, 1) << "nothing leasable was added";
  Reopen();
  auto letter = queue_->GetDeadLetter("q", (*added)[0].id);
  ASSERT_TRUE(letter.ok()) << letter.status();
  EXPECT_EQ(letter->death_reason, "price without a currency");
  EXPECT_EQ(letter->source, (JobSource{"prices", 0, 7}));
  ASSERT_EQ(letter->attempts.size(), 1u);
  EXPECT_EQ(letter->attempts[0].reason, "boom");
  EXPECT_EQ(letter->attempts[0].failure_class, FailureClass::kPermanent);
  EXPECT_EQ(letter->failures, 1);
}

TEST_F(AddDeadLettersTest, BadLettersAreRefusedAndChangeNothing) {
  Create("q");
  NewDeadLetter no_reason = Letter("p", "k");
  no_reason.reason.clear();
  EXPECT_EQ(Add({no_reason}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Add({}).status().code(), absl::StatusCode::kInvalidArgument);
  NewDeadLetter delayed = Letter("p", "k");
  delayed.job.delay = absl::Seconds(1);
  EXPECT_EQ(Add({delayed}).status().code(), absl::StatusCode::kInvalidArgument);
  NewDeadLetter huge = Letter(std::string(kMaxPayloadBytes + 1, 'x'), "k");
  EXPECT_EQ(Add({Letter("ok", "k2"), huge}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Stats().dead, 0) << "a refused call adds none of its letters";
  EXPECT_EQ(Wait<std::vector<EnqueuedJob>>(
                [&](auto cb) { queue_->AddDeadLetters("nope", {Letter("p", "k")}, cb); })
                .status()
                .code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace conduit::work_queue
