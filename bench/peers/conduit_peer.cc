#include "bench/peers/conduit_peer.h"

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <future>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

#include "bench/peers/conduit_common.h"
#include "client/producer.h"
#include "client/worker.h"
#include "common/grpc/proto_time.h"
#include "conduit/log/v1/log.grpc.pb.h"
#include "conduit/queue/v1/queue.grpc.pb.h"

namespace conduit::bench::peers {
namespace {

int queue_runs = 0;
// The run's --durability, for the queues as for the topic (ConduitSetUp sets it).
qpb::QueueDurability queue_durability = qpb::QUEUE_DURABILITY_SYNC;

}  // namespace

bool ConduitSetUp(int port, const std::string& topic, const std::string& durability) {
  auto stub = lpb::LogService::NewStub(Channel(port));
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  lpb::CreateTopicRequest req;
  req.set_name(topic);
  req.set_partitions(1);
  req.mutable_config()->set_durability(durability == "sync" ? lpb::DURABILITY_SYNC
                                                            : lpb::DURABILITY_INTERVAL);
  queue_durability =
      durability == "sync" ? qpb::QUEUE_DURABILITY_SYNC : qpb::QUEUE_DURABILITY_INTERVAL;
  lpb::CreateTopicResponse resp;
  const grpc::Status s = stub->CreateTopic(&ctx, req, &resp);
  if (s.ok() || s.error_code() == grpc::StatusCode::ALREADY_EXISTS) return true;  // a second run
  std::fprintf(stderr, "CreateTopic %s: code %d: %s\n", topic.c_str(),
               static_cast<int>(s.error_code()), s.error_message().c_str());
  return false;
}

Figures ConduitPing(int port, int clients, absl::Duration run) {
  std::vector<std::unique_ptr<lpb::LogService::Stub>> stubs;
  for (int i = 0; i < clients; ++i) stubs.push_back(lpb::LogService::NewStub(Channel(port)));
  return RunThreads(clients, run, [&](int i) -> int64_t {
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    lpb::ListTopicsResponse resp;
    return stubs[i]->ListTopics(&ctx, lpb::ListTopicsRequest(), &resp).ok() ? 1 : -1;
  });
}

Figures ConduitAppend(int port, const std::string& topic, int clients, int pipeline,
                      int value_bytes, absl::Duration run) {
  const std::string value(value_bytes, 'v');
  std::vector<std::unique_ptr<lpb::LogService::Stub>> stubs;
  for (int i = 0; i < clients; ++i) stubs.push_back(lpb::LogService::NewStub(Channel(port)));
  auto make_request = [&] {
    lpb::ProduceRequest req;
    req.set_topic(topic);
    auto* r = req.add_records();
    r->set_partition(0);
    r->set_value(value);
    return req;
  };
  if (pipeline <= 1) {
    return RunThreads(clients, run, [&](int i) -> int64_t {
      grpc::ClientContext ctx;
      SetDeadline(&ctx);
      lpb::ProduceResponse resp;
      return stubs[i]->Produce(&ctx, make_request(), &resp).ok() ? 1 : -1;
    });
  }
  // Pipelined: `pipeline` async calls in flight; one op of RunThreads is one round of them.
  return RunThreads(clients, run, [&](int i) -> int64_t {
    struct Call {
      grpc::ClientContext ctx;
      lpb::ProduceRequest req;
      lpb::ProduceResponse resp;
    };
    std::vector<Call> calls(pipeline);
    std::mutex mu;
    std::condition_variable cv;
    int done = 0, failed = 0;
    for (Call& c : calls) {
      SetDeadline(&c.ctx);
      c.req = make_request();
      stubs[i]->async()->Produce(&c.ctx, &c.req, &c.resp, [&](grpc::Status s) {
        std::lock_guard<std::mutex> lock(mu);
        if (!s.ok()) ++failed;
        if (++done == pipeline) cv.notify_one();  // wake the caller once per round, not per call
      });
    }
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return done == pipeline; });
    return failed ? -1 : pipeline;
  });
}

namespace {

// The producer workloads' client::Producer: defaults but a 1 ms linger.
absl::StatusOr<std::unique_ptr<client::Producer>> BenchProducer(int port,
                                                                const std::string& topic) {
  client::ProducerOptions options;
  options.address = Address(port);
  options.topic = topic;
  options.linger = absl::Milliseconds(1);
  return client::Producer::Create(options);
}

}  // namespace

