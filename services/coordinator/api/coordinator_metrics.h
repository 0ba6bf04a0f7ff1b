#pragma once

#include <string>
#include <tuple>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include "absl/container/btree_map.h"
#include "absl/synchronization/mutex.h"
#include "services/coordinator/domain/group_coordinator.h"

namespace conduit::coordinator::api {

// Prometheus families of the coordinator, fed by the domain as its CoordinatorObserver:
// conduit_coordinator_group_lag_records / _group_lag_seconds {group,topic,partition},
// conduit_coordinator_group_members {group}, conduit_coordinator_rebalances_total {group},
// conduit_coordinator_commits_total {group}, conduit_coordinator_commit_rejections_total
// {group,reason}, conduit_coordinator_heartbeats_total. A deleted group's series are removed, and
// so are the lag series of a deleted topic.
// Thread-safe.
class CoordinatorMetrics final : public CoordinatorObserver {
 public:
  explicit CoordinatorMetrics(prometheus::Registry& registry);

  void OnMembers(const std::string& group, int members) override;
  void OnRebalance(const std::string& group) override;
  void OnCommit(const std::string& group) override;
  void OnCommitRejected(const std::string& group, const std::string& reason) override;
  void OnHeartbeat() override;
  void OnLag(const std::string& group, const TopicPartition& tp, int64_t records,
             double seconds) override;
  void OnLagGone(const std::string& group, const std::string& topic) override;
  void OnGroupDeleted(const std::string& group) override;

 private:
  void RemoveLag(const std::string& group, const TopicPartition& tp);

  prometheus::Family<prometheus::Gauge>& lag_records_;
  prometheus::Family<prometheus::Gauge>& lag_seconds_;
  prometheus::Family<prometheus::Gauge>& members_;
  prometheus::Family<prometheus::Counter>& rebalances_;
  prometheus::Family<prometheus::Counter>& commits_;
  prometheus::Family<prometheus::Counter>& rejections_;
  prometheus::Counter& heartbeats_;
  absl::Mutex mu_;
  // Lag series exported per group, so that a deleted group's are removed.
  absl::btree_map<std::string, absl::btree_set<TopicPartition>> lag_series_ ABSL_GUARDED_BY(mu_);
};

}  // namespace conduit::coordinator::api
