#pragma once

// Shared pieces of log_bench: the scenario and figure types, small process helpers, the RocksDB
// ceiling (log_bench_ceiling.cc) and the printed report (log_bench_report.cc).

#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <cstdint>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/notification.h"
#include "conduit/log/v1/log.grpc.pb.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/histogram.h"

namespace conduit::bench {

namespace pb = ::conduit::log::v1;

using SteadyClock = std::chrono::steady_clock;

struct Scenario {
  int record_size = 0;
  int partitions = 0;
  int producers = 0;
  bool sync = true;
  int batch = 0;
};

struct Settings {
  absl::Duration measure, warmup, flush_interval, deadline;
  int channels = 0, consumers = 0, fetch_max_records = 0;
  bool fetch = true, ceiling = true;
};

struct ProduceFigures {
  double records_per_s = 0, mb_per_s = 0, syncs_per_s = 0;
  double cpu_cores = 0;       // this process's CPU time / wall time over the window
  double server_avg_us = 0;   // the service's own produce latency (receipt → Finish), mean
  double wal_sync_avg_us = 0; // mean of conduit_log_wal_sync_seconds (sync: write + fsync)
  double requests_per_commit = 0, records_per_commit = 0;
  LatencyHistogram latency;
  uint64_t errors = 0;
  std::string first_error;
};

struct FetchFigures {
  uint64_t records = 0;
  double records_per_s = 0, mb_per_s = 0;
  LatencyHistogram latency;
  uint64_t errors = 0;
};

struct CeilingFigures {
  double records_per_s = 0, mb_per_s = 0, syncs_per_s = 0;
  LatencyHistogram latency;  // per WriteBatch
};

struct Row {
  Scenario scenario;
  ProduceFigures produce;
  FetchFigures fetch_one, fetch_many;
  CeilingFigures ceiling;
  std::string error;
};

inline double Us(uint64_t ns) { return static_cast<double>(ns) / 1000.0; }
// Resident set now (not the peak), from /proc/self/statm.
inline double RssNowMb() {
  std::ifstream in("/proc/self/statm");
  long pages = 0, resident = 0;
  in >> pages >> resident;
  return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) / (1 << 20);
}
inline double CpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto secs = [](const timeval& tv) { return tv.tv_sec + tv.tv_usec / 1e6; };
  return secs(usage.ru_utime) + secs(usage.ru_stime);
}
inline std::string LoadAverage() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  in >> a >> b >> c;
  return a + " " + b + " " + c;
}
inline double PeakRssMb() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;
}
inline std::chrono::system_clock::time_point Deadline(absl::Duration d) {
  return absl::ToChronoTime(absl::Now() + d);
}

// Incompressible bytes, so LZ4 in flushes does real work as it would on real payloads.
inline std::string MakePayload(int size, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string out(static_cast<size_t>(size), '\0');
  for (char& c : out) c = static_cast<char>(rng());
  return out;
}

inline std::string Dur(const Scenario& s) { return s.sync ? "sync" : "interval"; }



// --- clients (log_bench_clients.cc) -----------------------------------------------------------

struct alignas(64) ProducerOutput {
  LatencyHistogram latency;
  uint64_t records = 0, errors = 0;
  std::string first_error;
};

// One producer thread: the same request again and again, timing send → ack. Only requests
// acknowledged inside [window_start, window_end) count.
void ProduceLoop(pb::LogService::Stub* stub, const pb::ProduceRequest& request,
                 const std::atomic<bool>& stop, SteadyClock::time_point window_start,
                 SteadyClock::time_point window_end, absl::Duration deadline, ProducerOutput* out);

// One producer as a chain of callback-API calls: one request in flight, the next sent from the
// completion of the previous. Many such producers share gRPC's few callback threads, so the
// client side does not pay a thread wakeup per request (2 cores are shared with the server).
class AsyncProducer {
 public:
  AsyncProducer(pb::LogService::Stub* stub, const pb::ProduceRequest* request,
                const std::atomic<bool>* stop, SteadyClock::time_point window_start,
                SteadyClock::time_point window_end, absl::Duration deadline, ProducerOutput* out)
      : stub_(stub), request_(request), stop_(stop), window_start_(window_start),
        window_end_(window_end), deadline_(deadline), out_(out) {}

  void Start() { Send(); }
  void Wait() { done_.WaitForNotification(); }

 private:
  void Send() {
    ctx_ = std::make_unique<grpc::ClientContext>();
    ctx_->set_deadline(Deadline(deadline_));
    response_.Clear();
    sent_ = SteadyClock::now();
    stub_->async()->Produce(ctx_.get(), request_, &response_, [this](grpc::Status status) {
      const auto t1 = SteadyClock::now();
      if (!status.ok()) {
        if (out_->errors++ == 0) {
          out_->first_error =
              absl::StrFormat("code %d: %s", status.error_code(), status.error_message());
        }
      } else if (t1 >= window_start_ && t1 < window_end_) {
        out_->latency.Record(std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - sent_).count());
        out_->records += static_cast<uint64_t>(request_->records_size());
      }
      if (stop_->load(std::memory_order_relaxed)) {
        done_.Notify();
        return;
      }
      Send();
    });
  }

  pb::LogService::Stub* const stub_;
  const pb::ProduceRequest* const request_;
  const std::atomic<bool>* const stop_;
  const SteadyClock::time_point window_start_, window_end_;
  const absl::Duration deadline_;
  ProducerOutput* const out_;
  std::unique_ptr<grpc::ClientContext> ctx_;
  pb::ProduceResponse response_;
  SteadyClock::time_point sent_;
  absl::Notification done_;
};

struct FetchRange {
  int32_t partition;
  int64_t from, to;
};

// Reads every range with `consumers` threads pulling ranges from a shared cursor; checks that
// offsets come back dense.
FetchFigures RunFetch(const std::vector<std::shared_ptr<grpc::Channel>>& channels,
                      const std::vector<FetchRange>& ranges, int consumers, int record_size,
                      const Settings& settings);

// The same records written straight to RocksDB by one thread (log_bench_ceiling.cc).
absl::StatusOr<CeilingFigures> RunCeiling(const Scenario& s, const Settings& settings);

// The report (log_bench_report.cc).
void PrintProduceHeader();
void PrintProduceRow(const Row& r);
void PrintTables(const std::vector<Row>& rows, const Settings& settings);
void PrintMachine(const std::string& base);

}  // namespace conduit::bench