Figures ConduitProducer(int port, const std::string& topic, int clients, int value_bytes,
                        absl::Duration run) {
  auto producer = BenchProducer(port, topic);
  if (!producer.ok()) return Figures{.errors = 1, .error = producer.status().ToString()};
  const std::string value(value_bytes, 'v');
  // One op = a window of 1000 sends, all acknowledged (the callback API: no future per record).
  return RunThreads(clients, run, [&](int) -> int64_t {
    struct Window {
      absl::Mutex mu;
      int64_t acked = 0, failed = 0;
      bool Done() const { return acked + failed == 1000; }
    } w;
    for (int k = 0; k < 1000; ++k) {
      client::ProducerRecord r;
      r.value = value;
      (*producer)->Send(std::move(r), [&w](absl::StatusOr<client::RecordPosition> result) {
        absl::MutexLock lock(&w.mu);
        ++(result.ok() ? w.acked : w.failed);
      });
    }
    absl::MutexLock lock(&w.mu);
    w.mu.Await(absl::Condition(&w, &Window::Done));
    return w.failed == 0 ? w.acked : -1;
  });
}

Figures ConduitProducerSteady(int port, const std::string& topic, int value_bytes,
                              absl::Duration run) {
  auto producer = BenchProducer(port, topic);
  if (!producer.ok()) return Figures{.errors = 1, .error = producer.status().ToString()};
  const std::string value(value_bytes, 'v');
  struct Acks {
    absl::Mutex mu;
    LatencyHistogram latency;  // per record, send to ack
    std::atomic<int64_t> acked{0}, failed{0};
  };
  auto acks = std::make_shared<Acks>();
  // One op = 1000 sends, counting the acks that came meanwhile; Send blocks while the
  // producer's buffer (max_buffered_bytes) is full.
  Figures f = RunThreads(1, run, [&](int) -> int64_t {
    const int64_t before = acks->acked.load();
    for (int k = 0; k < 1000; ++k) {
      client::ProducerRecord r;
      r.value = value;
      (*producer)->Send(std::move(r), [acks, sent = Clock::now()](auto result) {
        const uint64_t ns = Ns(Clock::now() - sent);
        absl::MutexLock lock(&acks->mu);
        (result.ok() ? acks->acked : acks->failed).fetch_add(1);
        acks->latency.Record(ns);
      });
    }
    return acks->failed.load() == 0 ? acks->acked.load() - before : -1;
  });
  (void)(*producer)->Flush();
  absl::MutexLock lock(&acks->mu);
  f.latency = acks->latency;
  return f;
}

Figures ConduitFetch(int port, const std::string& topic, absl::Duration run) {
  auto stub = lpb::LogService::NewStub(Channel(port));
  int64_t offset = 0;
  return RunThreads(1, run, [&](int) -> int64_t {
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    lpb::FetchRequest req;
    req.set_topic(topic);
    req.set_partition(0);
    req.set_offset(offset);
    req.set_max_records(1000);
    lpb::FetchResponse resp;
    if (!stub->Fetch(&ctx, req, &resp).ok()) return -1;
    offset = resp.records_size() > 0 ? resp.next_offset() : 0;  // wrap at the end
    return resp.records_size();
  });
}

Figures ConduitTail(int port, const std::string& topic, absl::Duration run) {
  auto stub = lpb::LogService::NewStub(Channel(port));
  Figures f;
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + run + absl::Seconds(10)));
  lpb::TailRequest req;
  req.set_topic(topic);
  req.set_partition(0);
  req.set_offset(0);
  req.set_max_records(5000);
  auto reader = stub->Tail(&ctx, req);
  lpb::TailResponse resp;
  // The stream runs from offset 0 to the end of what is there: the run ends when it has caught
  // up (the tail would then wait for new records) or after `run`.
  int64_t records = 0;
  const auto start = Clock::now();
  const auto deadline = start + absl::ToChronoNanoseconds(run);
  auto last = start;
  while (Clock::now() < deadline && reader->Read(&resp)) {
    const auto now = Clock::now();
    f.latency.Record(Ns(now - last));  // per streamed message
    last = now;
    records += resp.records_size();
    if (resp.records_size() == 0) continue;
    if (resp.records(resp.records_size() - 1).offset() + 1 >= resp.high_watermark()) break;
  }
  const double secs = Ns(last - start) / 1e9;
  // gRPC's sync API wants a cancelled stream read to its end before Finish (calling Finish at
  // once races with messages still in flight: one run aborted in gRPC's ref counting).
  ctx.TryCancel();
  while (reader->Read(&resp)) {
  }
  (void)reader->Finish();
  f.ops_per_s = secs > 0 ? records / secs : 0;
  if (records == 0) {
    f.errors = 1;
    f.error = "the tail read nothing";
  }
  return f;
}

