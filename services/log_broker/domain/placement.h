#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "services/log_broker/domain/cluster_view.h"

namespace conduit::log_broker {

// One partition state the controller wants written, guarded by the revision it read.
struct PartitionChange {
  std::string topic;
  TopicId topic_id;
  int32_t partition = 0;
  int64_t read_revision = 0;  // 0: the key must not exist yet
  PartitionAssignment next;
  // An out-of-sync replica elected (the topic allows it): records only the lost in-sync
  // replicas had are gone, and the controller says so.
  bool unclean = false;
  friend bool operator==(const PartitionChange&, const PartitionChange&) = default;
};

// The controller's rules, as a pure function of one view (no I/O, so every rule is a unit
// test). Applied in order, each change keeps these invariants:
// - a new topic's partitions are placed on live brokers only, replicas on distinct brokers,
//   leaders spread so that no live broker leads more than one partition above another
//   (counting every partition already led), at leader epoch 1, in-sync = replicas;
// - a partition whose leader is not live gets a live in-sync replica as leader (the first in
//   the in-sync set), and the in-sync set becomes its live members: only a replica that holds
//   every acknowledged record is ever elected;
// - with no live in-sync replica it goes offline (leader kNoBroker), keeping its in-sync set,
//   so the first of those to return leads again — unless the topic allows unclean election:
//   then the first live replica leads, alone in sync (what it lacks is lost);
// - a reassignment (target_replicas) first adds the wanted replicas; once every one is in sync,
//   the first wanted replica leads (if live; epoch + 1 when the leader changes) and the
//   others are dropped from the replicas and the in-sync set;
// - every change of leader bumps the epoch, and the epoch never goes back.
std::vector<PartitionChange> PlanPartitionChanges(const ClusterView& view);

// Preferred-leader rebalancing (Kafka's auto.leader.rebalance): every partition whose preferred
// replica (the first of its replicas, where placement and reassignment put the leader) is live
// and in sync but not leading, and that is not being reassigned, hands leadership back to it at
// epoch + 1, the in-sync set unchanged. So leaders spread out again after a broker returns,
// once it has caught up; an in-sync replica holds every acknowledged record, so nothing
// acknowledged is lost by the move (a batch still waiting for its acks is answered UNAVAILABLE,
// outcome unknown). The controller runs it periodically, only when PlanPartitionChanges has
// nothing to do.
std::vector<PartitionChange> PlanPreferredLeaders(const ClusterView& view);

// The brokers `changes` take leadership from because `view` shows them gone (not live): the
// changes are right only while those brokers are still gone, so the controller's write also
// requires their registrations to be absent. (A broker that registers again in between would
// otherwise see views naming it leader at its old epoch until the write lands.) Moves away from
// a live leader (preferred leaders, reassignment) assume nothing and add nobody.
std::set<int32_t> LeadersTakenAsGone(const ClusterView& view,
                                     const std::vector<PartitionChange>& changes);

// INVALID_ARGUMENT unless 1 <= replication_factor <= live brokers.
absl::Status CheckReplicationFactor(const ClusterView& view, int32_t replication_factor);

}  // namespace conduit::log_broker
