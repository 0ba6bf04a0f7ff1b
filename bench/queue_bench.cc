// Work queue benchmark: prints figures, asserts nothing.
//
//   queue_bench [--seconds=3] [--enqueue_batch=100] [--dead_letters=100000]
//
// Over real gRPC to an in-process server on 127.0.0.1:0 (durable: every change is fsynced,
// group-committed):
// 1. enqueue rate with 8 clients sending `enqueue_batch` jobs of 100 B per request;
// 2. lease + ack cycles with 1, 4 and 16 workers (one job per lease), p50/p99 cycle latency;
// 3. ListDeadLetters page time with `dead_letters` jobs in the lane (loaded through the domain).

#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "bench/histogram.h"
#include "common/grpc/server_runner.h"
#include "common/runtime/runtime.h"
#include "common/testing/temp_dir.h"
#include "services/work_queue/queue_node.h"

ABSL_FLAG(double, seconds, 3, "measured seconds per run");
ABSL_FLAG(int, enqueue_batch, 100, "jobs per Enqueue request");
ABSL_FLAG(int, dead_letters, 100'000, "dead letters for the listing benchmark");

namespace conduit::bench {
namespace {

namespace qpb = ::conduit::queue::v1;
namespace wq = ::conduit::work_queue;

auto Deadline() { return absl::ToChronoTime(absl::Now() + absl::Seconds(10)); }

struct Server {
  testing::TempDir dir;
  prometheus::Registry registry;
  runtime::Runtime runtime;
  std::unique_ptr<wq::QueueNode> node;
  std::unique_ptr<grpc_util::RunningServer> server;

  Server() {
    node = *wq::QueueNode::Open(dir.Sub("data"), registry, &runtime);
    server = *grpc_util::StartServer({}, {node->service()});
    auto stub = NewStub();
    grpc::ClientContext ctx;
    ctx.set_deadline(Deadline());
    qpb::CreateQueueRequest create;
    create.set_name("bench");
    qpb::CreateQueueResponse created;
    if (!stub->CreateQueue(&ctx, create, &created).ok()) std::abort();
  }
  std::unique_ptr<qpb::WorkQueue::Stub> NewStub() {
    return qpb::WorkQueue::NewStub(
        grpc::CreateChannel(server->address(), grpc::InsecureChannelCredentials()));
  }
};

void EnqueueRate() {
  Server s;
  const int batch = absl::GetFlag(FLAGS_enqueue_batch);
  std::atomic<bool> stop{false};
  std::atomic<int64_t> jobs{0};
  const absl::Duration measure = absl::Seconds(absl::GetFlag(FLAGS_seconds));
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      auto stub = s.NewStub();
      qpb::EnqueueRequest request;
      request.set_queue("bench");
      for (int i = 0; i < batch; ++i) request.add_jobs()->set_payload(std::string(100, 'j'));
      while (!stop.load()) {
        grpc::ClientContext ctx;
        ctx.set_deadline(Deadline());
        qpb::EnqueueResponse response;
        if (stub->Enqueue(&ctx, request, &response).ok()) jobs += batch;
      }
    });
  }
  absl::SleepFor(measure);
  stop = true;
  for (auto& t : threads) t.join();
  std::printf("enqueue: 8 clients x %d jobs/request: %.0f jobs/s\n", batch,
              jobs.load() / absl::ToDoubleSeconds(measure));
}

