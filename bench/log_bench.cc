// log_bench: produce and fetch throughput and latency of the log broker over real gRPC, and the
// raw RocksDB ceiling for the same records in the same process.
//
// For every scenario of the matrix (record size × partitions × producers × durability × records
// per request) it starts a fresh broker (LogBrokerNode on a temp dir, gRPC server on
// 127.0.0.1:0), runs producer threads for --seconds after a --warmup_ms warm-up, reads every
// record back with 1 and --consumers consumer threads, and writes the same records straight to a
// fresh RocksDB with one WriteBatch per request from one thread (same options, key encoding,
// value codec and durability). One produce line per scenario, then the fetch table, the ceiling
// table and the targets (`== targets`).
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
#include "bench/log_bench.h"
#include "common/flags/flags.h"
#include "common/grpc/server_runner.h"
#include "common/rocksdb/rocksdb_util.h"
#include "common/runtime/runtime.h"
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

namespace lb = ::conduit::log_broker;
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
  runtime::Runtime runtime;
  auto node = lb::LogBrokerNode::Open(dir.Sub("data"), registry, &runtime);
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
  (*node)->BeginShutdown();
  (*server)->Shutdown();
  return absl::OkStatus();
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
