#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/etcd/etcd_client.h"
#include "common/runtime/runtime.h"
#include "services/log_broker/cluster/cluster_metrics.h"
#include "services/log_broker/cluster/metadata_codec.h"
#include "services/log_broker/domain/cluster_view.h"
#include "services/log_broker/domain/id_allocator.h"
#include "services/log_broker/domain/placement.h"

namespace conduit::log_broker::cluster {

struct EtcdClusterOptions {
  std::vector<std::string> endpoints;  // etcd host:port
  std::string cluster = "default";
  int32_t broker_id = 0;
  absl::Duration lease_ttl = absl::Seconds(6);
  etcd::ClientOptions etcd;
  // How long CreateTopic waits for the controller's placement before DEADLINE_EXCEEDED.
  absl::Duration placement_wait = absl::Seconds(10);
  // How often the controller hands leadership back to preferred replicas that are in sync
  // (PlanPreferredLeaders; Kafka's leader.imbalance.check.interval, 300 s there too). Zero: never.
  absl::Duration leader_rebalance_interval = absl::Seconds(300);
  // Called (on the remote pool, one at a time, in revision order) with every new view.
  std::function<void(std::shared_ptr<const ClusterView>)> on_view = [](auto) {};
  ClusterObserver* observer = nullptr;  // null: none; must outlive the EtcdCluster
};

// ClusterMetadata and IdAllocator over etcd (services/log_broker/README.md, "Cluster mode").
//
// Join() grants this broker's lease, registers it (revoking the lease of an earlier process of
// the same broker id: the data directory's lock proves that process is gone), enters the
// controller election, reads every key under the prefix and watches them. From then on:
// - keep-alive is periodic work on a remote-pool Scope, every TTL/3; LeaseValid() holds while
//   the last keep-alive etcd confirmed was sent less than a TTL ago by this process's monotonic
//   clock. A lease found gone makes the broker join again (a new lease, registration and
//   candidacy; the controller then gives its partitions back at a new epoch), and so does a
//   registration that failed halfway; RegistrationRevision() names the new registration's
//   revision once it is complete;
// - each watch batch updates the mirror of the keys, builds a new ClusterView, publishes it and
//   hands it to on_view; a watch that ends or falls behind a compaction re-reads everything;
// - when this broker is the controller it applies PlanPartitionChanges (domain/placement.h),
//   and every leader_rebalance_interval PlanPreferredLeaders when nothing else is to change,
//   every write guarded by its epoch (the create revision of its own controller key) and by the
//   mod revision the plan read: a deposed controller's writes change nothing.
//
// Thread-safe. Blocking calls (CreateTopic, DeleteTopic, UpdateTopicConfig, Next*Id) make etcd
// round trips; run them off request threads.
class EtcdCluster final : public ClusterMetadata, public IdAllocator {
 public:
  static absl::StatusOr<std::unique_ptr<EtcdCluster>> Create(EtcdClusterOptions options,
                                                             runtime::Runtime* runtime);
  ~EtcdCluster() override;  // stops the periodic work and the watch; revokes the lease

  // Registers this broker at `address` and starts following the metadata. UNAVAILABLE when etcd
  // cannot be reached. Call once.
  absl::Status Join(const std::string& address);

  // ClusterMetadata.
  int32_t self() const override { return options_.broker_id; }
  const std::string& cluster_name() const override { return options_.cluster; }
  std::shared_ptr<const ClusterView> View() const override;
  bool LeaseValid() const override;
  int64_t RegistrationRevision() const override;
  absl::StatusOr<TopicAssignment> CreateTopic(const TopicMeta& meta,
                                              int32_t replication_factor) override;
  absl::Status DeleteTopic(const std::string& name) override;
  absl::StatusOr<ProducerInfo> InitProducer(const std::string& name) override;
  absl::StatusOr<TopicMeta> UpdateTopicConfig(
      const std::string& name,
      const std::function<absl::StatusOr<TopicConfig>(const TopicConfig&)>& change) override;

  absl::StatusOr<int64_t> UpdatePartitionState(TopicId topic_id, int32_t partition,
                                               int64_t read_revision,
                                               const PartitionAssignment& next) override;

  // IdAllocator: blocks of 64 ids reserved in etcd (ids/topics, ids/producers).
  absl::StatusOr<TopicId> NextTopicId() override;
  absl::StatusOr<ProducerId> NextProducerId() override;
  void NoteInUse(TopicId) override {}
  void NoteInUse(ProducerId) override {}

