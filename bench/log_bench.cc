// log_bench: produce and fetch throughput and latency of the log broker over real gRPC, and the
// raw RocksDB ceiling for the same records in the same process.
//
// For every scenario of the matrix (record size × partitions × producers × durability × records
// per request) it starts a fresh broker (LogBrokerNode on a temp dir, gRPC server on
// 127.0.0.1:0), runs producer threads for --seconds after a --warmup_ms warm-up, reads every
// record back with 1 and --consumers consumer threads, and writes the same records straight to a
// fresh RocksDB with one WriteBatch per request from one thread (same options, key encoding,
// value codec and durability). One produce line per scenario, then the fetch table, the ceiling
// table and the targets of the issue.
//
//   log_bench                         the full default matrix (a few minutes)
//   log_bench --quick                 a tiny run
//   log_bench --record_sizes=100 --partitions=1 --producers=1,32 --durability=sync --batch=1

#include <sys/resource.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <prometheus/registry.h>
#include <rocksdb/write_batch.h>

#include "absl/flags/flag.h"
#include "absl/synchronization/notification.h"
#include "absl/synchronization/mutex.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "bench/histogram.h"
#include "common/flags/flags.h"
#include "common/grpc/server_runner.h"
#include "common/rocksdb/rocksdb_util.h"
#include "common/testing/temp_dir.h"
#include "common/time/clock.h"
#include "conduit/log/v1/log.grpc.pb.h"
#include "services/log_broker/log_broker_node.h"
#include "services/log_broker/storage/codec.h"
#include "services/log_broker/storage/key_schema.h"

using StringList = std::vector<std::string>;
ABSL_FLAG(StringList, record_sizes, StringList({"100", "1024"}), "value bytes per record");
ABSL_FLAG(StringList, partitions, StringList({"1", "8"}), "partitions of the topic");
ABSL_FLAG(StringList, producers, StringList({"1", "8", "32"}), "concurrent producer threads");
ABSL_FLAG(StringList, durability, StringList({"sync", "interval"}), "topic durability");
ABSL_FLAG(StringList, batch, StringList({"1", "100"}), "records per produce request");
ABSL_FLAG(double, seconds, 3, "measured seconds per scenario (produce and ceiling)");
ABSL_FLAG(int, warmup_ms, 300, "unmeasured warm-up before each measured window");
ABSL_FLAG(int, flush_interval_ms, 100, "WAL fsync period of interval topics (and the ceiling)");
ABSL_FLAG(int, channels, 0, "gRPC channels (TCP connections) the producers share; 0: one each");
ABSL_FLAG(int, consumers, 8, "consumer threads of the parallel fetch pass");
ABSL_FLAG(int, fetch_max_records, 1000, "max_records of each Fetch");
ABSL_FLAG(bool, fetch, true, "read everything back after producing");
ABSL_FLAG(bool, ceiling, true, "measure the raw RocksDB WriteBatch ceiling");
ABSL_FLAG(int, deadline_ms, 10000, "deadline of every RPC");
ABSL_FLAG(std::string, dir, "", "where the temp data dirs go (default $TMPDIR or /tmp)");
ABSL_FLAG(bool, mutex_deadlock_detection, true,
          "leave absl::Mutex deadlock detection as the library defaults (Debian's absl is built "
          "without NDEBUG, so it is on); false turns it off, to measure its cost");
ABSL_FLAG(bool, async_producers, true,
          "producers use gRPC's callback client API (one request in flight each) instead of a "
          "blocking thread each");
ABSL_FLAG(bool, quick, false,
          "tiny run: 100 B, 1 partition, 1 and 8 producers, batch 1 and 100, 1 s each");

