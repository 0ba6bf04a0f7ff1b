// client::Worker against a real server: lease extension, batch leases, retries and the
// dead-letter lane.
#include <atomic>
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "absl/synchronization/mutex.h"
#include "client/tests/client_fixture.h"
#include "client/worker.h"

namespace conduit::client {
namespace {

// A slow handler (`handling` per job) holds `jobs` jobs of `queue` (1 s leases), leasing up to
// `batch` at a time, while a second worker polls the same queue all along: it would get a job
// whose lease lapsed. `visibility` is what the slow worker asks for (zero: the queue's).
// Returns the slow worker's stats; `calls` counts deliveries to either worker.
Worker::Stats RunSlowHandler(const std::string& address, const std::string& queue,
                             absl::Duration visibility, absl::Duration handling, int* calls,
                             absl::Status* error, int jobs = 1, int batch = 1) {
  std::atomic<int> delivered{0};
  Worker slow({.address = address, .queue = queue, .worker_id = "slow",
               .max_jobs_per_lease = batch, .visibility_timeout = visibility},
              [&](const Job&) {
                delivered.fetch_add(1);
                absl::SleepFor(handling);
                return Outcome::Ack();
              });
  Worker other({.address = address, .queue = queue, .worker_id = "other"}, [&](const Job&) {
    delivered.fetch_add(1);
    return Outcome::Ack();
  });
  slow.Start();
  absl::SleepFor(absl::Milliseconds(300));
  other.Start();
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  while (slow.stats().acked < jobs && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  slow.Stop();
  other.Stop();
  *calls = delivered.load();
  *error = slow.error();
  return slow.stats();
}

TEST_F(ClientTest, WorkerExtendsTheLeaseOfASlowHandlerAndTheJobIsNotRedelivered) {
  CreateQueue("slow", absl::Seconds(1), 5);
  Enqueue("slow", {"big report"});
  int calls = 0;
  absl::Status error;
  Worker::Stats stats = RunSlowHandler(address(), "slow", absl::Seconds(1),
                                       absl::Milliseconds(3200),  // over three lease lengths
                                       &calls, &error);
  EXPECT_EQ(calls, 1) << "the job was redelivered";
  EXPECT_EQ(stats.acked, 1);
  EXPECT_GE(stats.extensions, 2);
  EXPECT_EQ(stats.lost_leases, 0);
  EXPECT_TRUE(error.ok()) << error;
}

TEST_F(ClientTest, WorkerWithTheQueuesDefaultLeaseExtendsByTheGrantedLength) {
  // A 2 s lease, as in the batch test below: with 1 s (0.5 s of slack before the keeper
  // extends it) a lease was lost once in a full `ctest -j 2` run.
  CreateQueue("defaults", absl::Seconds(2), 5);
  Enqueue("defaults", {"report"});
  int calls = 0;
  absl::Status error;
  Worker::Stats stats = RunSlowHandler(address(), "defaults", absl::ZeroDuration(),  // 2 s
                                       absl::Milliseconds(4400), &calls, &error);
  EXPECT_EQ(calls, 1) << "the job was redelivered";
  EXPECT_EQ(stats.acked, 1);
  EXPECT_EQ(stats.lost_leases, 0);
}

TEST_F(ClientTest, WorkerLeasingInBatchesKeepsTheWaitingJobsLeasedAndAcksThemAll) {
  // A 2 s lease, extended when half of it is left: a 1 s lease (0.5 s of slack) was lost once
  // in a full `ctest -j 2` run on 2 cores.
  CreateQueue("batch", absl::Seconds(2), 5);
  Enqueue("batch", {"a", "b", "c"});
  int calls = 0;
  absl::Status error;
  // The third job waits 2.8 s for its turn, past its 2 s lease unless the keeper extends it.
  Worker::Stats stats = RunSlowHandler(address(), "batch", absl::Seconds(2),
                                       absl::Milliseconds(1400), &calls, &error, 3, 3);
  EXPECT_EQ(calls, 3) << "a job waiting in the batch was redelivered";
  EXPECT_EQ(stats.leased, 3);
  EXPECT_EQ(stats.acked, 3);
  EXPECT_EQ(stats.lost_leases, 0);
  EXPECT_TRUE(error.ok()) << error;
}

TEST_F(ClientTest, WorkerReportsAnUnknownQueue) {
  Worker w({.address = address(), .queue = "nope", .worker_id = "w"}, [](const Job&) {
    return Outcome::Ack();
  });
  w.Start();
  const absl::Time give_up = absl::Now() + absl::Seconds(5);
  while (w.error().ok() && absl::Now() < give_up) absl::SleepFor(absl::Milliseconds(10));
  EXPECT_TRUE(absl::IsNotFound(w.error())) << w.error();
  w.Stop();
}

TEST_F(ClientTest, WorkerRetriesThenDeadLettersAPoisonJob) {
  CreateQueue("mail", absl::Seconds(5), 3);
  Enqueue("mail", {"ok", "flaky", "poison"});
  absl::Mutex mu;
  std::map<std::string, int> attempts;
  Worker worker({.address = address(), .queue = "mail", .worker_id = "w", .concurrency = 2},
                [&](const Job& job) {
                  absl::MutexLock lock(&mu);
                  const int n = ++attempts[job.payload];
                  if (job.payload == "poison") return Outcome::Retry("smtp said 550");
                  if (job.payload == "flaky" && n == 1) return Outcome::Retry("timeout");
                  return Outcome::Ack();
                });
  worker.Start();
  const absl::Time give_up = absl::Now() + absl::Seconds(15);
  while (absl::Now() < give_up) {
    Worker::Stats s = worker.stats();
    if (s.acked == 2 && s.dead == 1) break;
    absl::SleepFor(absl::Milliseconds(20));
  }
  worker.Stop();
  Worker::Stats s = worker.stats();
  EXPECT_EQ(s.acked, 2);
  EXPECT_EQ(s.dead, 1);
  absl::MutexLock lock(&mu);
  EXPECT_EQ(attempts["poison"], 3) << "max attempts";
  EXPECT_EQ(attempts["flaky"], 2);
  EXPECT_EQ(attempts["ok"], 1);
}

}  // namespace
}  // namespace conduit::client
