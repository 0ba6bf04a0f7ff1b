// The side-by-side benchmark's load generator: runs one system's workloads and prints one
// RESULT line per workload (scripts/bench-peers.sh starts each system, calls this, stops it, and
// builds docs/BENCHMARKS.md from the lines).
//
//   peer_bench --system=conduit|grpc-floor|redis|nats|beanstalkd|ceiling --port=P [--durability=sync]
//              [--seconds=3] [--value_bytes=100] [--only=PREFIX]
//              [--tls-ca=ca.pem [--tls-cert=c.pem --tls-key=c.key]] [--token-file=FILE]
//
// The --tls-* and --token-file flags set the process default DialSecurity (common/grpc/dial.h),
// which every Conduit channel of the workloads goes through, the client library's included
// (scripts/bench-security.sh: the same workloads against a plaintext and a secured server).
// Without them: plaintext, no token. The address is always 127.0.0.1 (in the server
// certificate of scripts/make-certs.sh).
//
// RESULT <tab> workload <tab> ops/s <tab> p50 ms <tab> p99 ms <tab> errors
// Workloads (same names for every system that has them):
//   ping-1           Conduit only: ListTopics, answered on gRPC's thread: one gRPC round trip
//   append-1x1       1 client, one record per request, wait for each ack
//   append-8x1       8 clients, the same
//   append-1x100     1 client, 100 requests in flight (pipelined / async publish)
//   append-stream-1  Conduit only: 1 caller, one record per message on one ProduceStream
//                    (generated-stub code, not client::Producer): against append-1x100
//   producer-1       Conduit only: one-record sends through client::Producer (batching), acks
//                    awaited after every 1000
//   producer-steady-1  Conduit only: the same without waiting, held back by the Producer's buffer
//   fetch-1          Conduit only: reads back the appended records, 1000 per Fetch
//   tail-1           Conduit only: the same through one Tail stream (5000 per message), until
//                    caught up
//   cycle-1, cycle-8 consume cycle with 1 / 8 workers: Conduit Lease+Ack, Redis XREADGROUP+XACK,
//                    NATS pull+ack on a work-queue stream, beanstalkd reserve+delete
//   cycle-stream-1, cycle-stream-8  Conduit only: the consume cycle on Consume streams, one job
//                    per message (64 credits, one more per ack): against the peers' cycle-N
//   batch-cycle-1, batch-cycle-8  consume cycle taking up to 100 jobs per round: Conduit
//                    Lease(max_jobs=100)+AckBatch, Redis XREADGROUP COUNT 100 + one XACK, NATS
//                    pull batch 100 + pipelined AckSyncs, beanstalkd 100 pipelined reserves +
//                    deletes
//   worker-1         Conduit only: client::Worker, 1 thread leasing up to 100 jobs, acks sent
//                    together (AckBatch): what an application using the client library gets
//   ceiling-b1, ceiling-b100  RocksDB alone: WriteBatches of 1 / 100 records, as the broker
//                    writes them (keys, values, options), one thread

#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "bench/log_bench.h"
#include "bench/peers/conduit_peer.h"
#include "bench/peers/peer.h"
#include "common/flags/flags.h"
#include "common/grpc/dial.h"

ABSL_FLAG(std::string, system, "conduit",
          "conduit | grpc-floor | redis | nats | beanstalkd | ceiling");
ABSL_FLAG(int, port, 0, "the system's port on 127.0.0.1");
ABSL_FLAG(std::string, durability, "sync", "Conduit topics and the ceiling: sync | interval");
ABSL_FLAG(double, seconds, 3, "measured seconds per workload");
ABSL_FLAG(int, value_bytes, 100, "record / message / job payload bytes");
ABSL_FLAG(double, prefill_rate, 0,
          "beanstalkd: jobs per second of run to pre-fill for the consume cycles (0: enough for "
          "the best rate seen; at -f 0 every put is fsynced, so a lower figure saves minutes)");
ABSL_FLAG(std::vector<std::string>, only, {},
          "run only the workloads whose name starts with one of these (comma-separated)");
ABSL_FLAG(std::string, tls_ca, "",
          "Conduit: PEM CA of the server's certificate: TLS instead of plaintext");
ABSL_FLAG(std::string, tls_cert, "", "Conduit: PEM client certificate for mTLS, with --tls-key");
ABSL_FLAG(std::string, tls_key, "", "Conduit: PEM key of --tls-cert");
ABSL_FLAG(std::string, token_file, "",
          "Conduit: file holding the bearer token sent as 'authorization: Bearer' on every call");

