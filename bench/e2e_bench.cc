// End-to-end benchmark through the client library: prints figures, asserts nothing.
//
//   e2e_bench [--seconds=3] [--partitions=8] [--durability=interval] [--linger_ms=1]
//             [--loads=1000,10000,50000] [--producers=1,8]
//
// Over real gRPC to an in-process server on 127.0.0.1:0 (the log broker).
// 1. Offered load: one client::Producer sends 100-byte records at a fixed rate (each carries its
//    send time); one long-poll Fetch thread per partition reads them. Latency is send → read,
//    p50/p99/p999, and send → acknowledged.
// 2. Producer throughput: N threads each send single records through one shared client::Producer
//    as fast as acknowledgements allow (at most 20,000 outstanding per thread): what the
//    client's batching (linger, max batch) makes of one-record sends.

#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "bench/histogram.h"
#include "client/producer.h"
#include "common/grpc/proto_time.h"
#include "common/grpc/server_runner.h"
#include "common/runtime/runtime.h"
#include "common/testing/temp_dir.h"
#include "services/log_broker/log_broker_node.h"
#include "tests/support/log_client.h"

ABSL_FLAG(double, seconds, 3, "measured seconds per run");
ABSL_FLAG(int, partitions, 8, "partitions of the topic");
ABSL_FLAG(std::string, durability, "interval", "sync or interval");
ABSL_FLAG(int, linger_ms, 1, "producer linger");
ABSL_FLAG(std::string, loads, "1000,10000,50000", "offered loads, records/s");
ABSL_FLAG(std::string, producers, "1,8", "producer threads for the throughput runs");

namespace conduit::bench {
namespace {

namespace lpb = ::conduit::log::v1;
using Clock = std::chrono::steady_clock;

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

std::vector<int> Ints(const std::string& list) {
  std::vector<int> out;
  for (absl::string_view s : absl::StrSplit(list, ',')) {
    int v;
    if (absl::SimpleAtoi(s, &v)) out.push_back(v);
  }
  return out;
}

struct Server {
  testing::TempDir dir;
  prometheus::Registry registry;
  runtime::Runtime runtime;
  std::unique_ptr<log_broker::LogBrokerNode> broker;
  std::unique_ptr<grpc_util::RunningServer> server;
  int topics = 0;

