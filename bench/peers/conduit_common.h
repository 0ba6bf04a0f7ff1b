#pragma once

// What the Conduit workloads of peer_bench share (conduit_peer.cc, conduit_streams.cc): channels,
// deadlines, the measuring loop, and prefilled queues.
//
// Every channel of these workloads comes from grpc_util::Dial, as the client library's
// (client::Producer, client::Worker) do: the process default DialSecurity (peer_bench's --tls-*
// and --token-file flags; plaintext without them) applies to all of them alike.

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/peers/peer.h"
#include "common/grpc/dial.h"
#include "conduit/log/v1/log.grpc.pb.h"
#include "conduit/queue/v1/queue.grpc.pb.h"

namespace conduit::bench::peers {

namespace lpb = ::conduit::log::v1;
namespace qpb = ::conduit::queue::v1;
using Clock = std::chrono::steady_clock;

inline const absl::Duration kWarmup = absl::Milliseconds(200);

inline std::string Address(int port) { return "127.0.0.1:" + std::to_string(port); }
// A channel to the server on 127.0.0.1:`port` with the process default DialSecurity.
inline std::shared_ptr<grpc::Channel> Channel(int port) { return grpc_util::Dial(Address(port)); }
inline void SetDeadline(grpc::ClientContext* ctx) {
  ctx->set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
}
inline uint64_t Ns(Clock::duration d) {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(d).count());
}

// Sleeps through the warm-up, sets `measuring` for `run`, then sets `stop`: the measured seconds.
inline double MeasureWindow(std::atomic<bool>& measuring, std::atomic<bool>& stop,
                            absl::Duration run) {
  absl::SleepFor(kWarmup);
  measuring.store(true);
  const auto start = Clock::now();
  absl::SleepFor(run);
  measuring.store(false);
  const double secs = Ns(Clock::now() - start) / 1e9;
  stop.store(true);
  return secs;
}

// Runs `clients` threads of `op` (which returns the operations it completed, or -1 on error)
// for warm-up + run, counting only the measured window.
template <typename Op>
Figures RunThreads(int clients, absl::Duration run, Op op) {
  std::atomic<bool> measuring{false}, stop{false};
  std::vector<LatencyHistogram> histograms(clients);
  std::vector<uint64_t> ops(clients, 0), errors(clients, 0);
  std::vector<std::thread> threads;
  for (int i = 0; i < clients; ++i) {
    threads.emplace_back([&, i] {
      while (!stop.load()) {
        const auto t0 = Clock::now();
        const int64_t n = op(i);
        const auto t1 = Clock::now();
        if (!measuring.load()) continue;
        if (n < 0) {
          ++errors[i];
          continue;
        }
        ops[i] += n;
        histograms[i].Record(Ns(t1 - t0));
      }
    });
  }
  const double secs = MeasureWindow(measuring, stop, run);
  for (auto& t : threads) t.join();
  Figures f;
  uint64_t total = 0;
  for (int i = 0; i < clients; ++i) {
    total += ops[i];
    f.errors += errors[i];
    f.latency.Merge(histograms[i]);
  }
  f.ops_per_s = total / secs;
  return f;
}

// A fresh queue with 60 s leases holding enough jobs for the run at up to `rate` cycles/s.
absl::StatusOr<std::string> PrefilledQueue(int port, absl::Duration run, double rate);
// Drops the queue (and the jobs it still holds) after a workload.
void DropQueue(int port, const std::string& queue);

}  // namespace conduit::bench::peers
