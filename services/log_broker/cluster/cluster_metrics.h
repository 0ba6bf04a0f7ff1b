#pragma once

#include <string>
#include <utility>
#include <vector>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "services/log_broker/domain/cluster_view.h"
#include "services/log_broker/domain/replica_state.h"

namespace conduit::log_broker::cluster {

// What EtcdCluster reports as it works; the default does nothing. Called on its threads (the
// runtime's remote pool, gRPC's watch thread); must not block.
class ClusterObserver {
 public:
  virtual ~ClusterObserver() = default;
  // One etcd call (all endpoint attempts): `op` is etcd's method name (Range, Txn, ...).
  virtual void OnEtcdRequest(absl::string_view op, absl::Duration latency,
                             const absl::Status& status) {}
  // A view was applied to the broker, `latency` after its watch batch arrived.
  virtual void OnViewApplied(const ClusterView& view, int32_t self, absl::Duration latency) {}
  virtual void OnLease(bool valid) {}
  // The controller elected an out-of-sync replica (the topic allows unclean election).
  virtual void OnUncleanElection() {}
};

// The cluster's Prometheus families (services/log_broker/README.md, "Metrics"):
// conduit_cluster_partitions_led, _offline_partitions, _live_brokers, _is_controller,
// _controller_epoch, _lease_valid, _under_replicated_partitions, _under_min_isr_partitions
// (gauges), _etcd_request_seconds{op} and _view_apply_seconds (histograms),
// _etcd_errors_total{op}, _unclean_elections_total, _leader_elections_total. Thread-safe.
class ClusterMetrics final : public ClusterObserver {
 public:
  explicit ClusterMetrics(prometheus::Registry& registry);

  void OnEtcdRequest(absl::string_view op, absl::Duration latency,
                     const absl::Status& status) override;
  // Also counts the partitions this broker leads at an epoch it did not lead them at in the
  // previous view (elected, or placed on it when created); the first view seeds that state, so
  // a restart is not counted as elections.
  void OnViewApplied(const ClusterView& view, int32_t self, absl::Duration latency) override;
  void OnLease(bool valid) override { lease_valid_.Set(valid ? 1 : 0); }
  void OnUncleanElection() override { unclean_elections_.Increment(); }
  // The partitions this broker leads now (ReplicaManager::ReplicationSnapshot): sets the
  // under-replicated (in-sync set smaller than the replicas) and under-min-ISR gauges.
  void OnReplication(const std::vector<PartitionReplication>& led);

 private:
  absl::Mutex mu_;
  bool seeded_ ABSL_GUARDED_BY(mu_) = false;
  // The last view's partitions led here: (topic id, partition) → leader epoch.
  absl::flat_hash_map<std::pair<uint64_t, int32_t>, int32_t> led_ ABSL_GUARDED_BY(mu_);

  prometheus::Gauge& partitions_led_;
  prometheus::Gauge& offline_partitions_;
  prometheus::Gauge& live_brokers_;
  prometheus::Gauge& is_controller_;
  prometheus::Gauge& controller_epoch_;
  prometheus::Gauge& lease_valid_;
  prometheus::Counter& unclean_elections_;
  prometheus::Gauge& under_replicated_;
  prometheus::Gauge& under_min_isr_;
  prometheus::Counter& leader_elections_;
  prometheus::Histogram& view_apply_;
  prometheus::Family<prometheus::Histogram>& etcd_latency_;
  prometheus::Family<prometheus::Counter>& etcd_errors_;
};

}  // namespace conduit::log_broker::cluster