namespace conduit::bench {
namespace {

namespace pb = ::conduit::log::v1;
namespace lb = ::conduit::log_broker;
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

double Us(uint64_t ns) { return static_cast<double>(ns) / 1000.0; }
// Resident set now (not the peak), from /proc/self/statm.
double RssNowMb() {
  std::ifstream in("/proc/self/statm");
  long pages = 0, resident = 0;
  in >> pages >> resident;
  return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) / (1 << 20);
}
double CpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto secs = [](const timeval& tv) { return tv.tv_sec + tv.tv_usec / 1e6; };
  return secs(usage.ru_utime) + secs(usage.ru_stime);
}
std::string LoadAverage() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  in >> a >> b >> c;
  return a + " " + b + " " + c;
}
double PeakRssMb() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;
}
std::chrono::system_clock::time_point Deadline(absl::Duration d) {
  return absl::ToChronoTime(absl::Now() + d);
}

// Incompressible bytes, so LZ4 in flushes does real work as it would on real payloads.
std::string MakePayload(int size, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string out(static_cast<size_t>(size), '\0');
  for (char& c : out) c = static_cast<char>(rng());
  return out;
}

// Counters of the broker's Prometheus families.
struct BrokerCounters {
  double wal_syncs = 0, wal_sync_seconds = 0, commits = 0, commit_requests = 0,
         commit_records = 0, produces = 0, produce_seconds = 0;
};

BrokerCounters ReadCounters(prometheus::Registry& registry) {
  BrokerCounters c;
  for (const auto& family : registry.Collect()) {
    if (family.metric.empty()) continue;
    const auto& h = family.metric.front().histogram;
    if (family.name == "conduit_log_wal_sync_seconds") {
      c.wal_syncs = static_cast<double>(h.sample_count);
      c.wal_sync_seconds = h.sample_sum;
    } else if (family.name == "conduit_log_produce_latency_seconds") {
      c.produces = static_cast<double>(h.sample_count);
      c.produce_seconds = h.sample_sum;
    } else if (family.name == "conduit_log_group_commit_requests") {
      c.commits = static_cast<double>(h.sample_count);
      c.commit_requests = h.sample_sum;
    } else if (family.name == "conduit_log_group_commit_records") {
      c.commit_records = h.sample_sum;
    }
  }
  return c;
}

// One producer thread: the same request again and again, timing send → ack. Only requests
// acknowledged inside [window_start, window_end) count.
struct alignas(64) ProducerOutput {
  LatencyHistogram latency;
  uint64_t records = 0, errors = 0;
  std::string first_error;
};

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

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  args.SetMaxSendMessageSize(64 << 20);
  // A channel of its own (TCP connection), not one shared through the global subchannel pool.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
}

