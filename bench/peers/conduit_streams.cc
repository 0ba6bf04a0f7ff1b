// peer_bench's stream workloads, one record or job per message through the generated C++ stubs
// (what Python, Node and Go callers of the generated stubs can do too): ProduceStream on the
// stub's callback API (stub->async()), Consume on its synchronous stream. Each is the faster of
// the two on this machine (peer_bench --durability=interval, 3 s, 3 runs each): append-stream-1
// 144k-173k rec/s on the callback API against 90k-116k on the synchronous one, whose Write
// returns only after each message's write completed; cycle-stream-1 15k-19k jobs/s on the
// callback API against 25k-26k synchronous, cycle-stream-8 19k-23k against 16k-20k.
// append-stream-1 keeps at most 1024 messages unanswered (the server's window) and writes 99 of
// every 100 with gRPC's buffer hint, so they leave in one sendmsg (as the Redis peer writes 100
// pipelined XADDs at once): 155k-214k rec/s at p50 3.5-5 ms, against 95k-117k at p50 5 ms with
// the window and no hint, and 129k-178k at p50 7-35 ms with neither (4 runs each, interval).

#include <condition_variable>
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

namespace {

// One ProduceStream on gRPC's callback API: the next message is written as soon as the previous
// write completes (gRPC allows one write in flight per stream), answers are read as they come.
class AppendStreamReactor final
    : public grpc::ClientBidiReactor<lpb::ProduceStreamRequest, lpb::ProduceStreamResponse> {
 public:
  AppendStreamReactor(lpb::LogService::Stub* stub, const std::string& topic, int value_bytes,
                      Window& w)
      : w_(w) {
    message_.mutable_request()->set_topic(topic);
    auto* record = message_.mutable_request()->add_records();
    record->set_partition(0);
    record->set_value(std::string(value_bytes, 'v'));
    stub->async()->ProduceStream(&ctx_, this);
    StartRead(&response_);
    WriteNext();
    StartCall();
  }

  void OnWriteDone(bool ok) override {
    if (!ok) return;
    {
      std::lock_guard<std::mutex> lock(sent_mu_);
      writing_ = false;
    }
    WriteNext();
  }
  void OnWritesDoneDone(bool) override {}
  void OnReadDone(bool ok) override {
    if (!ok) return;
    const Clock::time_point now = Clock::now();
    for (const auto& answer : response_.answers()) {
      Clock::time_point at;
      {
        std::lock_guard<std::mutex> lock(sent_mu_);
        at = sent_.front();
        sent_.pop_front();
      }
      if (answer.code() != 0) {
        w_.Fail(answer.message());
      } else if (w_.measuring.load(std::memory_order_relaxed)) {
        ++w_.ops;
        std::lock_guard<std::mutex> lock(w_.mu);
        w_.latency.Record(Ns(now - at));
      }
    }
    StartRead(&response_);
    WriteNext();  // if the window had stopped the writes
  }
  void OnDone(const grpc::Status& status) override {
    std::lock_guard<std::mutex> lock(done_mu_);
    status_ = status;
    done_ = true;
    done_cv_.notify_all();
  }

  // After the writes stopped (Window::stop): the stream's end status.
  grpc::Status Await() {
    std::unique_lock<std::mutex> lock(done_mu_);
    done_cv_.wait(lock, [this] { return done_; });
    return status_;
  }

 private:
  // Writes the next message unless a write is in flight (gRPC allows one per stream), the
  // window is full, or the run is over (then ends the writes, once).
  void WriteNext() {
    grpc::WriteOptions options;
    bool end = false;
    {
      std::lock_guard<std::mutex> lock(sent_mu_);
      if (writing_ || (sent_.size() >= kWindow && !w_.stop.load())) return;
      writing_ = true;  // stays set after the writes ended
      if (w_.stop.load()) {
        end = true;
      } else {
        message_.set_sequence(next_++);
        sent_.push_back(Clock::now());
        // The write that fills the window goes out at once, or nothing would answer it.
        if (next_ % kFlushEvery != 0 && sent_.size() < kWindow) options.set_buffer_hint();
      }
    }
    if (end) {
      StartWritesDone();
      return;
    }
    StartWrite(&message_, options);
  }

  // Messages per flush: the others are written with gRPC's buffer hint, which lets the
  // transport send them together (one sendmsg for many messages, as the Redis peer writes 100
  // pipelined XADDs at once); each is still one record with its own sequence and answer.
  static constexpr int64_t kFlushEvery = 100;
  // Unanswered messages at most, as the server's own window (ProduceStream answers 1024 at a
  // time): more would only wait in socket buffers and count as latency.
  static constexpr size_t kWindow = 1024;

  Window& w_;
  grpc::ClientContext ctx_;
  lpb::ProduceStreamRequest message_;  // rewritten only between writes
  lpb::ProduceStreamResponse response_;
  int64_t next_ = 0;
  std::mutex sent_mu_;
  std::deque<Clock::time_point> sent_;  // write times of unanswered messages, in order
  bool writing_ = false;  // a StartWrite is in flight, or the writes ended
  std::mutex done_mu_;
  std::condition_variable done_cv_;
  bool done_ = false;
  grpc::Status status_;
};

}  // namespace

Figures ConduitAppendStream(int port, const std::string& topic, int value_bytes,
                            absl::Duration run) {
  auto stub = lpb::LogService::NewStub(Channel(port));
  Window w;
  AppendStreamReactor stream(stub.get(), topic, value_bytes, w);
  const double secs = w.Measure(run);
  grpc::Status status = stream.Await();
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
