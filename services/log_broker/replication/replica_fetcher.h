#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/runtime/runtime.h"
#include "conduit/log/v1/replica.grpc.pb.h"
#include "services/log_broker/domain/broker.h"
#include "services/log_broker/domain/cluster_view.h"

namespace conduit::log_broker::replication {

struct ReplicaFetcherOptions {
  int32_t self = 0;
  absl::Duration max_wait = absl::Milliseconds(500);  // long-poll at the leader
  int32_t max_bytes = 8 << 20;
  absl::Duration retry_backoff = absl::Milliseconds(100);
};

// The follower side of replication: one fetcher per leader broker the applied view names for
// partitions this broker copies. A fetcher asks for all of them in one ReplicaFetch
// (ReplicaManager::FollowedPartitions, from the local durable log ends), applies the answer
// (ReplicaManager::ApplyReplicaData: append, or truncate a divergent suffix) and asks again once
// that is durable — so each fetch offset it sends is durable here. Calls use gRPC's callback API:
// no thread waits on a long-poll.
//
// Thread-safe. OnView after each applied view; the destructor cancels calls in flight and
// waits for them.
class ReplicaFetchers {
 public:
  ReplicaFetchers(Broker* broker, runtime::Runtime* runtime, ReplicaFetcherOptions options);
  ~ReplicaFetchers();

  // Starts fetchers for leaders the view names (at their addresses) and stops the others.
  void OnView(const ClusterView& view);

 private:
  class Fetcher;

  Broker* const broker_;
  const ReplicaFetcherOptions options_;
  absl::Mutex mu_;
  std::map<int32_t, std::shared_ptr<Fetcher>> fetchers_ ABSL_GUARDED_BY(mu_);  // by leader id
  runtime::Scope scope_;  // retries after a backoff
};

}  // namespace conduit::log_broker::replication
