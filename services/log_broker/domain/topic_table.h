#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "services/log_broker/domain/cluster_view.h"
#include "services/log_broker/domain/ids.h"
#include "services/log_broker/domain/topic_state.h"

namespace conduit::log_broker {

// The broker's router: the topics this broker holds (by name) and the applied view of the
// cluster's metadata, with the rule that says who serves a partition (only the leader at the
// view's epoch serves it; a write also needs a confirmed lease). The Broker fills it (recovery,
// ApplyView); produce, fetch and replication look partitions up through it.
//
// Thread-safe: the topic map and the view have a lock each; a TopicState is shared, so a
// request holding one outlives a concurrent delete (it sees `deleted`).
class TopicTable {
 public:
  // `cluster` (the metadata, etcd's or a cluster of one) must outlive the table.
  explicit TopicTable(ClusterMetadata* cluster) : cluster_(cluster) {}

  ClusterMetadata& cluster() const { return *cluster_; }

  // INVALID_ARGUMENT for an empty name; UNAVAILABLE for a topic the cluster has that this
  // broker has not set up yet (retry); NOT_FOUND otherwise.
  absl::StatusOr<std::shared_ptr<TopicState>> Find(const std::string& name) const;
  // NOT_FOUND for a partition the topic does not have.
  static absl::Status CheckPartition(const TopicState& topic, int32_t partition);
  std::vector<std::shared_ptr<TopicState>> Snapshot() const;
  void Insert(std::shared_ptr<TopicState> topic);
  void Erase(const std::string& name);

  // The view this broker serves by (null before the first is applied), and publishing the next
  // one once the local state follows it.
  std::shared_ptr<const ClusterView> AppliedView() const;
  void Publish(std::shared_ptr<const ClusterView> view);
  // Whether this broker may act as a leader (take writes, move high watermarks, change in-sync
  // sets) by what `view` says: its lease is confirmed and `view` is at least as recent as its
  // registration. False for a null view.
  bool MayLeadUnder(const ClusterView* view) const;
  // OK when this broker leads the partition at the applied view's epoch (and, for a write,
  // MayLeadUnder that view); else the not-leader FAILED_PRECONDITION naming the leader, or
  // UNAVAILABLE (offline, not placed yet, epoch not applied yet, lease unconfirmed, view older
  // than its registration).
  absl::Status CheckServing(const TopicState& topic, int32_t partition, bool write) const;
  // A keyless record's partition: round-robin over the partitions this broker leads.
  int32_t StickyPartition(TopicState& topic) const;

 private:
  ClusterMetadata* const cluster_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<TopicState>> topics_ ABSL_GUARDED_BY(mu_);
  mutable absl::Mutex view_mu_;
  std::shared_ptr<const ClusterView> view_ ABSL_GUARDED_BY(view_mu_);
  std::atomic<int64_t> applied_revision_{-1};  // view_'s revision, read without view_mu_
};

}  // namespace conduit::log_broker
