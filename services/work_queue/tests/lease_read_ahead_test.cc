// Read-ahead for batch leases: an AckBatch of a queue whose last Lease asked for a batch reads
// the next ready jobs' records while its write is made, and the next Lease takes them from
// memory instead of the store. A record read ahead is never older than the job: one written
// while the read-ahead was in flight is read again. A queue deleted meanwhile breaks neither the
// ack nor a new queue of its name, and an ack of jobs leased a few at a time reads none ahead.

#include <string>
#include <thread>
#include <vector>

#include "services/work_queue/tests/queue_fixture.h"

namespace conduit::work_queue {
namespace {

class LeaseReadAheadTest : public WorkQueueTest {
 protected:
  // A test that failed while an ack's read was held must not leave its thread behind.
  void TearDown() override {
    if (acker_.joinable()) {
      flaky_->ReleaseReads();
      acker_.join();
    }
  }
  // Enqueues `n` jobs with payloads p0, p1, ...
  void Fill(int n) {
    std::vector<NewJob> jobs;
    for (int i = 0; i < n; ++i) jobs.push_back(JobFor("p" + std::to_string(i)));
    ASSERT_TRUE(Enqueue("q", std::move(jobs)).ok());
  }
  // Creates queue "q" with `fill` jobs and leases the first `lease` of them.
  std::vector<Job> LeaseFirst(int fill, int lease) {
    Create("q");
    Fill(fill);
    auto first = Lease("q", lease);
    EXPECT_TRUE(first.ok()) << first.status();
    EXPECT_EQ(first.ok() ? first->size() : 0u, static_cast<size_t>(lease));
    return first.ok() ? *std::move(first) : std::vector<Job>{};
  }
  absl::Status AckBatch(const std::vector<Job>& jobs) {
    std::vector<AckEntry> entries;
    for (const Job& job : jobs) entries.push_back({job.id, job.lease_token});
    auto results = Wait<std::vector<absl::Status>>(
        [&](auto cb) { queue_->AckBatch("q", entries, cb); });
    if (!results.ok()) return results.status();
    for (const absl::Status& s : *results) {
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  }
  // Acks `jobs` on its own thread; returns once the ack's read-ahead has read the store and is
  // held there. FinishHeldAck lets it go on and returns the ack's outcome.
  void StartHeldAck(std::vector<Job> jobs) {
    flaky_->HoldNextRead(/*then_fail=*/false, /*after_read=*/true);
    acker_ = std::thread([this, jobs = std::move(jobs)] { acked_ = AckBatch(jobs); });
    ASSERT_TRUE(flaky_->AwaitHeldRead()) << "the ack read nothing ahead";
  }
  absl::Status FinishHeldAck() {
    flaky_->ReleaseReads();
    acker_.join();
    return acked_;
  }
  absl::StatusOr<NackResult> NackNow(const Job& job, std::string reason) {
    NackArgs args{std::move(reason), FailureClass::kTransient, absl::ZeroDuration()};
    return Wait<NackResult>([&](auto cb) { queue_->Nack("q", job.id, job.lease_token, args, cb); });
  }

  std::thread acker_;
  absl::Status acked_;
};

TEST_F(LeaseReadAheadTest, TheNextBatchLeaseTakesItsRecordsFromTheReadAheadNotTheStore) {
  const std::vector<Job> first = LeaseFirst(300, 100);
  ASSERT_TRUE(AckBatch(first).ok());  // reads the next 100 ahead before it returns

  const int64_t read_before = flaky_->ids_read();
  auto second = Lease("q", 100);
  ASSERT_TRUE(second.ok()) << second.status();
  ASSERT_EQ(second->size(), 100u);
  EXPECT_EQ(flaky_->ids_read(), read_before) << "the lease read records from the store";
  for (int i = 0; i < 100; ++i) {
    EXPECT_EQ((*second)[i].payload, "p" + std::to_string(100 + i));
    EXPECT_EQ((*second)[i].attempts.size(), 1u);
  }
  ASSERT_TRUE(AckBatch(*second).ok());
  EXPECT_EQ(Stats().ready, 100);
  EXPECT_EQ(Stats().leased, 0);
}

TEST_F(LeaseReadAheadTest, AJobWrittenWhileItsRecordWasReadAheadIsReadAgain) {
  const std::vector<Job> first = LeaseFirst(300, 100);
  // The AckBatch's read-ahead reads jobs 100..199 as they are now, then waits.
  StartHeldAck(first);

  // Meanwhile the first of those jobs is leased alone and nacked: its record now has a failure.
  auto alone = Lease("q", 1);
  ASSERT_TRUE(alone.ok() && alone->size() == 1u);
  const uint64_t id = alone->front().id;
  EXPECT_EQ(alone->front().payload, "p100");
  ASSERT_TRUE(NackNow(alone->front(), "boom").ok());

  ASSERT_TRUE(FinishHeldAck().ok());

  auto next = Lease("q", 100);
  ASSERT_TRUE(next.ok()) << next.status();
  bool found = false;
  for (const Job& job : *next) {
    if (job.id != id) continue;
    found = true;
    EXPECT_EQ(job.failures, 1) << "the record read ahead before the nack was served";
    ASSERT_EQ(job.attempts.size(), 2u);
    EXPECT_EQ(job.attempts.front().reason, "boom");
  }
  EXPECT_TRUE(found) << "job " << id << " was not leased again";
}

TEST_F(LeaseReadAheadTest, AQueueDeletedDuringAReadAheadBreaksNeitherTheAckNorTheNewQueue) {
  StartHeldAck(LeaseFirst(200, 50));
  ASSERT_TRUE(Wait<bool>([&](auto cb) { queue_->DeleteQueue("q", cb); }).ok());
  Create("q");  // the same name: a new queue
  EXPECT_TRUE(FinishHeldAck().ok());

  Fill(3);
  auto fresh = Lease("q", 20);
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  ASSERT_EQ(fresh->size(), 3u) << "only the new queue's jobs";
  EXPECT_EQ(fresh->front().payload, "p0");
}

TEST_F(LeaseReadAheadTest, AnAckOfManyJobsLeasedAFewAtATimeReadsNoneAhead) {
  Create("q");
  Fill(200);
  std::vector<Job> held;
  while (held.size() < 20) {
    auto few = Lease("q", 4);
    ASSERT_TRUE(few.ok() && few->size() == 4u);
    held.insert(held.end(), few->begin(), few->end());
  }
  const int64_t read_before = flaky_->ids_read();
  ASSERT_TRUE(AckBatch(held).ok());
  EXPECT_EQ(flaky_->ids_read(), read_before) << "read ahead after leases of 4 jobs";
}

}  // namespace
}  // namespace conduit::work_queue