namespace conduit::bench {
namespace {

void Report(const std::string& workload, const peers::Figures& f) {
  std::printf("RESULT\t%s\t%.0f\t%.3f\t%.3f\t%llu\n", workload.c_str(), f.ops_per_s,
              f.latency.Quantile(0.5) / 1e6, f.latency.Quantile(0.99) / 1e6,
              static_cast<unsigned long long>(f.errors));
  if (!f.error.empty()) std::fprintf(stderr, "%s: %s\n", workload.c_str(), f.error.c_str());
  std::fflush(stdout);
}

// Sets the process default DialSecurity from --tls-ca, --tls-cert, --tls-key and --token-file,
// before any channel is made. Returns INVALID_ARGUMENT for a certificate without its key or
// without --tls-ca, and the read error of a file that cannot be read.
absl::Status SetDialSecurityFromFlags() {
  auto security =
      grpc_util::ReadDialSecurity({absl::GetFlag(FLAGS_tls_ca), absl::GetFlag(FLAGS_tls_cert),
                                   absl::GetFlag(FLAGS_tls_key), absl::GetFlag(FLAGS_token_file)},
                                  "--tls");
  if (!security.ok()) return security.status();
  grpc_util::SetDefaultDialSecurity(*std::move(security));
  return absl::OkStatus();
}

bool Wanted(const std::string& workload) {
  const std::vector<std::string> only = absl::GetFlag(FLAGS_only);
  return only.empty() || std::any_of(only.begin(), only.end(), [&](const std::string& prefix) {
           return absl::StartsWith(workload, prefix);
         });
}

int Run() {
  const std::string system = absl::GetFlag(FLAGS_system);
  const int port = absl::GetFlag(FLAGS_port);
  const absl::Duration run = absl::Seconds(absl::GetFlag(FLAGS_seconds));
  const int bytes = absl::GetFlag(FLAGS_value_bytes);
  auto maybe = [&](const std::string& workload, auto fn) {
    if (Wanted(workload)) Report(workload, fn());
  };
  if (system == "conduit") {
    if (absl::Status s = SetDialSecurityFromFlags(); !s.ok()) {
      std::fprintf(stderr, "%s\n", s.ToString().c_str());
      return 2;
    }
    const std::string topic = "peer-" + absl::GetFlag(FLAGS_durability);
    if (!peers::ConduitSetUp(port, topic, absl::GetFlag(FLAGS_durability))) {
      std::fprintf(stderr, "cannot create topic %s on port %d\n", topic.c_str(), port);
      return 1;
    }
    maybe("ping-1", [&] { return peers::ConduitPing(port, 1, run); });
    maybe("append-1x1", [&] { return peers::ConduitAppend(port, topic, 1, 1, bytes, run); });
    maybe("append-8x1", [&] { return peers::ConduitAppend(port, topic, 8, 1, bytes, run); });
    maybe("append-1x100", [&] { return peers::ConduitAppend(port, topic, 1, 100, bytes, run); });
    maybe("append-stream-1", [&] { return peers::ConduitAppendStream(port, topic, bytes, run); });
    maybe("producer-1", [&] { return peers::ConduitProducer(port, topic, 1, bytes, run); });
    maybe("producer-steady-1",
          [&] { return peers::ConduitProducerSteady(port, topic, bytes, run); });
    maybe("fetch-1", [&] { return peers::ConduitFetch(port, topic, run); });
    maybe("tail-1", [&] { return peers::ConduitTail(port, topic, run); });
    maybe("cycle-1", [&] { return peers::ConduitQueueCycle(port, 1, 1, run); });
    maybe("cycle-8", [&] { return peers::ConduitQueueCycle(port, 8, 1, run); });
    maybe("cycle-stream-1", [&] { return peers::ConduitCycleStream(port, 1, 64, run); });
    maybe("cycle-stream-8", [&] { return peers::ConduitCycleStream(port, 8, 64, run); });
    maybe("batch-cycle-1", [&] { return peers::ConduitQueueCycle(port, 1, 100, run); });
    maybe("batch-cycle-8", [&] { return peers::ConduitQueueCycle(port, 8, 100, run); });
    maybe("worker-1", [&] { return peers::ConduitWorker(port, 1, 100, run); });
  } else if (system == "grpc-floor") {
    // bench/grpc_floor.cc: the same client code against a LogService that answers at once.
    if (!peers::ConduitSetUp(port, "peer-floor", "interval")) return 1;
    maybe("ping-1", [&] { return peers::ConduitPing(port, 1, run); });
    maybe("append-1x1", [&] { return peers::ConduitAppend(port, "peer-floor", 1, 1, bytes, run); });
    maybe("append-8x1", [&] { return peers::ConduitAppend(port, "peer-floor", 8, 1, bytes, run); });
    maybe("append-1x100",
          [&] { return peers::ConduitAppend(port, "peer-floor", 1, 100, bytes, run); });
    maybe("append-stream-1",
          [&] { return peers::ConduitAppendStream(port, "peer-floor", bytes, run); });
    maybe("batch-cycle-1", [&] { return peers::ConduitQueueCycle(port, 1, 100, run); });
  } else if (system == "redis") {
    maybe("append-1x1", [&] { return peers::RedisXadd(port, 1, 1, bytes, run); });
    maybe("append-8x1", [&] { return peers::RedisXadd(port, 8, 1, bytes, run); });
    maybe("append-1x100", [&] { return peers::RedisXadd(port, 1, 100, bytes, run); });
    maybe("cycle-1", [&] { return peers::RedisReadAck(port, 1, bytes, run); });
    maybe("cycle-8", [&] { return peers::RedisReadAck(port, 8, bytes, run); });
    maybe("batch-cycle-1", [&] { return peers::RedisReadAckBatch(port, 1, 100, bytes, run); });
    maybe("batch-cycle-8", [&] { return peers::RedisReadAckBatch(port, 8, 100, bytes, run); });
  } else if (system == "nats") {
    maybe("append-1x1", [&] { return peers::NatsPublish(port, 1, 1, bytes, run); });
    maybe("append-8x1", [&] { return peers::NatsPublish(port, 8, 1, bytes, run); });
    maybe("append-1x100", [&] { return peers::NatsPublish(port, 1, 100, bytes, run); });
    maybe("cycle-1", [&] { return peers::NatsWorkQueueCycle(port, 1, run); });
    maybe("cycle-8", [&] { return peers::NatsWorkQueueCycle(port, 8, run); });
    maybe("batch-cycle-1", [&] { return peers::NatsWorkQueueCycleBatch(port, 1, 100, run); });
    maybe("batch-cycle-8", [&] { return peers::NatsWorkQueueCycleBatch(port, 8, 100, run); });
  } else if (system == "beanstalkd") {
    maybe("append-1x1", [&] { return peers::BeanstalkPut(port, 1, bytes, run); });
    maybe("append-8x1", [&] { return peers::BeanstalkPut(port, 8, bytes, run); });
    const double prefill = absl::GetFlag(FLAGS_prefill_rate);
    maybe("cycle-1", [&] { return peers::BeanstalkReserveDelete(port, 1, run, prefill); });
    maybe("cycle-8", [&] { return peers::BeanstalkReserveDelete(port, 8, run, prefill); });
    maybe("batch-cycle-1",
          [&] { return peers::BeanstalkReserveDeleteBatch(port, 1, 100, run, prefill); });
    maybe("batch-cycle-8",
          [&] { return peers::BeanstalkReserveDeleteBatch(port, 8, 100, run, prefill); });
  } else if (system == "ceiling") {
    for (int batch : {1, 100}) {
      const std::string workload = "ceiling-b" + std::to_string(batch);
      if (!Wanted(workload)) continue;
      Scenario s{.record_size = bytes,
                 .partitions = 1,
                 .producers = 1,
                 .sync = absl::GetFlag(FLAGS_durability) == "sync",
                 .batch = batch};
      Settings settings{.measure = run,
                        .warmup = absl::Milliseconds(200),
                        .flush_interval = absl::Milliseconds(100)};
      auto c = RunCeiling(s, settings);
      if (!c.ok()) {
        std::fprintf(stderr, "%s: %s\n", workload.c_str(), c.status().ToString().c_str());
        return 1;
      }
      peers::Figures f;
      f.ops_per_s = c->records_per_s;
      f.latency = c->latency;
      Report(workload, f);
    }
  } else {
    std::fprintf(stderr, "unknown --system %s\n", system.c_str());
    return 2;
  }
  return 0;
}

}  // namespace
}  // namespace conduit::bench

int main(int argc, char** argv) {
  conduit::flags::Parse(argc, argv);  // --tls-ca and --tls_ca alike
  // Debian's Abseil is built without NDEBUG, so every absl::Mutex would check for lock-order
  // cycles (a global graph) in this client as in the servers, which turn it off too.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  return conduit::bench::Run();
}