void LeaseAckCycles(int workers) {
  Server s;
  {  // enough ready jobs for the whole run
    auto stub = s.NewStub();
    qpb::EnqueueRequest request;
    request.set_queue("bench");
    for (int i = 0; i < 1000; ++i) request.add_jobs()->set_payload(std::string(100, 'j'));
    for (int r = 0; r < 200; ++r) {
      grpc::ClientContext ctx;
      ctx.set_deadline(Deadline());
      qpb::EnqueueResponse response;
      if (!stub->Enqueue(&ctx, request, &response).ok()) std::abort();
    }
  }
  std::atomic<bool> stop{false};
  std::vector<LatencyHistogram> latency(workers);
  std::vector<int64_t> cycles(workers, 0);
  const absl::Duration measure = absl::Seconds(absl::GetFlag(FLAGS_seconds));
  std::vector<std::thread> threads;
  for (int w = 0; w < workers; ++w) {
    threads.emplace_back([&, w] {
      auto stub = s.NewStub();
      while (!stop.load()) {
        const auto t0 = std::chrono::steady_clock::now();
        grpc::ClientContext lctx;
        lctx.set_deadline(Deadline());
        qpb::LeaseRequest lease;
        lease.set_queue("bench");
        lease.set_worker_id("w");
        qpb::LeaseResponse leased;
        if (!stub->Lease(&lctx, lease, &leased).ok() || leased.jobs_size() == 0) break;
        grpc::ClientContext actx;
        actx.set_deadline(Deadline());
        qpb::AckRequest ack;
        ack.set_queue("bench");
        ack.set_job_id(leased.jobs(0).job_id());
        ack.set_lease_token(leased.jobs(0).lease_token());
        qpb::AckResponse acked;
        if (!stub->Ack(&actx, ack, &acked).ok()) break;
        latency[w].Record(std::chrono::duration_cast<std::chrono::nanoseconds>(
                              std::chrono::steady_clock::now() - t0)
                              .count());
        ++cycles[w];
      }
    });
  }
  absl::SleepFor(measure);
  stop = true;
  for (auto& t : threads) t.join();
  LatencyHistogram all;
  int64_t total = 0;
  for (int w = 0; w < workers; ++w) {
    all.Merge(latency[w]);
    total += cycles[w];
  }
  std::printf("lease+ack: %2d workers: %.0f cycles/s, p50 %.0f us, p99 %.0f us\n", workers,
              total / absl::ToDoubleSeconds(measure), all.Quantile(0.50) / 1000.0,
              all.Quantile(0.99) / 1000.0);
}

void DeadLetterListing() {
  testing::TempDir dir;
  prometheus::Registry registry;
  runtime::Runtime runtime;
  wq::WorkQueueOptions options;
  options.scheduler_interval = absl::ZeroDuration();
  auto node = *wq::QueueNode::Open(dir.Sub("data"), registry, &runtime, options);
  wq::WorkQueue* queue = node->queue();
  auto wait = [](auto call) {
    absl::Notification done;
    call([&](auto) { done.Notify(); });
    done.WaitForNotification();
  };
  wait([&](auto cb) { queue->CreateQueue("bench", {}, cb); });
  const int n = absl::GetFlag(FLAGS_dead_letters);
  for (int i = 0; i < n; i += 1000) {
    std::vector<wq::NewJob> jobs(1000);
    for (int j = 0; j < 1000; ++j) {
      jobs[j].payload = std::string(100, 'd');
      jobs[j].tenant = j % 2 ? "odd" : "even";
    }
    wait([&](auto cb) { queue->Enqueue("bench", std::move(jobs), cb); });
    std::vector<wq::Job> leased;
    absl::Notification got;
    queue->Lease(wq::LeaseArgs{"bench", "w", 1000, std::nullopt, absl::ZeroDuration()},
                 [&](absl::StatusOr<std::vector<wq::Job>> r) {
                   leased = *r;
                   got.Notify();
                 });
    got.WaitForNotification();
    std::atomic<int> left{static_cast<int>(leased.size())};
    absl::Notification all;
    for (const wq::Job& job : leased) {
      queue->Nack("bench", job.id, job.lease_token,
                  wq::NackArgs{i % 3 ? "smtp 550" : "timeout", wq::FailureClass::kPermanent, {}},
                  [&](auto) {
                    if (--left == 0) all.Notify();
                  });
    }
    all.WaitForNotification();
  }
  auto time_it = [&](const char* what, const wq::DeadLetterFilter& filter) {
    const absl::Time t0 = absl::Now();
    auto page = queue->ListDeadLetters("bench", filter, 100, "");
    const absl::Duration first = absl::Now() - t0;
    std::string token = page->next_page_token;
    int pages = 1;
    const absl::Time t1 = absl::Now();
    while (!token.empty()) {
      page = queue->ListDeadLetters("bench", filter, 1000, token);
      token = page->next_page_token;
      ++pages;
    }
    std::printf("dead letters (%d): %s: first page of 100 in %.0f us; all %d pages in %.1f ms\n", n,
                what, absl::ToDoubleMicroseconds(first), pages,
                absl::ToDoubleMilliseconds(absl::Now() - t1));
  };
  time_it("no filter", {});
  wq::DeadLetterFilter filter;
  filter.reason_contains = "timeout";
  filter.tenant = "odd";
  time_it("reason+tenant filter", filter);
}

}  // namespace
}  // namespace conduit::bench

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  std::printf("machine: %u cores\n", std::thread::hardware_concurrency());
  conduit::bench::EnqueueRate();
  for (int workers : {1, 4, 16}) conduit::bench::LeaseAckCycles(workers);
  conduit::bench::DeadLetterListing();
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  std::printf("peak RSS %.0f MB\n", usage.ru_maxrss / 1024.0);
  return 0;
}
