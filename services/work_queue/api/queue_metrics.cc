#include "services/work_queue/api/queue_metrics.h"

namespace conduit::work_queue::api {
namespace {

const char* EventName(QueueEvent e) {
  switch (e) {
    case QueueEvent::kEnqueued: return "enqueued";
    case QueueEvent::kLeased: return "leased";
    case QueueEvent::kAcked: return "acked";
    case QueueEvent::kNacked: return "nacked";
    case QueueEvent::kExpired: return "expired";
    case QueueEvent::kDead: return "dead";
    case QueueEvent::kRedriven: return "redriven";
    case QueueEvent::kDiscarded: return "discarded";
  }
  return "unknown";
}

const char* OutcomeName(ReadAheadOutcome o) {
  switch (o) {
    case ReadAheadOutcome::kKept: return "kept";
    case ReadAheadOutcome::kServed: return "served";
    case ReadAheadOutcome::kFailed: return "failed";
  }
  return "unknown";
}

constexpr const char* kStates[] = {"ready", "delayed", "leased", "dead"};
constexpr ReadAheadOutcome kOutcomes[] = {ReadAheadOutcome::kKept, ReadAheadOutcome::kServed,
                                          ReadAheadOutcome::kFailed};
constexpr QueueEvent kEvents[] = {QueueEvent::kEnqueued, QueueEvent::kLeased, QueueEvent::kAcked,
                                  QueueEvent::kNacked,   QueueEvent::kExpired, QueueEvent::kDead,
                                  QueueEvent::kRedriven, QueueEvent::kDiscarded};

}  // namespace

QueueMetrics::QueueMetrics(prometheus::Registry& registry)
    : jobs_(prometheus::BuildGauge()
                .Name("conduit_queue_jobs")
                .Help("Jobs by queue and state (ready, delayed, leased, dead)")
                .Register(registry)),
      oldest_ready_(prometheus::BuildGauge()
                        .Name("conduit_queue_oldest_ready_age_seconds")
                        .Help("Age of the oldest job that is ready now, by queue")
                        .Register(registry)),
      oldest_dead_(prometheus::BuildGauge()
                       .Name("conduit_queue_oldest_dead_age_seconds")
                       .Help("Age of the oldest dead letter, by queue")
                       .Register(registry)),
      events_(prometheus::BuildCounter()
                  .Name("conduit_queue_events_total")
                  .Help("Job events by queue: enqueued, leased, acked, nacked, expired, dead, "
                        "redriven, discarded")
                  .Register(registry)),
      tenant_jobs_(prometheus::BuildGauge()
                       .Name("conduit_queue_tenant_jobs")
                       .Help("Ready and leased jobs of the busiest tenants per queue (the rest "
                             "under tenant=\"_other\")")
                       .Register(registry)),
      read_ahead_(prometheus::BuildCounter()
                      .Name("conduit_queue_read_ahead_records_total")
                      .Help("Job records read ahead for batch leases, by queue and outcome: kept "
                            "for the next lease, served to a lease, or not read because the "
                            "store's read failed")
                      .Register(registry)) {}

void QueueMetrics::OnTenantDepth(const std::string& queue, const std::vector<TenantDepth>& tenants) {
  absl::MutexLock lock(&mu_);
  std::vector<std::string>& exported = tenants_[queue];
  absl::flat_hash_map<std::string, bool> now_exported;
  for (const TenantDepth& t : tenants) {
    tenant_jobs_.Add({{"queue", queue}, {"tenant", t.tenant}, {"state", "ready"}})
        .Set(static_cast<double>(t.ready));
    tenant_jobs_.Add({{"queue", queue}, {"tenant", t.tenant}, {"state", "leased"}})
        .Set(static_cast<double>(t.leased));
    now_exported[t.tenant] = true;
  }
  for (const std::string& old : exported) {
    if (now_exported.contains(old)) continue;
    for (const char* state : {"ready", "leased"}) {
      tenant_jobs_.Remove(&tenant_jobs_.Add({{"queue", queue}, {"tenant", old}, {"state", state}}));
    }
  }
  exported.clear();
  for (const TenantDepth& t : tenants) exported.push_back(t.tenant);
}

void QueueMetrics::OnEvents(const std::string& queue, QueueEvent event, int64_t count) {
  events_.Add({{"queue", queue}, {"event", EventName(event)}}).Increment(static_cast<double>(count));
}

void QueueMetrics::OnReadAhead(const std::string& queue, ReadAheadOutcome outcome,
                               int64_t records) {
  read_ahead_.Add({{"queue", queue}, {"outcome", OutcomeName(outcome)}})
      .Increment(static_cast<double>(records));
}

void QueueMetrics::OnDepth(const std::string& queue, const QueueStats& s) {
  const int64_t values[] = {s.ready, s.delayed, s.leased, s.dead};
  for (int i = 0; i < 4; ++i) {
    jobs_.Add({{"queue", queue}, {"state", kStates[i]}}).Set(static_cast<double>(values[i]));
  }
  oldest_ready_.Add({{"queue", queue}}).Set(absl::ToDoubleSeconds(s.oldest_ready_age));
  oldest_dead_.Add({{"queue", queue}}).Set(absl::ToDoubleSeconds(s.oldest_dead_age));
}

void QueueMetrics::OnQueueDeleted(const std::string& queue) {
  for (const char* state : kStates) jobs_.Remove(&jobs_.Add({{"queue", queue}, {"state", state}}));
  oldest_ready_.Remove(&oldest_ready_.Add({{"queue", queue}}));
  oldest_dead_.Remove(&oldest_dead_.Add({{"queue", queue}}));
  for (QueueEvent e : kEvents) {
    events_.Remove(&events_.Add({{"queue", queue}, {"event", EventName(e)}}));
  }
  for (ReadAheadOutcome o : kOutcomes) {
    read_ahead_.Remove(&read_ahead_.Add({{"queue", queue}, {"outcome", OutcomeName(o)}}));
  }
  OnTenantDepth(queue, {});
  absl::MutexLock lock(&mu_);
  tenants_.erase(queue);
}

}  // namespace conduit::work_queue::api
