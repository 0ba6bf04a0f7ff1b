// The queue beyond RAM, through the public API of a conduit-queue child
// process: N acknowledged jobs of 100 B (4 priorities; ready at once, after a delay, or at a
// not_before in the past or the near future; one tenant; each payload names the job's sequence
// number) survive a SIGKILL and a restart on the same data dir. The restarted server shows N ready,
// and a drain by Lease (1000 jobs) + AckBatch brings every job exactly once, in lease order:
// priority descending, then ready time, then id. Printed: enqueue and drain rates, the time from
// spawn to the first GetQueueStats answer ("restart-to-serving"), and the server's VmRSS/VmHWM
// before the kill and after the restart.
//
// N = 1,000,000 by default; CONDUIT_RESTART_JOBS=N for quick local runs.

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/testing/temp_dir.h"
#include "conduit/queue/v1/queue.grpc.pb.h"
#include "tests/support/process_memory.h"
#include "tests/support/recovering_server.h"

namespace conduit::testing {
namespace {

namespace qpb = ::conduit::queue::v1;

constexpr char kQueue[] = "restart";
constexpr char kTenant[] = "acme";
constexpr int kBatch = 1000;
constexpr int kPayloadBytes = 100;
constexpr int kEnqueueClients = 4;
constexpr int32_t kPriorities[] = {-1, 0, 3, 9};
// Every job is due within this long after its Enqueue was sent (delays and not_befores below).
constexpr int kLatestDueMs = 2000;
constexpr absl::Duration kLatestDue = absl::Milliseconds(kLatestDueMs);

std::chrono::system_clock::time_point Deadline(absl::Duration d = absl::Seconds(30)) {
  return absl::ToChronoTime(absl::Now() + d);
}

int64_t Micros(const google::protobuf::Timestamp& t) {
  return t.seconds() * 1'000'000 + t.nanos() / 1000;
}

// How job `seq` is made, a function of its sequence number so that the drain can recompute it.
// Kinds cycle by 5 and priorities by 4, so every priority meets every kind.
enum class Ready { kNow, kDelay, kPastNotBefore, kSoonNotBefore };
Ready ReadyOf(int64_t seq) {
  static constexpr Ready kKinds[] = {Ready::kNow, Ready::kDelay, Ready::kNow, Ready::kPastNotBefore,
                                     Ready::kSoonNotBefore};
  return kKinds[seq % 5];
}
int32_t PriorityOf(int64_t seq) { return kPriorities[seq % 4]; }
constexpr absl::Duration DelayOf(int64_t seq) { return absl::Milliseconds(100 + (seq % 7) * 250); }
// A soon not_before is its batch's base (the time the request was built + 500 ms) plus this.
constexpr int kSoonBaseMs = 500;
constexpr absl::Duration kSoonBase = absl::Milliseconds(kSoonBaseMs);
constexpr absl::Duration SoonOffsetOf(int64_t seq) { return absl::Milliseconds((seq % 9) * 100); }
static_assert(DelayOf(6) < kLatestDue &&
              SoonOffsetOf(8) < absl::Milliseconds(kLatestDueMs - kSoonBaseMs));

std::string PayloadOf(int64_t seq) {
  std::string payload = absl::StrFormat("job %010d ", seq);
  payload.resize(kPayloadBytes, 'p');
  return payload;
}
// The sequence number a payload names, or -1.
int64_t SeqOf(const std::string& payload) {
  int64_t seq = -1;
  if (payload.size() != kPayloadBytes || payload.compare(0, 4, "job ") != 0 ||
      !absl::SimpleAtoi(payload.substr(4, 10), &seq)) {
    return -1;
  }
  return seq;
}

// What was enqueued: the id answered for each sequence number and each batch's not_before base.
struct Enqueued {
  explicit Enqueued(int64_t jobs) : ids(jobs, 0), soon_base_us((jobs + kBatch - 1) / kBatch, 0) {}

  // When job `seq` is ready, by the queue's rule: a not_before in the past means now (the
  // enqueue time), a delay counts from the enqueue time. Microseconds, as the server keeps time.
  int64_t ReadyMicros(int64_t seq, int64_t enqueued_us) const {
    switch (ReadyOf(seq)) {
      case Ready::kDelay:
        return enqueued_us + absl::ToInt64Microseconds(DelayOf(seq));
      case Ready::kPastNotBefore:
        return std::max(enqueued_us, past_not_before_us);
      case Ready::kSoonNotBefore:
        return std::max(enqueued_us,
                        soon_base_us[seq / kBatch] + absl::ToInt64Microseconds(SoonOffsetOf(seq)));
      case Ready::kNow:
        break;
    }
    return enqueued_us;
  }

