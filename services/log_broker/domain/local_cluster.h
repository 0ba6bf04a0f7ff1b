#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "services/log_broker/domain/cluster_view.h"
#include "services/log_broker/domain/producer_registry.h"

namespace conduit::log_broker {

// A single node is a cluster of one: this is its ClusterMetadata, kept in memory and made from
// the topics the broker recovers from its own store (which stays the durable record: applying
// a view creates, changes and drops the topics there, as in a cluster). Broker 0 is the only
// broker, the controller and the leader of every partition, which has one replica. So the
// Broker serves a single node through the same rules as a cluster member.
//
// Each change makes a new view and applies it to the broker (`Attach`) before it returns, so a
// topic created is served at once. Changes are serialised; the view is read lock-free of them.
// Thread-safe.
class LocalClusterMetadata final : public ClusterMetadata {
 public:
  using Apply = std::function<absl::Status(std::shared_ptr<const ClusterView>)>;

  // `producers` (the broker's) hands out idempotent producer ids; it must outlive this.
  explicit LocalClusterMetadata(ProducerRegistry* producers);

  // The broker's ApplyView; called once, before any change.
  void Attach(Apply apply) { apply_ = std::move(apply); }
  // The first view: the recovered topics (each partition at its recovered leader epoch).
  absl::Status Seed(const std::vector<TopicAssignment>& topics);
  // Leadership of one partition taken again at `epoch` (a single node's stand-in for the
  // controller's leader change; tests). FAILED_PRECONDITION below the current epoch, NOT_FOUND.
  absl::Status SetLeaderEpoch(const std::string& topic, int32_t partition, LeaderEpoch epoch);
  // The one partition assignment of a single node at `epoch`.
  static PartitionAssignment Sole(LeaderEpoch epoch);

  int32_t self() const override { return 0; }
  const std::string& cluster_name() const override { return name_; }
  std::shared_ptr<const ClusterView> View() const override;
  bool LeaseValid() const override { return true; }
  int64_t RegistrationRevision() const override { return 0; }
  // INVALID_ARGUMENT for a replication factor other than 1; ALREADY_EXISTS.
  absl::StatusOr<TopicAssignment> CreateTopic(const TopicMeta& meta,
                                              int32_t replication_factor) override;
  absl::Status DeleteTopic(const std::string& name) override;
  absl::StatusOr<ProducerInfo> InitProducer(const std::string& name) override;
  absl::StatusOr<TopicMeta> UpdateTopicConfig(
      const std::string& name,
      const std::function<absl::StatusOr<TopicConfig>(const TopicConfig&)>& change) override;
  // A single node holds the one replica of each partition: there is nothing to change.
  absl::StatusOr<int64_t> UpdatePartitionState(TopicId topic_id, int32_t partition,
                                               int64_t read_revision,
                                               const PartitionAssignment& next) override;

 private:
  // Publishes `next` (revision one past the current) and applies it; on an error applying it
  // the previous view stays.
  absl::Status Publish(ClusterView next) ABSL_EXCLUSIVE_LOCKS_REQUIRED(change_mu_);

  ProducerRegistry* const producers_;
  const std::string name_;
  Apply apply_;
  absl::Mutex change_mu_ ABSL_ACQUIRED_BEFORE(view_mu_);  // one change at a time, in order
  mutable absl::Mutex view_mu_;
  std::shared_ptr<const ClusterView> view_ ABSL_GUARDED_BY(view_mu_);
};

}  // namespace conduit::log_broker
