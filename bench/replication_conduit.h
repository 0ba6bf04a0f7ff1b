#pragma once

// Conduit's side of replication_bench that is more than a workload: creating a replicated
// one-partition topic on a BrokerCluster and waiting until it is served, and the leader-failover
// measurement (NATS's counterpart is bench/replication_nats.h).

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "bench/broker_cluster.h"
#include "bench/replication_nats.h"
#include "conduit/log/v1/log.pb.h"

namespace conduit::bench {

struct ConduitConfig {
  const char* label;
  int replication_factor;
  ::conduit::log::v1::Acks acks;
  ::conduit::log::v1::Durability durability;
};

// Creates `topic` (1 partition) and waits until its leader acknowledges a produce and, with
// more than one replica, every replica is in sync. The leader's broker id, or -1.
int CreateReplicatedTopic(BrokerCluster& c, const std::string& topic, const ConduitConfig& cfg);

// On a fresh three-broker cluster (started with `broker_args`), kills the leader of an RF 3,
// acks all, min in-sync 2, sync topic `kills` times under a produce loop that follows the
// cluster the way a client does (client::ClusterRouter: the not-leader hint at once, else
// GetMetadata and a 5 ms pause), one record per Produce, a 1 s deadline per call. A kill without
// an acknowledged write within `limit` counts as not measured.
FailoverFigures ConduitFailover(int kills, const std::vector<std::string>& broker_args,
                                absl::Duration limit);

}  // namespace conduit::bench
