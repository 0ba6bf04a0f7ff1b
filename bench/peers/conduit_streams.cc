// peer_bench's stream workloads: ProduceStream and Consume through the generated C++ stubs'
// synchronous streams, one record or job per message (what Python, Node and Go callers of the
// generated stubs can do too).

#include <deque>
#include <map>
#include <mutex>

#include "bench/peers/conduit_common.h"
#include "bench/peers/conduit_peer.h"

namespace conduit::bench::peers {
namespace {

// The measured window of a stream workload whose threads count ops (and record latencies) while
// `measuring` and end at `stop`.
struct Window {
  std::atomic<bool> measuring{false}, stop{false};
  std::atomic<uint64_t> ops{0}, errors{0};
  std::mutex mu;
  LatencyHistogram latency;
  std::string error;

  void Fail(const std::string& why) {
    std::lock_guard<std::mutex> lock(mu);
    ++errors;
    if (error.empty()) error = why;
  }
  // Sleeps through warm-up and the run; then asks the loops to stop.
  double Measure(absl::Duration run) { return MeasureWindow(measuring, stop, run); }
  Figures Result(double secs) {
    Figures f;
    f.ops_per_s = ops.load() / secs;
    f.latency.Merge(latency);
    f.errors = errors.load();
    f.error = error;
    return f;
  }
};

}  // namespace

Figures ConduitAppendStream(int port, const std::string& topic, int value_bytes,
                            absl::Duration run) {
  auto stub = lpb::LogService::NewStub(Channel(port));
  grpc::ClientContext ctx;
  auto stream = stub->ProduceStream(&ctx);
  Window w;
  std::mutex sent_mu;
  std::deque<Clock::time_point> sent;  // write times of unanswered messages, in order
  std::thread reader([&] {
    lpb::ProduceStreamResponse response;
    while (stream->Read(&response)) {
      const Clock::time_point now = Clock::now();
      for (const auto& answer : response.answers()) {
        Clock::time_point at;
        {
          std::lock_guard<std::mutex> lock(sent_mu);
          at = sent.front();
          sent.pop_front();
        }
        if (answer.code() != 0) {
          w.Fail(answer.message());
        } else if (w.measuring.load(std::memory_order_relaxed)) {
          ++w.ops;
          std::lock_guard<std::mutex> lock(w.mu);
          w.latency.Record(Ns(now - at));
        }
      }
    }
  });
  std::thread writer([&] {
    lpb::ProduceStreamRequest message;
    message.mutable_request()->set_topic(topic);
    auto* record = message.mutable_request()->add_records();
    record->set_partition(0);
    record->set_value(std::string(value_bytes, 'v'));
    for (int64_t n = 0; !w.stop.load(); ++n) {
      message.set_sequence(n);
      {
        std::lock_guard<std::mutex> lock(sent_mu);
        sent.push_back(Clock::now());
      }
      if (!stream->Write(message)) break;
    }
    stream->WritesDone();
  });
  const double secs = w.Measure(run);
  writer.join();
  reader.join();
  grpc::Status status = stream->Finish();
  if (!status.ok()) w.Fail(status.error_message());
  return w.Result(secs);
}

Figures ConduitCycleStream(int port, int clients, int credits, absl::Duration run) {
  auto queue = PrefilledQueue(port, run, 100'000);
  if (!queue.ok()) return Figures{.errors = 1, .error = queue.status().ToString()};
  auto stub = qpb::WorkQueue::NewStub(Channel(port));
  Window w;
  std::vector<std::thread> workers;
  for (int i = 0; i < clients; ++i) {
    workers.emplace_back([&, i] {
      grpc::ClientContext ctx;
      auto stream = stub->Consume(&ctx);
      qpb::ConsumeRequest start;
      start.mutable_start()->set_queue(*queue);
      start.mutable_start()->set_worker_id("w" + std::to_string(i));
      start.mutable_start()->set_credits(credits);
      std::mutex mu;
      std::map<uint64_t, Clock::time_point> pushed;  // job → when it arrived
      if (!stream->Write(start)) return w.Fail("Consume start");
      qpb::ConsumeResponse m;
      qpb::ConsumeRequest ack;  // an ack with a credit for the next job
      ack.set_credits(1);
      bool open = true;
      while (open && !w.stop.load() && stream->Read(&m)) {
        const Clock::time_point now = Clock::now();
        for (const qpb::SettleResult& r : m.settled()) {
          Clock::time_point at;
          {
            std::lock_guard<std::mutex> lock(mu);
            auto it = pushed.find(r.job_id());
            at = it == pushed.end() ? now : it->second;
            if (it != pushed.end()) pushed.erase(it);
          }
          if (r.code() != 0) {
            w.Fail(r.message());
          } else if (w.measuring.load(std::memory_order_relaxed)) {
            ++w.ops;
            std::lock_guard<std::mutex> lock(w.mu);
            w.latency.Record(Ns(now - at));
          }
        }
        for (const qpb::LeasedJob& job : m.jobs()) {
          {
            std::lock_guard<std::mutex> lock(mu);
            pushed[job.job_id()] = now;
          }
          ack.set_request_id(static_cast<int64_t>(job.job_id()));
          ack.mutable_ack()->set_job_id(job.job_id());
          ack.mutable_ack()->set_lease_token(job.lease_token());
          if (!stream->Write(ack)) {
            open = false;
            break;
          }
        }
      }
      ctx.TryCancel();  // the leases still held come back when they expire; the queue is dropped
      (void)stream->Finish();
    });
  }
  const double secs = w.Measure(run);
  for (auto& t : workers) t.join();
  DropQueue(port, *queue);
  return w.Result(secs);
}

}  // namespace conduit::bench::peers
