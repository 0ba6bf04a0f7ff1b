#include "services/coordinator/api/coordinator_metrics.h"

#include <string>
#include <vector>

namespace conduit::coordinator::api {
namespace {

prometheus::Labels LagLabels(const std::string& group, const TopicPartition& tp) {
  return {{"group", group}, {"topic", tp.topic}, {"partition", std::to_string(tp.partition)}};
}

}  // namespace

CoordinatorMetrics::CoordinatorMetrics(prometheus::Registry& registry)
    : lag_records_(prometheus::BuildGauge()
                       .Name("conduit_coordinator_group_lag_records")
                       .Help("High watermark minus the committed offset, per partition")
                       .Register(registry)),
      lag_seconds_(prometheus::BuildGauge()
                       .Name("conduit_coordinator_group_lag_seconds")
                       .Help("Now minus the append time of the first unprocessed record (0 when "
                             "caught up)")
                       .Register(registry)),
      members_(prometheus::BuildGauge()
                   .Name("conduit_coordinator_group_members")
                   .Help("Current members of the group")
                   .Register(registry)),
      rebalances_(prometheus::BuildCounter()
                      .Name("conduit_coordinator_rebalances_total")
                      .Help("Target assignment changes")
                      .Register(registry)),
      commits_(prometheus::BuildCounter()
                   .Name("conduit_coordinator_commits_total")
                   .Help("Accepted offset commits")
                   .Register(registry)),
      rejections_(prometheus::BuildCounter()
                      .Name("conduit_coordinator_commit_rejections_total")
                      .Help("Rejected offset commits by reason (stale_epoch, not_owner, "
                            "unknown_member, not_member)")
                      .Register(registry)),
      heartbeats_(prometheus::BuildCounter()
                      .Name("conduit_coordinator_heartbeats_total")
                      .Help("Heartbeats answered")
                      .Register(registry)
                      .Add({})) {}

void CoordinatorMetrics::OnMembers(const std::string& group, int members) {
  members_.Add({{"group", group}}).Set(members);
}

void CoordinatorMetrics::OnRebalance(const std::string& group) {
  rebalances_.Add({{"group", group}}).Increment();
}

void CoordinatorMetrics::OnCommit(const std::string& group) {
  commits_.Add({{"group", group}}).Increment();
}

void CoordinatorMetrics::OnCommitRejected(const std::string& group, const std::string& reason) {
  rejections_.Add({{"group", group}, {"reason", reason}}).Increment();
}

void CoordinatorMetrics::OnHeartbeat() { heartbeats_.Increment(); }

void CoordinatorMetrics::OnLag(const std::string& group, const TopicPartition& tp,
                               int64_t records, double seconds) {
  {
    absl::MutexLock lock(&mu_);
    lag_series_[group].insert(tp);
  }
  const prometheus::Labels labels = LagLabels(group, tp);
  lag_records_.Add(labels).Set(static_cast<double>(records));
  lag_seconds_.Add(labels).Set(seconds);
}

void CoordinatorMetrics::RemoveLag(const std::string& group, const TopicPartition& tp) {
  const prometheus::Labels labels = LagLabels(group, tp);
  lag_records_.Remove(&lag_records_.Add(labels));
  lag_seconds_.Remove(&lag_seconds_.Add(labels));
}

void CoordinatorMetrics::OnLagGone(const std::string& group, const std::string& topic) {
  std::vector<TopicPartition> gone;
  {
    absl::MutexLock lock(&mu_);
    auto it = lag_series_.find(group);
    if (it == lag_series_.end()) return;
    for (auto tp = it->second.begin(); tp != it->second.end();) {
      if (tp->topic == topic) {
        gone.push_back(*tp);
        tp = it->second.erase(tp);
      } else {
        ++tp;
      }
    }
  }
  for (const TopicPartition& tp : gone) RemoveLag(group, tp);
}

void CoordinatorMetrics::OnGroupDeleted(const std::string& group) {
  absl::btree_set<TopicPartition> series;
  {
    absl::MutexLock lock(&mu_);
    series = std::move(lag_series_[group]);
    lag_series_.erase(group);
  }
  for (const TopicPartition& tp : series) RemoveLag(group, tp);
  members_.Remove(&members_.Add({{"group", group}}));
  rebalances_.Remove(&rebalances_.Add({{"group", group}}));
  commits_.Remove(&commits_.Add({{"group", group}}));
  for (const char* reason : {"stale_epoch", "not_owner", "unknown_member", "not_member"}) {
    rejections_.Remove(&rejections_.Add({{"group", group}, {"reason", reason}}));
  }
}

}  // namespace conduit::coordinator::api