// A fresh broker for one scenario: produce, then fetch everything back.
absl::Status RunBroker(const Scenario& s, const Settings& settings, Row* row) {
  testing::TempDir dir;
  prometheus::Registry registry;
  auto node = lb::LogBrokerNode::Open(dir.Sub("data"), registry, time::SystemClock::Get());
  if (!node.ok()) return node.status();
  auto server = grpc_util::StartServer(grpc_util::ServerOptions{}, {(*node)->service()});
  if (!server.ok()) return server.status();

  const int n_channels = settings.channels > 0 ? settings.channels
                                               : std::max(s.producers, settings.consumers);
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  for (int i = 0; i < n_channels; ++i) {
    channels.push_back(MakeChannel((*server)->address()));
    if (!channels.back()->WaitForConnected(Deadline(settings.deadline))) {
      return absl::UnavailableError("cannot connect to the broker");
    }
  }
  auto admin = pb::LogService::NewStub(channels[0]);
  {
    pb::CreateTopicRequest request;
    request.set_name("bench");
    request.set_partitions(s.partitions);
    auto* config = request.mutable_config();
    config->set_durability(s.sync ? pb::DURABILITY_SYNC : pb::DURABILITY_INTERVAL);
    const int64_t interval_ns = absl::ToInt64Nanoseconds(settings.flush_interval);
    config->mutable_flush_interval()->set_seconds(interval_ns / 1'000'000'000);
    config->mutable_flush_interval()->set_nanos(static_cast<int32_t>(interval_ns % 1'000'000'000));
    pb::CreateTopicResponse response;
    grpc::ClientContext ctx;
    ctx.set_deadline(Deadline(settings.deadline));
    grpc::Status status = admin->CreateTopic(&ctx, request, &response);
    if (!status.ok()) return absl::InternalError("create topic: " + status.error_message());
  }

  // Produce. Keyless records: each request goes to one partition, round-robin across requests.
  pb::ProduceRequest request;
  request.set_topic("bench");
  const std::string payload = MakePayload(s.record_size, 42);
  for (int i = 0; i < s.batch; ++i) request.add_records()->set_value(payload);
  std::atomic<bool> stop{false};
  const auto window_start = SteadyClock::now() + absl::ToChronoNanoseconds(settings.warmup);
  const auto window_end = window_start + absl::ToChronoNanoseconds(settings.measure);
  std::vector<ProducerOutput> outputs(s.producers);
  std::vector<std::unique_ptr<pb::LogService::Stub>> stubs;
  std::vector<std::thread> threads;
  std::vector<std::unique_ptr<AsyncProducer>> async_producers;
  for (int i = 0; i < s.producers; ++i) {
    stubs.push_back(pb::LogService::NewStub(channels[i % channels.size()]));
    if (absl::GetFlag(FLAGS_async_producers)) {
      async_producers.push_back(std::make_unique<AsyncProducer>(
          stubs.back().get(), &request, &stop, window_start, window_end, settings.deadline,
          &outputs[i]));
      async_producers.back()->Start();
    } else {
      threads.emplace_back(ProduceLoop, stubs.back().get(), std::cref(request), std::cref(stop),
                           window_start, window_end, settings.deadline, &outputs[i]);
    }
  }
  std::this_thread::sleep_until(window_start);
  const BrokerCounters before = ReadCounters(registry);
  const double cpu_before = CpuSeconds();
  std::this_thread::sleep_until(window_end);
  const BrokerCounters after = ReadCounters(registry);
  const double cpu_after = CpuSeconds();
  stop.store(true);
  for (auto& t : threads) t.join();
  for (auto& a : async_producers) a->Wait();

  ProduceFigures& p = row->produce;
  uint64_t records = 0;
  for (const auto& o : outputs) {
    records += o.records;
    p.errors += o.errors;
    p.latency.Merge(o.latency);
    if (p.first_error.empty()) p.first_error = o.first_error;
  }
  const double secs = absl::ToDoubleSeconds(settings.measure);
  p.records_per_s = static_cast<double>(records) / secs;
  p.mb_per_s = p.records_per_s * s.record_size / 1e6;
  p.syncs_per_s = (after.wal_syncs - before.wal_syncs) / secs;
  p.cpu_cores = (cpu_after - cpu_before) / secs;
  if (after.wal_syncs > before.wal_syncs) {
    p.wal_sync_avg_us = 1e6 * (after.wal_sync_seconds - before.wal_sync_seconds) /
                        (after.wal_syncs - before.wal_syncs);
  }
  if (after.produces > before.produces) {
    p.server_avg_us = 1e6 * (after.produce_seconds - before.produce_seconds) /
                      (after.produces - before.produces);
  }
  const double commits = after.commits - before.commits;
  if (commits > 0) {
    p.requests_per_commit = (after.commit_requests - before.commit_requests) / commits;
    p.records_per_commit = (after.commit_records - before.commit_records) / commits;
  }

  if (settings.fetch) {
    pb::DescribeTopicRequest describe;
    describe.set_name("bench");
    pb::DescribeTopicResponse topic;
    grpc::ClientContext ctx;
    ctx.set_deadline(Deadline(settings.deadline));
    grpc::Status status = admin->DescribeTopic(&ctx, describe, &topic);
    if (!status.ok()) return absl::InternalError("describe topic: " + status.error_message());
    // Split each partition so that the parallel pass has at least `consumers` ranges.
    const int pieces = std::max(1, (settings.consumers + s.partitions - 1) / s.partitions);
    std::vector<FetchRange> ranges;
    for (const auto& part : topic.partitions()) {
      const int64_t hw = part.high_watermark();
      for (int k = 0; k < pieces; ++k) {
        const int64_t from = hw * k / pieces, to = hw * (k + 1) / pieces;
        if (from < to) ranges.push_back(FetchRange{part.partition(), from, to});
      }
    }
    row->fetch_one = RunFetch(channels, ranges, 1, s.record_size, settings);
    row->fetch_many = RunFetch(channels, ranges, settings.consumers, s.record_size, settings);
  }

  stubs.clear();
  admin.reset();
  channels.clear();
  (*node)->service()->BeginShutdown();
  (*server)->Shutdown();
  return absl::OkStatus();
}

// The raw ceiling: the same records written by one thread straight to a fresh RocksDB (the
// broker's options, column family layout, key and value encoding), one WriteBatch of `batch`
// records per write, partitions round-robin; sync writes for `sync`, else unsynced writes with
// a background SyncWAL every flush interval.
absl::StatusOr<CeilingFigures> RunCeiling(const Scenario& s, const Settings& settings) {
  testing::TempDir dir;
  const std::string cf = lb::keys::TopicColumnFamily(1);
  CeilingFigures out;
  uint64_t records = 0, syncs = 0;
  {
    auto db = rocksdb_util::Open(dir.Sub("ceiling"), rocksdb_util::DefaultDbOptions(),
                                 rocksdb_util::DefaultCfOptions(), {cf});
    if (!db.ok()) return db.status();
    auto handle = db->Find(cf);
    std::atomic<bool> stop{false};
    std::atomic<uint64_t> background_syncs{0};
    std::thread syncer;
    if (!s.sync) {
      syncer = std::thread([&] {
        while (!stop.load()) {
          absl::SleepFor(settings.flush_interval);
          if (db->db()->SyncWAL().ok()) background_syncs.fetch_add(1);
        }
      });
    }
    lb::RecordData data;
    data.value = MakePayload(s.record_size, 42);
    std::vector<int64_t> next_offset(s.partitions, 0);
    rocksdb::WriteOptions options;
    options.sync = s.sync;
    std::string value;
    const auto window_start = SteadyClock::now() + absl::ToChronoNanoseconds(settings.warmup);
    const auto window_end = window_start + absl::ToChronoNanoseconds(settings.measure);
    uint64_t syncs_before = 0;
    bool in_window = false;
    for (int32_t partition = 0;; partition = (partition + 1) % s.partitions) {
      const auto t0 = SteadyClock::now();
      if (t0 >= window_end) break;
      if (!in_window && t0 >= window_start) {
        in_window = true;
        syncs_before = background_syncs.load();
      }
      rocksdb::WriteBatch batch;
      const absl::Time append_time = absl::Now();
      for (int i = 0; i < s.batch; ++i) {
        lb::codec::EncodeRecord(data, append_time, &value);
        (void)batch.Put(handle.get(), lb::keys::RecordKey(partition, next_offset[partition]++),
                        value);
      }
      rocksdb::Status status = db->db()->Write(options, &batch);
      if (!status.ok()) return rocksdb_util::ToStatus(status, "ceiling write");
      const auto t1 = SteadyClock::now();
      if (in_window) {
        out.latency.Record(std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count());
        records += static_cast<uint64_t>(s.batch);
        if (s.sync) ++syncs;
      }
    }
    stop.store(true);
    if (syncer.joinable()) syncer.join();
    if (!s.sync) syncs = background_syncs.load() - syncs_before;
    handle.reset();
  }
  const double secs = absl::ToDoubleSeconds(settings.measure);
  out.records_per_s = static_cast<double>(records) / secs;
  out.mb_per_s = out.records_per_s * s.record_size / 1e6;
  out.syncs_per_s = static_cast<double>(syncs) / secs;
  return out;
}

std::string Dur(const Scenario& s) { return s.sync ? "sync" : "interval"; }

void PrintProduceHeader() {
  std::printf("\n== produce (records/s and MB/s of value bytes; latency per request, send -> ack)\n");
  std::printf("   avg_us: client mean; srv_us: service mean (receipt -> Finish); wal_us: mean "
              "write+fsync (sync) or background SyncWAL (interval); cpu: cores this process used;\n"
              "   rss_MB: resident now (after the scenario's broker closed); peakMB: peak so far\n");
  std::printf("%5s %4s %4s %-8s %5s | %10s %7s %8s %8s %8s %8s %8s | %7s %7s %7s %7s | %10s %5s "
              "| %4s %4s %6s %6s\n",
              "size", "part", "prod", "dur", "batch", "rec/s", "MB/s", "p50_us", "p99_us",
              "p999_us", "avg_us", "srv_us", "syncs/s", "wal_us", "req/cmt", "rec/cmt",
              "ceil rec/s", "ratio", "cpu", "errs", "rss_MB", "peakMB");
}

void PrintProduceRow(const Row& r) {
  const Scenario& s = r.scenario;
  if (!r.error.empty()) {
    std::printf("%5d %4d %4d %-8s %5d | ERROR %s\n", s.record_size, s.partitions, s.producers,
                Dur(s).c_str(), s.batch, r.error.c_str());
    return;
  }
  const ProduceFigures& p = r.produce;
  const double ratio = r.ceiling.records_per_s > 0 ? p.records_per_s / r.ceiling.records_per_s : 0;
  std::printf(
      "%5d %4d %4d %-8s %5d | %10.0f %7.1f %8.0f %8.0f %8.0f %8.0f %8.0f | %7.0f %7.0f %7.2f %7.1f "
      "| %10.0f %5.2f | %4.2f %4llu %6.0f %6.0f\n",
      s.record_size, s.partitions, s.producers, Dur(s).c_str(), s.batch, p.records_per_s,
      p.mb_per_s, Us(p.latency.Quantile(0.5)), Us(p.latency.Quantile(0.99)),
      Us(p.latency.Quantile(0.999)), p.latency.mean() / 1000.0, p.server_avg_us, p.syncs_per_s,
      p.wal_sync_avg_us, p.requests_per_commit, p.records_per_commit, r.ceiling.records_per_s,
      ratio, p.cpu_cores, static_cast<unsigned long long>(p.errors), RssNowMb(), PeakRssMb());
  if (!p.first_error.empty()) std::printf("      first produce error: %s\n", p.first_error.c_str());
  std::fflush(stdout);
}

void PrintTables(const std::vector<Row>& rows, const Settings& settings) {
  if (settings.fetch) {
    std::printf("\n== fetch (everything from offset 0; max_records %d; latency per Fetch)\n",
                settings.fetch_max_records);
    std::printf("%5s %4s %4s %-8s %5s | %9s | %10s %7s %8s %8s | %10s %7s %8s %8s | %4s\n",
                "size", "part", "prod", "dur", "batch", "records", "1c rec/s", "MB/s", "p50_us",
                "p99_us", absl::StrFormat("%dc rec/s", settings.consumers).c_str(), "MB/s",
                "p50_us", "p99_us", "errs");
    for (const Row& r : rows) {
      if (!r.error.empty()) continue;
      const Scenario& s = r.scenario;
      const FetchFigures &a = r.fetch_one, &b = r.fetch_many;
      std::printf(
          "%5d %4d %4d %-8s %5d | %9llu | %10.0f %7.1f %8.0f %8.0f | %10.0f %7.1f %8.0f %8.0f | "
          "%4llu\n",
          s.record_size, s.partitions, s.producers, Dur(s).c_str(), s.batch,
          static_cast<unsigned long long>(a.records), a.records_per_s, a.mb_per_s,
          Us(a.latency.Quantile(0.5)), Us(a.latency.Quantile(0.99)), b.records_per_s, b.mb_per_s,
          Us(b.latency.Quantile(0.5)), Us(b.latency.Quantile(0.99)),
          static_cast<unsigned long long>(a.errors + b.errors));
    }
  }
  if (settings.ceiling) {
    std::printf("\n== raw RocksDB ceiling (1 thread, one WriteBatch of `batch` records per write)\n");
    std::printf("%5s %4s %-8s %5s | %10s %7s %8s %9s %9s\n", "size", "part", "dur", "batch",
                "rec/s", "MB/s", "syncs/s", "p50_us", "p99_us");
    std::map<std::tuple<int, int, bool, int>, const CeilingFigures*> seen;
    for (const Row& r : rows) {
      const Scenario& s = r.scenario;
      if (!r.error.empty() || !seen.emplace(std::tuple(s.record_size, s.partitions, s.sync, s.batch),
                                           &r.ceiling).second) {
        continue;
      }
      const CeilingFigures& c = r.ceiling;
      std::printf("%5d %4d %-8s %5d | %10.0f %7.1f %8.0f %9.0f %9.0f\n", s.record_size,
                  s.partitions, Dur(s).c_str(), s.batch, c.records_per_s, c.mb_per_s,
                  c.syncs_per_s, Us(c.latency.Quantile(0.5)), Us(c.latency.Quantile(0.99)));
    }
  }

  std::printf("\n== targets\n");
  int max_batch = 0, max_producers = 0;
  for (const Row& r : rows) {
    max_batch = std::max(max_batch, r.scenario.batch);
    max_producers = std::max(max_producers, r.scenario.producers);
  }
  for (const Row& r : rows) {
    const Scenario& s = r.scenario;
    if (!r.error.empty() || s.sync || s.batch != max_batch || max_batch == 1 ||
        r.ceiling.records_per_s == 0) {
      continue;
    }
    const double ratio = r.produce.records_per_s / r.ceiling.records_per_s;
    std::printf("interval batch=%d size=%d part=%d prod=%d: conduit/ceiling %.2f (>= 0.60) %s\n",
                s.batch, s.record_size, s.partitions, s.producers, ratio,
                ratio >= 0.6 ? "PASS" : "FAIL");
  }
  for (const Row& one : rows) {
    const Scenario& s = one.scenario;
    if (!one.error.empty() || !s.sync || s.batch != 1 || s.producers != 1) continue;
    for (const Row& many : rows) {
      const Scenario& m = many.scenario;
      if (!many.error.empty() || !m.sync || m.batch != 1 || m.producers != max_producers ||
          m.producers == 1 || m.record_size != s.record_size || m.partitions != s.partitions) {
        continue;
      }
      const double gain = one.produce.records_per_s > 0
                              ? many.produce.records_per_s / one.produce.records_per_s
                              : 0;
      std::printf("sync batch=1 size=%d part=%d: %d producers / 1 producer = %.1fx (>= 10x) %s\n",
                  s.record_size, s.partitions, m.producers, gain, gain >= 10 ? "PASS" : "FAIL");
    }
  }
}

std::vector<int> Ints(const StringList& list, const char* flag) {
  std::vector<int> out;
  for (const auto& item : list) {
    int v = 0;
    if (!absl::SimpleAtoi(item, &v) || v <= 0) {
      std::fprintf(stderr, "--%s: '%s' is not a positive integer\n", flag, item.c_str());
      std::exit(2);
    }
    out.push_back(v);
  }
  return out;
}

void PrintMachine(const std::string& base) {
  std::string cpu = "unknown";
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("model name", 0) == 0) {
      cpu = line.substr(line.find(':') + 2);
      break;
    }
  }
  cpu_set_t set;
  CPU_ZERO(&set);
  const int usable = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : -1;
  struct statfs fs{};
  std::string fs_type = "unknown";
  if (statfs(base.c_str(), &fs) == 0) {
    fs_type = fs.f_type == 0x01021994 ? "tmpfs (fsync is free: sync figures are not meaningful)"
              : fs.f_type == 0xEF53   ? "ext2/3/4"
              : fs.f_type == 0x58465342 ? "xfs"
                                        : absl::StrFormat("0x%x", fs.f_type);
  }
  std::printf("machine: nproc %d (online %ld), cpu %s\n", usable, sysconf(_SC_NPROCESSORS_ONLN),
              cpu.c_str());
  std::printf("data dir base: %s (%s); gRPC %s, RocksDB %d.%d\n", base.c_str(), fs_type.c_str(),
              grpc::Version().c_str(), ROCKSDB_MAJOR, ROCKSDB_MINOR);
}

int Main() {
  StringList sizes = absl::GetFlag(FLAGS_record_sizes), parts = absl::GetFlag(FLAGS_partitions),
             producers = absl::GetFlag(FLAGS_producers), batches = absl::GetFlag(FLAGS_batch),
             durability = absl::GetFlag(FLAGS_durability);
  double seconds = absl::GetFlag(FLAGS_seconds);
  int warmup_ms = absl::GetFlag(FLAGS_warmup_ms);
  if (absl::GetFlag(FLAGS_quick)) {
    sizes = {"100"};
    parts = {"1"};
    producers = {"1", "8"};
    batches = {"1", "100"};
    seconds = 1;
    warmup_ms = 200;
  }
  Settings settings;
  settings.measure = absl::Seconds(seconds);
  settings.warmup = absl::Milliseconds(warmup_ms);
  settings.flush_interval = absl::Milliseconds(absl::GetFlag(FLAGS_flush_interval_ms));
  settings.deadline = absl::Milliseconds(absl::GetFlag(FLAGS_deadline_ms));
  settings.channels = absl::GetFlag(FLAGS_channels);
  settings.consumers = std::max(1, absl::GetFlag(FLAGS_consumers));
  settings.fetch_max_records = absl::GetFlag(FLAGS_fetch_max_records);
  settings.fetch = absl::GetFlag(FLAGS_fetch);
  settings.ceiling = absl::GetFlag(FLAGS_ceiling);

  std::vector<Scenario> matrix;
  for (int size : Ints(sizes, "record_sizes"))
    for (int p : Ints(parts, "partitions"))
      for (const auto& d : durability)
        for (int b : Ints(batches, "batch"))
          for (int n : Ints(producers, "producers")) {
            if (d != "sync" && d != "interval") {
              std::fprintf(stderr, "--durability: '%s' is not sync or interval\n", d.c_str());
              return 2;
            }
            matrix.push_back(Scenario{size, p, n, d == "sync", b});
          }

  std::string base = absl::GetFlag(FLAGS_dir);
  if (!base.empty()) setenv("TMPDIR", base.c_str(), 1);  // testing::TempDir creates under it
  const char* tmp = std::getenv("TMPDIR");
  PrintMachine(tmp ? tmp : "/tmp");
  std::printf("load average at start: %s; absl mutex deadlock detection %s\n",
              LoadAverage().c_str(),
              absl::GetFlag(FLAGS_mutex_deadlock_detection) ? "library default" : "off");
  std::printf("scenarios: %zu x (%.1f s measured after %d ms warm-up); flush interval %lld ms\n",
              matrix.size(), seconds, warmup_ms,
              static_cast<long long>(absl::ToInt64Milliseconds(settings.flush_interval)));
  PrintProduceHeader();

  std::vector<Row> rows;
  std::map<std::tuple<int, int, bool, int>, CeilingFigures> ceilings;
  const auto started = SteadyClock::now();
  for (const Scenario& s : matrix) {
    Row row;
    row.scenario = s;
    if (absl::Status status = RunBroker(s, settings, &row); !status.ok()) {
      row.error = std::string(status.message());
    } else if (settings.ceiling) {
      const auto key = std::tuple(s.record_size, s.partitions, s.sync, s.batch);
      auto it = ceilings.find(key);
      if (it == ceilings.end()) {
        auto ceiling = RunCeiling(s, settings);
        if (!ceiling.ok()) {
          row.error = "ceiling: " + std::string(ceiling.status().message());
        } else {
          it = ceilings.emplace(key, *std::move(ceiling)).first;
        }
      }
      if (it != ceilings.end()) row.ceiling = it->second;
    }
    PrintProduceRow(row);
    rows.push_back(std::move(row));
  }
  PrintTables(rows, settings);
  std::printf("\npeak RSS %.0f MB; wall time %.0f s; load average at end: %s\n", PeakRssMb(),
              std::chrono::duration<double>(SteadyClock::now() - started).count(),
              LoadAverage().c_str());
  return 0;
}

}  // namespace
}  // namespace conduit::bench

int main(int argc, char** argv) {
  conduit::flags::Parse(argc, argv);
  if (!absl::GetFlag(FLAGS_mutex_deadlock_detection)) {
    absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  }
  return conduit::bench::Main();
}