// A fresh queue with 60 s leases and the run's durability holding enough jobs for the run at up to
// `rate` cycles/s. Not more: the queue keeps its jobs in memory, and the server's peak RSS is
// reported.
absl::StatusOr<std::string> PrefilledQueue(int port, absl::Duration run, double rate) {
  const std::string queue = "peer-q" + std::to_string(queue_runs++);
  auto stub = qpb::WorkQueue::NewStub(Channel(port));
  {
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    qpb::CreateQueueRequest req;
    req.set_name(queue);
    req.mutable_config()->mutable_visibility_timeout()->set_seconds(60);
    req.mutable_config()->set_durability(queue_durability);
    qpb::CreateQueueResponse resp;
    if (!stub->CreateQueue(&ctx, req, &resp).ok()) return absl::UnavailableError("CreateQueue");
  }
  const int jobs = static_cast<int>(rate * absl::ToDoubleSeconds(run + kWarmup)) + 10'000;
  for (int done = 0; done < jobs; done += 1000) {
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    qpb::EnqueueRequest req;
    req.set_queue(queue);
    for (int k = 0; k < 1000; ++k) req.add_jobs()->set_payload(std::string(100, 'j'));
    qpb::EnqueueResponse resp;
    if (!stub->Enqueue(&ctx, req, &resp).ok()) return absl::UnavailableError("Enqueue");
  }
  return queue;
}

// Drops the queue (and the jobs it still holds in the server's memory) after a workload.
void DropQueue(int port, const std::string& queue) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  qpb::DeleteQueueRequest req;
  req.set_name(queue);
  qpb::DeleteQueueResponse resp;
  (void)qpb::WorkQueue::NewStub(Channel(port))->DeleteQueue(&ctx, req, &resp);
}

namespace {

template <typename Request>
grpc::Status CallAck(qpb::WorkQueue::Stub* stub, const Request& req) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  if constexpr (std::is_same_v<Request, qpb::AckRequest>) {
    qpb::AckResponse resp;
    return stub->Ack(&ctx, req, &resp);
  } else {
    qpb::AckBatchResponse resp;
    grpc::Status s = stub->AckBatch(&ctx, req, &resp);
    for (const auto& r : resp.results()) {
      if (r.code() != 0) return grpc::Status(grpc::StatusCode::INTERNAL, r.message());
    }
    return s;
  }
}

}  // namespace

Figures ConduitQueueCycle(int port, int clients, int batch, absl::Duration run) {
  // Over twice the best rate seen on 2 cores (~5k/s one job per round, ~100k/s with 100).
  auto queue = PrefilledQueue(port, run, batch == 1 ? 20'000 : 200'000);
  if (!queue.ok()) return Figures{.errors = 1, .error = queue.status().ToString()};
  std::vector<std::unique_ptr<qpb::WorkQueue::Stub>> stubs;
  for (int i = 0; i < clients; ++i) stubs.push_back(qpb::WorkQueue::NewStub(Channel(port)));
  Figures f = RunThreads(clients, run, [&](int i) -> int64_t {
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    qpb::LeaseRequest lease;
    lease.set_queue(*queue);
    lease.set_worker_id("w" + std::to_string(i));
    lease.set_max_jobs(batch);
    qpb::LeaseResponse leased;
    if (!stubs[i]->Lease(&ctx, lease, &leased).ok() || leased.jobs_size() == 0) return -1;
    if (batch == 1) {
      qpb::AckRequest ack;
      ack.set_queue(*queue);
      ack.set_job_id(leased.jobs(0).job_id());
      ack.set_lease_token(leased.jobs(0).lease_token());
      return CallAck(stubs[i].get(), ack).ok() ? 1 : -1;
    }
    qpb::AckBatchRequest acks;
    acks.set_queue(*queue);
    for (const auto& job : leased.jobs()) {
      auto* e = acks.add_jobs();
      e->set_job_id(job.job_id());
      e->set_lease_token(job.lease_token());
    }
    return CallAck(stubs[i].get(), acks).ok() ? leased.jobs_size() : -1;
  });
  DropQueue(port, *queue);
  return f;
}

Figures ConduitWorker(int port, int clients, int batch, absl::Duration run) {
  auto queue = PrefilledQueue(port, run, batch == 1 ? 20'000 : 100'000);
  if (!queue.ok()) return Figures{.errors = 1, .error = queue.status().ToString()};
  std::atomic<bool> measuring{false};
  std::atomic<int64_t> handled{0};
  client::Worker worker({.address = Address(port),
                         .queue = *queue,
                         .worker_id = "bench",
                         .concurrency = clients,
                         .max_jobs_per_lease = batch},
                        [&](const client::Job&) {
                          if (measuring.load(std::memory_order_relaxed)) handled.fetch_add(1);
                          return client::Outcome::Ack();
                        });
  worker.Start();
  absl::SleepFor(kWarmup);
  const int64_t acked_before = worker.stats().acked;
  measuring.store(true);
  const auto start = Clock::now();
  absl::SleepFor(run);
  const int64_t acked = worker.stats().acked - acked_before;
  const double secs = Ns(Clock::now() - start) / 1e9;
  measuring.store(false);
  worker.Stop();
  DropQueue(port, *queue);
  Figures f;
  f.ops_per_s = acked / secs;  // acknowledged by the queue, not just handled
  if (!worker.error().ok()) {
    f.errors = 1;
    f.error = worker.error().ToString();
  }
  return f;
}

}  // namespace conduit::bench::peers