  std::vector<uint64_t> ids;          // by sequence number
  std::vector<int64_t> soon_base_us;  // by batch
  int64_t past_not_before_us = 0;
};

// Enqueues batch `b` (jobs b*1000 .. up to `jobs`); OK when every job got a new id.
grpc::Status EnqueueBatch(qpb::WorkQueue::Stub* stub, int64_t b, int64_t jobs, Enqueued* out) {
  const absl::Time now = absl::Now();
  out->soon_base_us[b] = absl::ToUnixMicros(now + kSoonBase);
  qpb::EnqueueRequest request;
  request.set_queue(kQueue);
  const int64_t first = b * kBatch, end = std::min(jobs, first + kBatch);
  for (int64_t seq = first; seq < end; ++seq) {
    qpb::NewJob* job = request.add_jobs();
    job->set_payload(PayloadOf(seq));
    job->set_priority(PriorityOf(seq));
    job->set_tenant(kTenant);
    switch (ReadyOf(seq)) {
      case Ready::kDelay:
        job->mutable_delay()->set_nanos(absl::ToInt64Nanoseconds(DelayOf(seq)) % 1'000'000'000);
        job->mutable_delay()->set_seconds(absl::ToInt64Seconds(DelayOf(seq)));
        break;
      case Ready::kPastNotBefore:
        job->mutable_not_before()->set_seconds(out->past_not_before_us / 1'000'000);
        job->mutable_not_before()->set_nanos(out->past_not_before_us % 1'000'000 * 1000);
        break;
      case Ready::kSoonNotBefore: {
        const int64_t us = out->soon_base_us[b] + absl::ToInt64Microseconds(SoonOffsetOf(seq));
        job->mutable_not_before()->set_seconds(us / 1'000'000);
        job->mutable_not_before()->set_nanos(us % 1'000'000 * 1000);
        break;
      }
      case Ready::kNow:
        break;
    }
  }
  grpc::ClientContext ctx;
  ctx.set_deadline(Deadline());
  qpb::EnqueueResponse response;
  grpc::Status status = stub->Enqueue(&ctx, request, &response);
  if (!status.ok()) return status;
  if (response.jobs_size() != end - first) {
    return grpc::Status(grpc::StatusCode::INTERNAL, "an answer per job expected");
  }
  for (int i = 0; i < response.jobs_size(); ++i) {
    if (response.jobs(i).duplicate()) {
      return grpc::Status(grpc::StatusCode::INTERNAL, "a job without a key answered duplicate");
    }
    out->ids[first + i] = response.jobs(i).job_id();
  }
  return grpc::Status::OK;
}

// Checks each leased job against what was enqueued and against the one before it in lease
// order; counts the faults and reports the first few.
class DrainCheck {
 public:
  explicit DrainCheck(const Enqueued& enqueued)
      : enqueued_(enqueued), seen_(enqueued.ids.size(), false) {}

  void Leased(const qpb::LeasedJob& job) {
    ++leased_;
    const int64_t seq = SeqOf(job.payload());
    if (seq < 0 || seq >= static_cast<int64_t>(seen_.size())) {
      return Fault(absl::StrCat("job ", job.job_id(), " has a payload never enqueued"));
    }
    if (seen_[seq]) return Fault(absl::StrCat("job ", job.job_id(), " (seq ", seq, ") twice"));
    seen_[seq] = true;
    if (job.job_id() != enqueued_.ids[seq] || job.priority() != PriorityOf(seq) ||
        job.tenant() != kTenant) {
      return Fault(absl::StrCat("job ", job.job_id(), " came back as seq ", seq, " enqueued as ",
                                enqueued_.ids[seq], ", priority ", job.priority(), ", tenant '",
                                job.tenant(), "'"));
    }
    const Key key{-int64_t{job.priority()}, enqueued_.ReadyMicros(seq, Micros(job.enqueued_at())),
                  job.job_id()};
    if (leased_ > 1 && !(last_ < key)) {
      Fault(
          absl::StrFormat("job %d (priority %d, ready %d us) leased after job %d (priority %d, "
                          "ready %d us)",
                          job.job_id(), job.priority(), std::get<1>(key), std::get<2>(last_),
                          -std::get<0>(last_), std::get<1>(last_)));
    }
    last_ = key;
  }

  int64_t leased() const { return leased_; }
  int64_t faults() const { return faults_; }
  int64_t Lost() const { return std::count(seen_.begin(), seen_.end(), false); }

 private:
  using Key = std::tuple<int64_t, int64_t, uint64_t>;  // -priority, ready µs, id

  void Fault(const std::string& what) {
    if (faults_++ < 10) ADD_FAILURE() << what;
  }

  const Enqueued& enqueued_;
  std::vector<bool> seen_;  // by sequence number
  Key last_{};
  int64_t leased_ = 0;
  int64_t faults_ = 0;
};

// Acks a leased batch; "" when every job was acked, else what went wrong.
std::string AckAll(qpb::WorkQueue::Stub* stub, const qpb::AckBatchRequest& ack) {
  grpc::ClientContext ctx;
  ctx.set_deadline(Deadline());
  qpb::AckBatchResponse acked;
  grpc::Status status = stub->AckBatch(&ctx, ack, &acked);
  if (!status.ok()) return absl::StrCat("AckBatch: ", status.error_message());
  if (acked.results_size() != ack.jobs_size()) return "AckBatch: a result per job expected";
  for (const auto& result : acked.results()) {
    if (result.code() != 0) {
      return absl::StrCat("ack of job ", result.job_id(), ": ", result.message());
    }
  }
  return "";
}

qpb::GetQueueStatsResponse Stats(qpb::WorkQueue::Stub* stub, grpc::Status* status,
                                 absl::Duration timeout = absl::Seconds(10)) {
  grpc::ClientContext ctx;
  ctx.set_deadline(Deadline(timeout));
  qpb::GetQueueStatsRequest request;
  request.set_queue(kQueue);
  qpb::GetQueueStatsResponse stats;
  *status = stub->GetQueueStats(&ctx, request, &stats);
  return stats;
}

std::unique_ptr<qpb::WorkQueue::Stub> StubFor(const RecoveringServer& server) {
  return qpb::WorkQueue::NewStub(
      grpc::CreateChannel(server.address(), grpc::InsecureChannelCredentials()));
}

TEST(QueueRestart, EveryJobComesBackOnceInLeaseOrderAfterSigkill) {
  const char* bin_dir = std::getenv("CONDUIT_BIN_DIR");
  ASSERT_NE(bin_dir, nullptr);
  const std::string binary = std::string(bin_dir) + "/conduit-queue";
  const char* jobs_env = std::getenv("CONDUIT_RESTART_JOBS");
  const int64_t jobs = jobs_env ? std::atoll(jobs_env) : 1'000'000;
  ASSERT_GT(jobs, 0);
  TempDir dir;
  Enqueued enqueued(jobs);
  enqueued.past_not_before_us = absl::ToUnixMicros(absl::Now() - absl::Seconds(5));

  auto server = std::make_unique<RecoveringServer>(binary, dir.Sub("data"), dir.path());
  absl::Status started = server->WaitForPort(absl::Seconds(30));
  ASSERT_TRUE(started.ok()) << started << "; see " << dir.path() << "/server.log";
  {
    auto stub = StubFor(*server);
    grpc::ClientContext ctx;
    ctx.set_deadline(Deadline());
    qpb::CreateQueueRequest create;
    create.set_name(kQueue);
    qpb::CreateQueueResponse created;
    ASSERT_TRUE(stub->CreateQueue(&ctx, create, &created).ok());
  }

  // Enqueue: a few clients take batches in turn (ids follow the order the server takes them).
  const int64_t batches = (jobs + kBatch - 1) / kBatch;
  std::atomic<int64_t> next_batch{0};
  std::mutex mu;
  std::string enqueue_error;
  const absl::Time enqueue_start = absl::Now();
  std::vector<std::thread> clients;
  for (int c = 0; c < kEnqueueClients; ++c) {
    clients.emplace_back([&] {
      auto stub = StubFor(*server);
      for (int64_t b = next_batch++; b < batches; b = next_batch++) {
        grpc::Status status = EnqueueBatch(stub.get(), b, jobs, &enqueued);
        if (!status.ok()) {
          std::lock_guard<std::mutex> lock(mu);
          enqueue_error = absl::StrCat("batch ", b, ": ", status.error_message());
          next_batch = batches;  // the others stop too
          return;
        }
      }
    });
  }
  for (auto& c : clients) c.join();
  const absl::Time enqueue_end = absl::Now();
  ASSERT_EQ(enqueue_error, "");
  const double enqueue_seconds = absl::ToDoubleSeconds(enqueue_end - enqueue_start);
  std::printf("enqueued %lld jobs of %d B in %.2f s (%.0f jobs/s), %d clients x %d jobs/request\n",
              static_cast<long long>(jobs), kPayloadBytes, enqueue_seconds, jobs / enqueue_seconds,
              kEnqueueClients, kBatch);

  // Every enqueue was acknowledged, so durable: a SIGKILL must lose none of them.
  const ProcessMemory before = ReadProcessMemory(server->pid());
  std::printf("server before SIGKILL: VmRSS %.0f MiB, VmHWM %.0f MiB\n", before.rss_mib(),
              before.hwm_mib());
  server->Kill(SIGKILL);
  server.reset();

  const absl::Time spawned = absl::Now();
  server = std::make_unique<RecoveringServer>(binary, dir.Sub("data"), dir.path());
  started = server->WaitForPort(absl::Seconds(120));
  ASSERT_TRUE(started.ok()) << started << "; see " << dir.path() << "/server.log";
  auto stub = StubFor(*server);
  grpc::Status status;
  qpb::GetQueueStatsResponse stats;
  for (const absl::Time give_up = spawned + absl::Seconds(120); absl::Now() < give_up;) {
    stats = Stats(stub.get(), &status, absl::Seconds(1));
    if (status.ok()) break;
    absl::SleepFor(absl::Milliseconds(10));  // a fresh child process: polling until it answers
  }
  ASSERT_TRUE(status.ok()) << status.error_message();
  const double restart_seconds = absl::ToDoubleSeconds(absl::Now() - spawned);
  const ProcessMemory after = ReadProcessMemory(server->pid());
  std::printf("restart-to-serving: %.3f s (spawn to the first GetQueueStats answer)\n",
              restart_seconds);
  std::printf("server after restart: VmRSS %.0f MiB, VmHWM %.0f MiB\n", after.rss_mib(),
              after.hwm_mib());

  // Delayed jobs and soon not_befores are due by now, or shortly.
  if (const absl::Duration wait = enqueue_end + kLatestDue - absl::Now();
      wait > absl::ZeroDuration()) {
    absl::SleepFor(wait);
  }
  stats = Stats(stub.get(), &status);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(stats.ready(), jobs);
  EXPECT_EQ(stats.delayed(), 0);
  EXPECT_EQ(stats.leased(), 0);
  EXPECT_EQ(stats.dead(), 0);

  // Drain: one worker leasing, so the lease order is the queue's order; each batch's AckBatch
  // overlaps the next Lease.
  DrainCheck check(enqueued);
  std::future<std::string> acking;  // the last batch's AckBatch: "" or what went wrong
  const absl::Time drain_start = absl::Now();
  while (true) {
    grpc::ClientContext lctx;
    lctx.set_deadline(Deadline());
    qpb::LeaseRequest lease;
    lease.set_queue(kQueue);
    lease.set_worker_id("drain");
    lease.set_max_jobs(1000);
    lease.mutable_visibility_timeout()->set_seconds(60);
    qpb::LeaseResponse leased;
    status = stub->Lease(&lctx, lease, &leased);
    ASSERT_TRUE(status.ok()) << status.error_message();
    if (acking.valid()) {
      ASSERT_EQ(acking.get(), "");
    }
    if (leased.jobs_size() == 0) break;
    qpb::AckBatchRequest ack;
    ack.set_queue(kQueue);
    for (const qpb::LeasedJob& job : leased.jobs()) {
      check.Leased(job);
      qpb::AckBatchRequest::Entry* entry = ack.add_jobs();
      entry->set_job_id(job.job_id());
      entry->set_lease_token(job.lease_token());
    }
    ASSERT_LT(check.faults(), 1000) << "giving up the drain";
    acking = std::async(std::launch::async,
                        [&stub, ack = std::move(ack)] { return AckAll(stub.get(), ack); });
  }
  const double drain_seconds = absl::ToDoubleSeconds(absl::Now() - drain_start);
  const ProcessMemory drained = ReadProcessMemory(server->pid());
  std::printf(
      "drained %lld jobs in %.2f s (%.0f jobs/s), Lease 1000 + AckBatch (overlapping), one worker; "
      "server after: VmRSS %.0f MiB, VmHWM %.0f MiB\n",
      static_cast<long long>(check.leased()), drain_seconds, check.leased() / drain_seconds,
      drained.rss_mib(), drained.hwm_mib());

  EXPECT_EQ(check.faults(), 0) << "duplicates, strangers or leases out of order (first above)";
  EXPECT_EQ(check.Lost(), 0) << "enqueued jobs never leased";
  EXPECT_EQ(check.leased(), jobs);
  stats = Stats(stub.get(), &status);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(stats.ready() + stats.delayed() + stats.leased() + stats.dead(), 0);
  server->Kill(SIGTERM);
}

}  // namespace
}  // namespace conduit::testing