  // The controller's guarded write of one batch of partition states, as of `epoch`, valid only
  // while every broker in `gone` is still unregistered (LeadersTakenAsGone). Exposed so a test
  // can show a deposed controller's write, or one whose gone leader came back, failing.
  // Returns whether etcd applied it.
  absl::StatusOr<bool> WritePartitionStates(int64_t epoch,
                                            const std::vector<PartitionChange>& changes,
                                            const std::set<int32_t>& gone = {});
  etcd::LeaseId lease() const;

 private:
  struct IdBlock {
    uint64_t next = 0;
    uint64_t end = 0;
  };

  EtcdCluster(EtcdClusterOptions options, std::unique_ptr<etcd::Client> client,
              std::unique_ptr<etcd::Client> quick_client, runtime::Runtime* runtime);

  bool stopping() const;
  absl::Status Register() ABSL_EXCLUSIVE_LOCKS_REQUIRED(join_mu_);
  absl::Status Relist() ABSL_EXCLUSIVE_LOCKS_REQUIRED(join_mu_);
  // Re-reads and re-watches after `delay`, again with backoff until it works.
  void ScheduleRelist(absl::Duration delay);
  void OnEvents(std::vector<etcd::WatchEvent> events, int64_t revision);
  void Publish(std::shared_ptr<const ClusterView> view);
  void KeepAlive();
  // `rebalance`: when nothing else is to change, also move leaders back to preferred replicas.
  void RunController(const std::shared_ptr<const ClusterView>& view, bool rebalance = false);
  absl::Status DeleteOrphanPartitions(int64_t epoch);
  absl::StatusOr<uint64_t> NextId(const std::string& key, IdBlock* block)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(ids_mu_);
  absl::StatusOr<std::shared_ptr<const ClusterView>> WaitForView(
      const std::function<bool(const ClusterView&)>& ready, absl::Duration timeout);

  const EtcdClusterOptions options_;
  ClusterObserver default_observer_;
  ClusterObserver* const observer_;
  const MetadataKeys keys_;
  const std::unique_ptr<etcd::Client> client_;
  // Keep-alives, re-reads and the lease revoke at a stop: bounded by min(TTL/3, 1 s).
  const std::unique_ptr<etcd::Client> quick_client_;
  const time::Clock* const clock_;
  const std::string incarnation_;

  absl::Mutex join_mu_ ABSL_ACQUIRED_BEFORE(mu_);  // Join, Rejoin and Relist, one at a time
  std::string address_ ABSL_GUARDED_BY(join_mu_);
  std::unique_ptr<etcd::WatchHandle> watch_ ABSL_GUARDED_BY(join_mu_);

  mutable absl::Mutex mu_;
  etcd::LeaseId lease_ ABSL_GUARDED_BY(mu_);
  absl::Duration lease_confirmed_at_ ABSL_GUARDED_BY(mu_) = -absl::InfiniteDuration();
  absl::Duration lease_ttl_ ABSL_GUARDED_BY(mu_);
  // The revision of Register's last write; kRegistering from the lease's grant until then.
  static constexpr int64_t kRegistering = std::numeric_limits<int64_t>::max();
  int64_t registration_revision_ ABSL_GUARDED_BY(mu_) = kRegistering;
  Mirror mirror_ ABSL_GUARDED_BY(mu_);
  int64_t mirror_revision_ ABSL_GUARDED_BY(mu_) = 0;
  std::shared_ptr<const ClusterView> view_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;

  absl::Mutex ids_mu_;
  IdBlock topic_ids_ ABSL_GUARDED_BY(ids_mu_);
  IdBlock producer_ids_ ABSL_GUARDED_BY(ids_mu_);

  // Views are handed to on_view and the controller in order, one at a time, on this scope.
  absl::Mutex apply_mu_;
  int64_t last_applied_revision_ ABSL_GUARDED_BY(apply_mu_) = -1;
  runtime::Scope scope_;  // last member: destroyed (drained) first
  runtime::Scope::PeriodicId keepalive_ = 0;
  runtime::Scope::PeriodicId controller_tick_ = 0;
  runtime::Scope::PeriodicId rebalance_tick_ = 0;
};

}  // namespace conduit::log_broker::cluster
