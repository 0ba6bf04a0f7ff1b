// Read-ahead for batch leases: an AckBatch of a queue whose last Lease asked for a batch reads
// the next ready jobs' records while its write is made, and the next Lease takes them from
// memory instead of the store. A record read ahead is never older than the job: one written
// while the read-ahead was in flight is read again. A queue deleted meanwhile breaks neither the
// ack nor a new queue of its name, and an ack of jobs leased a few at a time reads none ahead.
// A read-ahead that fails leaves nothing behind and stops none after it; with several tenants
// every leased job still carries its own record, in each tenant's order.

#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "services/work_queue/tests/queue_fixture.h"

namespace conduit::work_queue {
namespace {

// Records counted per read-ahead outcome (what conduit_queue_read_ahead_records_total exports).
class ReadAheadRecorder : public QueueObserver {
 public:
  void OnReadAhead(const std::string&, ReadAheadOutcome outcome, int64_t records) override {
    counts[outcome] += records;
  }
  std::map<ReadAheadOutcome, int64_t> counts;
};

class LeaseReadAheadTest : public WorkQueueTest {
 protected:
  LeaseReadAheadTest() {
    observer_ = &recorder_;
    Reopen();
  }
  ~LeaseReadAheadTest() override { queue_.reset(); }  // before the recorder it reports to
  int64_t Count(ReadAheadOutcome outcome) { return recorder_.counts[outcome]; }
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

  // Leases a batch of 100 and checks the payloads are p`from`, p`from+1`, ...
  std::vector<Job> LeaseBatchFrom(int from) {
    auto batch = Lease("q", 100);
    EXPECT_TRUE(batch.ok()) << batch.status();
    if (!batch.ok()) return {};
    EXPECT_EQ(batch->size(), 100u);
    for (size_t i = 0; i < batch->size(); ++i) {
      EXPECT_EQ((*batch)[i].payload, "p" + std::to_string(from + static_cast<int>(i)));
    }
    return *std::move(batch);
  }

  ReadAheadRecorder recorder_;
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
  EXPECT_EQ(Count(ReadAheadOutcome::kServed), 100);
  EXPECT_EQ(Count(ReadAheadOutcome::kKept), 200);  // the second ack read the last 100 ahead
  EXPECT_EQ(Count(ReadAheadOutcome::kFailed), 0);
}

TEST_F(LeaseReadAheadTest, AFailedReadAheadLeavesNothingAheadAndTheNextAckReadsAheadAgain) {
  const std::vector<Job> first = LeaseFirst(400, 100);
  flaky_->HoldNextRead(/*then_fail=*/true);
  acker_ = std::thread([this, first] { acked_ = AckBatch(first); });
  ASSERT_TRUE(flaky_->AwaitHeldRead()) << "the ack read nothing ahead";
  EXPECT_TRUE(FinishHeldAck().ok()) << "a failed read-ahead failed the ack it rode on";
  EXPECT_EQ(Count(ReadAheadOutcome::kFailed), 100);
  EXPECT_EQ(Count(ReadAheadOutcome::kKept), 0);

  int64_t read_before = flaky_->ids_read();
  const std::vector<Job> second = LeaseBatchFrom(100);
  EXPECT_EQ(flaky_->ids_read() - read_before, 100) << "the lease did not read its records";
  ASSERT_TRUE(AckBatch(second).ok());

  read_before = flaky_->ids_read();
  LeaseBatchFrom(200);
  EXPECT_EQ(flaky_->ids_read(), read_before) << "no read-ahead after the failed one";
  EXPECT_EQ(Count(ReadAheadOutcome::kServed), 100);
}

TEST_F(LeaseReadAheadTest, WithSeveralTenantsEveryLeasedJobCarriesItsOwnRecord) {
  Create("q");
  // Three tenants of unequal size: the read-ahead's like share per tenant guesses part wrong
  // once the smallest runs out.
  std::map<uint64_t, std::string> payload_of;
  for (const auto& [tenant, n] : std::vector<std::pair<std::string, int>>{
           {"a", 250}, {"b", 200}, {"c", 60}}) {
    std::vector<NewJob> jobs;
    for (int i = 0; i < n; ++i) jobs.push_back(JobFor(tenant + std::to_string(i), tenant));
    auto enqueued = Enqueue("q", jobs);
    ASSERT_TRUE(enqueued.ok()) << enqueued.status();
    for (int i = 0; i < n; ++i) payload_of[(*enqueued)[i].id] = jobs[i].payload;
  }
  std::set<uint64_t> leased;
  std::map<std::string, int> next_of;  // tenant → the index its next leased job must have
  for (int round = 0; leased.size() < payload_of.size(); ++round) {
    auto batch = Lease("q", 100);
    ASSERT_TRUE(batch.ok()) << batch.status();
    ASSERT_FALSE(batch->empty()) << leased.size() << " of " << payload_of.size() << " leased";
    for (const Job& job : *batch) {
      EXPECT_TRUE(leased.insert(job.id).second) << "job " << job.id << " leased twice";
      EXPECT_EQ(job.payload, payload_of[job.id]) << "job " << job.id << " of " << job.tenant;
      EXPECT_EQ(job.attempts.size(), 1u);
      // Each tenant's jobs come in the order they were enqueued.
      EXPECT_EQ(job.payload, job.tenant + std::to_string(next_of[job.tenant]++));
    }
    // The second batch, with all three tenants still ready, was mostly guessed right.
    if (round == 1) EXPECT_GE(Count(ReadAheadOutcome::kServed), 50);
    ASSERT_TRUE(AckBatch(*batch).ok());
  }
  EXPECT_EQ(Stats().ready, 0);
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
