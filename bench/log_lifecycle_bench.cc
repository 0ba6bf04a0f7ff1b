// Benchmarks for the log's lifecycle features (retention, compaction, idempotent
// producers). Prints figures; asserts nothing.
//
//   log_lifecycle_bench [--producers=8 --batch=100 --seconds=3]       idempotent produce on vs off
//                       [--compaction_records=1000000 --compaction_keys=100000]
//
// 1. Produce throughput over real gRPC (in-process server on 127.0.0.1:0), `producers` threads
//    each writing `batch` x 100 B records per request to its own partition, with and without
//    the idempotent producer fields, for sync and interval durability.
// 2. Compaction: load `compaction_records` keyed records (`compaction_keys` distinct keys, so
//    each key has records/keys versions) into a compacted topic through the broker, then time
//    cleaner passes until one record per key is left, and report live SST bytes before and
//    after a RocksDB compaction of the topic's key range.

#include <sys/resource.h>

#include <atomic>
#include <cstdio>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/grpc/server_runner.h"
#include "common/runtime/runtime.h"
#include "common/testing/temp_dir.h"
#include "conduit/log/v1/log.grpc.pb.h"
#include "services/log_broker/log_broker_node.h"

ABSL_FLAG(int, producers, 8, "producer threads for the idempotence comparison");
ABSL_FLAG(int, batch, 100, "records per produce request");
ABSL_FLAG(double, seconds, 3, "measured seconds per produce run");
ABSL_FLAG(int, compaction_records, 1'000'000, "records loaded into the compacted topic");
ABSL_FLAG(int, compaction_keys, 100'000, "distinct keys among them");

namespace conduit::bench {
namespace {

namespace pb = ::conduit::log::v1;
namespace lb = ::conduit::log_broker;

std::string RandomBytes(int n, uint64_t* state) {
  std::string out(n, '\0');
  for (char& c : out) {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    c = static_cast<char>(*state);
  }
  return out;
}

std::chrono::system_clock::time_point Deadline() {
  return std::chrono::system_clock::now() + std::chrono::seconds(10);
}

// Records/s of `producers` threads producing for `seconds`, idempotent or not.
double ProduceRate(bool sync, bool idempotent) {
  testing::TempDir dir;
  prometheus::Registry registry;
  runtime::Runtime runtime;
  auto node = *lb::LogBrokerNode::Open(dir.Sub("data"), registry, &runtime);
  auto server = *grpc_util::StartServer({}, {node->service()});
  const int producers = absl::GetFlag(FLAGS_producers);
  const int batch = absl::GetFlag(FLAGS_batch);
  {
    auto stub = pb::LogService::NewStub(
        grpc::CreateChannel(server->address(), grpc::InsecureChannelCredentials()));
    grpc::ClientContext ctx;
    ctx.set_deadline(Deadline());
    pb::CreateTopicRequest create;
    create.set_name("bench");
    create.set_partitions(producers);
    create.mutable_config()->set_durability(sync ? pb::DURABILITY_SYNC : pb::DURABILITY_INTERVAL);
    pb::CreateTopicResponse created;
    if (!stub->CreateTopic(&ctx, create, &created).ok()) std::abort();
  }
  std::atomic<bool> stop{false};
  std::atomic<int64_t> records{0}, errors{0};
  const absl::Time start = absl::Now() + absl::Milliseconds(300);
  const absl::Time end = start + absl::Seconds(absl::GetFlag(FLAGS_seconds));
  std::vector<std::thread> threads;
  for (int t = 0; t < producers; ++t) {
    threads.emplace_back([&, t] {
      auto stub = pb::LogService::NewStub(grpc::CreateChannel(
          server->address(), grpc::InsecureChannelCredentials()));  // one connection each
      pb::ProduceRequest request;
      request.set_topic("bench");
      const std::string payload(100, 'x');
      for (int i = 0; i < batch; ++i) {
        auto* r = request.add_records();
        r->set_value(payload);
        r->set_partition(t);
      }
      if (idempotent) {
        grpc::ClientContext ctx;
        ctx.set_deadline(Deadline());
        pb::InitProducerResponse producer;
        if (!stub->InitProducer(&ctx, {}, &producer).ok()) std::abort();
        request.set_producer_id(producer.producer_id());
        request.set_producer_epoch(producer.producer_epoch());
        request.add_sequences()->set_partition(t);
      }
      int32_t sequence = 0;
      pb::ProduceResponse response;
      while (!stop.load()) {
        if (idempotent) request.mutable_sequences(0)->set_base_sequence(sequence);
        grpc::ClientContext ctx;
        ctx.set_deadline(Deadline());
        if (!stub->Produce(&ctx, request, &response).ok()) {
          errors++;
          continue;
        }
        sequence += batch;
        const absl::Time now = absl::Now();
        if (now >= start && now < end) records += batch;
      }
    });
  }
  absl::SleepFor(end - absl::Now());
  stop = true;
  for (auto& t : threads) t.join();
  if (errors.load() > 0) std::printf("  (%lld errors)\n", static_cast<long long>(errors.load()));
  server->Shutdown();
  return static_cast<double>(records.load()) / absl::GetFlag(FLAGS_seconds);
}

void Compaction() {
  testing::TempDir dir;
  prometheus::Registry registry;
  runtime::Runtime runtime;
  lb::BrokerOptions options;
  options.maintenance_interval = absl::ZeroDuration();  // passes are run and timed here
  auto node = *lb::LogBrokerNode::Open(dir.Sub("data"), registry, &runtime, options);
  lb::Broker* broker = node->broker();
  lb::TopicConfigPatch config;
  config.cleanup_policy = lb::CleanupPolicy::kCompact;
  config.durability = lb::Durability::kInterval;
  if (!broker->CreateTopic("compacted", 1, config).ok()) std::abort();

  const int total = absl::GetFlag(FLAGS_compaction_records);
  const int keys = absl::GetFlag(FLAGS_compaction_keys);
  const absl::Time load_start = absl::Now();
  constexpr int kPerRequest = 1000;
  uint64_t seed = 42;
  std::atomic<int> inflight{0};
  for (int i = 0; i < total; i += kPerRequest) {
    std::vector<lb::ProduceRecordArgs> batch;
    for (int j = i; j < std::min(total, i + kPerRequest); ++j) {
      lb::ProduceRecordArgs r;
      r.data.key = absl::StrCat("key-", j % keys);
      r.data.value = RandomBytes(100, &seed);  // incompressible, like real payloads
      batch.push_back(std::move(r));
    }
    while (inflight.load() > 64) absl::SleepFor(absl::Microseconds(100));  // bounded queue
    inflight++;
    absl::Status s = broker->Produce("compacted", std::move(batch), std::nullopt,
                                     [&](absl::StatusOr<lb::ProduceResult>) { inflight--; });
    if (!s.ok()) std::abort();
  }
  while (inflight.load() > 0) absl::SleepFor(absl::Milliseconds(1));
  const absl::Duration load = absl::Now() - load_start;
  const lb::TopicId topic_id = broker->DescribeTopic("compacted")->meta.id;
  if (!node->store()->CompactTopic(topic_id).ok()) std::abort();  // flush into SSTs for a fair size
  const int64_t bytes_before = node->store()->LiveDataBytes();

  // Passes are bounded (the cleaner maps and sweeps at most 200k records per pass), so run them
  // until only the newest record of each key is left.
  const absl::Time clean_start = absl::Now();
  int passes = 0;
  int64_t previous = total;
  while (previous > keys && passes < 1000) {
    broker->RunMaintenance();
    ++passes;
    previous = broker->DescribeTopic("compacted")->partitions[0].meta.record_count;
  }
  const absl::Duration clean = absl::Now() - clean_start;
  const absl::Time reclaim_start = absl::Now();
  if (!node->store()->CompactTopic(topic_id).ok()) std::abort();
  const absl::Duration reclaim = absl::Now() - reclaim_start;
  const int64_t bytes_after = node->store()->LiveDataBytes();
  std::printf("compaction: %d records, %d keys, loaded in %.2f s (%.0f rec/s)\n", total, keys,
              absl::ToDoubleSeconds(load), total / absl::ToDoubleSeconds(load));
  std::printf("  cleaner: %d passes, %.2f s, %.0f input records/s, %lld records left\n", passes,
              absl::ToDoubleSeconds(clean), total / absl::ToDoubleSeconds(clean),
              static_cast<long long>(previous));
  std::printf("  live SST bytes: %.1f MB before, %.1f MB after (RocksDB compaction %.2f s), "
              "%.1f%% reclaimed\n",
              bytes_before / 1e6, bytes_after / 1e6, absl::ToDoubleSeconds(reclaim),
              100.0 * (1.0 - static_cast<double>(bytes_after) / static_cast<double>(bytes_before)));
}

}  // namespace
}  // namespace conduit::bench

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  std::printf("machine: %u cores\n", std::thread::hardware_concurrency());
  for (bool sync : {true, false}) {
    const double off = conduit::bench::ProduceRate(sync, false);
    const double on = conduit::bench::ProduceRate(sync, true);
    std::printf("%-8s producers %d batch %d: plain %.0f rec/s, idempotent %.0f rec/s, cost %.1f%%\n",
                sync ? "sync" : "interval", absl::GetFlag(FLAGS_producers),
                absl::GetFlag(FLAGS_batch), off, on, 100.0 * (1.0 - on / off));
  }
  conduit::bench::Compaction();
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  std::printf("peak RSS %.0f MB\n", usage.ru_maxrss / 1024.0);
  return 0;
}
