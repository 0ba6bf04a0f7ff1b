#pragma once

// The cluster's keys in etcd and their values (conduit.cluster.v1, in protobuf's JSON form),
// and the ClusterView built from a mirror of every key under the cluster's prefix. The layout
// is documented in services/log_broker/README.md ("Cluster mode").

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "common/etcd/types.h"
#include "services/log_broker/domain/cluster_view.h"

namespace conduit::log_broker::cluster {

// Keys under "/conduit/<cluster>/".
class MetadataKeys {
 public:
  explicit MetadataKeys(const std::string& cluster) : prefix_("/conduit/" + cluster + "/") {}

  const std::string& prefix() const { return prefix_; }
  std::string Broker(int32_t id) const { return prefix_ + "brokers/" + std::to_string(id); }
  std::string Controller(etcd::LeaseId lease) const {
    return prefix_ + "controller/" + std::to_string(lease.value());
  }
  std::string Topic(const std::string& name) const { return prefix_ + "topics/" + name; }
  std::string Partitions(TopicId topic) const {
    return prefix_ + "partitions/" + std::to_string(topic.value()) + "/";
  }
  std::string Partition(TopicId topic, int32_t partition) const {
    return Partitions(topic) + std::to_string(partition);
  }
  std::string Producer(const std::string& name) const { return prefix_ + "producers/" + name; }
  std::string TopicIds() const { return prefix_ + "ids/topics"; }
  std::string ProducerIds() const { return prefix_ + "ids/producers"; }

 private:
  std::string prefix_;
};

// Every key under the prefix, as last read or watched: key → KeyValue.
using Mirror = std::map<std::string, etcd::KeyValue>;

std::string EncodeBroker(const BrokerRegistration& broker, etcd::LeaseId lease);
absl::StatusOr<BrokerRegistration> DecodeBroker(const std::string& json,
                                                etcd::LeaseId* lease = nullptr);
std::string EncodeController(int32_t broker_id, const std::string& incarnation);
absl::StatusOr<int32_t> DecodeController(const std::string& json);
std::string EncodeTopic(const TopicMeta& meta, int32_t replication_factor);
absl::StatusOr<TopicAssignment> DecodeTopic(const std::string& json);
std::string EncodePartition(const PartitionAssignment& partition);
absl::StatusOr<PartitionAssignment> DecodePartition(const std::string& json);
std::string EncodeProducer(const ProducerInfo& producer);
absl::StatusOr<ProducerInfo> DecodeProducer(const std::string& name, const std::string& json);
std::string EncodeIdBlock(uint64_t next);
absl::StatusOr<uint64_t> DecodeIdBlock(const std::string& json);

// The view of a mirror at `revision`: live brokers, the controller (lowest create revision
// under controller/) and its epoch, topics with the partition states found under their ids.
// Keys that do not decode are skipped (and counted in *skipped) rather than failing the view.
ClusterView BuildView(const MetadataKeys& keys, const Mirror& mirror, int64_t revision,
                      int* skipped = nullptr);

}  // namespace conduit::log_broker::cluster