  Server() {
    broker = *log_broker::LogBrokerNode::Open(dir.Sub("data"), registry, &runtime);
    server = *grpc_util::StartServer({}, {broker->service()});
  }
  ~Server() {
    broker->BeginShutdown();
    server->Shutdown();
  }
  std::string NewTopic() {
    const std::string name = "t" + std::to_string(topics++);
    testing::LogClient log(server->address());
    if (!log.CreateTopic(name, absl::GetFlag(FLAGS_partitions),
                         absl::GetFlag(FLAGS_durability) == "sync" ? lpb::DURABILITY_SYNC
                                                                   : lpb::DURABILITY_INTERVAL)
             .ok()) {
      std::abort();
    }
    return name;
  }
};

client::ProducerOptions ProducerOptionsFor(const Server& s, const std::string& topic) {
  client::ProducerOptions o;
  o.address = s.server->address();
  o.topic = topic;
  o.linger = absl::Milliseconds(absl::GetFlag(FLAGS_linger_ms));
  return o;
}

void OfferedLoad(Server& s, int rate) {
  const std::string topic = s.NewTopic();
  auto producer = *client::Producer::Create(ProducerOptionsFor(s, topic));
  const int partitions = absl::GetFlag(FLAGS_partitions);
  const absl::Duration run = absl::Seconds(absl::GetFlag(FLAGS_seconds));
  std::atomic<bool> stop{false};
  std::atomic<int64_t> received{0};
  std::vector<LatencyHistogram> read_latency(partitions);
  std::vector<std::thread> readers;
  for (int p = 0; p < partitions; ++p) {
    readers.emplace_back([&, p] {
      auto stub = lpb::LogService::NewStub(
          grpc::CreateChannel(s.server->address(), grpc::InsecureChannelCredentials()));
      int64_t offset = 0;
      while (!stop.load()) {
        grpc::ClientContext ctx;
        ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
        lpb::FetchRequest req;
        req.set_topic(topic);
        req.set_partition(p);
        req.set_offset(offset);
        req.set_max_records(1000);
        grpc_util::SetDuration(absl::Milliseconds(200), req.mutable_max_wait());
        lpb::FetchResponse resp;
        if (!stub->Fetch(&ctx, req, &resp).ok()) break;
        const int64_t now = NowNs();
        for (const lpb::Record& r : resp.records()) {
          int64_t sent = 0;
          if (!absl::SimpleAtoi(r.value().substr(0, r.value().find(' ')), &sent)) continue;
          read_latency[p].Record(static_cast<uint64_t>(std::max<int64_t>(0, now - sent)));
        }
        received.fetch_add(resp.records_size());
        offset = resp.next_offset();
      }
    });
  }
  std::mutex ack_mu;
  LatencyHistogram ack_latency;
  const std::string padding(80, 'x');
  const int64_t interval_ns = 1'000'000'000LL / rate;
  const int64_t start = NowNs();
  int64_t sent = 0;
  while (NowNs() - start < absl::ToInt64Nanoseconds(run)) {
    const int64_t due = start + sent * interval_ns;
    if (due - NowNs() > 200'000) absl::SleepFor(absl::Nanoseconds(due - NowNs() - 100'000));
    while (NowNs() < due) {
    }
    const int64_t t = NowNs();
    client::ProducerRecord r;
    r.value = std::to_string(t) + " " + padding;
    producer->Send(std::move(r), [&ack_mu, &ack_latency, t](absl::StatusOr<client::RecordPosition>) {
      const int64_t done = NowNs();
      std::lock_guard<std::mutex> lock(ack_mu);
      ack_latency.Record(static_cast<uint64_t>(done - t));
    });
    ++sent;
  }
  (void)producer->Flush();
  const double secs = (NowNs() - start) / 1e9;
  const absl::Time drain = absl::Now() + absl::Seconds(5);
  while (received.load() < sent && absl::Now() < drain) absl::SleepFor(absl::Milliseconds(5));
  stop.store(true);
  for (auto& t : readers) t.join();
  LatencyHistogram all;
  for (auto& h : read_latency) all.Merge(h);
  std::printf("  offered %6d/s: sent %7.0f/s read %lld  send->read p50 %6.2f p99 %6.2f p999 %6.2f ms"
              "  send->ack p99 %6.2f ms\n",
              rate, sent / secs, static_cast<long long>(received.load()), all.Quantile(0.5) / 1e6,
              all.Quantile(0.99) / 1e6, all.Quantile(0.999) / 1e6, ack_latency.Quantile(0.99) / 1e6);
}

void Throughput(Server& s, int threads) {
  const std::string topic = s.NewTopic();
  auto producer = *client::Producer::Create(ProducerOptionsFor(s, topic));
  const absl::Duration run = absl::Seconds(absl::GetFlag(FLAGS_seconds));
  std::atomic<bool> stop{false};
  std::atomic<int64_t> acked{0}, failed{0};
  std::vector<std::thread> workers;
  const std::string value(100, 'v');
  const absl::Time start = absl::Now();
  for (int i = 0; i < threads; ++i) {
    workers.emplace_back([&] {
      std::atomic<int64_t> outstanding{0};
      while (!stop.load()) {
        if (outstanding.load() >= 20'000) {
          std::this_thread::yield();
          continue;
        }
        outstanding.fetch_add(1);
        client::ProducerRecord r;
        r.value = value;
        producer->Send(std::move(r), [&](absl::StatusOr<client::RecordPosition> p) {
          (p.ok() ? acked : failed).fetch_add(1);
          outstanding.fetch_sub(1);
        });
      }
      while (outstanding.load() > 0) std::this_thread::yield();
    });
  }
  absl::SleepFor(run);
  stop.store(true);
  for (auto& t : workers) t.join();
  const double secs = absl::ToDoubleSeconds(absl::Now() - start);
  std::printf("  %2d threads, 100 B single-record sends: %9.0f records/s acknowledged (%lld failed)\n",
              threads, acked.load() / secs, static_cast<long long>(failed.load()));
}

}  // namespace
}  // namespace conduit::bench

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  using namespace conduit::bench;
  Server s;
  std::printf("end to end through client::Producer (%s, %d partitions, linger %d ms)\n",
              absl::GetFlag(FLAGS_durability).c_str(), absl::GetFlag(FLAGS_partitions),
              absl::GetFlag(FLAGS_linger_ms));
  for (int rate : Ints(absl::GetFlag(FLAGS_loads))) OfferedLoad(s, rate);
  std::printf("producer throughput\n");
  for (int threads : Ints(absl::GetFlag(FLAGS_producers))) Throughput(s, threads);
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  std::printf("peak RSS %.0f MB (client and server in one process)\n", usage.ru_maxrss / 1024.0);
  return 0;
}
