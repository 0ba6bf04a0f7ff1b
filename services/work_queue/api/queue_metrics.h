#pragma once

#include <string>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "services/work_queue/domain/work_queue.h"

namespace conduit::work_queue::api {

// Prometheus families of the work queue, fed by the domain as its QueueObserver:
// conduit_queue_jobs{queue,state}, conduit_queue_oldest_ready_age_seconds{queue},
// conduit_queue_oldest_dead_age_seconds{queue}, conduit_queue_events_total{queue,event}
// (enqueued, leased, acked, nacked, expired, dead, redriven, discarded),
// conduit_queue_tenant_jobs{queue,tenant,state} (ready, leased; the busiest 20 tenants and
// "_other", so the label set stays bounded), conduit_queue_read_ahead_records_total{queue,outcome}
// (kept, served, failed: records read ahead for batch leases). Thread-safe.
class QueueMetrics final : public QueueObserver {
 public:
  explicit QueueMetrics(prometheus::Registry& registry);

  void OnEvents(const std::string& queue, QueueEvent event, int64_t count) override;
  void OnDepth(const std::string& queue, const QueueStats& stats) override;
  void OnQueueDeleted(const std::string& queue) override;
  void OnTenantDepth(const std::string& queue, const std::vector<TenantDepth>& tenants) override;
  void OnReadAhead(const std::string& queue, ReadAheadOutcome outcome, int64_t records) override;

 private:
  prometheus::Family<prometheus::Gauge>& jobs_;
  prometheus::Family<prometheus::Gauge>& oldest_ready_;
  prometheus::Family<prometheus::Gauge>& oldest_dead_;
  prometheus::Family<prometheus::Counter>& events_;
  prometheus::Family<prometheus::Gauge>& tenant_jobs_;
  prometheus::Family<prometheus::Counter>& read_ahead_;
  absl::Mutex mu_;
  // Tenant labels currently exported per queue, so those that drop out are removed.
  absl::flat_hash_map<std::string, std::vector<std::string>> tenants_ ABSL_GUARDED_BY(mu_);
};

}  // namespace conduit::work_queue::api
