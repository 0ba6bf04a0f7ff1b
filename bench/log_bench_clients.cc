// log_bench: producer and consumer clients.

#include <atomic>
#include <mutex>
#include <thread>

#include "absl/strings/str_format.h"
#include "bench/log_bench.h"

namespace conduit::bench {

void ProduceLoop(pb::LogService::Stub* stub, const pb::ProduceRequest& request,
                 const std::atomic<bool>& stop, SteadyClock::time_point window_start,
                 SteadyClock::time_point window_end, absl::Duration deadline, ProducerOutput* out) {
  pb::ProduceResponse response;
  while (!stop.load(std::memory_order_relaxed)) {
    grpc::ClientContext ctx;
    ctx.set_deadline(Deadline(deadline));
    response.Clear();
    const auto t0 = SteadyClock::now();
    grpc::Status status = stub->Produce(&ctx, request, &response);
    const auto t1 = SteadyClock::now();
    if (!status.ok()) {
      if (out->errors++ == 0) {
        out->first_error = absl::StrFormat("code %d: %s", status.error_code(), status.error_message());
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));  // backpressure: back off
      continue;
    }
    if (t1 >= window_start && t1 < window_end) {
      out->latency.Record(std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count());
      out->records += static_cast<uint64_t>(request.records_size());
    }
  }
}



FetchFigures RunFetch(const std::vector<std::shared_ptr<grpc::Channel>>& channels,
                      const std::vector<FetchRange>& ranges, int consumers, int record_size,
                      const Settings& settings) {
  std::atomic<size_t> next{0};
  std::vector<FetchFigures> per(consumers);
  auto consume = [&](int i) {
    auto stub = pb::LogService::NewStub(channels[i % channels.size()]);
    FetchFigures& out = per[i];
    pb::FetchRequest request;
    request.set_topic("bench");
    request.set_max_bytes(16 << 20);
    pb::FetchResponse response;
    for (size_t r; (r = next.fetch_add(1)) < ranges.size();) {
      const FetchRange& range = ranges[r];
      for (int64_t offset = range.from; offset < range.to;) {
        request.set_partition(range.partition);
        request.set_offset(offset);
        request.set_max_records(
            static_cast<int32_t>(std::min<int64_t>(settings.fetch_max_records, range.to - offset)));
        grpc::ClientContext ctx;
        ctx.set_deadline(Deadline(settings.deadline));
        response.Clear();
        const auto t0 = SteadyClock::now();
        grpc::Status status = stub->Fetch(&ctx, request, &response);
        const auto t1 = SteadyClock::now();
        if (!status.ok() || response.records_size() == 0 ||
            response.records(0).offset() != offset) {
          ++out.errors;
          break;
        }
        out.latency.Record(std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count());
        out.records += static_cast<uint64_t>(response.records_size());
        offset += response.records_size();
      }
    }
  };
  const auto start = SteadyClock::now();
  std::vector<std::thread> threads;
  for (int i = 0; i < consumers; ++i) threads.emplace_back(consume, i);
  for (auto& t : threads) t.join();
  const double secs = std::chrono::duration<double>(SteadyClock::now() - start).count();
  FetchFigures total;
  for (const auto& f : per) {
    total.records += f.records;
    total.errors += f.errors;
    total.latency.Merge(f.latency);
  }
  total.records_per_s = static_cast<double>(total.records) / secs;
  total.mb_per_s = total.records_per_s * record_size / 1e6;
  return total;
}

}  // namespace conduit::bench
