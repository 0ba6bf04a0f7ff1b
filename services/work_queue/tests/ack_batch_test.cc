// AckBatch: many acks in one durable write, each job settled or refused on its own.

#include <gtest/gtest.h>

#include "services/work_queue/tests/queue_fixture.h"

namespace conduit::work_queue {
namespace {

class AckBatchTest : public WorkQueueTest {
 protected:
  absl::StatusOr<std::vector<absl::Status>> AckBatch(const std::string& q,
                                                     const std::vector<AckEntry>& entries) {
    return Wait<std::vector<absl::Status>>(
        [&](auto cb) { queue_->AckBatch(q, entries, cb); });
  }
  static AckEntry EntryFor(const Job& job) { return {job.id, job.lease_token}; }
};

TEST_F(AckBatchTest, EachJobIsSettledOrRefusedOnItsOwnAndTheAcksSurviveRestart) {
  Create("q");
  ASSERT_TRUE(Enqueue("q", {JobFor("a"), JobFor("b"), JobFor("c"), JobFor("d")}).ok());
  auto leased = Lease("q", 3);
  ASSERT_EQ(leased->size(), 3u);
  const Job a = (*leased)[0], b = (*leased)[1], c = (*leased)[2];
  AckEntry stale = EntryFor(b);
  stale.lease_token = LeaseToken("not-the-token");
  auto results = AckBatch("q", {EntryFor(a), stale, AckEntry{999, LeaseToken("x")}, EntryFor(c)});
  ASSERT_TRUE(results.ok()) << results.status();
  ASSERT_EQ(results->size(), 4u);
  EXPECT_TRUE((*results)[0].ok());
  EXPECT_EQ((*results)[1].code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ((*results)[2].code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE((*results)[3].ok());
  QueueStats stats = Stats();
  EXPECT_EQ(stats.leased, 1) << "b keeps its lease";
  EXPECT_EQ(stats.ready, 1);

  Reopen();  // the acks were durable before the reply
  stats = Stats();
  EXPECT_EQ(stats.leased, 1);
  EXPECT_EQ(stats.ready, 1);
  EXPECT_EQ(Ack(a).code(), absl::StatusCode::kNotFound) << "acked jobs are gone";
  EXPECT_TRUE(Ack(b).ok());
}

TEST_F(AckBatchTest, AnExpiredLeaseIsRefusedLikeASingleAck) {
  Create("q");
  ASSERT_TRUE(Enqueue("q", {JobFor("a"), JobFor("b")}).ok());
  auto leased = Lease("q", 2);
  ASSERT_EQ(leased->size(), 2u);
  clock_.Advance(absl::Seconds(31));  // past the 30 s default lease, before the scheduler runs
  auto results = AckBatch("q", {EntryFor((*leased)[0]), EntryFor((*leased)[1])});
  ASSERT_TRUE(results.ok());
  EXPECT_EQ((*results)[0].code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ((*results)[1].code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Stats().leased, 2) << "nothing acked";
}

TEST_F(AckBatchTest, BadInputAcksNothing) {
  Create("q");
  ASSERT_TRUE(Enqueue("q", {JobFor("a"), JobFor("b")}).ok());
  auto leased = Lease("q", 2);
  ASSERT_EQ(leased->size(), 2u);
  const AckEntry a = EntryFor((*leased)[0]), b = EntryFor((*leased)[1]);
  EXPECT_EQ(AckBatch("q", {}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(AckBatch("q", {a, b, a}).status().code(), absl::StatusCode::kInvalidArgument)
      << "a job listed twice";
  EXPECT_EQ(AckBatch("q", std::vector<AckEntry>(kMaxAckBatch + 1, a)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(AckBatch("missing", {a}).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(Stats().leased, 2) << "none of the refused calls acked anything";
}

TEST_F(AckBatchTest, AfterAStorageFailureTheBatchIsRefusedAndNothingIsAcked) {
  Create("q");
  ASSERT_TRUE(Enqueue("q", {JobFor("a"), JobFor("b")}).ok());
  auto leased = Lease("q", 2);
  ASSERT_EQ(leased->size(), 2u);
  flaky_->fail = true;
  auto results = AckBatch("q", {EntryFor((*leased)[0]), EntryFor((*leased)[1])});
  EXPECT_EQ(results.status().code(), absl::StatusCode::kUnavailable);
  flaky_->fail = false;
  Reopen();
  // The leases may be gone too (a lease is answered before its write, and losing it equals
  // its expiry), but both jobs must still be there.
  const QueueStats stats = Stats();
  EXPECT_EQ(stats.ready + stats.leased, 2) << "the failed batch left no trace on disk";
}

}  // namespace
}  // namespace conduit::work_queue
