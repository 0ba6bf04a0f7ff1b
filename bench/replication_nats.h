#pragma once

// NATS JetStream R3 for replication_bench: three clustered nats-server processes on loopback
// (file storage) and the stream-leader failover measurement. The load itself is bench/peers'
// NatsPublish (the raw NATS text protocol client in bench/peers/nats_protocol.h).

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "bench/histogram.h"

namespace conduit::bench {

// Three nats-server processes (names n1..n3) in one cluster, JetStream on, each with its own
// store dir under `dir`, client and route ports chosen free at Start and kept across restarts.
// Output goes to <dir>/n<i>.log. Killed when the object goes. Not thread-safe.
class NatsCluster {
 public:
  explicit NatsCluster(std::string dir) : dir_(std::move(dir)) {}
  ~NatsCluster();
  NatsCluster(const NatsCluster&) = delete;
  NatsCluster& operator=(const NatsCluster&) = delete;

  // Starts the three servers and waits (up to 30 s) until a stream with 3 replicas can be
  // created (the meta group has a leader and every server has joined). The error text, or "".
  std::string Start();
  // Starts server `i` (0..2) again on its store dir and ports.
  bool StartServer(int i);
  // SIGKILL and reap server `i`.
  void Kill(int i);

  int port(int i) const { return client_ports_[i]; }
  pid_t pid(int i) const { return pids_[i]; }
  bool running(int i) const { return pids_[i] > 0; }
  // The index of the server named `name` ("n2" → 1); -1 when none.
  static int IndexOf(const std::string& name);

 private:
  std::string dir_;
  std::vector<int> client_ports_, route_ports_;
  std::vector<pid_t> pids_ = std::vector<pid_t>(3, -1);
};

// Failover figures: seconds from SIGKILL of the leader to the first acknowledged write sent
// after it, one sample per kill.
struct FailoverFigures {
  LatencyHistogram seconds_ns;  // nanoseconds, despite the name: Quantile()/1e9 gives seconds
  int kills = 0;                // leaders killed
  int measured = 0;             // of those, with an acknowledged write within the limit
  std::string error;            // first problem seen, if any
};

// `kills` times: publish to a fresh R3 stream every `interval` from a connection to a server
// that is not the stream leader (so the client never has to reconnect), SIGKILL the stream
// leader (named by $JS.API.STREAM.INFO), time the first PubAck for a message published after
// the kill, restart the killed server and wait until every replica reports itself current
// again.
FailoverFigures NatsFailover(NatsCluster& cluster, int kills, absl::Duration interval,
                             absl::Duration limit);

}  // namespace conduit::bench
