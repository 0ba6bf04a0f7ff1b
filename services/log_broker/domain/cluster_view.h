#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "services/log_broker/domain/ids.h"
#include "services/log_broker/domain/producer_state.h"
#include "services/log_broker/domain/topic.h"

namespace conduit::log_broker {

inline constexpr int32_t kNoBroker = -1;

// A broker registered in the cluster (its key lives on its etcd lease).
struct BrokerRegistration {
  int32_t id = kNoBroker;
  std::string address;      // host:port clients reach it at
  std::string incarnation;  // random per process start: tells a restart from the old process
  friend bool operator==(const BrokerRegistration&, const BrokerRegistration&) = default;
};

// Who holds one partition. Written by the controller (leaders, epochs, placement) and by the
// partition's leader (its in-sync set), each write guarded by the revision it read.
struct PartitionAssignment {
  int32_t leader = kNoBroker;  // kNoBroker: offline
  LeaderEpoch leader_epoch;    // bumped by every change of leader, offline included
  std::vector<int32_t> replicas;
  std::vector<int32_t> isr;
  // A reassignment in progress (ReassignPartition): the replicas wanted, the first preferred as
  // leader, and the bytes/s a replica that is catching up may copy (0: unthrottled). Empty:
  // none.
  std::vector<int32_t> target_replicas;
  int64_t throttle_bytes_per_second = 0;
  friend bool operator==(const PartitionAssignment&, const PartitionAssignment&) = default;
};

// A topic as the cluster knows it. `partitions[p]` is absent until the controller has placed
// partition p.
struct TopicAssignment {
  TopicMeta meta;
  int32_t replication_factor = 1;
  std::vector<std::optional<PartitionAssignment>> partitions;
  // The metadata revision of each partition's state (0: absent), for the controller's guards.
  std::vector<int64_t> partition_revisions;

  bool placed() const {
    for (const auto& p : partitions)
      if (!p) return false;
    return true;
  }
};

// One consistent snapshot of the cluster's metadata, as of one etcd revision. Immutable once
// published: readers hold a shared_ptr to it and a new snapshot replaces it whole.
struct ClusterView {
  int64_t revision = 0;
  std::map<int32_t, BrokerRegistration> brokers;  // live brokers by id
  int32_t controller = kNoBroker;
  int64_t controller_epoch = 0;  // the controller key's create revision
  std::map<std::string, TopicAssignment> topics;

  const TopicAssignment* FindTopic(const std::string& name) const {
    auto it = topics.find(name);
    return it == topics.end() ? nullptr : &it->second;
  }
  const PartitionAssignment* FindPartition(const std::string& topic, int32_t partition) const {
    const TopicAssignment* t = FindTopic(topic);
    if (t == nullptr || partition < 0 || partition >= static_cast<int32_t>(t->partitions.size()))
      return nullptr;
    return t->partitions[partition] ? &*t->partitions[partition] : nullptr;
  }
};

// The cluster's metadata as a broker uses it: the current view, and the changes any broker
// may ask for. Implemented over etcd in cluster/, and by LocalClusterMetadata for a single node
// (a cluster of one).
//
// Every change is one compare-and-swap on the metadata, so concurrent requests through
// different brokers never lose an update; errors: UNAVAILABLE when the metadata store cannot
// be reached ("etcd unreachable: ..."), DEADLINE_EXCEEDED when a change was made but not yet
// seen through (e.g. placement pending). Thread-safe.
class ClusterMetadata {
 public:
  virtual ~ClusterMetadata() = default;

  virtual int32_t self() const = 0;
  virtual const std::string& cluster_name() const = 0;
  // The latest view; never null.
  virtual std::shared_ptr<const ClusterView> View() const = 0;
  // Whether this broker's lease is confirmed within its TTL, by this broker's own monotonic
  // clock since the last confirmed keep-alive. While not, it must refuse appends: the cluster
  // may already have declared it gone.
  virtual bool LeaseValid() const = 0;
  // The metadata revision of this broker's current registration (its last write on joining),
  // or INT64_MAX while it is registering. A broker whose lease lapsed may have been deposed
  // before it registered again, and only a view at least this recent shows that: it acts as
  // a leader only under such a view. Registering sets the lease and this together, so read it
  // after LeaseValid(): a lease seen confirmed is never paired with an older registration.
  virtual int64_t RegistrationRevision() const = 0;

  // ALREADY_EXISTS when the name is taken (of two concurrent creators exactly one wins);
  // INVALID_ARGUMENT for a replication factor above the live brokers. Answers once the
  // controller's placement is visible.
  virtual absl::StatusOr<TopicAssignment> CreateTopic(const TopicMeta& meta,
                                                      int32_t replication_factor) = 0;
  virtual absl::Status DeleteTopic(const std::string& name) = 0;
  // An idempotent producer id and epoch, valid at every broker: an anonymous producer gets a
  // new id at epoch 0; a named one the same id at the next epoch (fencing the older instance
  // wherever it sends). INVALID_ARGUMENT for a name over 256 bytes.
  virtual absl::StatusOr<ProducerInfo> InitProducer(const std::string& name) = 0;
  // Sets the topic's config to change(current config): a compare-and-swap on the revision
  // read, so a concurrent change makes it re-read and apply `change` again (no lost update).
  // NOT_FOUND; `change`'s own error.
  virtual absl::StatusOr<TopicMeta> UpdateTopicConfig(
      const std::string& name,
      const std::function<absl::StatusOr<TopicConfig>(const TopicConfig&)>& change) = 0;
  // The leader's in-sync set change: writes `next` as the partition's state if it is still the
  // one read at `read_revision` (the view's partition_revisions). Returns the metadata revision
  // of the write, or 0 when the state moved (a new epoch, or another change): re-read the view.
  virtual absl::StatusOr<int64_t> UpdatePartitionState(TopicId topic_id, int32_t partition,
                                                       int64_t read_revision,
                                                       const PartitionAssignment& next) = 0;
};

}  // namespace conduit::log_broker
